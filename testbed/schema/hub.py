"""The `hf` dataset's section as the schema settles it: which data exactly (the revision), and where the partitioner
a user wrote among the loader's options goes. Light: hashlib and pathlib; huggingface_hub is imported only where a
Hub name's revision is looked up.

Semantics:
- `options.dataset` is a local path (a parquet/csv/json file, or a folder load_dataset reads: parquet files,
  an imagefolder) where one exists, relative to the scenario file's folder (`~` is the home folder); else a Hub
  name (owner/name). A local path is written back resolved (as data.root is). Text that can only be a path (it
  starts with `.`, `/` or `~`, or ends in a data file's suffix: PATH_SUFFIXES) and names nothing is refused as a
  missing path, with where it was looked for and the likely fix, never sent to the Hub: a Hub that cannot be
  reached would hide the real cause.
- `options.revision`, where not given, becomes: for a Hub name, the commit sha of its main branch (HfApi's
  dataset_info; offline (no network, or HF_HUB_OFFLINE=1), the sha the Hugging Face cache holds in
  datasets--owner--name/refs/main; else a one-line refusal); for a local path, `local-<16 hex>`: a SHA-256 over
  the names and bytes of its files (hidden ones left out), computed once per process for the same paths, sizes and
  modification times. A given revision that is not a local path's fingerprint is refused: the files changed.
  So the validated scenario, hence scenario.resolved.yaml, runlog.claim() and a checkpoint, say what was trained on.
- `options.partitioner: {name: DirichletPartitioner, alpha: 0.5, ...}` moves to `data.partition: {kind: flwr,
  name, options}`; writing both is refused. A flwr partition whose partition_by names a column other than
  `label` makes the loader carry that column as the clients (options.clients), unless clients is given.
"""
from __future__ import annotations

import hashlib
import os
from difflib import get_close_matches
from functools import cache
from pathlib import Path
from typing import Any

from testbed.schema.common import FieldError, relative_to_scenario, scenario_folder

HF = "hf"
LOCAL = "local-"
HUB_TIMEOUT_S = 10   # a Hub that does not answer must not hang a validation
# A Hub name (owner/name) neither starts with one of these nor ends in a data file's suffix: text that does is a path
PATH_STARTS = (".", "/", "~")
PATH_SUFFIXES = (".parquet", ".csv", ".tsv", ".json", ".jsonl", ".arrow", ".txt")


def settle(data: dict, info) -> dict:
    """The raw `data` section of an `hf` dataset with its revision resolved and its partitioner moved."""
    options = dict(data.get("options") or {})
    if not isinstance(options.get("dataset"), str) or not options["dataset"]:
        raise ValueError("data.options.dataset: dataset 'hf' needs the dataset: a Hub name (uoft-cs/cifar10) or a "
                         "local path (a parquet file, a folder of them, an imagefolder)")
    data = dict(data)
    if "partitioner" in options:
        data["partition"] = moved_partitioner(options.pop("partitioner"), data.get("partition"))
    partition = data.get("partition")
    if isinstance(partition, dict) and partition.get("kind") == "flwr" and "clients" not in options:
        by = (partition.get("options") or {}).get("partition_by")
        if isinstance(by, str) and by != "label":
            options["clients"] = by
    try:
        local = local_dataset(options["dataset"], info)
        if local is not None:
            options["dataset"] = str(local)
        options["revision"] = revision_of(options["dataset"], options.get("revision"))
    except FieldError as err:
        raise ValueError(f"data.options.{err.field}: {err}") from None
    return {**data, "options": options}


def moved_partitioner(partitioner: Any, partition: Any) -> dict:
    if partition is not None:
        raise ValueError("data.options.partitioner: give the partitioner once, here or as data.partition (kind: "
                         "flwr), not both")
    if not isinstance(partitioner, dict) or not isinstance(partitioner.get("name"), str):
        raise ValueError("data.options.partitioner: a mapping with the partitioner's name and its options, e.g. "
                         "{name: DirichletPartitioner, alpha: 0.5, partition_by: label}")
    options = {k: v for k, v in partitioner.items() if k != "name"}
    return {"kind": "flwr", "name": partitioner["name"], "options": options}


def looks_like_path(dataset: str) -> bool:
    """Whether `dataset` can only be a local path, never a Hub name."""
    return dataset.startswith(PATH_STARTS) or dataset.rstrip("/").lower().endswith(PATH_SUFFIXES)


