"""FedLPS (testbed/algorithms/fedlps.py) on tiny hand-made models: the top-k unit masks, the straight-through
gate's gradient, L_ir, what a device uploads and keeps, and the server's masked aggregation (eq. 12-13), all
against numbers computed by hand."""
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, vmap

from testbed.algorithms import Arrival, FedLPS, FixedRatio, ServerState, Task, Timeline
from testbed.algorithms.fedlps import SCORE, top_units
from testbed.local import LocalSGD, train_one
from testbed.payload import Dense, UnitMasked, transmit
from testbed.submodel import SubmodelCosts, keep_count


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _units(mask):
    return torch.nonzero(mask).flatten().tolist()


# ---- the mask: top keep_count(n, s) scores of each layer ------------------------------------------------------
def test_top_units_keeps_the_largest_scores_ties_to_the_lower_index():
    scores = torch.tensor([0.3, -1.0, 2.0, 0.3, 0.5])
    assert top_units(scores, 2).tolist() == [0, 0, 1, 0, 1]   # 2.0 (unit 2) and 0.5 (unit 4)
    assert _units(top_units(scores, 3)) == [0, 2, 4]          # 0.3 twice: unit 0 before unit 3
    assert _units(top_units(scores, 4)) == [0, 2, 3, 4]
    assert _units(top_units(scores, 1)) == [2]
    assert top_units(scores, 5).sum() == 5 and top_units(scores, 2).dtype == scores.dtype
    assert torch.equal(top_units(scores, torch.tensor(3)), top_units(scores, 3))  # a 0-d tensor count


def test_top_units_under_vmap_takes_a_different_count_per_row():
    scores = torch.tensor([[0.3, -1.0, 2.0, 0.3, 0.5],
                           [-0.3, 1.0, -2.0, -0.3, -0.5]])
    masks = vmap(top_units)(scores, torch.tensor([1, 3]))
    # row 0 keeps its best unit (2); row 1 keeps 1.0 (unit 1), then the tie -0.3 at units 0 and 3
    assert masks.tolist() == [[0, 0, 1, 0, 0], [1, 1, 0, 1, 0]]


def test_keep_count_of_the_fedlps_tiers():
    assert keep_count(10, 1 / 16) == 1   # int(0.625), never zero
    assert keep_count(50, 0.5) == 25
    assert keep_count(20, 0.125) == 2 and keep_count(50, 0.0625) == 3


# ---- a tiny model: Linear(3 -> 2) prunable (2 units), Linear(2 -> 2) the classifier ------------------------
W1 = torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])  # unit 0: w.x = 3; unit 1: w.x = 5, |w|_1 = 4
W2 = torch.tensor([[1.0, 0.0], [2.0, 1.0]])
X = torch.tensor([[1.0, 1.0, 2.0]])
C = torch.tensor([1.0, 2.0])  # the task loss is C . logits: dL/dh = W2^T C = (5, 2)
Q = torch.tensor([0.2, 0.9])  # keep 1 of 2: unit 1 kept, unit 0 pruned


def _linear_model():
    return nn.Sequential(nn.Linear(3, 2, bias=False), nn.Linear(2, 2, bias=False))


def _linear_loss(model):
    def loss_fn(params, x, y):
        return (functional_call(model, params, (x,)) * C).sum(), torch.tensor(0.0)
    return loss_fn


def _fedlps(model, example, **kw):
    return FedLPS(LocalSGD(lr=0.1, batch_size=1), SubmodelCosts(model, example), FixedRatio(0.5), **kw)


def _grads(objective, params, anchor, extras):
    params = {n: p.clone().requires_grad_() for n, p in params.items()}
    loss, aux = objective(params, anchor, X, torch.zeros(1, dtype=torch.long), extras)
    return dict(zip(params, torch.autograd.grad(loss, list(params.values())))), loss, aux


PARAMS = {"0.weight": W1, "1.weight": W2, SCORE + "0.weight": Q}
EXTRAS = {"keep": {"0.weight": torch.tensor(1)}}


