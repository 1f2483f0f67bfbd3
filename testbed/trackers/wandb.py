"""`--track wandb[=PROJECT]`: the run as a Weights & Biases run.

Where: the project PROJECT, else WANDB_PROJECT, else "fl-edge-testbed"; the group: a sweep's name (none for a single
run); the run's name: quickstart/0; job type "run". Offline unless WANDB_MODE is set (the testbed runs where there is
often no network; `wandb sync <folder>` uploads an offline run later; WANDB_MODE=online logs live). W&B's folder
(wandb/offline-run-...) lies under the run folder, or under WANDB_DIR where set. Quiet (WANDB_SILENT's setting, the
terminal not captured) unless WANDB_SILENT is set; starting gives up after 30 s (WANDB_INIT_TIMEOUT where set).
The run is a new one even inside a user's own active W&B run (reinit="create_new"), never logged into theirs.

Each round: one run.log of every metric (the row's numbers but NaNs, sim_time_s = t_end_s, the running totals
bytes_up_total, bytes_down_total, flops_total, energy_J_total) at step = the round (W&B's _step). define_metric
makes sim_time_s every metric's x-axis (the charts open against simulated seconds; "Step" switches to rounds).
W&B logs asynchronously: the round does not wait. The resolved scenario: the run's config, nested as it is (W&B's
UI shows it flattened to dotted keys). The end: summary.json's entries into run.summary (final_accuracy,
time_to_accuracy_s.0.9, status, ...; they replace the last logged values of sim_time_s and the *_total metrics by the
run's own, which are the same or later), the files saved into the run (run.save, at their paths under the run
folder: plots/accuracy_vs_time.png, hard-linked into W&B's files/ where the file system allows, else copied), and
run.finish(exit_code=0). A failed run: summary status = its status, exit code 1 (W&B: failed); an interrupted one
exit code 255, as W&B's own Ctrl-C hook gives.
The lines a run prints (places.py): an offline run's folder, which `wandb sync FOLDER` uploads (and
testbed/trackers/wandb_offline.py reads back); an online run's page.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from testbed.trackers.base import Tracker, killed, relative
from testbed.trackers.places import Place, TrackedGroup, argument, logged

PROJECT = "fl-edge-testbed"
OFFLINE = ("offline", "dryrun")   # W&B's modes that keep the run in its folder until `wandb sync`


class WandbTracker(Tracker):
    fix = "check the project and WANDB_* settings (WANDB_MODE=offline works without network or account)"

    def start(self) -> None:
        import wandb

        quiet = {} if "WANDB_SILENT" in os.environ else {"silent": True}
        wait = {} if "WANDB_INIT_TIMEOUT" in os.environ else {"init_timeout": 30.0}
        settings = wandb.Settings(console="off", reinit="create_new", **quiet, **wait)
        # W&B keeps its runs in FOLDER/wandb/; absolute, since W&B's service process, started by an earlier run
        # of this process, resolves a relative one against its own folder, not the current one
        folder = Path(os.environ.get("WANDB_DIR") or self.run.folder).absolute()
        folder.mkdir(parents=True, exist_ok=True)  # W&B wants its dir there; an unwritable one fails here
        self.wandb = wandb.init(
            project=self.target or os.environ.get("WANDB_PROJECT") or PROJECT, group=self.run.group,
            name=self.run.name, job_type="run", config=self.run.params, dir=str(folder), settings=settings,
            mode=None if "WANDB_MODE" in os.environ else "offline")
        self.wandb.define_metric("sim_time_s")
        self.wandb.define_metric("*", step_metric="sim_time_s")

    def place(self) -> Place:
        if self.wandb.settings.mode in OFFLINE:   # its folder: FOLDER/wandb/offline-run-<time>-<id>, files/ in it
            folder = argument(Path(self.wandb.dir).parent)
            return Place("wandb", f"logging this run offline into {folder}",
                         f"kept offline; upload: wandb sync {folder}")
        if self.wandb.url:
            return Place("wandb", *logged("logging this run", "logged this run", self.wandb.url))
        return Place("wandb", *[f"WANDB_MODE={os.environ.get('WANDB_MODE')}: nothing kept"] * 2)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.wandb.log(metrics, step=step)
        self.last_step = step

    def finish(self, summary: dict, files: list[Path]) -> None:
        self.wandb.summary.update(summary)
        for path in files:
            self.save(Path(path))
        self.wandb.finish(exit_code=0)
        self.wandb = None

    def save(self, path: Path) -> None:
        """The file hard-linked (else copied) into the run's files/ at its path under the run folder, then saved
        from there: run.save of a file elsewhere links it itself but then prints a warning that WANDB_SILENT's
        setting for this one run does not hold back (W&B's terminal settings are its process-wide setup's)."""
        into = Path(self.wandb.dir) / relative(path, self.run.folder)
        into.parent.mkdir(parents=True, exist_ok=True)
        into.unlink(missing_ok=True)
        try:
            os.link(path, into)
        except OSError:  # another file system, or one without hard links
            shutil.copyfile(path, into)
        self.wandb.save(str(into), base_path=self.wandb.dir, policy="now")

    def close(self, status: str) -> None:
        if getattr(self, "wandb", None) is None:  # start failed before the run was made, or it is over
            return
        self.wandb.summary["status"] = status
        self.wandb.finish(exit_code=255 if killed(status) else 1)
        self.wandb = None


def group_place(target: str | None, group: TrackedGroup) -> Place:
    """Offline (W&B's folder under WANDB_DIR, else under each run folder): the glob of its runs' folders, which
    `wandb sync` takes all at once; online: the project and group, whose page W&B's server names."""
    runs, mode = f"{group.count} runs", os.environ.get("WANDB_MODE") or "offline"
    if mode in OFFLINE:
        wandb_dir = os.environ.get("WANDB_DIR")
        folders = argument(wandb_dir, "wandb") if wandb_dir else argument(group.folder, f"{group.runs}/wandb")
        return Place("wandb", f"logging {runs} offline into {folders}",
                     f"kept offline; upload: wandb sync {folders}/offline-run-*")
    if mode == "disabled":
        return Place("wandb", *[f"WANDB_MODE={mode}: nothing kept"] * 2)
    where = f"project {target or os.environ.get('WANDB_PROJECT') or PROJECT}" + (
        f", group {group.group}" if group.group else "")
    return Place("wandb", f"logging {runs} to {where}", f"logged {runs} to {where}")
