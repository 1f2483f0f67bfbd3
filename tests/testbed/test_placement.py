"""Where the server's tensors live (testbed/execution/placement.py), and the GPU paths checked on the CPU:
a strategy that says SERVER_ON_DEVICE must compute wherever its tensors are (checked with PyTorch's meta device,
which refuses to mix with CPU tensors as CUDA does), evaluation's device path scores as the CPU's does, a group
that runs out of memory is split, and executor.precision sets and restores the GPU's flags."""
import copy

import numpy as np
import pytest
import torch
from helpers import TWO_DEVICES, simulate, tiny_blobs, tiny_scenario

import testbed.data
from testbed import scenario as sc
from testbed.algorithms.base import Arrival, ServerState
from testbed.engine import Engine
from testbed.functional import _score_on_device, score
from testbed.execution.device import CPU
from testbed.execution.placement import Placement
from testbed.execution.precision import arithmetic
from testbed.errors import TestbedError
from testbed.schema.algorithms import BUILTIN

META = torch.device("meta")


def _meta(params: dict) -> dict:
    return {n: t.to(META) if isinstance(t, torch.Tensor) else t for n, t in params.items()}


def _recorded_round(raw: dict):
    """(strategy, configure's arguments, aggregate's state, arrivals and failures) of the first round of a run of
    `raw` on the CPU."""
    exp = sc.build(sc.validate(raw, "test"))
    strategy, seen, asked = exp.strategy, [], []

    class Recording(type(strategy)):
        def configure(self, state, ctx, rng):
            asked.append((ctx, copy.deepcopy(rng)))
            return super().configure(state, ctx, rng)

        def aggregate(self, state, round, arrivals, failures):
            seen.append((state, arrivals, failures))
            return super().aggregate(state, round, arrivals, failures)

    exp.strategy = copy.copy(strategy)
    object.__setattr__(exp.strategy, "__class__", Recording)   # a frozen dataclass: the same fields, spied on
    Engine(exp, lambda record, rows: None).run()
    return strategy, asked[0], *seen[0]


def _on_device_strategies():
    names = []
    for name in BUILTIN:
        try:
            exp = sc.build(sc.validate(tiny_scenario({"name": name}), "test"))
        except Exception:   # noqa: BLE001 - an algorithm that needs more of a scenario than the tiny one
            continue
        if exp.strategy.SERVER_ON_DEVICE:
            names.append(name)
    return names


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(testbed.data.DATASETS, "tiny_blobs", tiny_blobs)


def test_fedavg_fedopt_and_the_moment_averaging_servers_keep_the_server_on_the_device(tiny):
    assert {"fedavg", "fedprox", "fedavgm", "fedadam", "fedyogi", "fedadagrad", "fedlion", "mfl", "fafed", "fedda",
            "fedlada"} <= set(_on_device_strategies())


def test_a_server_on_the_device_computes_where_its_tensors_are(tiny):
    """Every built-in that says SERVER_ON_DEVICE: its aggregation, its configure and broadcast, and its devices'
    start and finish, given the model on another device (meta), compute there and give tensors there; a CPU tensor
    mixed in (torch.tensor(weights) without a device, .item(), numpy) raises, as it would on a GPU."""
    names = _on_device_strategies()
    assert names
    for name in names:
        strategy, (ctx, rng), state, arrivals, failures = _recorded_round(tiny_scenario({"name": name}))
        on_meta = ServerState(_meta(state.params), {k: _meta(v) for k, v in state.optimizer.items()}, {})
        tasks = strategy.configure(on_meta, ctx, rng)
        moved = [Arrival(a.device, a.num_samples, _meta(a.update), a.metrics, a.local_state, a.timeline, a.task)
                 for a in arrivals]
        new, _ = strategy.aggregate(on_meta, 2, moved, failures)
        for what in (new.params, *new.optimizer.values()):
            assert all(t.device == META for t in what.values()), name
        sent = strategy.broadcast(new)
        task = tasks[0]
        start, opt_state = strategy.start(task, sent)
        result = strategy.finish(task, start, sent, {"train_loss": 1.0, "train_accuracy": 0.5}, opt_state)
        assert all(t.device == META for t in result.update.values()), name


