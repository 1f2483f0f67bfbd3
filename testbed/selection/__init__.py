"""Participant selection (base.py: the interface; history.py: what the server observed; one module a rule)."""
from testbed.selection.availability import Availability
from testbed.selection.base import Registry, SelectionContext, Selector, older_interface, select_uniform
from testbed.selection.fedcs import FedCS
from testbed.selection.history import History, Outcome
from testbed.selection.oort import Oort
from testbed.selection.power_of_choice import PowerOfChoice
from testbed.selection.tifl import TiFL
from testbed.selection.uniform import Uniform

SELECTORS: dict[str, type[Selector]] = {"uniform": Uniform, "oort": Oort, "tifl": TiFL, "fedcs": FedCS,
                                        "power_of_choice": PowerOfChoice, "availability": Availability}

__all__ = ["SELECTORS", "Availability", "FedCS", "History", "Oort", "Outcome", "PowerOfChoice", "Registry",
           "SelectionContext", "Selector", "TiFL", "Uniform", "older_interface", "select_uniform"]
