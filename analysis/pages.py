"""The report as pages a researcher can publish: report.html, one self-contained file (figures embedded as
base64 PNG, tables sortable by a small inline script, nothing fetched), and report.md, the same tables in
markdown with the figures beside it as image links.

Layout (for a window of about 1400 px): figures two to a row in a grid, each row's figures top-aligned, a figure
wider than WIDE_PX in a row of its own; tables wider than the page scroll in their frame. Run folders that were
found but left out (analysis.discovery) are listed under the title.

Sorting: click a column header (again: descending); or open the page as report.html#sort=COLUMN
(#sort=-COLUMN: descending), which sorts every table with that column on load. Missing values sort last.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd
from PIL import Image

from analysis.compare import group_runs, write_comparison
from analysis.discovery import find_runs
from analysis.report import (DEFAULT_METRIC, METRIC_NOTES, default_targets, resource_note, seed_table_cells,
                             table_cells, tta_table, write_report)
from analysis.terminal import wrap
from analysis.compare_text import INTERVALS_NOTE, VS, interval_cells
from analysis.verdicts import headline

HTML_PAGE, MARKDOWN_PAGE = "report.html", "report.md"
COMPARE_NOTE = ("groups: runs that differ only in seed; mean±std over a group's seeds (sample std); "
                "time_s/uplink_MB/TFLOPs/rounds@target: over only the seeds that reached it, reached@target of them; "
                "speedup@target: the baseline's time to it over the group's, the ratio of their geometric means")

SORT_SCRIPT = """
function sortTable(table, column, descending) {
  const body = table.tBodies[0];
  const value = row => {
    const text = row.cells[column].dataset.sort;
    return text === "" ? null : (isNaN(Number(text)) ? text : Number(text));
  };
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === null || y === null) return (x === null) - (y === null);  // missing last, either way
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return descending ? -order : order;
  });
  rows.forEach(row => body.appendChild(row));
  Array.from(table.tHead.rows[0].cells).forEach((th, i) =>
    th.setAttribute("aria-sort", i === column ? (descending ? "descending" : "ascending") : "none"));
}
function sortByName(name, descending) {
  document.querySelectorAll("table.sortable").forEach(table => {
    const column = Array.from(table.tHead.rows[0].cells).findIndex(th => th.textContent === name);
    if (column >= 0) sortTable(table, column, descending);
  });
}
function sortFromHash() {
  const match = decodeURIComponent(location.hash).match(/^#sort=(-?)(.+)$/);
  if (match) sortByName(match[2], match[1] === "-");
}
document.querySelectorAll("table.sortable th").forEach(th => th.addEventListener("click", () => {
  const descending = th.getAttribute("aria-sort") === "ascending";
  history.replaceState(null, "", "#sort=" + (descending ? "-" : "") + encodeURIComponent(th.textContent));
  sortByName(th.textContent, descending);
}));
window.addEventListener("hashchange", sortFromHash);
sortFromHash();
"""

# A table wider than the page scrolls in its frame (the scrollbar drawn always, even where the system hides
# scrollbars until used), and the frame's right edge is shaded while columns are hidden there.
SCROLL_SCRIPT = """
function markHidden() {
  document.querySelectorAll(".scroll").forEach(box =>
    box.parentElement.classList.toggle("more", box.scrollLeft + box.clientWidth < box.scrollWidth - 1));
}
document.querySelectorAll(".scroll").forEach(box => box.addEventListener("scroll", markHidden));
window.addEventListener("resize", markHidden);
markHidden();
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; } th[aria-sort=descending]::after { content: " \\25BC"; }
td:first-child, th:first-child { text-align: left; }
tbody tr:nth-child(even) { background: #fafafa; }
.frame { position: relative; } .scroll { overflow-x: auto; }
.scroll::-webkit-scrollbar { height: 10px; } .scroll::-webkit-scrollbar-track { background: #eee; }
.scroll::-webkit-scrollbar-thumb { background: #999; border-radius: 5px; }
.frame.more::after { content: ""; position: absolute; top: 0; right: 0; bottom: 0; width: 3em; pointer-events: none;
                     background: linear-gradient(to right, rgba(255, 255, 255, 0), rgba(90, 90, 90, 0.35)); }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 560px), 1fr)); gap: 1em;
           align-items: start; }
