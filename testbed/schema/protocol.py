"""The `protocol:` section: synchronous rounds (the default), asynchronous aggregation, or hierarchical
aggregation through the cells' edge servers, on the same clock.

Semantics of each: testbed/protocols/sync.py, asynchronous.py and hierarchical.py. A staleness section is the
function's kind and constants (testbed/staleness.py); testbed/build.py makes the function of it.
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from testbed.schema.common import Strict


class SyncProtocol(Strict):
    """Synchronous rounds, as `round:` sets them (clients_per_round, overcommit, deadline_s)."""

    kind: Literal["sync"] = "sync"


class ConstantStaleness(Strict):
    kind: Literal["constant"]


class PolynomialStaleness(Strict):
    """(1 + tau)^-a; a = 0.5 is FedBuff's 1 / sqrt(1 + tau)."""

    kind: Literal["polynomial"]
    a: NonNegativeFloat = 0.5


class HingeStaleness(Strict):
    """1 up to b versions old, then 1 / (a (tau - b) + 1)."""

    kind: Literal["hinge"]
    a: NonNegativeFloat
    b: NonNegativeInt


Staleness = Annotated[Union[ConstantStaleness, PolynomialStaleness, HingeStaleness], Field(discriminator="kind")]


class AsyncProtocol(Strict):
    """Devices train asynchronously; the server aggregates every buffer_size updates (FedBuff; 1 with mixing:
    FedAsync) and/or every period_s simulated seconds (semi-asynchronous)."""

    kind: Literal["async"]
    concurrency: PositiveInt                        # tasks in flight at once
    buffer_size: PositiveInt | None = None          # aggregate at this many buffered updates (FedBuff's K)
    period_s: PositiveFloat | None = None           # aggregate every period_s, whatever has arrived
    staleness: Staleness = PolynomialStaleness(kind="polynomial")
    max_staleness: NonNegativeInt | None = None     # older updates are discarded, their work wasted
    mixing: Annotated[float, Field(gt=0, le=1)] | None = None   # FedAsync's alpha (needs buffer_size 1)

    @model_validator(mode="after")
    def _triggers(self):
        if self.buffer_size is None and self.period_s is None:
            raise ValueError("set buffer_size (FedBuff's K; 1 for FedAsync) or period_s (aggregate every so many "
                             "simulated seconds), or both")
        if self.buffer_size is not None and self.buffer_size > self.concurrency:
            raise ValueError(f"buffer_size {self.buffer_size} is more than concurrency {self.concurrency}: the "
                             "buffer could never fill; lower buffer_size or raise concurrency")
        if self.mixing is not None and (self.buffer_size != 1 or self.period_s is not None):
            raise ValueError("mixing is FedAsync's rule, applied to one update at a time; set buffer_size: 1 "
                             "and remove period_s, or remove mixing (FedBuff)")
        return self


class HierarchicalProtocol(Strict):
    """HierFAVG: each cell's edge server plays edge_rounds (kappa_2) synchronous rounds, as `round:` sets them,
    among its cell's devices, then the cloud aggregates the edges (network.cells, each kind with a backhaul)."""

    kind: Literal["hierarchical"]
    edge_rounds: PositiveInt = 2


Protocol = Annotated[Union[SyncProtocol, AsyncProtocol, HierarchicalProtocol], Field(discriminator="kind")]
