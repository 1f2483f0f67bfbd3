"""Resource modelling in report and compare, every number by hand on the tiny run of conftest with resources on:

rounds 1-5 spend 1500, 2500, 3000, 4000, 5000 J (cumulative 1500, 4000, 7000, 11000, 16000; total 16 kJ), 600 J of
it wasted; devices kept out by memory in rounds 1 and 5 (2), by battery in rounds 2 and 3 (2); one task dropped by
an empty battery in round 4. Accuracy 0.42 / 0.81 / 0.79 in rounds 2 / 4 / 5: 0.4 is reached at 4000 J, 0.8 at
11000 J (seed 1, slower: at 16000 J in round 5). Devices wait for their round to close in "idle" phases.
Battery groups: 0 (a, b) and 1 (c) of phone_mid, minimum levels 20% and 30%; 2 (d) of watch, minimum 10%.
"""
import io

import numpy as np
import pandas as pd
import pytest

import analysis.battery_plots as battery_plots
import analysis.plots as plots
from analysis.battery_plots import battery_by_class, plot_battery
from analysis.compare import compare_table, write_compare
from analysis.metrics import device_utilisation, round_breakdown, time_breakdown
from analysis.pages import write_pages
from analysis.plots import mean_curve, plot_accuracy, plot_gantt, plotted_axes
from analysis.report import format_seed_table, format_table, table_cells, tta_table, write_report
from analysis.runs import Run, load_run

ENERGY = [1500, 2500, 3000, 4000, 5000]
WASTED = [100, 200, 0, 0, 300]
EXCLUDED_MEMORY, EXCLUDED_BATTERY, DEPLETED = [1, 0, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 0, 1, 0]
RESOURCE_COLUMNS = ["total_energy_J", "wasted_energy_J", "excluded_memory", "excluded_battery", "depleted"]

# Each device's wait from its upload's end to its round's end (rounds end at 10, 25 and 60 s).
IDLE_EVENTS = """\
a,1,idle,6.0,10.0,done
c,1,idle,9.0,10.0,done
a,2,idle,16.5,25.0,done
c,2,idle,19.0,25.0,done
a,5,idle,57.0,60.0,done
b,5,idle,58.0,60.0,done
"""

BATTERY = """\
round,t_s,group,profile,level_mean,level_min,level_max,below_min
1,10.0,0,phone_mid,0.9,0.8,1.0,0
1,10.0,1,phone_mid,0.6,0.6,0.6,0
1,10.0,2,watch,0.3,0.3,0.3,0
2,25.0,0,phone_mid,0.8,0.6,1.0,0
2,25.0,1,phone_mid,0.5,0.5,0.5,0
2,25.0,2,watch,0.25,0.25,0.25,1
3,40.0,0,phone_mid,0.7,0.5,0.9,1
3,40.0,1,phone_mid,0.4,0.4,0.4,0
3,40.0,2,watch,0.2,0.2,0.2,1
"""

DEVICES = "device,group,profile\na,0,phone_mid\nb,0,phone_mid\nc,1,phone_mid\nd,2,watch\n"

FLEET = """\
fleet:
  groups:
    - {profile: phone_mid, count: 2, battery: {min_level: 0.2}}
    - {profile: phone_mid, count: 1, battery: {min_level: 0.3}}
    - {profile: watch, count: 1, battery: {min_level: 0.1}}
resources: {energy: true, idle_energy: true}
"""


