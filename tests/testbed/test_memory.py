import copy
import itertools
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from testbed.local import LocalAdam, LocalSGD
from testbed.memory import Footprint, TrainingMemory
from testbed.models import MODELS

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
FLOAT = 4  # bytes of a float32
MLP_PARAMS = (6 * 16 + 16 + 16 * 3 + 3) * FLOAT
# What autograd saves in Linear(6, 16) -> ReLU -> Linear(16, 3) -> cross-entropy at batch 8 (traced with
# saved_tensors_hooks): the first addmm saves its input x (8x6; not its weight: x needs no gradient); ReLU saves
# its result (8x16), which the second addmm also saves as its input (same storage, counted once; that addmm's
# weight.t() is a parameter's storage, not counted); log_softmax saves its result (8x3), which nll_loss saves too;
# nll_loss saves the labels (8 int64) and its 0-d float total_weight. The first Linear's output is not kept.
MLP_ACTIVATIONS = 8 * 6 * FLOAT + 8 * 16 * FLOAT + 8 * 3 * FLOAT + 8 * 8 + FLOAT
assert MLP_ACTIVATIONS == 868
# Backward's transient: the largest saved storage that needs a gradient is ReLU's result (8x16 floats; x needs
# none, log_softmax's result is 8x3): the second addmm's backward allocates its gradient while it is still saved.
MLP_BACKWARD = 8 * 16 * FLOAT


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


@pytest.mark.parametrize("optimizer, state", [
    (LocalSGD(lr=0.1, batch_size=8), 0),
    (LocalSGD(lr=0.1, batch_size=8, momentum=0.9), MLP_PARAMS),  # one momentum buffer per parameter
    (LocalAdam(lr=1e-3, batch_size=8), 2 * MLP_PARAMS + 8),  # m and v, and the float64 step counter
])
def test_mlp_footprint_by_hand(optimizer, state):
    footprint = TrainingMemory(_mlp(), torch.zeros(1, 6), optimizer, extra_bytes=100).footprint()
    assert footprint == Footprint(MLP_PARAMS, MLP_PARAMS, state, MLP_ACTIVATIONS, MLP_BACKWARD, 100)
    assert footprint.total == 2 * MLP_PARAMS + state + MLP_ACTIVATIONS + MLP_BACKWARD + 100


def _quickstart():
    """The quickstart scenario's model, built as scenario.py builds it (MNIST: 1x28x28, 10 classes), and its
    client settings (lr, local_epochs, batch_size)."""
    scenario = yaml.safe_load(QUICKSTART.read_text())
    torch.manual_seed(0)
    model = MODELS[scenario["model"]["name"]]((1, 28, 28), 10, scenario["model"].get("width", 1.0))
    return model, scenario["client"]


