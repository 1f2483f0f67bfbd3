"""`--track tensorboard[=LOGDIR]`: the run as a TensorBoard run (event files, read by `tensorboard --logdir`).

Where: LOGDIR/<run name> (LOGDIR/quickstart/0), a sweep's runs LOGDIR/<sweep>/<run name>, so that one
`tensorboard --logdir LOGDIR` shows a sweep's runs side by side; without LOGDIR, the run folder's tensorboard/
(`tensorboard --logdir runs` then shows every run under runs/).

Each round, two events, each holding all of the round's metrics (the row's numbers but NaNs, sim_time_s and the
running totals bytes_up_total, bytes_down_total, flops_total, energy_J_total):
- tags `round/<metric>` at step = the round;
- tags `sim_time/<metric>` at step = the simulated time in milliseconds, int(round(t_end_s * 1000)): TensorBoard's
  x-axis is a step or the real wall time, so the simulated time is a step of its own tag family (`sim_time/accuracy`
  is accuracy against simulated ms). Wall times stay real: TensorBoard's "Relative" axis is how long the run took.
TensorBoard keeps scalars as float32 (7 significant digits: a 1.5 GB total to within ~100 bytes).

The resolved scenario: the hparams plugin's session start info, written into this same run (not a sub-run, as
SummaryWriter.add_hparams would), flattened to dotted keys (numbers, bools and strings as they are, lists as JSON,
nulls left out), the session's group = the sweep's name; no experiment summary, so that TensorBoard builds the
HPARAMS table from all the runs' hparams, with their metrics' last values. The end: the summary's numbers as scalars
`summary/<key>` at the last round's step, the whole summary as a text `summary` (a table), and the session's status:
success; failure (a failed run); unknown (interrupted: the plugin has no "aborted"), with the status as a text
`status`.
TensorBoard keeps no files: finish() ignores them (the run folder has them).
The lines a run prints (places.py): `tensorboard --logdir` of the run folder's tensorboard/, or of LOGDIR, which
holds this run beside the others logged there; a sweep's, of its folder or of LOGDIR.
"""
from __future__ import annotations

import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.trackers.base import Tracker, flat, killed, number, split_summary, text
from testbed.trackers.places import Place, TrackedGroup, argument, logged


class TensorBoardTracker(Tracker):
    fix = "choose a LOGDIR you can write: --track tensorboard=LOGDIR"

    def start(self) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package: checked before

        self.logdir = self.where()
        try:
            # max_queue: events the writer's thread buffers before it writes (two a round);
            # flush_secs: a live `tensorboard` sees new rounds within 10 s
            self.writer = SummaryWriter(log_dir=str(self.logdir), max_queue=64, flush_secs=10)
        except OSError as err:
            raise TestbedError(f"--track {self.spec}: cannot write {self.logdir} ({type(err).__name__}: "
                               f"{err.strerror or err}); {self.fix}") from None
        self.write(self.hparams(session_start_info=self.session_start()))
        self.writer.flush()

    def where(self) -> Path:
        if self.target is None:
            return self.run.folder / "tensorboard"
        return Path(self.target).expanduser() / (self.run.group or "") / self.run.name

    def place(self) -> Place:
        opens = opener(self.target, self.run.folder / "tensorboard")
        return Place("tensorboard", *logged("logging this run", "logged this run", opens))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        # one Summary of many values an event, not add_scalar per value: a 40th of the protobuf work
        sim_ms = int(round(metrics["sim_time_s"] * 1000))
        for family, at in (("round", step), ("sim_time", sim_ms)):
            self.writer.file_writer.add_summary(
                Summary(value=[Summary.Value(tag=f"{family}/{k}", simple_value=v) for k, v in metrics.items()]), at)
        self.last_step = step

    def finish(self, summary: dict, files: list[Path]) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        numbers, _ = split_summary(summary)
        self.writer.file_writer.add_summary(
            Summary(value=[Summary.Value(tag=f"summary/{k}", simple_value=v) for k, v in numbers.items()]),
            self.last_step)
        rows = "\n".join(f"| {k} | {text(v)} |" for k, v in flat(summary, nulls=True).items())
        self.writer.add_text("summary", f"| key | value |\n| --- | --- |\n{rows}", self.last_step)
        self.end("STATUS_SUCCESS")

    def close(self, status: str) -> None:
        if getattr(self, "writer", None) is None:  # start failed before the writer was made
            return
        self.writer.add_text("status", status, self.last_step)
        self.end("STATUS_UNKNOWN" if killed(status) else "STATUS_FAILURE")

    def end(self, status: str) -> None:
        from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

        info = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value(status), end_time_secs=time.time())
        self.write(self.hparams(session_end_info=info))
        self.writer.close()
        self.writer = None

    def session_start(self):
        from tensorboard.plugins.hparams import plugin_data_pb2

        info = plugin_data_pb2.SessionStartInfo(group_name=self.run.group or "", start_time_secs=time.time())
        for key, value in flat(self.run.params).items():
            if isinstance(value, bool):
                info.hparams[key].bool_value = value
            elif number(value) is not None:
                info.hparams[key].number_value = value
            else:
                info.hparams[key].string_value = text(value)
        return info

    @staticmethod
    def hparams(**data):
        """The hparams plugin's summary holding one of its messages (session start or end info)."""
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.plugins.hparams import metadata, plugin_data_pb2

        (field, message), = data.items()
        tag = {"session_start_info": metadata.SESSION_START_INFO_TAG,
               "session_end_info": metadata.SESSION_END_INFO_TAG}[field]
        content = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**{field: message}))
        return Summary(value=[Summary.Value(tag=tag, metadata=content, tensor=metadata.NULL_TENSOR)])

    def write(self, summary) -> None:
        self.writer.file_writer.add_summary(summary, self.last_step)


def opener(target: str | None, folder: Path) -> str:
    """The command that shows the runs logged under `folder` (without LOGDIR), or those in LOGDIR."""
    return f"tensorboard --logdir {argument(Path(target) if target is not None else folder)}"


def group_place(target: str | None, group: TrackedGroup) -> Place:
    runs = f"{group.count} runs"
    return Place("tensorboard", *logged(f"logging {runs}", f"logged {runs}", opener(target, group.folder)))
