"""A path as the user should read it, wherever `testbed run | sweep | report` print one (a line, an error):
relative to the current folder where it is under it, as `testbed run` names its default `runs/...`, so that an
absolute `--out` or run folder does not make every printed line wider than the terminal (issue 46)."""
from __future__ import annotations

from pathlib import Path


def user_path(path: str | Path) -> str:
    """`path` relative to the current folder where it is an absolute path under it ('.' for the folder itself),
    else as given. Lexical only: no symlink is resolved and no '..' folded, so that the text names the same file
    the path does; a path outside the current folder keeps its absolute form rather than a chain of '../'."""
    path = Path(path)
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except (ValueError, OSError):  # not under the current folder (or that folder was removed)
            pass
    return str(path)