def test_straight_through_gradient_by_hand():
    """dL/dq_j = sum_k dL/d(w_jk m_j) w_jk = (W2^T C)_j (w_j . x), for the pruned unit too; the weights see the
    masked forward; L_ir adds (q_j - sigmoid(|w_j m_j|_1)) / n_units; L_pr adds 2 mu (w - anchor)."""
    model = _linear_model()
    strategy = _fedlps(model, torch.zeros(1, 3), mu=0.0, lam=0.0)
    assert strategy.costs.units == {"0.weight": 2}
    grads, loss, aux = _grads(strategy.objective(_linear_loss(model)), PARAMS, PARAMS, EXTRAS)
    # forward with unit 0 pruned: h = (0, 5), logits = W2 h = (0, 5), L = 1 * 0 + 2 * 5 = 10
    assert loss.item() == 10.0
    assert grads[SCORE + "0.weight"].tolist() == [5 * 3, 2 * 5]
    assert grads["0.weight"].tolist() == [[0, 0, 0], [2, 2, 4]]   # (W2^T C)_j x, zero on the pruned row
    assert grads["1.weight"].tolist() == [[0, 5], [0, 10]]        # C_i h_j
    assert aux["update_mask"]["0.weight"].tolist() == [[0], [1]]  # the pruned row keeps its value
    assert SCORE + "0.weight" not in aux["update_mask"]           # every score learns

    anchor = {"0.weight": W1 - 0.5, "1.weight": W2 + 0.25, SCORE + "0.weight": Q}
    strategy = _fedlps(model, torch.zeros(1, 3), mu=1.0, lam=1.0)
    grads, loss, _ = _grads(strategy.objective(_linear_loss(model)), PARAMS, anchor, EXTRAS)
    targets = [0.5, sigmoid(4.0)]  # the pruned unit's masked weights are all zero: sigmoid(0)
    expected_q = [15 + (0.2 - targets[0]), 10 + (0.9 - targets[1])]
    torch.testing.assert_close(grads[SCORE + "0.weight"], torch.tensor(expected_q))
    torch.testing.assert_close(grads["0.weight"], torch.tensor([[1.0, 1, 1], [3, 3, 5]]))  # + 2 * 0.5
    torch.testing.assert_close(grads["1.weight"], torch.tensor([[-0.5, 4.5], [-0.5, 9.5]]))  # - 2 * 0.25
    l_ir = ((0.2 - targets[0]) ** 2 + (0.9 - targets[1]) ** 2) / 2
    l_pr = 6 * 0.25 + 4 * 0.0625
    assert loss.item() == pytest.approx(10 + l_ir + l_pr, rel=1e-6)


def test_code_faithful_scores_learn_from_l_ir_only_and_pruned_scores_freeze():
    model = _linear_model()
    strategy = _fedlps(model, torch.zeros(1, 3), mu=1.0, lam=1.0, code_faithful=True)
    anchor = {"0.weight": W1 - 0.5, "1.weight": W2 + 0.25, SCORE + "0.weight": Q}
    grads, loss, aux = _grads(strategy.objective(_linear_loss(model)), PARAMS, anchor, EXTRAS)
    torch.testing.assert_close(grads[SCORE + "0.weight"], torch.tensor([0.2 - 0.5, 0.9 - sigmoid(4.0)]))
    assert grads["1.weight"].tolist() == [[0, 5], [0, 10]]       # no L_pr in the code
    assert aux["update_mask"][SCORE + "0.weight"].tolist() == [0, 1]
    # one SGD step (lr 0.1): the pruned unit's score and weights stay, the kept ones move
    trained, _, _ = train_one(strategy.objective(_linear_loss(model)), PARAMS, X, torch.zeros(1, dtype=torch.long),
                              strategy.client, np.random.default_rng(0), EXTRAS)
    q = trained[SCORE + "0.weight"]
    assert q[0].item() == Q[0].item()
    assert q[1].item() == pytest.approx(0.9 - 0.1 * (0.9 - sigmoid(4.0)))
    assert torch.equal(trained["0.weight"][0], W1[0])
    torch.testing.assert_close(trained["0.weight"][1], W1[1] - 0.1 * torch.tensor([2.0, 2, 4]))


