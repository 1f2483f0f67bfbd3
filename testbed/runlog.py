"""The run folder: runs/<scenario>/<seed>/ with the resolved scenario, per-round and per-phase tables, the
devices, a summary, and a checkpoint. Each round's rows go to each table in one write, so a run that fails keeps
what it did; at a checkpoint the tables are synced to disk and their lengths and digests saved with it, and a
resumed run checks them and cuts the tables back to those lengths (dropping a row torn by a kill, and the rounds
it will play again, in a line that says so); rows the run did not write are refused in one line, never dropped."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from analysis.metrics import summarize
from analysis.runs import EVENTS_NUMERIC, ROUNDS_NUMERIC, DamagedRun, table_of
from testbed import checkpoint as ckpt
from testbed.data.partition import label_histograms, non_iid_degree
from testbed.degenerate import degenerate_rounds
from testbed.columns import tables
from testbed.errors import TestbedError
from testbed.paths import user_path

def run_folder(out_root: str | Path, scenario) -> Path:
    return Path(out_root) / scenario.name / str(scenario.seed)


def resolved(scenario) -> str:
    """The scenario with every default filled in, as scenario.resolved.yaml holds it."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)


def claim(folder: Path, scenario, resume: bool, overwrite: bool) -> dict | None:
    """Make the run folder ready for a run of `scenario`, so that no run is ever replaced silently. The summary of
    this scenario's completed run where the folder holds one and the run neither resumes nor overwrites (it is
    done: nothing to run, nothing rewritten); None where the run goes ahead: the folder holds no run
    (no scenario.resolved.yaml), resume goes on with it (a checkpoint checks its own scenario, checkpoint.load;
    without one, resume starts this scenario over from round 1), or overwrite deleted it. Refused in one line
    where it holds another scenario's run (resume without a checkpoint included), or this scenario's unfinished
    one."""
    held = folder / "scenario.resolved.yaml"
    if not held.is_file() or (resume and (folder / ckpt.FILE).is_file()):
        return None
    if overwrite:
        shutil.rmtree(folder)  # all of it: a table the new run does not write (battery.csv) must not outlive it
        return None
    try:
        before = yaml.safe_load(held.read_text())
    except (yaml.YAMLError, UnicodeDecodeError):
        before = None
    now = scenario.model_dump(mode="json")
    if before != now:
        raise TestbedError(f"{user_path(folder)}: holds a run of another scenario ({first_difference(before, now)}); "
                           "run into another --out, or replace it with --overwrite (--resume goes on with the same "
                           "scenario only)")
    if resume:
        return None
    summary = folder / "summary.json"
    status = json.loads(summary.read_text()).get("status", "unknown") if summary.is_file() else "no summary.json"
    if status != "completed":
        raise TestbedError(f"{user_path(folder)}: holds an unfinished run of this scenario ({status.split(':')[0]}); "
                           "go on with --resume, or start over with --overwrite")
    return json.loads(summary.read_text())


def first_difference(before, now: dict) -> str:
    """The first field (in name order) where two resolved scenarios differ, as 'field: before there, now now'."""
    if not isinstance(before, dict):
        return "its scenario.resolved.yaml does not read back as a scenario"
    flat_before, flat_now = (pd.json_normalize(d, sep=".").iloc[0].to_dict() for d in (before, now))
    field = next(k for k in sorted(flat_before.keys() | flat_now.keys()) if flat_before.get(k) != flat_now.get(k))
    return f"{field}: {flat_before.get(field)!r} there, {flat_now.get(field)!r} now"


RESUMED_NUMERIC = {"rounds.csv": ROUNDS_NUMERIC, "events.csv": EVENTS_NUMERIC}


def past_checkpoint(path: Path, data: bytes, kept: int, columns: list[str], resume: ckpt.Checkpoint) -> str | None:
    """What a resumed run drops of a table (`data`, its bytes) past the checkpoint's `kept` bytes, as 'lines 6-7'
    (None: nothing), where the run wrote it: whole rows of this table from rounds after an unfinished checkpoint's,
    increasing by one in rounds.csv, and perhaps a row torn by a kill at the end; the resumed run plays those rounds
    again. Anything else (lines after a finished run's last round, or not its rows) is someone's edit: refused in a
    TestbedError naming the lines, so that nothing a user added is lost."""
    past = data[kept:]
    if not past:
        return None
    first = data[:kept].count(b"\n") + 1
    lines = past.split(b"\n")
    whole = [line.rstrip(b"\r") for line in lines[:-1]]  # the last piece: a row torn by a kill, or b""
    count = len(whole) + bool(lines[-1])
    where = f"line {first}" if count == 1 else f"lines {first}-{first + count - 1}"
    rows = list(csv.reader(line.decode("utf-8", "replace") for line in whole))
    rounds = [row[columns.index("round")] for row in rows if len(row) == len(columns)]
    own = not resume.finished and len(rounds) == len(rows) and all(r.isdigit() and int(r) > resume.round
                                                                    for r in rounds)
    if own and path.name == "rounds.csv":
        own = [int(r) for r in rounds] == list(range(resume.round + 1, resume.round + 1 + len(rounds)))
    if not own:
        after = f"after the run's last round ({resume.round})" if resume.finished else \
            f"past the checkpoint (round {resume.round}) that are not rows the run wrote"
        raise TestbedError(f"{user_path(path)}: {where} {after}; --resume would drop them: move them to another file, "
                           "then resume again (or run without --resume to start over)")
    return where


