"""Participant selection (base.py: the interface; history.py: what the server observed; one module a rule)."""
from testbed.selection.base import Registry, SelectionContext, Selector, select_uniform
from testbed.selection.fedcs import FedCS
from testbed.selection.history import History, Outcome
from testbed.selection.oort import Oort
from testbed.selection.tifl import TiFL
from testbed.selection.uniform import Uniform

SELECTORS: dict[str, type[Selector]] = {"uniform": Uniform, "oort": Oort, "tifl": TiFL, "fedcs": FedCS}

__all__ = ["SELECTORS", "FedCS", "History", "Oort", "Outcome", "Registry", "SelectionContext", "Selector", "TiFL",
           "Uniform", "select_uniform"]
