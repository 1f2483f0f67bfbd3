"""What made a run: the testbed's code, torch's build and the processor, recorded in summary.json as `made_with`.

Every trained number depends on all three and on the thread count (README, "Intervals, verdicts, and what depends
on the machine"), so a run folder says which of each it was made with, and `testbed compare` says when the runs it
compares were not all made alike. Issue 38 found study tables that no committed code made again: nothing had
recorded which code made them.

made_with(device) gives:
- `testbed`: the package version;
- `code`: the sha256 of the package's own source (every testbed/**/*.py, by path and content): the code that ran,
  committed or not, from a checkout or a wheel; a commit that changes only docs or tests leaves it as it is;
- `commit`: the git commit of the checkout the package runs from, None when it is not one (an installed wheel);
  `dirty`: whether its tracked files differ from that commit (a run of uncommitted code), None likewise;
- `torch`: torch's version with its build tag (e.g. 2.13.0+cpu);
- `processor`: the CPU's model name (Linux /proc/cpuinfo, else the platform's word for it), or for device "cuda"
  the GPU's name, where the clients train.
"""
from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
from pathlib import Path

from testbed.version import __version__

PACKAGE = Path(__file__).resolve().parent   # the testbed package's folder


def made_with(device: str = "cpu") -> dict:
    commit, dirty = code_version()
    return {"testbed": __version__, "code": source_digest(), "commit": commit, "dirty": dirty,
            "torch": torch_version(),
            "processor": gpu_name() if device == "cuda" else cpu_name()}


@functools.cache
def source_digest() -> str:
    """sha256 over the package's .py files in path order, each as its relative path, a NUL, its bytes, a NUL."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def code_version() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding the package; (None, None) outside one or without git."""
    def git(*args):
        return subprocess.run(["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, timeout=10)
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None, None
        # tracked files only: a run folder or a venv inside the checkout is not a change to the code
        status = git("status", "--porcelain", "--untracked-files=no")
        return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None


def torch_version() -> str:
    import torch

    return torch.__version__


@functools.cache
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda (unavailable)"
