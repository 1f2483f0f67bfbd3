"""testbed report's pages: report.html opened in headless Chromium shows the tables and every figure, embedded,
each once and at a readable size at 1400 px, every table fitting or scrolling in its frame, and sorts on load
from #sort=COLUMN; report.md holds the same tables. Study of conftest: speedups against
fedavg at 0.8 (geometric mean times) are 1, sqrt(52.5 * 60)/25 = 2.245, 1 and 60/52.5 = 1.143 (groups in the order
first seen)."""
import base64
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from analysis.report import file_safe
from testbed.cli import main

GROUPS = ["fedavg, heterogeneity=low", "fedlps, heterogeneity=low", "fedavg, heterogeneity=high",
          "fedlps, heterogeneity=high"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium to open the page in: apt-get install -y "
                                    "chromium (Debian's package; .ci/run installs it)")


class Page(HTMLParser):
    """What a reader sees: the tables (rows of cell texts, header first), the images' sources and the figures'
    captions; and for each table, the classes of the elements it sits in."""

    VOID = {"img", "meta", "br", "hr", "link", "input"}   # elements without an end tag

    def __init__(self, text: str):
        super().__init__()
        self.tables, self.images, self.captions, self.tags = [], [], [], set()
        self.table_frames, self._classes, self._cell, self._caption = [], [], None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
            self.table_frames.append([c for c in self._classes if c])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])
        elif tag == "figcaption":
            self._caption = ""
        if tag not in self.VOID:
            self._classes.append(dict(attrs).get("class"))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._caption is not None:
            self._caption += data

    def handle_endtag(self, tag):
        if tag not in self.VOID:
            self._classes.pop()
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None
        elif tag == "figcaption":
            self.captions.append(self._caption)
            self._caption = None


def rendered(page: Path, fragment: str = "") -> Page:
    """The page's DOM after its script ran, as headless Chromium dumps it."""
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          page.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "<table" in dom.stdout, dom.stderr[-2000:]
    return Page(dom.stdout)


def column(table: list[list[str]], name: str) -> list[str]:
    return [row[table[0].index(name)] for row in table[1:]]


@pytest.fixture(scope="module")
def report(make_study, tmp_path_factory):
    """testbed report of the study, once for the module's tests."""
    root = tmp_path_factory.mktemp("study")
    out = root / "report"
    assert main(["report", *map(str, make_study(root)), "--baseline", "fedavg", "--out", str(out)]) == 0
    return out


@needs_chromium
def test_the_page_shows_the_tables_and_every_figure_embedded(report):
    page = rendered(report / "report.html")
    groups, intervals, runs = page.tables
    assert column(groups, "group") == GROUPS
    # 52.5 and 60 s on logs: 4.027579 ± t(0.975, 1) * 0.094422 / sqrt(2) = 4.027579 ± 12.706 * 0.066766, taken
    # back: 56.1 [24.0, 131.1]; the other groups have one seed
    time = [row for row in intervals[1:] if row[1] == "time_s@0.8"]
    assert [row[3] for row in time] == ["56.1 [24.0, 131.1]", "25.0 (1 seed; need 2)", "60.0 (1 seed; need 2)",
                                        "52.5 (1 seed; need 2)"]
    assert [row[-1] for row in time] == ["baseline", "too few seeds", "baseline", "too few seeds"]
    assert column(groups, "time_s@0.8") == ["56.2±5.3", "25.0", "60.0", "52.5"]
    assert column(groups, "speedup@0.8") == ["1.000", "2.245", "1.000", "1.143"]
    assert column(runs, "run") == ["tiny-fedavg-low/0", "tiny-fedavg-low/1", "tiny-fedlps-low/0",
                                   "tiny-fedavg-high/0", "tiny-fedlps-high/0"]
    assert column(runs, "rounds@0.8") == ["4", "5", "2", "5", "4"]
    figures = sorted(path.name for path in report.glob("*.png"))
    assert len(page.images) == len(figures) >= 15
    for source in page.images:  # nothing fetched: every figure is in the page itself
        assert source.startswith("data:image/png;base64,")
        assert base64.b64decode(source.removeprefix("data:image/png;base64,"))[:4] == b"\x89PNG"
    assert not page.tags & {"link", "iframe"}


@needs_chromium
def test_the_page_sorts_on_load_from_the_fragment(report):
    by_speedup = rendered(report / "report.html", "#sort=-speedup@0.8").tables[0]
    # descending; the two ties keep their order
    assert column(by_speedup, "group") == [GROUPS[1], GROUPS[3], GROUPS[0], GROUPS[2]]
    by_level = rendered(report / "report.html", "#sort=fleet.heterogeneity").tables[0]
    assert column(by_level, "fleet.heterogeneity") == ["high", "high", "low", "low"]


def test_the_markdown_page_holds_the_tables_and_links_the_figures(report):
    text = (report / "report.md").read_text()
    assert "| fedlps, heterogeneity=low | fedlps | low | 1 |" in text
    groups = text.split("## Groups (mean ± std over seeds)")[1].split("## ")[0]
    rows = [line for line in groups.splitlines() if line.startswith("| fedavg, heterogeneity=low |")]
    assert len(rows) == 1 and "| 56.2±5.3 |" in rows[0] and rows[0].endswith("| 1.000 |")
    links = [line.split("](")[1].rstrip(")") for line in text.splitlines() if line.startswith("![")]
    assert links and all((report / link).is_file() for link in links)