figure { margin: 0; min-width: 0; } figure.wide { grid-column: 1 / -1; } img { max-width: 100%; height: auto; }
figcaption, .note, .skipped { color: #555; font-size: 0.85em; }
"""
# A figure wider than this (10 inches at analysis.plots.DPI) takes a row of its own: in half the page's width
# its text would be drawn at less than half its size.
WIDE_PX = 1200

SECTIONS = {  # figure file names by their first word, in page order
    "Accuracy": ("accuracy", "local"),
    "Comparison of groups": ("tta", "breakdown_by_group", "participation"),
    "Per run": ("gantt", "breakdown", "utilisation", "staleness", "battery"),
}


def write_pages(run_dirs: list, out_dir, targets: list[float] | None = None, baseline: str | None = None,
                metric: str = DEFAULT_METRIC) -> tuple[str, list[Path]]:
    """write_report and write_comparison into out_dir, then report.html and report.md of their tables (compare's
    groups, their 95% intervals and verdicts, the runs) and figures,
    each figure once: write_report draws the Gantt timelines per run and the curves averaged over compare's
    groups (only where a group has several runs: else they are the runs' own curves), so compare draws neither.
    A folder that holds runs stands for all of them (analysis.discovery). Returns write_report's text, after a
    line for each run folder skipped, and every path written."""
    found = find_runs(run_dirs)
    folders, runs = found.folders, found.runs()
    comparison, compare_files = write_comparison(runs, out_dir, targets, baseline, metric, timelines=False,
                                                 curves=False)
    compared = comparison.table
    text, report_files = write_report(runs, out_dir, targets, metric, groups=lambda runs: group_runs(runs)[0])
    per_run = tta_table(runs, default_targets(runs) if targets is None else targets, metric)
    written = report_files + compare_files
    notes = [METRIC_NOTES.get(metric, ""), resource_note(per_run)]
    intervals = headline(comparison.intervals).reset_index(drop=True)
    tables = {"Groups (mean ± std over seeds)": (seed_table_cells(compared), compared,
                                                 " ".join(filter(None, [*notes, COMPARE_NOTE]))),
              "Groups: 95% intervals and verdicts": (interval_cells(intervals), _interval_sort_values(intervals),
                                                     INTERVALS_NOTE),
              "Runs": (table_cells(per_run), per_run, " ".join(filter(None, notes)))}
    figures = list(dict.fromkeys(p for p in written if p.suffix == ".png"))
    title = (f"Report: {len(folders)} run{'' if len(folders) == 1 else 's'} of "
             f"{', '.join(dict.fromkeys(str(n) for n in per_run['scenario']))}")
    out_dir = Path(out_dir)
    (out_dir / HTML_PAGE).write_text(render_html(title, tables, figures, folders, found.skipped))
    (out_dir / MARKDOWN_PAGE).write_text(render_markdown(title, tables, figures, found.skipped))
    return "\n".join([*map(wrap, found.skipped), text]), written + [out_dir / HTML_PAGE, out_dir / MARKDOWN_PAGE]


def render_html(title: str, tables: dict, figures: list[Path], folders: list[Path], skipped: list[str] = ()) -> str:
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if skipped:
        parts.append('<ul class="skipped">' + "".join(f"<li>{html.escape(line)}</li>" for line in skipped) + "</ul>")
    for heading, (cells, values, note) in tables.items():
        parts += [f"<h2>{html.escape(heading)}</h2>", f'<p class="note">{html.escape(note)}</p>' if note else "",
                  f'<div class="frame"><div class="scroll">{_html_table(cells, values)}</div></div>']
    for heading, figures_here in _sections(figures).items():
        parts += [f"<h2>{html.escape(heading)}</h2>", '<div class="figures">', *map(_html_figure, figures_here),
                  "</div>"]
    parts.append('<p class="note">Run folders: ' + ", ".join(html.escape(str(f)) for f in folders) + "</p>")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(parts) + f"\n<script>{SORT_SCRIPT}{SCROLL_SCRIPT}</script>\n</body></html>\n")


def render_markdown(title: str, tables: dict, figures: list[Path], skipped: list[str] = ()) -> str:
    parts = [f"# {title}", *(["\n".join(f"- {line}" for line in skipped)] if skipped else [])]
    for heading, (cells, _, note) in tables.items():
        parts += [f"## {heading}", *([note] if note else []), _markdown_table(cells)]
    for heading, figures_here in _sections(figures).items():
        parts += [f"## {heading}", "\n".join(f"![{p.stem}]({p.name})" for p in figures_here)]
    return "\n\n".join(parts) + "\n"


def _markdown_table(cells: pd.DataFrame) -> str:
    """A pipe table (GitHub's markdown); '|' inside a cell escaped."""
    def line(values):
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    return "\n".join([line(cells.columns), line(["---"] * len(cells.columns)),
                      *(line(row) for row in cells.itertuples(index=False))])


def _html_table(cells: pd.DataFrame, values: pd.DataFrame) -> str:
    """cells as shown, each with its value to sort on (the number, or the mean of a mean±std cell)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cells.columns)
    rows = []
    for i in range(len(cells)):
        row = "".join(f'<td data-sort="{html.escape(_sort_key(values[c].iloc[i]))}">'
                      f"{html.escape(str(cells[c].iloc[i]))}</td>" for c in cells.columns)
        rows.append(f"<tr>{row}</tr>")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _html_figure(path: Path) -> str:
    """The figure embedded, at most as wide as drawn (its pixels), a row of its own where wider than WIDE_PX."""
    with Image.open(path) as image:
        width, height = image.size
    wide = ' class="wide"' if width > WIDE_PX else ""
    return (f'<figure{wide}><img alt="{html.escape(path.stem)}" width="{width}" height="{height}" '
            f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}">'
            f"<figcaption>{html.escape(path.name)}</figcaption></figure>")


def _interval_sort_values(intervals: pd.DataFrame) -> pd.DataFrame:
    """What interval_cells' columns sort on: the numbers behind the text (the mean, the difference)."""
    return pd.DataFrame({"group": intervals["group"], "metric": intervals["metric"], "n": intervals["seeds"],
                         "mean [95% CI]": intervals["mean"], VS: intervals["vs_baseline"],
                         "verdict": intervals["verdict"]})


def _sort_key(value) -> str:
    return "" if pd.isna(value) else str(value)


def _sections(figures: list[Path]) -> dict[str, list[Path]]:
    """The figures by SECTIONS, each under the first section whose prefix its name starts with (else "Per
    run"); in a section, by the prefix's place in it (a run's Gantt timelines before their breakdowns), then in
    the order given."""
    sections: dict[str, list[Path]] = {heading: [] for heading in SECTIONS}
    for figure in figures:
        heading = next((h for h, prefixes in SECTIONS.items() if figure.name.startswith(prefixes)), "Per run")
        sections[heading].append(figure)

    def place(heading, figure):
        return next((i for i, prefix in enumerate(SECTIONS[heading]) if figure.name.startswith(prefix)),
                    len(SECTIONS[heading]))

    return {heading: sorted(found, key=lambda figure: place(heading, figure))
            for heading, found in sections.items() if found}
