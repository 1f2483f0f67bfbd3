"""testbed report's pages: report.html opened in headless Chromium shows the tables and every figure, embedded,
and sorts on load from #sort=COLUMN; report.md holds the same tables. Study of conftest: speedups against
fedavg at 0.8 are 1, 56.25/25 = 2.25, 1 and 60/52.5 = 1.143 (groups in the order first seen)."""
import base64
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from testbed.cli import main

GROUPS = ["fedavg, heterogeneity=low", "fedlps, heterogeneity=low", "fedavg, heterogeneity=high",
          "fedlps, heterogeneity=high"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium to open the page in: apt-get install -y "
                                    "chromium (Debian's package; .ci/run installs it)")


class Page(HTMLParser):
    """What a reader sees: the tables (rows of cell texts, header first) and the images' sources."""

    def __init__(self, text: str):
        super().__init__()
        self.tables, self.images, self.tags, self._cell = [], [], set(), None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None


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
def test_the_page_shows_both_tables_and_every_figure_embedded(report):
    page = rendered(report / "report.html")
    groups, runs = page.tables
    assert column(groups, "group") == GROUPS
    assert column(groups, "time_s@0.8") == ["56.2±5.3", "25.0", "60.0", "52.5"]
    assert column(groups, "speedup@0.8") == ["1.000", "2.250", "1.000", "1.143"]
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
    rows = [line for line in text.splitlines() if line.startswith("| fedavg, heterogeneity=low |")]
    assert len(rows) == 1 and "| 56.2±5.3 |" in rows[0] and rows[0].endswith("| 1.000 |")
    links = [line.split("](")[1].rstrip(")") for line in text.splitlines() if line.startswith("![")]
    assert links and all((report / link).is_file() for link in links)


def test_the_title_counts_runs_in_words(report, tmp_path):
    assert (report / "report.md").read_text().splitlines()[0].startswith("# Report: 5 runs of ")
    one = next(report.parent.glob("*/*/0"))   # one run of the study alone
    assert main(["report", str(one), "--out", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "report.md").read_text().splitlines()[0].startswith("# Report: 1 run of ")
