"""Shared links: transfers that share cells and the server's links max-min fairly, solved exactly (fluid.py)."""
from testbed.network.fluid import Flows, solve
from testbed.network.maxmin import max_min_rates

__all__ = ["Flows", "solve", "max_min_rates"]
