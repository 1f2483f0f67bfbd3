"""Edge devices for the testbed: profiles with sourced figures, availability, batteries, fluctuating rates, fleets.

numpy only: the simulator's device state is arrays, and nothing here needs torch or simpy.
"""
from .availability import AlwaysOn, Availability, Diurnal, MarkovOnOff, TraceIntervals
from .battery import Batteries, BatterySpec
from .catalog import CATALOG, FEDLPS_TIERS, get_profile
from .catalog_file import DeviceCatalog, load_device_catalog
from .fleet import Fleet, GroupSpec
from .profiles import DeviceProfile
from .rates import Constant, DiurnalRate, MarkovSlowdown, Rates, TraceRate, load_rate_trace
from .trace_files import load_fedscale_trace, load_interval_trace

__all__ = [
    "DeviceProfile",
    "CATALOG",
    "FEDLPS_TIERS",
    "get_profile",
    "DeviceCatalog",
    "load_device_catalog",
    "AlwaysOn",
    "MarkovOnOff",
    "Diurnal",
    "TraceIntervals",
    "load_interval_trace",
    "load_fedscale_trace",
    "Availability",
    "GroupSpec",
    "Fleet",
    "BatterySpec",
    "Batteries",
    "Constant",
    "MarkovSlowdown",
    "DiurnalRate",
    "TraceRate",
    "Rates",
    "load_rate_trace",
]
