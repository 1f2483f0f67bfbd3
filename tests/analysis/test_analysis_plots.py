import io

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit, logit

from analysis.plots import mean_curve, plot_accuracy, plot_accuracy_mean, plot_breakdown, plot_gantt
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


# Seed 2 of the tiny run stopped after round 4, which ended later (55.5 s); evaluated in rounds 2 and 4.
SHORTER_SEED = """\
round,t_start_s,t_end_s,selected,arrived,dropped,late,surplus,bytes_up,bytes_down,flops,wasted_flops,wasted_bytes,accuracy,loss
1,0.0,10.0,3,2,1,0,0,2000,3000,600,100,500,,
2,10.0,25.0,3,2,0,1,0,3000,3000,600,200,1000,0.3,1.9
3,25.0,40.0,3,3,0,0,0,3000,3000,900,0,0,,
4,40.0,55.5,3,3,0,0,0,3000,3000,900,0,0,0.9,0.7
"""


@pytest.fixture
def three_seeds(tmp_path, run_dir, make_run, rounds_csv):
    """The tiny run (0.42, 0.81, 0.79 in rounds 2, 4, 5), a seed with 0.42, 0.6, 0.85, and SHORTER_SEED."""
    slower = rounds_csv.replace("0.81,0.7", "0.6,0.9").replace("0.79,0.75", "0.85,0.5")
    return [load_run(run_dir), load_run(make_run(tmp_path / "runs" / "tiny" / "1", rounds=slower, seed=1)),
            load_run(make_run(tmp_path / "runs" / "tiny" / "2", rounds=SHORTER_SEED, seed=2))]


def test_mean_curve_averages_the_rounds_every_seed_evaluated(three_seeds):
    curve = mean_curve(three_seeds, "time")
    assert list(curve.index) == [2, 4]  # round 5: only two seeds got there
    curve = curve[["x", "mean", "min", "max"]]
    assert curve.loc[2].to_dict() == pytest.approx({"x": 25.0, "mean": (0.42 + 0.42 + 0.3) / 3, "min": 0.3,
                                                    "max": 0.42})
    assert curve.loc[4].to_dict() == pytest.approx({"x": (52.5 + 52.5 + 55.5) / 3, "mean": (0.81 + 0.6 + 0.9) / 3,
                                                    "min": 0.6, "max": 0.9})
    # Cumulative cost at each round's end, as plot_accuracy's axes.
    assert list(mean_curve(three_seeds, "bytes_up")["x"]) == pytest.approx([0.005, 0.011])
    assert list(mean_curve(three_seeds, "flops")["x"]) == pytest.approx([1200, 3000])


def test_mean_curve_has_the_t_interval_of_its_accuracy_on_logits_and_none_for_one_seed(three_seeds):
    """Round 2: 0.42, 0.42, 0.3, on logits -0.322773, -0.322773, -0.847298: mean -0.497615, sample std 0.302834,
    so -0.497615 ± t(0.975, 2) * 0.302834 / sqrt(3) = -0.497615 ± 0.752282, taken back by 1 / (1 + e^-x):
    [0.2227, 0.5633] (Student's t on the values would give 0.38 ± 0.1721)."""
    curve = mean_curve(three_seeds, "time")
    assert (curve.loc[2, "ci95_low"], curve.loc[2, "ci95_high"]) == pytest.approx((0.222718, 0.563325), abs=1e-6)
    values = logit([0.81, 0.6, 0.9])   # round 4, against scipy's own t interval on the logits
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert (curve.loc[4, "ci95_low"], curve.loc[4, "ci95_high"]) == pytest.approx((expit(low), expit(high)))
    assert 0 < curve["ci95_low"].min() and curve["ci95_high"].max() < 1
    one = mean_curve(three_seeds[:1], "time")
    assert one["ci95_low"].isna().all() and one["ci95_high"].isna().all()  # one seed: no band, never a made-up one


def test_mean_curve_of_local_accuracy_and_of_a_run_without_it(three_seeds, tmp_path, make_run, rounds_csv):
    assert mean_curve(three_seeds, "time", "local_accuracy").empty  # the tiny runs have no local test split
    rounds = pd.read_csv(io.StringIO(rounds_csv))
    rounds["local_accuracy"] = [None, 0.5, None, 0.7, 0.8]
    local = load_run(make_run(tmp_path / "local" / "tiny" / "0", rounds=rounds.to_csv(index=False)))
    assert list(mean_curve([local], "time", "local_accuracy")["mean"]) == [0.5, 0.7, 0.8]


@pytest.mark.parametrize("x", ["time", "bytes_up", "flops"])
def test_plot_accuracy_mean_writes_a_png(tmp_path, three_seeds, make_run, x):
    other = load_run(make_run(tmp_path / "runs" / "other" / "0", name="other"))
    assert_png(plot_accuracy_mean([*three_seeds, other], x, tmp_path / "out" / f"mean_{x}.png"))


def test_plot_accuracy_mean_of_local_accuracy_and_bad_arguments(tmp_path, three_seeds, make_run, rounds_csv):
    rounds = pd.read_csv(io.StringIO(rounds_csv))
    rounds["local_accuracy"] = [None, 0.5, None, 0.7, 0.8]
    local = [load_run(make_run(tmp_path / "local" / "tiny" / str(seed), rounds=rounds.to_csv(index=False),
                               seed=seed)) for seed in (0, 1)]
    assert_png(plot_accuracy_mean(local, "time", tmp_path / "local.png", metric="local_accuracy"))
    with pytest.raises(ValueError, match="local_accuracy"):
        plot_accuracy_mean(three_seeds, "time", tmp_path / "x.png", metric="loss")
    with pytest.raises(ValueError, match="bytes_up"):
        plot_accuracy_mean(three_seeds, "seconds", tmp_path / "x.png")


@pytest.mark.parametrize("x", ["time", "bytes_up", "flops"])
def test_plot_accuracy_of_the_local_accuracy(tmp_path, make_run, rounds_csv, x):
    rounds = pd.read_csv(io.StringIO(rounds_csv))
    rounds["local_accuracy"] = [None, 0.6, None, 0.75, 0.85]
    run = load_run(make_run(tmp_path / "runs" / "tiny" / "0", rounds=rounds.to_csv(index=False)))
    assert_png(plot_accuracy([run], x, tmp_path / f"local_{x}.png", metric="local_accuracy"))
    with pytest.raises(ValueError, match="local_accuracy"):
        plot_accuracy([run], x, tmp_path / "x.png", metric="loss")
