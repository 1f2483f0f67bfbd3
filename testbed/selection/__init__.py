"""Participant selection (base.py: the interface; history.py: what the server observed; one module a rule)."""
from testbed.selection.availability import Availability
from testbed.selection.base import Registry, SelectionContext, Selector, select_uniform
from testbed.selection.history import History, Outcome
from testbed.selection.power_of_choice import PowerOfChoice
from testbed.selection.uniform import Uniform

SELECTORS: dict[str, type[Selector]] = {"availability": Availability, "power_of_choice": PowerOfChoice,
                                         "uniform": Uniform}

__all__ = ["SELECTORS", "Availability", "History", "Outcome", "PowerOfChoice", "Registry", "SelectionContext",
           "Selector", "Uniform", "select_uniform"]
