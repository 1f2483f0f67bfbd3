"""How a run is played and kept: rounds, stopping, evaluation, checkpoints, device state and the executor."""
from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator, model_validator

from testbed.schema.common import Strict


class Round(Strict):
    clients_per_round: PositiveInt            # K: updates the server waits for
    overcommit: float = Field(1.0, ge=1.0)    # select ceil(overcommit * K), keep the first K arrivals
    deadline_s: PositiveFloat | None = None   # cut the round this long after it starts

    @property
    def n_select(self) -> int:
        return math.ceil(self.overcommit * self.clients_per_round - 1e-9)


class Stop(Strict):
    max_rounds: PositiveInt = 100
    max_sim_time_s: PositiveFloat | None = None      # no round starts after this simulated time
    target_accuracy: float | None = Field(None, gt=0, le=1)
    stop_at_target: bool = False


class Eval(Strict):
    every_rounds: PositiveInt = 1
    every_s: PositiveFloat | None = None     # instead: the first round (aggregation) ending past each multiple
    max_samples: PositiveInt | None = None   # score on a fixed random subset of the test set (a slow model)


class Checkpointing(Strict):
    """How often the run folder gets a checkpoint that `testbed run --resume` goes on from."""

    every_rounds: PositiveInt = 5   # and after the last round


class DeviceState(Strict):
    """Where the server keeps what devices keep between rounds (moments, scores, personal models)."""

    max_in_memory: PositiveInt | None = None  # devices held in memory, least recently used first to disk


class TrainingDevice(Strict):
    device: Literal["cpu", "cuda"] = "cpu"   # where clients train (testbed/execution/device.py)
    threads: PositiveInt | None = None      # torch threads of the run, wherever it runs (testbed/execution/threads.py)
    # the GPU's arithmetic (testbed/execution/precision.py): exact float32, or TF32 / bf16 autocast, faster;
    # left out of resolved scenarios at its default, so that folders written before it still resume
    precision: Literal["exact", "tf32", "bf16"] = Field("exact", exclude_if=lambda p: p == "exact")

    @model_validator(mode="after")
    def _fast_needs_gpu(self):
        if self.precision != "exact" and self.device != "cuda":
            raise ValueError(f"precision: {self.precision} is a GPU's fast arithmetic; set device: cuda, or "
                             "precision: exact on the CPU")
        return self


class LocalExecutor(TrainingDevice):
    """An executor this machine runs, in the run's process or in `workers` worker processes."""

    # processes that train a round's clients (testbed/execution/processes.py); left out of resolved scenarios at
    # its default, as precision is
    workers: int | Literal["auto"] = Field(1, exclude_if=lambda w: w == 1)

    @field_validator("workers", mode="before")
    @classmethod
    def _a_count_or_auto(cls, value, info: ValidationInfo):
        if not (value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)):
            raise ValueError(f"give a number of worker processes (1, 2, ...) or auto (got {value!r})")
        if value not in (1, "auto") and info.data.get("device") == "cuda":
            raise ValueError(f"worker processes train on the CPU; with device: cuda set workers: 1 (got {value})")
        return value


class SerialExecutor(LocalExecutor):
    """One client after another: the reference."""

    kind: Literal["serial"] = "serial"


class BatchedExecutor(LocalExecutor):
    """A round's clients trained together with torch.func.vmap."""

    kind: Literal["batched"]
    max_clients: PositiveInt | None = None   # clients per vmapped group (memory); all of the round by default


class RayExecutor(TrainingDevice):
    """Batches of clients shipped to Ray workers (the `ray` extra)."""

    kind: Literal["ray"]
    workers: PositiveInt = 2
    address: str | None = None               # a running cluster ('auto', 'ray://host:10001'); none: start locally


Executor = Annotated[Union[SerialExecutor, BatchedExecutor, RayExecutor], Field(discriminator="kind")]