def test_the_title_counts_runs_in_words(report, tmp_path):
    assert (report / "report.md").read_text().splitlines()[0].startswith("# Report: 5 runs of ")
    one = next(report.parent.glob("*/*/0"))   # one run of the study alone
    assert main(["report", str(one), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "report.md").read_text().splitlines()[0].startswith("# Report: 1 run of ")


def test_each_figure_is_on_the_page_once_and_each_table_in_a_scrolling_frame(report):
    page = Page((report / "report.html").read_text())
    figures = sorted(path.name for path in report.glob("*.png"))
    assert sorted(page.captions) == figures and len(page.images) == len(figures)
    # fedavg at low has two seeds: the curves averaged over compare's groups, drawn once (compare's own
    # accuracy_by_group_vs_time would be the same curves again)
    assert [name for name in figures if name.startswith("accuracy")] == [
        "accuracy_mean_vs_bytes_up.png", "accuracy_mean_vs_flops.png", "accuracy_mean_vs_time.png",
        "accuracy_vs_bytes_up.png", "accuracy_vs_flops.png", "accuracy_vs_time.png"]
    assert page.table_frames == [["frame", "scroll"]] * 3
    links = [line for line in (report / "report.md").read_text().splitlines() if line.startswith("![")]
    assert sorted(link.split("](")[1].rstrip(")") for link in links) == figures


def test_two_one_seed_runs_draw_their_curves_once_and_average_nothing(make_run, tmp_path):
    """Two runs of one scenario name that differ in the learning rate: two groups of one seed each, so no curve
    averaged over seeds (by scenario name they would be one scenario's two "seeds")."""
    first = make_run(tmp_path / "runs" / "a" / "tiny" / "0")
    second = make_run(tmp_path / "runs" / "b" / "tiny" / "0")
    with open(second / "scenario.resolved.yaml", "a") as scenario:
        scenario.write("client: {lr: 0.1}\n")
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
    page = Page((out / "report.html").read_text())
    names = sorted(page.captions)
    assert names == sorted(path.name for path in out.glob("*.png"))
    assert [name.split("_")[0] for name in names] == [
        "accuracy", "accuracy", "accuracy", "breakdown", "breakdown", "breakdown", "gantt", "gantt",
        "participation", "participation"]
    assert not any("mean" in name or "by_group_vs" in name for name in names)
    assert not (out / "tta_by_scenario.csv").exists()   # nor a table of one scenario's two "seeds"
    assert f"gantt_{file_safe(str(first))}.png" in names and f"gantt_{file_safe(str(second))}.png" in names


LAYOUT_SCRIPT = """<script>
const box = element => element.getBoundingClientRect();
const figures = Array.from(document.querySelectorAll("figure")).map(figure => {
  const image = figure.querySelector("img"), at = box(figure);
  return {name: figure.querySelector("figcaption").textContent, top: at.top, bottom: at.bottom, left: at.left,
          right: at.right, scale: box(image).width / (Number(image.getAttribute("width")) || image.naturalWidth)};
});
const tables = Array.from(document.querySelectorAll("table")).map(table => {
  const frame = table.closest(".scroll") || table;
  return {overflow: getComputedStyle(frame).overflowX, right: box(frame).right,
          hidden: frame.scrollWidth > frame.clientWidth, shaded: frame.parentElement.classList.contains("more")};
});
const out = document.createElement("pre");
out.id = "layout";
out.textContent = JSON.stringify({window: innerWidth, page: document.documentElement.scrollWidth, figures, tables});
document.body.appendChild(out);
</script>"""


def layout(page: Path, width: int, tmp_path: Path) -> dict:
    """Where headless Chromium, in a window `width` px wide, draws the page's figures and tables."""
    measured = tmp_path / f"measured_{width}.html"
    measured.write_text(page.read_text().replace("</body>", LAYOUT_SCRIPT + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},3000",
                          "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout, re.S)
    assert dom.returncode == 0 and found, dom.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


@needs_chromium
def test_at_1400_px_every_figure_is_readable_in_a_grid_and_every_table_fits_or_scrolls(report, tmp_path):
    wide = layout(report / "report.html", 1400, tmp_path)
    assert wide["page"] <= wide["window"]        # nothing reaches past the page's right edge
    for figure in wide["figures"]:               # none shrunk below 60% of its drawn size (Gantt charts,
        assert figure["scale"] >= 0.6, figure    # the groups' breakdown: a row of their own)
    for one in wide["figures"]:                  # figures side by side start at one height and never overlap
        for other in wide["figures"]:
            if one is not other and one["top"] < other["bottom"] and other["top"] < one["bottom"]:
                assert one["top"] == other["top"] and (one["right"] <= other["left"] or other["right"] <= one["left"])
    rows = {figure["top"] for figure in wide["figures"]}
    assert len(rows) < len(wide["figures"])      # two columns where figures fit
    narrow = layout(report / "report.html", 700, tmp_path)
    for seen in (wide, narrow):
        for table in seen["tables"]:             # in a frame that scrolls, shaded at its edge while it hides columns
            assert table["overflow"] == "auto" and table["right"] <= seen["window"]
            assert table["shaded"] == table["hidden"]
    assert narrow["page"] <= narrow["window"] and all(table["hidden"] for table in narrow["tables"])