def with_resources(rounds_csv: str, events: pd.DataFrame) -> tuple[str, str]:
    """The tiny run's tables with the resource columns: the rounds' joules and counts, and the idle waits and every
    phase's joules (at 1 W: the analysis reads energy from rounds.csv, so these need not add up to it)."""
    header, *lines = rounds_csv.splitlines()
    rounds = "\n".join([header + ",energy_J,wasted_energy_J,excluded_memory,excluded_battery,depleted"]
                       + [f"{line},{e},{w},{m},{b},{d}" for line, e, w, m, b, d
                          in zip(lines, ENERGY, WASTED, EXCLUDED_MEMORY, EXCLUDED_BATTERY, DEPLETED)]) + "\n"
    events = pd.concat([events, pd.read_csv(io.StringIO(IDLE_EVENTS), names=list(events.columns))],
                       ignore_index=True)
    events["energy_J"] = events["end_s"] - events["start_s"]
    return rounds, events.to_csv(index=False)


SLOWER = {"0.81,0.7": "0.6,0.9", "0.79,0.75": "0.85,0.5"}  # 0.8 first reached in round 5, as in conftest


@pytest.fixture
def make_resource_run(make_run, rounds_csv, events):
    def make(folder, seed=0, slower=False):
        text = rounds_csv
        for old, new in (SLOWER if slower else {}).items():
            text = text.replace(old, new)
        rounds, phases = with_resources(text, events)
        folder = make_run(folder, rounds=rounds, events=phases, seed=seed, name="res")
        with open(folder / "scenario.resolved.yaml", "a") as scenario:
            scenario.write(FLEET)
        (folder / "battery.csv").write_text(BATTERY)
        (folder / "devices.csv").write_text(DEVICES)
        return folder

    return make


