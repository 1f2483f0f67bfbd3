"""benchmarks/gpu.py's numbers: a run's metrics from its clock, the comparisons with the bare loop, the JSON-lines
file written as each row comes, and the table and targets at the end."""
from __future__ import annotations

import json
import math
from pathlib import Path

TESTBED_RUNS = ("serial", "batched")
TARGETS = {"serial_x_bare": 1.1, "batched_speedup": 3.0, "wpaper_peak": 0.40, "cores_speedup": 6.0}


class Output:
    """OUT/gpu.jsonl, one JSON object a line, flushed and synced as each comes (a run killed by its timeout keeps
    every row before it); a short line of each on stdout."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.peak = folder, math.nan
        self.file = open(folder / "gpu.jsonl", "a", encoding="utf-8")

    def emit(self, row: dict) -> None:
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        print(describe(row), flush=True)

    def finish(self, rows: list[dict], args) -> None:
        text = table(rows, self.peak) + "\n" + targets(rows) + "\n"
        (self.folder / "gpu.md").write_text(text)
        print("\n" + text + f"\nrows: {self.folder / 'gpu.jsonl'}; table: {self.folder / 'gpu.md'}", flush=True)
        self.file.close()


def metrics(timed, exp, flops_per_image: float, peak: float) -> dict:
    """Seconds a round from rounds 2..R, images and counted training FLOP/s, the accuracies."""
    epochs = exp.scenario.client.local_epochs
    images = [epochs * sum(len(exp.clients.train[d]) for d in timed.selection[r]) for r in sorted(timed.selection)]
    row = {"status": "ok" if not timed.stopped_early else "stopped by the budget", "rounds": timed.rounds,
           "first_round_s": timed.round_ends[0] - timed.start, "accuracies": timed.accuracies,
           "losses": timed.losses, "final_accuracy": timed.accuracies[-1], "flops_per_image": flops_per_image}
    if timed.rounds < 2:
        return row | {"note": "one round only: no seconds a round"}
    rounds = timed.rounds - 1
    per_round = (timed.round_ends[-1] - timed.round_ends[0]) / rounds
    train = sum(timed.train_seconds[1:]) / rounds
    trained = sum(images[1:timed.rounds]) / rounds
    flops = trained * flops_per_image
    return row | {"s_per_round": per_round, "train_s_per_round": train, "images_per_round": trained,
                  "images_per_s": trained / per_round, "train_flops_per_s": flops / train,
                  "peak_fraction": flops / train / peak, "peak_fraction_round": flops / per_round / peak}


def rescale(rows: list[dict], peak: float, new_peak: float) -> None:
    """The rows' fractions of the peak against `new_peak` (measured higher at the end) instead of `peak`."""
    for row in rows:
        for key in ("peak_fraction", "peak_fraction_round"):
            if key in row:
                row[key] *= peak / new_peak


def _same(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("workload", "precision", "device", "scale"))


def compare(row: dict, rows: list[dict]) -> None:
    """Adds to a testbed row its ratio to the bare loop of the same workload and precision and the largest gap
    between their accuracies; to a fast-precision row the largest gap to the same run in exact precision; to a
    CPU-cores row its speed-up over the first one (1 thread) and whether their tables (accuracy and loss of every
    round) are equal."""
    if not row.get("s_per_round"):
        return
    if row.get("cores"):
        base = next((r for r in rows if r.get("cores") and r.get("s_per_round")), None)
        if base is not None:
            n = min(row["rounds"], base["rounds"])
            row["speedup_vs_first"] = base["s_per_round"] / row["s_per_round"]
            row["tables_equal"] = (row["accuracies"][:n] == base["accuracies"][:n]
                                   and row["losses"][:n] == base["losses"][:n])
        return
    exact = next((r for r in rows if r["run"] == row["run"] and r.get("accuracies") and r["precision"] == "exact"
                  and _same(r, row | {"precision": "exact"})), None)
    if row["precision"] != "exact" and exact is not None:  # what a fast mode costs in accuracy
        row["max_gap_to_exact"] = max(abs(a - b) for a, b in zip(row["accuracies"], exact["accuracies"]))
    bare = next((r for r in rows if r["run"] == "bare" and _same(r, row) and r.get("s_per_round")), None)
    if row["run"] in TESTBED_RUNS and bare is not None:
        n = min(row["rounds"], bare["rounds"])
        row["x_bare"] = row["s_per_round"] / bare["s_per_round"]
        row["bare_final_accuracy"] = bare["accuracies"][n - 1]
        row["final_accuracy_at_bare_rounds"] = row["accuracies"][n - 1]
        row["max_accuracy_gap"] = max(abs(a - b) for a, b in zip(row["accuracies"][:n], bare["accuracies"][:n]))


