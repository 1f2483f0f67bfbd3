"""base.holder_mean, HeteroFL's aggregation, and the PartialModel server built on it: entry by entry, the
sample-weighted mean over the devices that held the entry, by hand."""
import torch

from testbed.algorithms import Arrival, PartialModel, Task, Timeline, holder_mean, weighted_mean
from testbed.local import LocalSGD
from testbed.payload import Dense


def test_holder_mean_by_hand():
    a = {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([1.0, 1.0])}
    b = {"w": torch.tensor([[5.0, 6.0], [7.0, 8.0]]), "b": torch.tensor([5.0, 9.0])}
    held_a = {"w": torch.tensor([[1.0, 1.0], [0.0, 0.0]])}          # b: no mask, held whole
    held_b = {"w": torch.tensor([[1.0, 0.0], [1.0, 0.0]]), "b": torch.tensor([0.0, 1.0])}
    out = holder_mean([a, b], [held_a, held_b], [3, 1])
    # w[0,0] by both: (3*1 + 1*5)/4 = 2; w[0,1] by a only: 2; w[1,0] by b only: 7; w[1,1] by nobody: 0
    assert out["w"].tolist() == [[2.0, 2.0], [7.0, 0.0]]
    # b[0] by a only: 1; b[1] by both: (3*1 + 1*9)/4 = 3
    assert out["b"].tolist() == [1.0, 3.0]


def test_holder_mean_with_everything_held_is_the_weighted_mean():
    a = {"w": torch.tensor([1.0, -2.0, 0.5])}
    b = {"w": torch.tensor([3.0, 2.0, 4.5])}
    full = {"w": torch.ones(3)}
    assert holder_mean([a, b], [full, {}], [1, 3])["w"].tolist() == [2.5, 1.0, 3.5]
    torch.testing.assert_close(holder_mean([a, b], [{}, {}], [1, 3])["w"], weighted_mean([a, b], [1, 3])["w"])


def test_holder_mean_broadcasts_a_row_mask():
    a, b = {"w": torch.ones(2, 3)}, {"w": torch.full((2, 3), 3.0)}
    out = holder_mean([a, b], [{"w": torch.tensor([[1.0], [0.0]])}, {"w": torch.tensor([[1.0], [0.0]])}], [1, 1])
    assert out["w"].tolist() == [[2.0] * 3, [0.0] * 3]


def test_partial_model_aggregate_keeps_entries_nobody_held():
    strategy = PartialModel(LocalSGD(lr=0.1), costs=None)
    old = {"w": torch.tensor([10.0, 20.0, 30.0])}
    timeline = Timeline(1, 10, 1, 0.0, 1.0, 1.0, (1.0, 1.0, 1.0))

    def arrival(device, n, update, held):
        task = Task(device, 1, n, n, Dense(), Dense(), ratio=1.0, extras={"held": {"w": held}})
        return Arrival(device, n, {"w": update}, {"train_loss": 1.0, "train_accuracy": 0.5}, None, timeline, task)

    arrivals = [arrival(0, 3, torch.tensor([4.0, 0.0, 0.0]), torch.tensor([1.0, 0.0, 0.0])),
                arrival(1, 1, torch.tensor([8.0, -4.0, 0.0]), torch.tensor([1.0, 1.0, 0.0]))]
    new, metrics = strategy.aggregate(strategy.init(old), 1, arrivals, [])
    # entry 0: (3*4 + 8)/4 = 5; entry 1: held by device 1 only, -4; entry 2: nobody, unchanged
    assert new.params["w"].tolist() == [15.0, 16.0, 30.0] and metrics == {"train_loss": 1.0}
