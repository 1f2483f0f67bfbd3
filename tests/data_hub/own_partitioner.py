"""A partitioner of one's own, named in a scenario as 'own_partitioner:EveryOther'."""
import numpy as np
from flwr_datasets.partitioner import Partitioner


class EveryOther(Partitioner):
    """Partition i holds samples i, i + n, i + 2n, ..."""

    def __init__(self, num_partitions: int):
        super().__init__()
        self._n = num_partitions

    @property
    def num_partitions(self) -> int:
        return self._n

    def load_partition(self, partition_id: int):
        return self.dataset.select(np.arange(partition_id, len(self.dataset), self._n))