def local_dataset(dataset: str, info) -> Path | None:
    """The local path `dataset` names, resolved against the scenario's folder; None for a Hub name. Text that
    looks like a path but names nothing is refused, saying where it was looked for."""
    local = relative_to_scenario(Path(dataset).expanduser(), info)
    if local.exists():
        return local
    if looks_like_path(dataset):
        raise FieldError("dataset", missing_path(dataset, local, scenario_folder(info).resolve()))
    return None


def missing_path(given: str, looked: Path, folder: Path) -> str:
    """'no such file or folder: X (where relative paths start; a missing folder on the way); the fix'."""
    notes = []
    if not Path(given).expanduser().is_absolute():
        notes.append(f"paths are relative to the scenario file's folder, {folder}")
    elif given.startswith("~"):
        notes.append(f"that is {looked}")
    if not looked.parent.is_dir():
        notes.append(f"there is no folder {looked.parent.resolve()}")
    where = " (" + "; ".join(notes) + ")" if notes else ""
    return f"no such file or folder: {given}{where}; {_likely_fix(given, looked, folder)}"


def _likely_fix(given: str, looked: Path, folder: Path) -> str:
    """The path from the scenario's folder to where `given` is from the current folder (a path written from
    where the command runs), else a close name beside where it was looked for (a typo), else 'correct it'."""
    here = Path.cwd() / Path(given).expanduser()
    if here.exists() and here.resolve() != looked.resolve():
        return f"did you mean {os.path.relpath(here, folder)}? ({given} is there from the current folder)"
    if looked.parent.is_dir():
        names = [p.name for p in looked.parent.iterdir() if not p.name.startswith(".")]
        close = get_close_matches(looked.name, names, n=1)
        written = given.rstrip("/")
        if close:   # as the user wrote the path, its last name corrected
            stem = written[:-len(looked.name)] if written.endswith(looked.name) else f"{looked.parent}/"
            return f"did you mean {stem}{close[0]}?"
    return "correct the path"


def revision_of(dataset: str, given: str | None) -> str:
    """The revision `dataset` is read at: the given one (checked against a local path's files) or the resolved."""
    path = Path(dataset).expanduser()
    if path.exists():
        found = fingerprint(path)
        if given is not None and given != found:
            raise FieldError("revision", f"{path} holds revision {found}, not {given}: its files changed; "
                             "remove revision (or set it to the new one) to train on them")
        return found
    if looks_like_path(dataset):   # not sent to the Hub: its answer would hide the real cause
        raise FieldError("dataset", "no such file or folder; correct the path")
    return given if given is not None else hub_sha(dataset)


def fingerprint(path: Path) -> str:
    """`local-` and the first 16 hex digits of a SHA-256 over the relative names and bytes of the files."""
    path = path.resolve()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                   p.relative_to(path).parts))
    return _hashed(tuple((p.relative_to(path).as_posix() if p != path else p.name, str(p), p.stat().st_size,
                          p.stat().st_mtime_ns) for p in files))


@cache
def _hashed(files: tuple) -> str:
    """Keyed by the files' names, sizes and modification times: their bytes are read once per process."""
    digest = hashlib.sha256()
    for relative, file, _, _ in files:
        digest.update(relative.encode() + b"\0")
        with open(file, "rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return LOCAL + digest.hexdigest()[:16]


@cache
def hub_sha(name: str) -> str:
    """The commit sha of the Hub dataset's main branch: asked of the Hub, else read from the local cache."""
    try:
        from huggingface_hub import HfApi, constants
        from huggingface_hub.errors import RepositoryNotFoundError
    except ImportError:
        raise FieldError("dataset", 'Hub datasets need the hf extra: pip install -e ".[hf]"') from None
    offline = constants.HF_HUB_OFFLINE or _truthy(os.environ.get("HF_HUB_OFFLINE"))   # set after its import too
    if not offline:
        try:
            return HfApi().dataset_info(name, timeout=HUB_TIMEOUT_S).sha
        except RepositoryNotFoundError:
            raise FieldError("dataset", f"no dataset '{name}' on the Hugging Face Hub and no such local "
                             "path; check its spelling (owner/name) or the path") from None
        except Exception:  # noqa: BLE001 - no network, a proxy, a timeout: the local cache may still know it
            pass
    ref = Path(constants.HF_HUB_CACHE) / f"datasets--{name.replace('/', '--')}" / "refs" / "main"
    if ref.is_file():
        return ref.read_text().strip()
    why = " (HF_HUB_OFFLINE is set)" if offline else ""
    raise FieldError("dataset", f"cannot reach the Hugging Face Hub for '{name}' (no network?){why} "
                     f"and {ref.parent.parent} holds no copy; connect once to download it, or give a local path")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")
