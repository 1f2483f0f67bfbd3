from testbed.algorithms.base import (Arrival, Failure, RoundContext, ServerState, Strategy, Task,
                                     select_uniform, weighted_mean)
from testbed.algorithms.fedavg import FedAvg, ServerAdagrad, ServerAdam, ServerSGD, ServerYogi

__all__ = ["Arrival", "Failure", "RoundContext", "ServerState", "Strategy", "Task", "select_uniform",
           "weighted_mean", "FedAvg", "ServerAdagrad", "ServerAdam", "ServerSGD", "ServerYogi"]
