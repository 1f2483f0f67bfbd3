"""What every `algorithm:` section declares: the class a built-in's or a plugin's config derives from."""
from __future__ import annotations

from typing import ClassVar

from testbed.schema.common import Strict

# ASYNC: the asynchronous update rules an algorithm runs under (protocol.kind: async): "buffered", FedBuff's
# staleness-weighted updates through the server rule; "mixing", FedAsync's x <- (1 - a) x + a x_new, which needs
# a server that adds the update as it is. Algorithms without it need a round's participants together (moments
# averaged with the model, masks, control variates, pruning) and are refused.
BUFFERED_AND_MIXING, BUFFERED = frozenset({"buffered", "mixing"}), frozenset({"buffered"})


class AlgorithmConfig(Strict):
    """An algorithm's section: its name, its options and what it needs of the scenario (its Strategy: built by
    testbed/strategies.py). The class attributes mean what Strategy's do (testbed/algorithms/base.py); a
    plugin's section reads them off the user's Strategy class."""

    ASYNC: ClassVar[frozenset[str]] = frozenset()
    NEEDS_LOCAL_STEPS: ClassVar[bool] = False
    NEEDS_SERVER_DATA: ClassVar[bool] = False

    def asynchronous(self) -> frozenset[str]:
        """The asynchronous rules it runs under ("buffered", "mixing"); none: synchronous rounds only."""
        return self.ASYNC

    def needs_local_steps(self) -> bool:
        return self.NEEDS_LOCAL_STEPS

    def needs_server_data(self) -> bool:
        return self.NEEDS_SERVER_DATA

    def server_share(self) -> float | None:
        """Data-sharing's fraction: devices also train on this share of the server's samples (None: they don't)."""
        return None