def test_placement_follows_the_strategy_and_the_executor(tiny):
    """The executor section's device for an in-process executor (serial, batched), the CPU for Ray's workers;
    the server there where the strategy says SERVER_ON_DEVICE. Executor sections are written as validated, no GPU
    needed (model_construct skips the check that torch sees one)."""
    from testbed.schema.run import BatchedExecutor, RayExecutor

    exp = sc.build(sc.validate(tiny_scenario({"name": "fedavg"}), "test"))
    assert Placement.of(exp.scenario.executor, exp.strategy) == Placement(CPU, CPU, "exact")

    class Host(type(exp.strategy)):
        SERVER_ON_DEVICE = False

    host = copy.copy(exp.strategy)
    object.__setattr__(host, "__class__", Host)
    gpu = BatchedExecutor.model_construct(kind="batched", device="cuda", precision="bf16", threads=None,
                                          max_clients=None)
    cuda = torch.device("cuda")
    assert Placement.of(gpu, exp.strategy) == Placement(cuda, cuda, "bf16")
    assert Placement.of(gpu, host) == Placement(CPU, cuda, "bf16")
    ray = RayExecutor.model_construct(kind="ray", device="cuda", precision="exact", threads=None, workers=2,
                                      address=None)
    assert Placement.of(ray, exp.strategy) == Placement(CPU, CPU, "exact")


def test_evaluation_on_a_device_scores_as_on_the_cpu():
    """The GPU's evaluation path (large batches, sums on the device, one read), run here on the CPU: the same
    hits and the same summed loss as the CPU's path, to float tolerance (other batch sizes)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5))
    params = dict(model.named_parameters())
    x, y = torch.randn(2345, 3, 4), torch.randint(0, 5, (2345,))
    correct, loss = score(model, params, x, y)
    correct_device, loss_device = _score_on_device(model, params, x, y)
    assert correct_device.dtype == np.bool_ and (correct_device == correct).all()
    assert loss_device == pytest.approx(loss, rel=1e-6)


def test_a_group_that_does_not_fit_is_split_and_trains_the_same(monkeypatch, caplog):
    """A vmapped group that runs out of memory trains again in halves, and later rounds keep the size that fitted;
    each job's own seed makes the tables those of the whole group (here: 3 of 4 clients never fit)."""
    raw = {**copy.deepcopy(TWO_DEVICES), "model": {"name": "logreg"}, "executor": {"kind": "batched"},
           "fleet": {"groups": [{**TWO_DEVICES["fleet"]["groups"][0], "count": 4}]},
           "round": {"clients_per_round": 4}, "client": {"lr": 0.05, "batch_size": 50, "local_steps": 2}}
    whole, _ = simulate(raw)
    import testbed.execution.batched as batched

    real, sizes = batched.train_stacked, []

    def short_of_memory(objective, params, *rest):
        sizes.append(len(params))
        if len(params) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(objective, params, *rest)

    monkeypatch.setattr(batched, "train_stacked", short_of_memory)
    split, _ = simulate(raw)
    assert sizes == [4, 2, 2, 2, 2]   # round 1: 4 failed, then halves; round 2 starts at the size that fitted
    assert [r["train_loss"] for r in split] == [r["train_loss"] for r in whole]
    assert [r["accuracy"] for r in split] == [r["accuracy"] for r in whole]
    assert "4 clients did not fit" in caplog.text


