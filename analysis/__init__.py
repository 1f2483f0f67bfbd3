"""Read run folders written by `testbed run`: metrics, plots and reports. Never imports the testbed."""

from analysis.metrics import cost_to_accuracy, round_breakdown, summarize, time_breakdown, time_to_accuracy
from analysis.plots import plot_accuracy, plot_breakdown, plot_gantt
from analysis.report import format_table, tta_table, write_report
from analysis.runs import Run, load_run, run_labels

__all__ = [
    "Run",
    "cost_to_accuracy",
    "format_table",
    "load_run",
    "plot_accuracy",
    "plot_breakdown",
    "plot_gantt",
    "round_breakdown",
    "run_labels",
    "summarize",
    "time_breakdown",
    "time_to_accuracy",
    "tta_table",
    "write_report",
]