def _measured(model: nn.Module, optimizer: torch.optim.Optimizer, batch_size: int) -> dict[str, int]:
    """torch's CPU allocations around one training step of `model` after a warm-up step (which creates Adam's
    state, so it is held before like the parameters). The profiler (profile_memory) records every allocation and
    free with its size; the running sum of those within the window gives the bytes the step holds at any time.
    held_before: parameters + optimizer state (their tensors' bytes). end_of_forward: what the graph holds when
    the forward pass (with the loss) is done. after_backward: what is left after backward (gradients, inputs,
    loss). peak: the highest running sum through forward and backward."""
    def step():
        x, y = torch.rand(batch_size, 1, 28, 28), torch.randint(0, 10, (batch_size,))
        with record_function("forward"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss, x, y

    step()
    optimizer.step()
    model.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        kept = step()  # held until the window closes: the loss and the input batch
    events = list(prof.profiler.kineto_results.events())
    forward = next(e for e in events if e.name() == "forward")
    memory = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    running = list(itertools.accumulate(n for _, n in memory))
    end_of_forward = running[sum(t <= forward.start_ns() + forward.duration_ns() for t, _ in memory) - 1]
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    held_before = sum(t.numel() * t.element_size() for t in [*model.parameters(), *state])
    del kept
    return {"held_before": held_before, "end_of_forward": end_of_forward, "after_backward": running[-1],
            "peak": max(running)}


@pytest.mark.parametrize("local, torch_optimizer", [
    (LocalSGD, lambda params, lr: torch.optim.SGD(params, lr=lr)),
    (LocalAdam, lambda params, lr: torch.optim.Adam(params, lr=lr)),
])
def test_quickstart_cnn_footprint_matches_torch_allocations(local, torch_optimizer):
    model, client = _quickstart()
    optimizer = local(**client)
    footprint = TrainingMemory(model, torch.zeros(1, 1, 28, 28), optimizer).footprint()
    trained = copy.deepcopy(model)  # the warm-up step changes it
    measured = _measured(trained, torch_optimizer(trained.parameters(), client["lr"]), client["batch_size"])
    batch = client["batch_size"] * (28 * 28 * FLOAT + 8)  # images and int64 labels
    # The parts, exactly: at the end of the forward pass torch holds the activations and the 0-d loss; after
    # backward, the gradients, the input batch and the loss. torch's Adam keeps a 4-byte step per parameter
    # where LocalAdam keeps one 8-byte step in all.
    assert measured["end_of_forward"] == footprint.activations + FLOAT
    assert measured["after_backward"] == footprint.grads + batch + FLOAT
    assert abs(measured["held_before"] - footprint.params - footprint.optimizer) <= 4 * len(list(model.parameters()))
    # The total: torch's peak (parameters and optimizer state held, plus the running sum's peak through forward and
    # backward) against the footprint. The peak comes in the first max-pool's backward: the gradient of conv1's
    # output (10x32x24x24 floats, the largest saved activation) is allocated while conv1's output is still saved
    # and all the gradients but conv1's exist. The footprint counts that gradient (`backward`) and also the
    # activations already freed by then, so it lies a little above: SGD +4.6% (footprint 7,022,772 B, torch
    # 6,711,848 B), Adam +2.7% (11,678,988 B vs 11,368,088 B).
    assert footprint.backward == client["batch_size"] * 32 * 24 * 24 * FLOAT
    peak = measured["held_before"] + measured["peak"]
    assert abs(footprint.total - peak) / peak <= 0.05


def test_submodel_footprint_counts_the_structured_half_width_network():
    model, client = _quickstart()
    memory = TrainingMemory(model, torch.zeros(1, 1, 28, 28), LocalAdam(**client))
    full, half = memory.footprint(1.0), memory.footprint(0.5)
    # CNN512 at ratio 0.5: conv1 16 of 32 maps; conv2 32 of 64 maps over the 16 live input maps; fc1 256 of 512
    # units over 32*4*4 live inputs; the classifier 10 classes over 256 live inputs; every bias with its rows.
    by_hand = (16 * 25 + 16) + (32 * 16 * 25 + 32) + (256 * 512 + 256) + (10 * 256 + 10)
    assert half.params == half.grads == by_hand * FLOAT
    assert half.params == sum(p.numel() for p in MODELS["cnn_512"]((1, 28, 28), 10, 0.5).parameters()) * FLOAT
    assert half.optimizer == 2 * half.params + 8
    batch = client["batch_size"] * (28 * 28 * FLOAT + 8)
    assert half.activations == batch + round((full.activations - batch) * 0.5)
    assert half.backward == round(full.backward * 0.5) > 0
    assert half.total < full.total
    whole = sum(p.numel() for p in model.parameters()) * FLOAT
    assert (full.params, full.optimizer) == (whole, 2 * whole + 8)
    assert full == TrainingMemory(model, torch.zeros(1, 1, 28, 28), LocalAdam(**client)).footprint()


def test_fitting_ratios():
    model, client = _quickstart()
    memory = TrainingMemory(model, torch.zeros(1, 1, 28, 28), LocalSGD(**client))
    fits = lambda ratio, budget: memory.footprint(ratio).total <= budget  # noqa: E731
    budget = (memory.footprint(0.25).total + memory.footprint(0.75).total) / 2
    ratio = memory.max_fitting_ratio(budget)
    assert 0.25 < ratio < 0.75 and fits(ratio, budget) and not fits(ratio + 1 / 64, budget)
    # coarser grids, on ratios already counted (each new ratio runs submodel.structure's probe)
    assert memory.max_fitting_ratio(memory.footprint(0.5).total, resolution=4) == 0.5
    assert memory.max_fitting_ratio(memory.footprint(0.5).total - 1, resolution=4) == 0.25
    assert memory.max_fitting_ratio(memory.footprint(1.0).total, resolution=4) == 1.0
    assert memory.max_fitting_ratio(1000, resolution=4) is None
    candidates = [1.0, 0.25, 0.75, 0.5]
    assert memory.largest_ratio_that_fits(memory.footprint(0.75).total, candidates) == 0.75
    assert memory.largest_ratio_that_fits(memory.footprint(0.75).total - 1, candidates) == 0.5
    assert memory.largest_ratio_that_fits(1000, candidates) is None
    with pytest.raises(ValueError, match="ratio"):
        memory.footprint(0.0)


class _TinyLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(12, 4)
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.fc = nn.Linear(8, 12)

    def forward(self, tokens):
        return self.fc(self.lstm(self.embedding(tokens))[0][:, -1])


def test_recurrent_submodel_scales_the_full_model():
    memory = TrainingMemory(_TinyLSTM(), torch.zeros(1, 5, dtype=torch.long), LocalSGD(lr=0.1, momentum=0.9))
    full, half = memory.footprint(), memory.footprint(0.5)
    assert (half.params, half.grads, half.optimizer) == (full.params // 2, full.params // 2, full.optimizer // 2)
    assert 0 < half.activations < full.activations


def test_measuring_leaves_the_model_and_the_global_rng_alone():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.5), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 3)).eval()
    before = {n: t.clone() for n, t in model.state_dict().items()}
    rng = torch.get_rng_state()
    footprint = TrainingMemory(model, torch.zeros(1, 1, 8, 8), LocalSGD(lr=0.1, batch_size=4)).footprint(0.5)
    assert footprint.activations > 0
    assert torch.equal(torch.get_rng_state(), rng)
    assert not model.training
    after = model.state_dict()
    assert all(torch.equal(before[n], after[n]) for n in before)  # parameters and BatchNorm statistics