def test_importance_regularizer_by_hand_two_layers():
    """L_ir = sum over layers of mean_j (q_j - sigmoid(|w_j m_j|_1))^2, the target taken without gradient."""
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 3), nn.Linear(3, 2))
    strategy = _fedlps(model, torch.zeros(1, 3), mu=0.0, lam=2.0)
    assert strategy.costs.units == {"0.weight": 2, "2.weight": 3}
    params = {n: torch.zeros_like(p) for n, p in model.named_parameters()}  # zero logits: CE = log 2
    params["0.weight"] = torch.tensor([[1.0, -2.0, 0.5], [0.25, 0.0, -1.0]])
    params["2.weight"] = torch.tensor([[1.0, 1.0], [-3.0, 0.0], [0.5, -0.5]])
    params[SCORE + "0.weight"] = torch.tensor([0.3, 0.9])        # keep 1: unit 1
    params[SCORE + "2.weight"] = torch.tensor([0.0, 0.0, -1.0])  # keep 2: units 0 and 1 (the tie, in order)
    extras = {"keep": {"0.weight": torch.tensor(1), "2.weight": torch.tensor(2)}}

    def zero_loss(params, x, y):
        return params["3.weight"].sum() * 0, torch.tensor(0.0)

    loss, aux = strategy.objective(zero_loss)(params, params, torch.zeros(1, 3), torch.zeros(1, dtype=torch.long),
                                              extras)
    layer0 = ((0.3 - 0.5) ** 2 + (0.9 - sigmoid(1.25)) ** 2) / 2
    layer2 = ((0.0 - sigmoid(2.0)) ** 2 + (0.0 - sigmoid(3.0)) ** 2 + (-1.0 - 0.5) ** 2) / 3
    assert loss.item() == pytest.approx(2.0 * (layer0 + layer2), rel=1e-6)
    assert aux["update_mask"]["2.weight"].flatten().tolist() == [1, 1, 0]


# ---- what a device sends and keeps --------------------------------------------------------------------------
def _wide_model():
    """Linear(3 -> 4) prunable (4 units), Linear(4 -> 2) the classifier."""
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _task(planned, keep=2):
    return Task(0, 1, 3, 3, Dense(), UnitMasked({"0.weight": planned}), ratio=0.5,
                extras={"keep": {"0.weight": torch.tensor(keep)}})


def test_finish_uploads_the_masked_change_and_keeps_the_masked_model():
    model = _wide_model()
    strategy = _fedlps(model, torch.zeros(1, 3))
    received = {"0.weight": torch.arange(12.0).reshape(4, 3), "0.bias": torch.ones(4),
                "2.weight": torch.ones(2, 4), "2.bias": torch.zeros(2)}
    trained = {n: p + 0.5 for n, p in received.items()}
    trained[SCORE + "0.weight"] = torch.tensor([0.1, 0.7, -0.2, 0.4])  # the learned mask: units 1 and 3
    planned = torch.tensor([True, True, False, False])                  # the round started with units 0 and 1
    task = _task(planned)
    result = strategy.finish(task, trained, received, {"train_loss": 1.0, "train_accuracy": 0.5}, {})
    assert result.update["0.weight"].tolist() == [[0, 0, 0], [0.5] * 3, [0, 0, 0], [0.5] * 3]
    for name in ("0.bias", "2.weight", "2.bias"):  # unmasked tensors: the dense change
        assert torch.equal(result.update[name], torch.full_like(received[name], 0.5))
    personal = result.local_state["model"]
    assert personal["0.weight"].tolist() == [[0, 0, 0], [3.5, 4.5, 5.5], [0, 0, 0], [9.5, 10.5, 11.5]]
    assert torch.equal(personal["0.bias"], trained["0.bias"]) and torch.equal(personal["2.weight"], trained["2.weight"])
    assert set(personal) == set(received)  # the scores are kept apart
    assert torch.equal(result.local_state["scores"]["0.weight"], trained[SCORE + "0.weight"])
    assert result.up.masks["0.weight"].tolist() == [False, True, False, True]
    # 1 byte of pattern + 2 rows x 3 x 4 bytes; bias 16, classifier 32 + 8: the planned size, another pattern
    shapes = {n: p.shape for n, p in received.items()}
    assert result.up.nbytes(shapes) == task.up.nbytes(shapes) == 25 + 16 + 32 + 8
    assert all(torch.equal(v, result.update[n]) for n, v in transmit(result.up, result.update).items())