def describe(row: dict) -> str:
    kind = row.get("kind")
    if kind == "machine":
        return f"gpu.py on {row['machine']}; GPU {row['gpu']}; {row['date']}; load average {row['load_average']:.2f}"
    if kind == "peak":
        again = " measured again (the table uses it)" if row.get("again") else ""
        return (f"float32 torch.mm peak on {row['device']}{again}: {row['float32_flops'] / 1e12:.2f} TFLOP/s "
                f"({row['matrix']})")
    if kind != "run":
        return row.get("note", json.dumps(row))
    head = f"{row['workload']} {row['precision']} {row['run']}:"
    if "s_per_round" not in row:
        return f"{head} {row.get('status')} {row.get('note', '')}"
    extra = f", {row['x_bare']:.2f}x bare" if "x_bare" in row else ""
    extra += f", {row['speedup_vs_first']:.2f}x the first, tables equal: {row['tables_equal']}" \
        if "speedup_vs_first" in row else ""
    return (f"{head} {row['s_per_round']:.3f} s a round over {row['rounds']} rounds ({row['images_per_s']:.0f} "
            f"images/s, {row['peak_fraction']:.1%} of peak in training{extra}), final accuracy "
            f"{row['final_accuracy']:.4f} [{row['status']}]")


def _cell(row: dict, key: str, fmt: str) -> str:
    return format(row[key], fmt) if row.get(key) is not None else "-"


def table(rows: list[dict], peak: float) -> str:
    lines = [f"float32 peak (torch.mm): {peak / 1e12:.2f} TFLOP/s", "",
             "| workload | precision | run | rounds | s a round | images/s | x bare | training TFLOP/s | of peak "
             "| of peak (round) | final accuracy | bare's | max gap | vs exact | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        note = r.get("note", "") if r.get("status") in ("skipped", "error") or "s_per_round" not in r else \
            ("" if r.get("status") == "ok" else r["status"])
        if "tables_equal" in r:
            note = f"{r['speedup_vs_first']:.2f}x the first row; tables equal: {r['tables_equal']}"
        lines.append(
            f"| {r['workload']}{' (CPU cores)' if r.get('cores') else ''} | {r['precision']} | {r['run']} "
            f"| {r.get('rounds', '-')} | {_cell(r, 's_per_round', '.3f')} | {_cell(r, 'images_per_s', ',.0f')} "
            f"| {_cell(r, 'x_bare', '.2f')} | {r['train_flops_per_s'] / 1e12:.2f} | {r['peak_fraction']:.1%} "
            f"| {r['peak_fraction_round']:.1%} | {_cell(r, 'final_accuracy', '.4f')} "
            f"| {_cell(r, 'bare_final_accuracy', '.4f')} | {_cell(r, 'max_accuracy_gap', '.4f')} "
            f"| {_cell(r, 'max_gap_to_exact', '.4f')} | {note} |"
            if "s_per_round" in r else
            f"| {r['workload']}{' (CPU cores)' if r.get('cores') else ''} | {r['precision']} | {r['run']} "
            f"| {r.get('rounds', '-')} | - | - | - | - | - | - | {_cell(r, 'final_accuracy', '.4f')} | - | - | - "
            f"| {r.get('status', '')}: {note} |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> str:
    """The issue's targets, each with its measured value (exact precision), or 'not measured'."""
    def find(workload, run):
        return next((r for r in rows if r["workload"] == workload and r["run"] == run and r["precision"] == "exact"
                     and not r.get("cores") and "s_per_round" in r), None)

    lines = ["| target (exact precision) | measured | met |", "|---|---|---|"]
    for workload in ("w1", "wcifar", "wpaper"):
        r = find(workload, "serial")
        value = r and r.get("x_bare")
        lines.append(f"| {workload}: serial <= {TARGETS['serial_x_bare']}x the bare loop | "
                     + (f"{value:.2f}x | {value <= TARGETS['serial_x_bare']} |" if value else "not measured | - |"))
    for workload in ("w1", "wcifar"):
        r = find(workload, "batched")
        value = r and r.get("x_bare") and 1 / r["x_bare"]
        lines.append(f"| {workload}: batched >= {TARGETS['batched_speedup']}x faster than the bare loop | "
                     + (f"{value:.2f}x | {value >= TARGETS['batched_speedup']} |" if value else "not measured | - |"))
    for run in TESTBED_RUNS + ("bare",):
        r = find("wpaper", run)
        value = r and r.get("peak_fraction")
        lines.append(f"| wpaper {run}: training >= {TARGETS['wpaper_peak']:.0%} of the float32 peak | "
                     + (f"{value:.1%} | {value >= TARGETS['wpaper_peak']} |" if value else "not measured | - |"))
    for r in (r for r in rows if r.get("cores") and "speedup_vs_first" in r):
        met = r["speedup_vs_first"] >= TARGETS["cores_speedup"] and r["tables_equal"]
        lines.append(f"| W-CIFAR on the CPU, {r['run']}: >= {TARGETS['cores_speedup']}x threads 1, tables equal | "
                     f"{r['speedup_vs_first']:.2f}x, tables equal: {r['tables_equal']} | {met} |")
    return "\n".join(lines)
