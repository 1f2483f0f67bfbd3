"""FedLADA by hand: one device, one AMSGrad step blended with the global update estimate, then the server."""
import math

import pytest
import torch

from testbed.algorithms import Arrival, FedLADA, Task
from testbed.local import LocalAdam, train_one
from testbed.payload import Dense


def _strategy(alpha=0.5, lr=0.1):
    client = LocalAdam(lr=lr * alpha, local_steps=1, batch_size=4, beta1=0.9, beta2=0.99, eps=0.0,
                       bias_correction=False, amsgrad=True)
    return FedLADA(client, Dense("float32", ("", "v")), alpha=alpha, local_lr=lr, local_steps=1)


def test_one_blended_step_and_the_server_update_by_hand():
    """x = 1, target t = 0 (gradient g = x = 1), vbar = 0.04, g_a = 2, alpha 0.5, eta 0.1, K = 1:
    m = 0.1 g = 0.1; v = 0.99 * 0.04 + 0.01 = 0.0496; vhat = max(0.04, 0.0496) = 0.0496;
    x1 = 1 - 0.1 (0.5 * 0.1 / sqrt(0.0496) + 0.5 * 2). Server (one arrival): x' = x1; vbar' = 0.0496;
    g_a' = (x - x1) / (eta K)."""
    strategy = _strategy()
    state = strategy.init({"w": torch.tensor([1.0])})
    state.optimizer["v"]["w"] = torch.tensor([0.04])
    state.optimizer["ga"]["w"] = torch.tensor([2.0])
    received = strategy.broadcast(state)
    task = Task(0, 1, 4, 4, strategy.down, strategy.up)
    params, opt = strategy.start(task, received)

    def objective(p, anchor, x, y, extras):  # 0.5 ||w||^2: gradient w
        return 0.5 * p["w"].square().sum(), {"accuracy": torch.tensor(0.0)}

    import numpy as np
    trained, stats, opt = train_one(objective, params, torch.zeros(4, 1), torch.zeros(4), strategy.client,
                                    np.random.default_rng(0), {}, opt)
    x1 = 1 - 0.1 * (0.5 * 0.1 / math.sqrt(0.0496) + 0.5 * 2)
    assert trained["w"].item() == pytest.approx(x1, rel=1e-6)
    result = strategy.finish(task, trained, received, stats, opt)
    assert result.update["v:w"].item() == pytest.approx(0.0496 - 0.04, rel=1e-5)
    new, _ = strategy.aggregate(state, 1, [Arrival(0, 4, result.update, stats)], [])
    assert new.params["w"].item() == pytest.approx(x1, rel=1e-6)
    assert new.optimizer["v"]["w"].item() == pytest.approx(0.0496, rel=1e-5)
    assert new.optimizer["ga"]["w"].item() == pytest.approx((1 - x1) / 0.1, rel=1e-5)
    assert strategy.down.nbytes({"w": torch.Size([1])}) == 12 and strategy.up.nbytes({"w": torch.Size([1])}) == 8
