"""Edge devices for the testbed: profiles with sourced figures, availability processes, and fleets.

numpy only: the simulator's device state is arrays, and nothing here needs torch or simpy.
"""
from .availability import AlwaysOn, Availability, Diurnal, MarkovOnOff, TraceIntervals
from .catalog import CATALOG, FEDLPS_TIERS, get_profile
from .fleet import Fleet, GroupSpec
from .profiles import DeviceProfile
from .trace_files import load_fedscale_trace, load_interval_trace

__all__ = [
    "DeviceProfile",
    "CATALOG",
    "FEDLPS_TIERS",
    "get_profile",
    "AlwaysOn",
    "MarkovOnOff",
    "Diurnal",
    "TraceIntervals",
    "load_interval_trace",
    "load_fedscale_trace",
    "Availability",
    "GroupSpec",
    "Fleet",
]
