from testbed.algorithms.base import (Arrival, Failure, Result, RoundContext, ServerState, Strategy, Task, Timeline,
                                     holder_mean, select_uniform, weighted_mean)
from testbed.algorithms.fedavg import FedAvg, ServerAdagrad, ServerAdam, ServerSGD, ServerYogi
from testbed.algorithms.fedlps import FedLPS
from testbed.algorithms.partial import PartialModel
from testbed.algorithms.fedlion import FAFED, MFL, FedDA, FedLion
from testbed.algorithms.moments import MomentAveraging
from testbed.algorithms.sparse_adam import SparseFedAdam
from testbed.algorithms.quantized_adam import ErrorFeedbackAdam
from testbed.algorithms.tracking import FedLADA, Tracking
from testbed.algorithms.ratios import (EUCB, PUCBV, CapabilityRatio, Feedback, FixedRatio, LevelsUpToCapability,
                                       xi_for)

__all__ = ["Arrival", "Failure", "Result", "RoundContext", "ServerState", "Strategy", "Task", "Timeline",
           "holder_mean", "select_uniform", "weighted_mean", "FedAvg", "ServerAdagrad", "ServerAdam", "ServerSGD",
           "ServerYogi", "FedLPS", "PartialModel", "EUCB", "PUCBV", "CapabilityRatio", "Feedback", "FixedRatio",
           "LevelsUpToCapability", "xi_for", "SparseFedAdam", "ErrorFeedbackAdam", "FedLion", "MFL", "FAFED",
           "FedDA", "MomentAveraging", "Tracking", "FedLADA"]
