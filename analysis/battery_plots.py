"""Battery levels of a run whose device groups have batteries (battery.csv): per device class over simulated time."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import PercentFormatter

from analysis.plots import _save, plot_mean_with_band
from analysis.runs import Run, devices_of


def battery_by_class(run: Run) -> pd.DataFrame:
    """Per device class (battery.csv's profile, in its order) and round, at the round's end (t_s): the mean battery
    level over the class's devices (each group's level_mean weighted by its devices in devices.csv; groups weigh
    the same where that is unknown), the lowest and highest level of any of them, and below_min, how many were under
    their group's minimum level; levels are fractions of capacity. Empty where the run has no battery.csv."""
    columns = ["profile", "round", "t_s", "devices", "mean", "min", "max", "below_min"]
    if run.battery is None or run.battery.empty:
        return pd.DataFrame(columns=columns)
    levels = run.battery.copy()
    devices = devices_of(run)
    sizes = devices.groupby("group").size() if "group" in devices else pd.Series(dtype="int64")
    levels["devices"] = levels["group"].map(sizes).fillna(1)
    levels["weighted"] = levels["level_mean"] * levels["devices"]
    table = levels.groupby(["profile", "round"], sort=False).agg(
        t_s=("t_s", "first"), devices=("devices", "sum"), weighted=("weighted", "sum"), min=("level_min", "min"),
        max=("level_max", "max"), below_min=("below_min", "sum")).reset_index()
    table["mean"] = table["weighted"] / table["devices"]
    return table[columns]


def min_levels(run: Run) -> dict[str, float]:
    """Each class's lowest minimum level (below it a device refuses work) from the resolved scenario's groups."""
    found: dict[str, float] = {}
    for group in ((run.scenario.get("fleet") or {}).get("groups") or []):
        level = (group.get("battery") or {}).get("min_level")
        if level is not None:
            profile = str(group.get("profile"))
            found[profile] = min(level, found.get(profile, level))
    return found


def plot_battery(run: Run, path) -> Path:
    """Per device class, its devices' mean battery level at each round's end over simulated time, with a band from
    the lowest to the highest device's level (battery_by_class) and a dotted line at its minimum level."""
    table = battery_by_class(run)
    floors = min_levels(run)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for profile, levels in table.groupby("profile", sort=False):
        devices = int(levels["devices"].iloc[0])
        below = int(levels["below_min"].max())
        note = f", up to {below} below the minimum" if below else ""
        line = plot_mean_with_band(ax, levels["t_s"], levels,
                                   f"{profile}: mean of {devices} device{'' if devices == 1 else 's'}{note}")
        if profile in floors:
            ax.axhline(floors[profile], color=line.get_color(), linestyle=":", linewidth=1,
                       label=f"{profile}: minimum level {floors[profile]:.0%}")
    if table.empty:
        ax.text(0.5, 0.5, "no battery levels recorded (no group has a battery)", transform=ax.transAxes,
                ha="center", va="center")
    else:
        ax.legend(loc="lower left", fontsize="small")
    ax.set_xlabel("Simulated time (s)")
    ax.set_ylabel("Battery level (share of capacity)")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_ylim(0, 1.05)
    ax.set_xlim(left=0)
    ax.set_title(f"{run.label}: battery levels at each round's end (band: lowest to highest device)")
    ax.grid(alpha=0.3)
    return _save(fig, path)