def test_a_client_that_does_not_fit_alone_is_one_line(monkeypatch):
    import testbed.execution.batched as batched

    def never(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(batched, "train_stacked", never)
    monkeypatch.setattr(batched.SerialExecutor, "_train", lambda self, strategy, jobs: never())
    raw = {**copy.deepcopy(TWO_DEVICES), "model": {"name": "logreg"}, "executor": {"kind": "batched"}}
    with pytest.raises(TestbedError, match="does not fit the memory of cpu"):
        simulate(raw)


@pytest.mark.parametrize("precision, tf32, matmul", [("exact", False, "highest"), ("tf32", True, "high"),
                                                     ("bf16", False, "highest")])
def test_each_precision_sets_the_gpus_flags_and_gives_them_back(precision, tf32, matmul):
    """torch's flags and autocast's state can be read and set without a GPU, so this runs everywhere."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")   # a user's own choice, given back after
    try:
        with arithmetic(torch.device("cuda"), precision):
            assert torch.get_float32_matmul_precision() == matmul
            assert torch.backends.cudnn.allow_tf32 == tf32 and torch.backends.cudnn.deterministic
            assert torch.is_autocast_enabled("cuda") == (precision == "bf16") or not torch.cuda.is_available()
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_fast_arithmetic_off_a_gpu_is_refused_naming_the_field(precision):
    raw = {**copy.deepcopy(TWO_DEVICES), "executor": {"kind": "serial", "precision": precision}}
    with pytest.raises(TestbedError) as err:
        sc.validate(raw, "s.yaml")
    assert "executor" in str(err.value) and "precision" in str(err.value) and "device: cuda" in str(err.value)
    assert "\n" not in str(err.value)


def test_exact_is_left_out_of_a_resolved_scenario_and_a_fast_mode_is_written():
    from testbed.runlog import resolved

    plain = sc.validate(copy.deepcopy(TWO_DEVICES), "s.yaml")
    assert "precision" not in resolved(plain)
    raw = {**copy.deepcopy(TWO_DEVICES), "executor": {"kind": "serial", "device": "cuda", "precision": "bf16"}}
    assert "precision: bf16" in resolved(sc.validate(raw, "s.yaml"))


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _devices_seen(raw: dict) -> set[str]:
    """The devices of the model and of the arrivals that the strategy's aggregate was given, over a run."""
    exp = sc.build(sc.validate(raw, "test"))
    seen = set()

    class Spy(type(exp.strategy)):
        def aggregate(self, state, round, arrivals, failures):
            seen.update(t.device.type for t in state.params.values())
            seen.update(t.device.type for a in arrivals for t in a.update.values())
            return super().aggregate(state, round, arrivals, failures)

    object.__setattr__(exp.strategy, "__class__", Spy)
    Engine(exp, lambda record, rows: None).run()
    return seen


@GPU
@pytest.mark.parametrize("kind", ["serial", "batched"])
def test_on_a_gpu_the_server_of_fedavg_stays_there_and_a_host_strategy_stays_on_the_cpu(kind):
    raw = {**copy.deepcopy(TWO_DEVICES), "executor": {"kind": kind, "device": "cuda"}}
    assert _devices_seen(raw) == {"cuda"}
    raw["algorithm"] = {"name": "fedlps"}   # reads its tensors on the host: not SERVER_ON_DEVICE
    assert _devices_seen(raw) == {"cpu"}


@GPU
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_fast_arithmetic_on_a_gpu_follows_exact_and_keeps_the_clock(precision):
    exact, exact_events = simulate({**copy.deepcopy(TWO_DEVICES), "executor": {"kind": "batched", "device": "cuda"}})
    fast, fast_events = simulate({**copy.deepcopy(TWO_DEVICES),
                                  "executor": {"kind": "batched", "device": "cuda", "precision": precision}})
    assert fast_events == exact_events   # the clock counts FLOPs and bytes, not the arithmetic
    assert [r["t_end_s"] for r in fast] == [r["t_end_s"] for r in exact]
    np.testing.assert_allclose([r["accuracy"] for r in fast], [r["accuracy"] for r in exact], atol=0.05)


@GPU
@pytest.mark.parametrize("algorithm", ["fedadam", "fedbuff_fedavg"])
def test_a_run_on_a_gpu_resumes_from_its_checkpoint_to_the_unbroken_runs_rounds(tmp_path, algorithm):
    """The checkpoint holds the server's GPU tensors (and, asynchronous, the models in flight); it reads back onto
    the CPU and the run moves them back to the GPU, ending where a run never stopped ends."""
    from testbed import checkpoint

    raw = {**copy.deepcopy(TWO_DEVICES), "executor": {"kind": "serial", "device": "cuda"},
           "stop": {"max_rounds": 4}, "checkpoint": {"every_rounds": 2}, "algorithm": {"name": "fedadam"}}
    if algorithm == "fedbuff_fedavg":
        raw |= {"algorithm": {"name": "fedavg"}, "protocol": {"kind": "async", "concurrency": 2, "buffer_size": 1}}
    unbroken, rounds = [], []

    def save(kept):   # as the run folder does: written when it is taken
        rounds.append(kept.round)
        (tmp_path / str(kept.round)).mkdir()
        checkpoint.save(tmp_path / str(kept.round), kept)

    Engine(sc.build(sc.validate(raw, "s.yaml")), lambda record, rows: unbroken.append(record), save).run()
    start = checkpoint.load(tmp_path / str(rounds[0]), "")   # the first, as --resume would find it
    assert all(t.device.type == "cpu" for t in start.state.params.values())
    resumed = []
    Engine(sc.build(sc.validate(raw, "s.yaml")), lambda record, rows: resumed.append(record), start=start).run()
    assert [r["accuracy"] for r in resumed] == [r["accuracy"] for r in unbroken[start.round:]]


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.5, 1e-3)])
def test_sgds_foreach_step_for_a_gpu_is_the_rule_of_the_loop(momentum, weight_decay):
    """The GPU's fused SGD step (torch's foreach kernels), run here on CPU tensors: the per-tensor rule's numbers
    to float32 rounding, for plain, momentum and weight-decay SGD, and torch.optim.SGD's."""
    from testbed.local import LocalSGD

    torch.manual_seed(0)
    sgd = LocalSGD(lr=0.1, momentum=momentum, weight_decay=weight_decay)
    params = {"w": torch.randn(5, 3), "b": torch.randn(3)}
    state = sgd.init(params)
    fused_params, fused_state = dict(params), dict(state)
    reference = [p.clone().requires_grad_() for p in params.values()]
    optimizer = torch.optim.SGD(reference, lr=0.1, momentum=momentum, weight_decay=weight_decay)
    for _ in range(3):
        grads = {"w": torch.randn(5, 3), "b": torch.randn(3)}
        params, state = sgd.step(params, grads, state)
        fused_params, fused_state = sgd._step_foreach(fused_params, grads, fused_state)
        for p, g in zip(reference, grads.values()):
            p.grad = g
        optimizer.step()
    for name, ref in zip(params, reference):
        torch.testing.assert_close(fused_params[name], params[name])
        torch.testing.assert_close(fused_params[name], ref.detach())
    assert fused_state.keys() == state.keys()