class RunWriter:
    """Writes a run folder from scratch, or, given the checkpoint a resumed run starts from, goes on with it."""

    def __init__(self, out_root: str | Path, exp, resume: ckpt.Checkpoint | None = None):
        scenario = exp.scenario
        self.scenario = scenario
        self.path = run_folder(out_root, scenario)
        self.path.mkdir(parents=True, exist_ok=True)
        self.resolved = resolved(scenario)
        (self.path / "scenario.resolved.yaml").write_text(self.resolved)
        self._write_devices(exp)
        if resume is None:
            (self.path / ckpt.FILE).unlink(missing_ok=True)  # an older run's: it must not be resumed into this one
        self._digests: dict = {}  # table file -> sha256 of what it holds (the checkpoint keeps it: resume checks it)
        self.dropped: list[str] = []  # a resumed run's rows past its checkpoint: 'rounds.csv lines 6-7'
        self._tables = {name: self._open(name, columns, resume) for name, columns in tables(scenario).items()}
        self.facts: dict = {}  # what the engine knows once built, for summary.json (the memory footprint)
        self.lost = False      # the folder was removed under the run (round() found it gone)

    def _open(self, name: str, columns: list[str], resume: ckpt.Checkpoint | None):
        """The table, unbuffered (a round's rows are one write), from its header or cut back to the checkpoint."""
        path = self.path / name
        if resume is None:
            handle = open(path, "wb", buffering=0)
            self._digests[name] = hashlib.sha256(self._write(handle, [dict(zip(columns, columns))], columns))
        else:
            kept = resume.tables[name]
            if not path.is_file() or path.stat().st_size < kept:  # cutting would pad it with zeros
                raise TestbedError(f"{user_path(path)}: shorter than its checkpoint says ({kept} bytes); the "
                                   "run folder was changed, run without --resume to start over")
            try:  # what it keeps must read back
                table_of(path, RESUMED_NUMERIC.get(name, ()), kept)
            except DamagedRun as err:
                raise TestbedError(f"{err}; or run without --resume to start over") from None
            data = path.read_bytes()
            self._digests[name] = hashlib.sha256(data[:kept])
            if name in resume.digests and self._digests[name].hexdigest() != resume.digests[name]:
                lines = data[:kept].count(b"\n")
                raise TestbedError(f"{user_path(path)}: its first {lines} lines (up to the checkpoint at "
                                   f"round {resume.round}) were changed since the run wrote them; restore them, or "
                                   "run without --resume to start over")
            past = past_checkpoint(path, data, kept, columns, resume)
            if past:
                self.dropped.append(f"{name} {past}")
            handle = open(path, "r+b", buffering=0)
            handle.truncate(kept)
            handle.seek(0, os.SEEK_END)
        return handle, columns

    @staticmethod
    def _write(handle, rows: list[dict], columns: list[str]) -> bytes:
        """Write the rows; what was written."""
        text = io.StringIO()
        csv.DictWriter(text, columns, lineterminator="\r\n").writerows(rows)
        written = text.getvalue().encode()
        data = memoryview(written)
        start = handle.tell()
        try:
            while data:  # one write call, unless the system takes less
                data = data[handle.write(data):]
        except OSError:  # a full disk: no torn row, the table ends at its last whole round
            handle.truncate(start)
            raise
        return written

    def _write_devices(self, exp) -> None:
        fleet = exp.fleet
        table = pd.DataFrame({"device": np.arange(fleet.n), "group": fleet.group, "profile": fleet.profile_name,
                              "peak_flops": fleet.peak_flops, "efficiency": fleet.efficiency,
                              "up_Bps": fleet.up_Bps, "down_Bps": fleet.down_Bps, "latency_s": fleet.latency_s,
                              "num_samples": exp.clients.num_samples,
                              "num_validation": [len(v) for v in exp.clients.validation],
                              "num_local_test": exp.clients.local_test_sizes()})
        histograms = label_histograms(exp.dataset.train_y.numpy(), exp.clients.train, exp.dataset.num_classes)
        per_device, self.non_iid_degree = non_iid_degree(histograms)
        table["js_divergence"] = per_device
        labels = pd.DataFrame(histograms, columns=[f"label_{c}" for c in range(exp.dataset.num_classes)])
        pd.concat([table, labels], axis=1).to_csv(self.path / "devices.csv", index=False)
        shared = getattr(exp, "shared", None)
        self.server_data = {} if shared is None else {"server_samples": shared.size,
                                                      "server_non_iid_degree": shared.non_iid_degree}

    def round(self, record: dict, events: list[dict]) -> None:
        if not self.path.is_dir():  # removed under the run: its open tables would go on into files nobody can read
            self.lost = True
            raise TestbedError(f"{user_path(self.path)}: the run folder was removed while the run was writing it "
                               f"(round {record['round']}); its tables are lost, so run it again")
        self._untouched()
        for name, rows in record.pop("tables", {}).items():  # a strategy's tables, e.g. FedAP's pruning.csv
            pd.DataFrame(rows).to_csv(self.path / name, index=False)
        rows = {"metrics.csv": record.pop("metrics", []), "battery.csv": record.pop("battery", []),
                "links.csv": record.pop("links", [])}
        rows |= {"rounds.csv": [record], "events.csv": events}
        for name, (handle, columns) in self._tables.items():
            self._digests[name].update(self._write(handle, rows[name], columns))

    def checkpoint(self, checkpoint: ckpt.Checkpoint) -> None:
        """Save the checkpoint with the tables' lengths, once the tables are on disk up to its round."""
        for handle, _ in self._tables.values():
            os.fsync(handle.fileno())
        checkpoint.tables = {name: handle.tell() for name, (handle, _) in self._tables.items()}
        checkpoint.digests = {name: digest.hexdigest() for name, digest in self._digests.items()}
        checkpoint.scenario = self.resolved
        ckpt.save(self.path, checkpoint)

    def _untouched(self) -> None:
        """Refuse, in one line, a table another writer changed under the run (a plugin appending to rounds.csv): cut
        back first to the rows the run wrote, so that the table stays whole rows."""
        for name, (handle, _) in self._tables.items():
            if handle.closed:
                continue
            size, written = os.fstat(handle.fileno()).st_size, handle.tell()
            if size != written:
                if size > written:
                    handle.truncate(written)
                raise TestbedError(f"{user_path(self.path / name)}: another writer changed it during the run ({size} "
                                   f"bytes on disk where the run had written {written}; cut back to the run's rows); a "
                                   "plugin writes files of its own (metrics['tables'], docs/extending.md)")

    def close(self, status: str = "completed") -> dict:
        """Close the tables and write summary.json with `status`; a completed run whose tables another writer
        changed is closed as failed, and the refusal raised once summary.json says so."""
        refused = None
        if status == "completed" and not self.lost:
            try:
                self._untouched()
            except TestbedError as err:
                refused, status = err, f"failed: {err}"
        for handle, _ in self._tables.values():
            handle.close()
        summary = {"scenario": self.scenario.name, "seed": self.scenario.seed,
                   "algorithm": self.scenario.algorithm.name, "status": status}
        if self.lost:  # a new folder holding only what happened, so that a sweep's index and --resume see it
            self.path.mkdir(parents=True, exist_ok=True)
        else:
            rounds = pd.read_csv(self.path / "rounds.csv")
            target = self.scenario.stop.target_accuracy
            summary |= {"target_accuracy": target, "non_iid_degree": self.non_iid_degree, **self.server_data,
                        **self.facts, **summarize(rounds, [target] if target else [])}
            summary |= degenerate_rounds(rounds, self.scenario)
            if "energy_J" in rounds:  # the sum of every phase's joules, read exactly as written (float(), not
                with open(self.path / "events.csv", newline="") as f:  # pandas 2's parser, which may be an ulp off)
                    # rows without joules (the server's work, an edge's backhaul) are nobody's battery
                    summary["energy_J_total"] = math.fsum(float(row["energy_J"]) for row in csv.DictReader(f)
                                                          if row["energy_J"])
        ckpt.write_atomically(self.path / "summary.json", json.dumps(summary, indent=2).encode())
        if refused is not None:
            raise refused
        return summary
