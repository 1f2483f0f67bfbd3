"""Edge devices for the testbed: profiles with sourced figures, availability, batteries, fluctuating rates, fleets.

numpy only: the simulator's device state is arrays, and nothing here needs torch or simpy. The names below are
imported at their first use (PEP 562), so the scenario schema reads `devices.CATALOG` (no numpy) without
importing the models that a run builds.
"""
from __future__ import annotations

import importlib

# name -> the submodule that defines it
EXPORTS = {
    "DeviceProfile": "profiles",
    "CATALOG": "catalog", "FEDLPS_TIERS": "catalog", "get_profile": "catalog",
    "DeviceCatalog": "catalog_file", "load_device_catalog": "catalog_file",
    "AlwaysOn": "availability", "MarkovOnOff": "availability", "Diurnal": "availability",
    "TraceIntervals": "availability", "Availability": "fleet_availability",
    "load_interval_trace": "trace_files", "load_fedscale_trace": "trace_files",
    "GroupSpec": "fleet", "Fleet": "fleet",
    "BatterySpec": "battery", "Batteries": "battery",
    "Constant": "rates", "MarkovSlowdown": "rates", "DiurnalRate": "rates", "TraceRate": "rates", "Rates": "rates",
    "load_rate_trace": "rates",
}
__all__ = list(EXPORTS)


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{EXPORTS[name]}", __name__), name)
    globals()[name] = value   # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *EXPORTS])