USER_STRATEGY = '''
from dataclasses import dataclass, field

from testbed.algorithms import ServerState, Strategy, weighted_mean
from testbed.local import LocalSGD
from testbed.payload import Dense


@dataclass(frozen=True)
class Damped(Strategy):
    """x + step * (the sample-weighted mean update), written with tensor arithmetic alone."""
    SERVER_ON_DEVICE = True

    client: LocalSGD
    step: float = 0.5
    down: Dense = field(default_factory=Dense)
    up: Dense = field(default_factory=Dense)

    def aggregate(self, state, round, arrivals, failures):
        if not arrivals:
            return state, {}
        mean = weighted_mean([a.update for a in arrivals], [a.num_samples for a in arrivals])
        return ServerState({n: p + self.step * mean[n] for n, p in state.params.items()}), {"train_loss": 0.5}
'''


def test_a_users_strategy_declares_server_on_device_as_a_built_in_does(tiny, tmp_path, monkeypatch):
    """A strategy from the user's module that says SERVER_ON_DEVICE gets the server on the training device, and
    passes the same meta-device check as the built-ins (docs/extending.md)."""
    from testbed.schema.run import BatchedExecutor

    (tmp_path / "my_server.py").write_text(USER_STRATEGY)
    monkeypatch.syspath_prepend(str(tmp_path))
    strategy, _, state, arrivals, failures = _recorded_round(tiny_scenario({"name": "my_server:Damped"}))
    gpu = BatchedExecutor.model_construct(kind="batched", device="cuda", precision="exact", threads=None,
                                          max_clients=None, workers=1)
    assert Placement.of(gpu, strategy).server == torch.device("cuda")
    moved = [Arrival(a.device, a.num_samples, _meta(a.update), a.metrics) for a in arrivals]
    new, _ = strategy.aggregate(ServerState(_meta(state.params)), 2, moved, failures)
    assert all(t.device == META for t in new.params.values())
