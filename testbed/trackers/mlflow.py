"""`--track mlflow[=TRACKING_URI]`: the run as an MLflow run (MlflowClient: no global active run is touched).

Where: TRACKING_URI as MLflow takes it (http://host:5000, sqlite:///path.db, file:/path for an old file store,
databricks); a path instead of a URI: a folder holding a SQLite store, DIR/mlflow.db (a path ending in .db: that
file). Without one, MLFLOW_TRACKING_URI where set, else a SQLite store in --out, OUT/mlflow.db, which every run
written there shares (`mlflow ui --backend-store-uri sqlite:///runs/mlflow.db` shows them side by side): nothing
goes into the current folder, where MLflow's own default (./mlflow.db, ./mlruns) would put it. `testbed report`
skips the copies of run folders its artifacts hold (analysis/discovery.py). Not a file store: MLflow 3 refuses
./mlruns as a store unless MLFLOW_ALLOW_FILE_STORE=true, and SQLite is its default. Experiments this tracker
creates in a SQLite store keep their files beside it, in mlartifacts/<experiment>.
The lines a run prints (places.py): `mlflow ui --backend-store-uri URI`, or the run's page on an http(s) server.
An http(s) server must accept a connection within 3 s, or start() fails in one line; its retries are cut to 2 and
its timeout to 10 s (MLFLOW_HTTP_REQUEST_MAX_RETRIES / _TIMEOUT, where not set): a server gone mid-run costs seconds.

The experiment: the sweep's name, else the scenario's; the run: its name (quickstart/0), tags testbed.scenario,
testbed.group (a sweep's), testbed.folder (the run folder).
Each round: every metric (the row's numbers but NaNs, sim_time_s = t_end_s, the running totals bytes_up_total,
bytes_down_total, flops_total, energy_J_total) at step = the round, its timestamp the real time it was logged.
The rounds are buffered and sent every 5 s (FLUSH_S; at MLflow's 1,000 metrics a batch sooner) in one synchronous
log_batch (~10-30 ms a batch in a SQLite store; MLflow's asynchronous queue would cost set_terminated a second at
the run's end); finish() and close() send the rest. The simulated time is the metric sim_time_s: pick it as the x-axis in the run's
charts. The resolved scenario: parameters, flattened to dotted keys (fleet.groups.0.profile; lists as JSON, nulls
left out, values cut to MLflow's length limit), in batches of MLflow's 100.
The end: the summary's numbers as metrics `summary/<key>` at the last round's step, its text as tags `summary/<key>`
(summary/status = completed), the files as artifacts at their paths under the run folder (plots/accuracy_vs_time.png),
and the run FINISHED. A failed run: tag testbed.status = its status, FAILED; an interrupted one KILLED.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import time
import urllib.parse
import warnings
from contextlib import contextmanager
from pathlib import Path

from testbed.errors import TestbedError
from testbed.trackers.base import Tracker, flat, killed, relative, split_summary, text
from testbed.trackers.places import Place, TrackedGroup, logged, uri_argument

PROBE_S = 3.0
# Rounds are sent together, every FLUSH_S: the SQLite store spends ~8 ms of CPU on a log_batch of one round's 22
# metrics, ~2 ms a round in a batch of ten (benchmarks/tracker_costs.py); a live view is FLUSH_S behind at most.
FLUSH_S = 5.0


class MlflowTracker(Tracker):
    fix = "check the URI: --track mlflow=URI (http://host:port, sqlite:///file.db or a folder)"

    def start(self) -> None:
        for name in ("mlflow.store.db.utils", "alembic"):  # a new SQLite store says it made its tables: noise
            logging.getLogger(name).setLevel(logging.WARNING)
        from mlflow import MlflowClient

        from mlflow.utils import validation

        self.run_id = None
        self.buffer = []   # the metrics of the rounds since the last flush
        self.flushed = time.time()
        self.per_batch = getattr(validation, "MAX_METRICS_PER_BATCH", 1000)
        self.uri, self.artifacts = store(self.target, self.run.out)
        folder = None if self.artifacts is None else self.artifacts.parent   # a SQLite store's
        if folder is not None:   # made here, where an unwritable one fails in one line
            folder.mkdir(parents=True, exist_ok=True)
        self.probe()
        with opening(folder), warnings.catch_warnings():  # SQLAlchemy's deprecations in MLflow: not the user's
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            self.client = MlflowClient(self.uri)
            self.experiment_id = self.experiment()
        self.run_id = self.client.create_run(self.experiment_id, run_name=self.run.name, tags={
            "testbed.scenario": self.run.scenario, "testbed.group": self.run.group or "",
            "testbed.folder": str(self.run.folder)}).info.run_id
        self.log_params()

    def place(self) -> Place:
        page = f"{self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        opens = page if web(self.uri) else opener(self.uri)
        return Place("mlflow", *logged(f"logging run {self.run.name}", f"logged run {self.run.name}", opens))

    def probe(self) -> None:
        """An http(s) server that does not take a connection within PROBE_S fails start() now, not after MLflow's
        minutes of retries."""
        if not web(self.uri):
            return
        parts = urllib.parse.urlparse(self.uri)
        for name, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")):
            os.environ.setdefault(name, value)
        host, port = parts.hostname or "localhost", parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((host, port), timeout=PROBE_S).close()
        except OSError as err:
            raise TestbedError(f"--track {self.spec}: no MLflow server answers at {host}:{port} "
                               f"({type(err).__name__}: {err.strerror or err}); start one (mlflow server "
                               f"--port {port}) or name another: --track mlflow=URI") from None

    def experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        name = self.run.experiment
        found = self.client.get_experiment_by_name(name)
        if found is None:
            where = None if self.artifacts is None else (self.artifacts / re.sub(r"[^\w.-]", "_", name)).as_uri()
            try:
                return self.client.create_experiment(name, artifact_location=where)
            except MlflowException:  # a sweep's other job made it meanwhile
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    raise
        if found.lifecycle_stage == "deleted":
            raise TestbedError(f"--track {self.spec}: MLflow experiment {name!r} is deleted; restore it "
                               f"(mlflow experiments restore) or remove it for good (mlflow gc)")
        return found.experiment_id

    def log_params(self) -> None:
        from mlflow.entities import Param
        from mlflow.utils import validation

        longest = getattr(validation, "MAX_PARAM_VAL_LENGTH", 6000)
        per_batch = getattr(validation, "MAX_PARAMS_TAGS_PER_BATCH", 100)
        params = [Param(key, text(value)[:longest]) for key, value in flat(self.run.params).items()]
        for i in range(0, len(params), per_batch):
            self.client.log_batch(self.run_id, params=params[i:i + per_batch])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = time.time()
        self.buffer += [Metric(k, v, int(now * 1000), step) for k, v in metrics.items()]
        self.last_step = step
        if now - self.flushed >= FLUSH_S or len(self.buffer) >= self.per_batch - len(metrics):
            self.flush()

    def flush(self) -> None:
        """The buffered rounds to the store, in one synchronous log_batch: MLflow's asynchronous queue, once used,
        makes set_terminated wait ~1 s for its thread (10% of a 10 s run), where a batch costs ~10-30 ms."""
        if self.buffer:
            self.client.log_batch(self.run_id, metrics=self.buffer)
        self.buffer, self.flushed = [], time.time()

    def finish(self, summary: dict, files: list[Path]) -> None:
        from mlflow.entities import Metric, RunTag

        self.flush()
        numbers, texts = split_summary(summary)
        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id,
                              metrics=[Metric(f"summary/{k}", v, now, self.last_step) for k, v in numbers.items()],
                              tags=[RunTag(f"summary/{k}", v[:5000]) for k, v in texts.items()])
        for path in files:
            folder = Path(relative(path, self.run.folder)).parent.as_posix()
            self.client.log_artifact(self.run_id, str(path), artifact_path=None if folder == "." else folder)
        self.client.set_terminated(self.run_id, "FINISHED")
        self.run_id = None

    def close(self, status: str) -> None:
        if getattr(self, "run_id", None) is None:  # start failed before the run was made, or it is over
            return
        try:
            self.flush()
        except Exception:  # the run failed anyway: mark it so whatever its queue did
            pass
        self.client.set_tag(self.run_id, "testbed.status", status[:5000])
        self.client.set_terminated(self.run_id, "KILLED" if killed(status) else "FAILED")
        self.run_id = None


def store(target: str | None, out: Path) -> tuple[str, Path | None]:
    """The tracking URI (see the module's docstring) and, for a SQLite store, the folder where new experiments keep
    their files. Makes nothing: start() makes the store's folder."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if target is None and env:
        uri = env  # MLflow's own setting, taken as MLflow takes it
    elif target is not None and (target == "databricks" or re.match(r"^[a-zA-Z][\w+.-]+:", target)):
        uri = target  # a URI, not a path (nor C:\...)
    else:
        path = Path(target if target is not None else out).expanduser().resolve()
        uri = f"sqlite:///{path if path.suffix == '.db' else path / 'mlflow.db'}"
    if uri.startswith("sqlite:///"):
        return uri, Path(urllib.parse.unquote(uri[len("sqlite:///"):])).resolve().parent / "mlartifacts"
    return uri, None


@contextmanager
def opening(folder: Path | None):
    """Held while this process opens the SQLite store in `folder` (None: not one): MLflow makes a new store's tables
    on first use, and processes doing so at once (a sweep's --jobs, sharing --out's store) fail with "duplicate
    column name" (2 of 3 did, measured). An advisory lock on the folder itself, so that no file is left; none where
    the system has no flock."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        fcntl = None
    if folder is None or fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # which releases the lock


def web(uri: str) -> bool:
    return urllib.parse.urlparse(uri).scheme in ("http", "https")


def opener(uri: str) -> str:
    """What opens a store's runs: its address (a server's, Databricks'), else `mlflow ui` on it."""
    return uri if web(uri) or uri.startswith("databricks") else f"mlflow ui --backend-store-uri {uri_argument(uri)}"


def group_place(target: str | None, group: TrackedGroup) -> Place:
    runs = f"{group.count} runs"
    return Place("mlflow", *logged(f"logging {runs}", f"logged {runs}", opener(store(target, group.out)[0])))
