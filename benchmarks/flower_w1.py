"""W1 under Flower's simulation (flwr.simulation.start_simulation, Ray backend), doing the testbed's work.

Same model (benchmarks/w1.py's plain CNN, started from the testbed's initial weights), same data (the
testbed's MNIST-5k tensors, put once into Ray's object store so that no client reloads or re-pickles them),
same partition (the testbed's per-device indices), same selection (configure_fit picks, each round, the
clients whose partition id the testbed trained in that round), same local steps (one epoch of torch SGD,
lr 0.05, batch 10, each epoch's order drawn from the testbed's (device, round) seed), sample-weighted FedAvg,
and a centralized evaluation on the 1,000 test digits after each round (none before the first).

This is a module of its own, not part of w1.py, so that Ray's workers import it by name.
"""
from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from plain_cnn import PlainCNN, sgd_epochs


def _ndarrays(model: torch.nn.Module) -> list[np.ndarray]:
    return [v.detach().numpy().copy() for v in model.state_dict().values()]


def _load(model: torch.nn.Module, arrays) -> None:
    model.load_state_dict({k: torch.from_numpy(np.asarray(a)) for k, a in zip(model.state_dict(), arrays)})


def run_flower(initial: dict[str, torch.Tensor], data, train_indices: list[np.ndarray],
               selection: dict[int, list[int]], seed: int, lr: float, batch_size: int, rounds: int,
               num_cpus: int = 2, client_cpus: float = 1) -> dict:
    """Run W1 under Flower; returns seconds (start_simulation; ray.init apart; rounds only) and accuracies."""
    import flwr
    import ray
    from flwr.client import NumPyClient
    from flwr.common import Context, FitIns, ndarrays_to_parameters
    from flwr.server import ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import start_simulation

    logging.getLogger("flwr").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False,
             logging_level=logging.WARNING)
    ray_init_s = time.perf_counter() - start
    refs = {"x": ray.put(data.train_x.numpy()), "y": ray.put(data.train_y.numpy())}
    parts = [np.asarray(p) for p in train_indices]

    class W1Client(NumPyClient):
        def __init__(self, device: int):
            self.device = device

        def fit(self, parameters, config):
            model = PlainCNN()
            _load(model, parameters)
            index = torch.from_numpy(parts[self.device])
            x = torch.from_numpy(ray.get(refs["x"]))[index]
            y = torch.from_numpy(ray.get(refs["y"]))[index]
            sgd_epochs(model, x, y, lr, batch_size, seed, int(config["round"]), self.device, epochs=1)
            return _ndarrays(model), len(y), {}

    def client_fn(context: Context):
        return W1Client(int(context.node_config["partition-id"])).to_client()

    test_x, test_y = data.test_x, data.test_y
    accuracies: list[float] = []
    clock: dict[str, float] = {}
    eval_model = PlainCNN()

    def evaluate_fn(server_round, parameters, config):
        if server_round == 0:  # Flower scores the initial model too; the testbed does not
            return None
        _load(eval_model, parameters)
        eval_model.eval()
        with torch.no_grad():
            logits = eval_model(test_x)
        accuracy = float((logits.argmax(1) == test_y).float().mean())
        accuracies.append(accuracy)
        clock["last_eval"] = time.perf_counter()
        return float(F.cross_entropy(logits, test_y)), {"accuracy": accuracy}

    class SameSelection(FedAvg):
        """FedAvg whose clients in round r are the devices the testbed trained in round r."""

        def configure_fit(self, server_round, parameters, client_manager):
            clock.setdefault("first_fit", time.perf_counter())
            by_partition = {c.partition_id: c for c in client_manager.all().values()}
            fit = FitIns(parameters, {"round": server_round})
            return [(by_partition[d], fit) for d in selection[server_round]]

    strategy = SameSelection(fraction_fit=0.0, fraction_evaluate=0.0, min_fit_clients=1, min_evaluate_clients=0,
                             min_available_clients=len(parts), evaluate_fn=evaluate_fn,
                             initial_parameters=ndarrays_to_parameters([v.numpy() for v in initial.values()]))
    start = time.perf_counter()
    start_simulation(client_fn=client_fn, num_clients=len(parts), config=ServerConfig(num_rounds=rounds),
                     strategy=strategy, client_resources={"num_cpus": client_cpus, "num_gpus": 0.0},
                     ray_init_args={"num_cpus": num_cpus, "ignore_reinit_error": True}, keep_initialised=True)
    seconds = time.perf_counter() - start
    ray.shutdown()
    return {"version": flwr.__version__, "ray_version": ray.__version__, "seconds": seconds,
            "ray_init_s": ray_init_s, "rounds_s": clock["last_eval"] - clock["first_fit"],
            "accuracies": accuracies}
