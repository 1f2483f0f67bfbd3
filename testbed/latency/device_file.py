"""The device file `testbed calibrate` writes: a catalog file (devices/catalog_file.py) of one profile, whose
`latency:` holds the fitted predictors and whose figures are what the calibration measured (peak, efficiency,
memory bandwidth, per-call overhead) or, for what it cannot measure (the device's links), marked assumed."""
from __future__ import annotations

from pathlib import Path

import yaml

from devices.catalog import LAB_WIFI_BPS, LAB_WIFI_LATENCY_S
from devices.latency import Calibrated, calibration_to_dict

LINK_SOURCE = ("assumed: testbed calibrate measures compute only; lab Wi-Fi as the built-in boards (100 Mbit/s, "
               "10 ms one-way): set the device's own link")


def profile_entry(model: Calibrated, name: str) -> dict:
    """The catalog entry of a calibrated device."""
    machine = model.machine or {}
    where = (f"measured by testbed calibrate on {machine.get('processor', '?')}, {machine.get('threads', '?')} "
             f"thread(s), torch {machine.get('torch', '?')}, {machine.get('measured', '?')}")
    peak = model.fallback.flops_per_s
    efficiency = min(1.0, machine.get("training_flops_per_s", peak) / peak)
    return {
        "name": name,
        "peak_flops": float(peak),
        "peak_flops_source": f"{where}: the 90th percentile of its convolutions' and matmuls' FLOP/s",
        "efficiency": round(efficiency, 6),
        "efficiency_source": f"{where}: the median FLOP/s of its training steps over that peak",
        "up_Bps": LAB_WIFI_BPS, "up_Bps_source": LINK_SOURCE,
        "down_Bps": LAB_WIFI_BPS, "down_Bps_source": LINK_SOURCE,
        "latency_s": LAB_WIFI_LATENCY_S, "latency_s_source": LINK_SOURCE,
        "memory_Bps": float(model.fallback.memory_Bps),
        "memory_Bps_source": f"{where}: the 90th percentile of its elementwise ops' bytes/s",
        "call_overhead_s": float(model.fallback.call_overhead_s),
        "call_overhead_s_source": f"{where}: the median time of its cheapest tenth of ops",
        "latency": calibration_to_dict(model),
    }


def write_device_file(path, model: Calibrated, name: str) -> Path:
    """Write the device file (YAML); its folder is made if needed."""
    path = Path(path)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"{path}: a calibrated device file is YAML; name it .yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump([profile_entry(model, name)], Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                     default_flow_style=None, sort_keys=False, width=120)
    path.write_text("# A device profile measured by testbed calibrate (devices/catalog_file.py, devices/latency.py)\n"
                    + text)
    return path
