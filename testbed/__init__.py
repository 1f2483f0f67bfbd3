"""Edge-device emulation testbed for federated learning.

The Python API (testbed/api.py): `testbed.run`, `load_run`, `sweep`, `report`, `compare`, `validate`, with their
`Run` and `Report`; `testbed.calibrate` and `testbed.step_time` (the latency clock, testbed/latency/). `import testbed` stays light (no torch, no pandas): the API is imported on first use of one
of its names (PEP 562), so that the command line's one-line errors stay fast.
"""
from testbed.version import __version__  # noqa: F401 - the package's version, as testbed.__version__

__all__ = ["Report", "Run", "RunsFailed", "TestbedError", "calibrate", "compare", "load_run", "report", "run",
           "step_time", "sweep", "validate"]
LATENCY = ("calibrate", "step_time")   # testbed/latency/__init__.py: the latency clock's calls


def __getattr__(name: str):
    if name in LATENCY:
        from testbed import latency

        return getattr(latency, name)
    if name in __all__:
        from testbed import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