def test_configure_plans_the_mask_of_the_sorted_initial_scores():
    """First round: scores are sorted normals, so the planned mask is the first units; the count is keep_count."""
    from testbed.algorithms import RoundContext

    class Fleet:
        def tier_at(self, round):
            return np.ones(2)

    model = _wide_model()
    strategy = _fedlps(model, torch.zeros(1, 3))
    params = {n: p.detach() for n, p in model.named_parameters()}
    ctx = RoundContext(1, np.arange(2), 2, np.array([3, 1]), Fleet(), np.random.default_rng(0))
    tasks = strategy.configure(strategy.init(params), ctx, np.random.default_rng(0))
    assert [(t.device, t.num_samples, t.ratio) for t in tasks] == [(0, 3, 0.5), (1, 1, 0.5)]
    for t in tasks:
        q = t.local[SCORE + "0.weight"]
        assert torch.equal(q, q.sort(descending=True).values)
        assert t.up.masks["0.weight"].tolist() == [True, True, False, False] and int(t.extras["keep"]["0.weight"]) == 2
        # mask-only FLOPs: the prunable layer's 12 multiply-adds scale by 2/4, the classifier's 8 stay
        assert t.forward_flops == 6 + 8
    assert not torch.equal(tasks[0].local[SCORE + "0.weight"], tasks[1].local[SCORE + "0.weight"])


# ---- the server: eq. 12-13 ----------------------------------------------------------------------------------
def _arrival(device, n, update, loss, scores):
    timeline = Timeline(100, 1000, 50, 0.1, 1e3, 1e3, (0.2, 1.0, 0.15))
    return Arrival(device, n, update, {"train_loss": loss, "train_accuracy": 0.5}, {"scores": scores, "model": {}},
                   timeline, _task(torch.ones(4, dtype=torch.bool)))


def test_aggregate_keeps_the_old_value_where_a_device_pruned():
    """w' = w + sum_k n_k (w_k - w) m_k / sum_k n_k: a device that pruned a row brings the old value there."""
    model = _wide_model()
    strategy = _fedlps(model, torch.zeros(1, 3))
    old = {"0.weight": torch.tensor([[1.0] * 3, [1.0] * 3, [1.0] * 3, [0.1, 0.2, 0.3]]), "0.bias": torch.zeros(4),
           "2.weight": torch.zeros(2, 4), "2.bias": torch.ones(2)}
    rows = lambda keep, value: torch.tensor([[value if k else 0.0] * 3 for k in keep])
    a = {"0.weight": rows([1, 1, 0, 0], 4.0), "0.bias": torch.full((4,), 4.0),
         "2.weight": torch.full((2, 4), 4.0), "2.bias": torch.zeros(2)}
    b = {"0.weight": rows([0, 1, 1, 0], 8.0), "0.bias": torch.full((4,), 8.0),
         "2.weight": torch.full((2, 4), -4.0), "2.bias": torch.zeros(2)}
    state = strategy.init(old)
    new, metrics = strategy.aggregate(state, 1, [_arrival(0, 3, a, 2.0, "qa"), _arrival(1, 1, b, 6.0, "qb")], [])
    w = new.params["0.weight"]
    assert w[0].tolist() == [4.0] * 3   # pruned by b: (3 * (1 + 4) + 1 * 1) / 4
    assert w[1].tolist() == [6.0] * 3   # kept by both: (3 * 5 + 1 * 9) / 4
    assert w[2].tolist() == [3.0] * 3   # kept by b only: (3 * 1 + 1 * 9) / 4
    assert torch.equal(w[3], old["0.weight"][3])  # pruned by both: the old value, exactly
    assert new.params["0.bias"].tolist() == [5.0] * 4 and new.params["2.weight"].tolist() == [[2.0] * 4] * 2
    assert torch.equal(new.params["2.bias"], old["2.bias"])
    assert metrics == {"train_loss": pytest.approx((3 * 2.0 + 6.0) / 4)}
    assert new.clients[0]["scores"] == "qa" and new.clients[1]["scores"] == "qb"
    assert strategy.aggregate(new, 2, [], [])[0] is new  # nobody arrived: nothing changes


def test_personal_models_are_the_devices_latest_masked_models():
    strategy = _fedlps(_wide_model(), torch.zeros(1, 3))
    state = ServerState({}, clients={3: {"model": {"w": torch.ones(1)}, "scores": {}}, 5: {"agent": None}})
    models = strategy.personal_models(state)
    assert list(models) == [3] and torch.equal(models[3]["w"], torch.ones(1))