@pytest.fixture
def resource_run_dir(tmp_path, make_resource_run):
    return make_resource_run(tmp_path / "runs" / "res" / "0")


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save (their artists stay readable after the save closes them)."""
    figures = []

    def spy(real):
        def save(fig, path):
            figures.append(fig)
            return real(fig, path)
        return save

    for module in (plots, battery_plots):
        monkeypatch.setattr(module, "_save", spy(module._save))
    return figures


def test_load_run_reads_battery_csv_only_where_there_is_one(resource_run_dir, run_dir):
    assert load_run(resource_run_dir).battery.shape == (9, 8)
    assert load_run(run_dir).battery is None


def test_report_table_has_energy_to_target_beside_time_and_the_resource_totals(resource_run_dir):
    table = tta_table([load_run(resource_run_dir)], [0.4, 0.8, 0.9])
    row = table.iloc[0]
    assert row[RESOURCE_COLUMNS].tolist() == [16000, 600, 2, 2, 1]
    assert (row["energy_J@0.4"], row["energy_J@0.8"]) == (1500 + 2500, 1500 + 2500 + 3000 + 4000)
    assert pd.isna(row["energy_J@0.9"])
    columns = list(table.columns)
    assert columns[columns.index("time_s@0.8") + 1] == "energy_J@0.8"
    assert columns[columns.index("total_uplink_MB") + 1:columns.index("final_accuracy")] == RESOURCE_COLUMNS
    cells = table_cells(table).iloc[0]
    # joules in the unit that keeps them short; counts as whole numbers
    assert cells[["total_energy_J", "wasted_energy_J", "energy_J@0.4", "energy_J@0.8", "energy_J@0.9"]].tolist() == [
        "16.0 kJ", "600.0 J", "4.000 kJ", "11.0 kJ", "-"]
    assert cells[["excluded_memory", "excluded_battery", "depleted"]].tolist() == ["2", "2", "1"]
    assert "11.0 kJ" in format_table(table)


def test_a_run_without_resources_gets_no_resource_column(run_dir, resource_run_dir):
    plain = tta_table([load_run(run_dir)], [0.8])
    assert not any(column in plain for column in [*RESOURCE_COLUMNS, "energy_J@0.8"])
    assert plotted_axes([load_run(run_dir)]) == ["time", "bytes_up", "flops"]
    # beside a run with resources: its cells are missing, not zero
    both = tta_table([load_run(run_dir), load_run(resource_run_dir)], [0.8])
    assert both[[*RESOURCE_COLUMNS, "energy_J@0.8"]].iloc[0].isna().all()
    assert table_cells(both).iloc[0]["energy_J@0.8"] == "-" and table_cells(both).iloc[1]["energy_J@0.8"] == "11.0 kJ"


def test_write_report_of_a_plain_run_writes_no_resource_plot_or_note(tmp_path, run_dir):
    text, paths = write_report([run_dir], tmp_path / "report")
    assert {path.name for path in paths} == {"accuracy_vs_time.png", "accuracy_vs_bytes_up.png",
                                             "accuracy_vs_flops.png", "gantt_tiny_0.png", "breakdown_tiny_0.png",
                                             "tta.csv"}
    assert "energy" not in text


def test_write_report_adds_accuracy_vs_energy_and_battery_plots(tmp_path, resource_run_dir):
    text, paths = write_report([resource_run_dir], tmp_path / "report")
    names = {path.name for path in paths}
    assert {"accuracy_vs_energy.png", "battery_res_0.png"} <= names
    assert all(path.stat().st_size > 10_000 for path in paths if path.suffix == ".png")
    assert text.startswith("energy: joules") and "energy_J@0.8" in text and "11.0 kJ" in text
    assert pd.read_csv(tmp_path / "report" / "tta.csv")["energy_J@0.8"].tolist() == [11000]


def test_accuracy_vs_energy_plots_cumulative_joules_at_the_evaluated_rounds(tmp_path, resource_run_dir, run_dir,
                                                                            drawn):
    path = plot_accuracy([load_run(resource_run_dir), load_run(run_dir)], "energy", tmp_path / "acc_energy.png")
    assert path.is_file()
    ax = drawn[0].axes[0]
    lines = [line for line in ax.get_lines() if line.get_label() == "res/0"]
    assert len(lines) == 1 and "tiny/0" not in [line.get_label() for line in ax.get_lines()]  # no energy: no line
    assert list(lines[0].get_xdata()) == [4000, 11000, 16000]  # rounds 2, 4, 5
    assert list(lines[0].get_ydata()) == [0.42, 0.81, 0.79]
    assert ax.get_xlabel() == "Cumulative device energy"


def test_battery_levels_per_class_weigh_each_group_by_its_devices(resource_run_dir):
    table = battery_by_class(load_run(resource_run_dir)).set_index(["profile", "round"])
    phone = table.loc["phone_mid"]
    assert phone["mean"].tolist() == pytest.approx([(2 * 0.9 + 0.6) / 3, (2 * 0.8 + 0.5) / 3, (2 * 0.7 + 0.4) / 3])
    assert phone["min"].tolist() == [0.6, 0.5, 0.4] and phone["max"].tolist() == [1.0, 1.0, 0.9]
    assert phone["below_min"].tolist() == [0, 0, 1] and phone["devices"].tolist() == [3, 3, 3]
    assert table.loc["watch", "mean"].tolist() == [0.3, 0.25, 0.2]


def test_plot_battery_draws_each_class_over_time_with_its_band_and_minimum(tmp_path, resource_run_dir, drawn):
    path = plot_battery(load_run(resource_run_dir), tmp_path / "battery.png")
    assert path.stat().st_size > 10_000
    ax = drawn[0].axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    phone = lines["phone_mid: mean of 3 devices, up to 1 below the minimum"]
    assert list(phone.get_xdata()) == [10.0, 25.0, 40.0]
    assert list(phone.get_ydata()) == pytest.approx([0.8, 0.7, 0.6])
    assert lines["phone_mid: minimum level 20%"].get_ydata()[0] == 0.2  # the lower of its groups' minimums
    assert "watch: mean of 1 device, up to 1 below the minimum" in lines
    assert len(ax.collections) == 2  # one min..max band per class


def test_compare_averages_energy_to_target_over_the_seeds(tmp_path, make_resource_run):
    runs = [load_run(make_resource_run(tmp_path / "runs" / "res" / str(seed), seed, slower=seed == 1))
            for seed in (0, 1)]
    table = compare_table(runs, [0.8]).iloc[0]
    assert table["energy_J@0.8"] == (11000 + 16000) / 2
    assert table["energy_J@0.8_std"] == pytest.approx(5000 / np.sqrt(2))
    assert (table["total_energy_J"], table["depleted"], table["reached@0.8"]) == (16000, 1, "2/2")
    assert "13.5±3.5 kJ" in format_seed_table(compare_table(runs, [0.8]))
    curve = mean_curve(runs, "energy")
    assert curve["x"].tolist() == [4000, 11000, 16000]


def test_write_compare_draws_the_groups_against_energy_only_where_accounted(tmp_path, make_resource_run, study,
                                                                             drawn):
    folders = [make_resource_run(tmp_path / "runs" / "res" / "0")]
    table, paths = write_compare(folders, tmp_path / "compare", [0.8], timelines=False)
    assert (tmp_path / "compare" / "accuracy_by_group_vs_energy.png").is_file()
    energy_plot = next(fig for fig in drawn if fig.axes[0].get_xlabel() == "Cumulative device energy")
    assert list(energy_plot.axes[0].get_lines()[0].get_xdata()) == [4000, 11000, 16000]
    _, paths = write_compare(study, tmp_path / "plain", [0.8], timelines=False)
    assert "accuracy_by_group_vs_energy.png" not in {path.name for path in paths}


def test_html_page_shows_the_energy_columns_and_the_battery_plot(tmp_path, resource_run_dir):
    write_pages([resource_run_dir], tmp_path / "pages")
    page = (tmp_path / "pages" / "report.html").read_text()
    assert "<th>energy_J@0.8</th>" in page and ">11.0 kJ</td>" in page and 'data-sort="11000.0"' in page
    assert "battery_res_0.png" in page and "accuracy_vs_energy.png" in page and "energy: joules" in page


def test_idle_phases_are_waiting_not_work(resource_run_dir, run_dir):
    with_idle, without = load_run(resource_run_dir), load_run(run_dir)
    assert (with_idle.events["phase"] == "idle").sum() == 6
    pd.testing.assert_frame_equal(time_breakdown(with_idle.events), time_breakdown(without.events))
    pd.testing.assert_frame_equal(round_breakdown(with_idle.rounds, with_idle.events),
                                  round_breakdown(without.rounds, without.events))
    utilisation = device_utilisation(with_idle.rounds, with_idle.events)
    pd.testing.assert_frame_equal(utilisation, device_utilisation(without.rounds, without.events))
    # a's waits: 6-10, 16.5-25, 57-60 s: waiting for aggregation, none of it busy
    assert utilisation.loc["a", "idle_wait_s"] == 4 + 8.5 + 3
    assert utilisation.loc["a", "busy_s"] == 6 + 6.5 + 4.5


def test_gantt_draws_idle_in_its_own_light_style_with_a_legend_entry(tmp_path, resource_run_dir, run_dir, drawn):
    plot_gantt(load_run(resource_run_dir), tmp_path / "gantt.png")
    plot_gantt(load_run(run_dir), tmp_path / "plain.png")
    idle_label = "idle (waiting for the round to close)"
    legend = [[text.get_text() for text in fig.axes[0].get_legend().get_texts()] for fig in drawn]
    assert idle_label in legend[0] and idle_label not in legend[1]
    idle_colour = pytest.approx((0xf3 / 255, 0xef / 255, 0xe0 / 255, 1.0))
    idle_bars = [bars for bars in drawn[0].axes[0].collections if tuple(bars.get_facecolor()[0]) == idle_colour]
    assert sum(len(bars.get_paths()) for bars in idle_bars) == 6


def test_a_run_built_by_hand_has_no_battery(tmp_path, rounds):
    assert Run(tmp_path, "x", 0, "fedavg", {}, rounds, pd.DataFrame(), {}).battery is None
