"""Participant selection (base.py: the interface; history.py: what the server observed; one module a rule)."""
from testbed.selection.base import Registry, SelectionContext, Selector, select_uniform
from testbed.selection.history import History, Outcome
from testbed.selection.oort import Oort
from testbed.selection.uniform import Uniform

SELECTORS: dict[str, type[Selector]] = {"uniform": Uniform, "oort": Oort}

__all__ = ["SELECTORS", "History", "Oort", "Outcome", "Registry", "SelectionContext", "Selector", "Uniform",
           "select_uniform"]
