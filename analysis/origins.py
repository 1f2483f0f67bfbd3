"""Whether the runs a comparison reads were all made alike: by the same code, torch build, processor and thread
count (summary.json's `made_with` and `torch_threads`, testbed/provenance.py). Trained numbers differ by any of
these alone, so `testbed compare` says so in one line when they differ, before anyone reads a verdict across
them; runs made before `made_with` was recorded are counted, not guessed."""
from __future__ import annotations

from collections import Counter

from analysis.runs import Run

ASPECTS = {"code": lambda m, r: m.get("code") and m["code"][:12],
           "torch": lambda m, r: m.get("torch"),
           "processor": lambda m, r: m.get("processor"),
           "threads": lambda m, r: r.summary.get("torch_threads")}


def mixed_origins(runs: list[Run]) -> list[str]:
    """One line per aspect that differs between the runs that recorded it, e.g. "note: these runs differ in processor
    (AMD EPYC: 20, Intel Xeon: 20 runs): ..."; and one for runs that recorded none, where others did."""
    known = [r for r in runs if isinstance(r.summary.get("made_with"), dict)]
    lines = []
    for aspect, value_of in ASPECTS.items():
        # a run that did not record this aspect is not a version of it
        counts = Counter(str(v) for v in (value_of(r.summary["made_with"], r) for r in known) if v is not None)
        if len(counts) > 1:
            each = ", ".join(f"{value}: {n}" for value, n in sorted(counts.items()))
            lines.append(f"note: these runs differ in {aspect} ({each} runs): trained numbers can differ by that "
                         "alone (README, 'Intervals, verdicts, and what depends on the machine')")
    if known and len(known) < len(runs):
        lines.append(f"note: {len(runs) - len(known)} of these runs do not record what made them (made before "
                     "summary.json's made_with): they may come from other code or another machine")
    return lines
