"""Where the server's tensors live: on the training device where they can, on the CPU where they must.

Semantics:
- The server's device is executor.device for an in-process executor (serial, batched) whose strategy declares
  SERVER_ON_DEVICE (its rules are tensor arithmetic that runs wherever its tensors are); the CPU otherwise: a
  strategy that reads its tensors on the host (numpy, .item()), and the Ray executor, whose workers are other
  processes. On a CPU-only run everything is on the CPU and nothing moves.
- On the server's device live the global model, the server optimizer's state, what is broadcast and delivered,
  the arrivals' decoded updates and the aggregation. What devices keep between rounds (ServerState.clients) is
  kept where the strategy's finish leaves it (the client store may spill it to disk): on the server's device for
  a SERVER_ON_DEVICE strategy, though none of the built-ins that declare it keeps any.
- Evaluation runs on the training device whatever the strategy (the model's parameters copied there when the
  server keeps them on the CPU); the test sets move there once.
- The crossings to the host, each named where it happens: a codec that encodes to bytes (payload.transmit),
  a checkpoint (written as it is, read back onto the CPU, moved back here by `to_server`), a Flower strategy
  (NumPy arrays; it is not SERVER_ON_DEVICE), and the numbers that go into the tables.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from testbed.algorithms.base import ServerState, Strategy
from testbed.execution.device import CPU, moved

IN_PROCESS = ("serial", "batched")   # executors that train in the run's own process, on executor.device


@dataclass(frozen=True)
class Placement:
    server: torch.device       # the global model, its optimizer state, the arrivals, the aggregation
    evaluation: torch.device   # the test sets and the forward passes that score a model
    precision: str = "exact"   # executor.precision (testbed/execution/precision.py), for evaluation too

    @classmethod
    def of(cls, executor: Any, strategy: Strategy) -> Placement:
        """The placement of a run with the scenario's `executor` section and this strategy (the module's
        docstring)."""
        device = torch.device(executor.device) if executor.kind in IN_PROCESS else CPU
        return cls(device if strategy.SERVER_ON_DEVICE else CPU, device, executor.precision)

    def here(self, value: Any) -> Any:
        """`value` (tensors, through dicts, lists and tuples) on the server's device; as it is where that is the
        CPU, which is where everything was built or read back."""
        return value if self.server == CPU else moved(value, self.server)

    def to_server(self, state: ServerState) -> ServerState:
        """A server state (built or read back from a checkpoint on the CPU) with its model and optimizer state on
        the server's device; the devices' kept state stays where it is."""
        if self.server == CPU:
            return state
        return replace(state, params=self.here(state.params), optimizer=self.here(state.optimizer))
