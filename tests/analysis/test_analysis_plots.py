import pytest

from analysis.plots import plot_accuracy, plot_breakdown, plot_gantt
from analysis.runs import load_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000  # axes, labels and lines, not a blank canvas


@pytest.mark.parametrize("x", ["time", "bytes_up", "flops"])
def test_plot_accuracy_writes_a_png(tmp_path, run_dir, make_run, x):
    runs = [load_run(run_dir), load_run(make_run(tmp_path / "runs" / "tiny" / "1", seed=1))]
    path = plot_accuracy(runs, x, tmp_path / "out" / f"acc_{x}.png")
    assert path == tmp_path / "out" / f"acc_{x}.png"
    assert_png(path)


def test_plot_accuracy_rejects_an_unknown_axis(run_dir, tmp_path):
    with pytest.raises(ValueError, match="bytes_up"):
        plot_accuracy([load_run(run_dir)], "seconds", tmp_path / "x.png")


def test_plot_gantt_and_breakdown_write_pngs(run_dir, tmp_path):
    run = load_run(run_dir)
    assert_png(plot_gantt(run, tmp_path / "gantt.png"))
    assert_png(plot_breakdown(run, tmp_path / "breakdown.png"))


def test_plots_of_a_fleet_sized_run(tmp_path, make_synthetic_run):
    run = load_run(make_synthetic_run(tmp_path / "runs" / "synthetic" / "0", devices=13, rounds=6))
    assert_png(plot_gantt(run, tmp_path / "gantt.png", rounds=3))
    assert_png(plot_breakdown(run, tmp_path / "breakdown.png"))
    assert_png(plot_accuracy([run], "time", tmp_path / "acc.png"))
