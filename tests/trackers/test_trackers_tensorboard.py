"""--track tensorboard, read back with TensorBoard's own EventAccumulator: the rounds at step = round and at step =
simulated ms, the totals, the hparams session in the same run, the summary, where the run goes, a status."""
import time

import pytest
from tracker_cases import EXPECTED, FLAT, NEVER, SIM_MS, play, tracked_run

from testbed.errors import TestbedError
from testbed.trackers import Trackers

pytest.importorskip("tensorboard")


def read(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    return EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0}).Reload()


def plugin_data(acc):
    """The hparams plugin's messages in the run: field name -> message."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    out = {}
    for content in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        out[data.WhichOneof("data")] = getattr(data, data.WhichOneof("data"))
    return out


def series(acc, tag):
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def f32(x):  # TensorBoard keeps float32 scalars
    import struct

    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.fixture
def finished(tmp_path):
    run = tracked_run(tmp_path / "runs")
    play(Trackers(["tensorboard"], run), run)
    return run, read(run.folder / "tensorboard")


def test_each_round_at_its_round_and_at_its_simulated_ms(finished):
    _, acc = finished
    for key, expected in EXPECTED.items():
        assert series(acc, f"round/{key}") == [(r, f32(v)) for r, v in expected], key
        assert series(acc, f"sim_time/{key}") == [(SIM_MS[r], f32(v)) for r, v in expected], key
    tags = set(acc.Tags()["scalars"])
    assert not {f"{family}/{key}" for family in ("round", "sim_time") for key in NEVER} & tags


def test_the_scenario_is_the_runs_hparams_session_and_the_end_a_success(finished):
    from tensorboard.plugins.hparams import api_pb2

    run, acc = finished
    assert [p.name for p in (run.folder / "tensorboard").iterdir()] == [
        p.name for p in (run.folder / "tensorboard").glob("events.out.tfevents.*")]  # no sub-run folder
    data = plugin_data(acc)
    start = data["session_start_info"]
    values = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    assert values == {**FLAT, "stop.targets": "[0.9, 0.95]"}
    assert start.group_name == ""
    assert data["session_end_info"].status == api_pb2.STATUS_SUCCESS


def test_the_summary_as_scalars_at_the_last_round_and_as_text(finished):
    _, acc = finished
    assert series(acc, "summary/final_accuracy") == [(3, 0.75)]
    assert series(acc, "summary/time_to_accuracy_s.0.5") == [(3, 1.5)]
    assert "summary/time_to_accuracy_s.0.9" not in acc.Tags()["scalars"]  # null: not reached
    text = acc.Tensors("summary/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text.splitlines()[2:] == [f"| {k} | {v} |" for k, v in (
        ("scenario", "quickstart"), ("seed", 0), ("status", "completed"), ("final_accuracy", 0.75),
        ("best_accuracy", 0.75), ("sim_time_s", 4.0), ("bytes_up_total", 250), ("time_to_accuracy_s.0.5", 1.5),
        ("time_to_accuracy_s.0.9", "null"))]


@pytest.mark.parametrize("status, code", [("failed: boom", "STATUS_FAILURE"), ("interrupted", "STATUS_UNKNOWN")])
def test_a_run_that_ends_badly_says_so(tmp_path, status, code):
    from tensorboard.plugins.hparams import api_pb2

    run = tracked_run(tmp_path)
    play(Trackers(["tensorboard"], run), run, end=status)
    acc = read(run.folder / "tensorboard")
    assert plugin_data(acc)["session_end_info"].status == api_pb2.Status.Value(code)
    assert acc.Tensors("status/text_summary")[0].tensor_proto.string_val[0].decode() == status
    assert series(acc, "round/accuracy") == [(1, 0.5), (3, 0.75)]


def test_a_logdir_holds_a_sweeps_runs_under_its_name(tmp_path):
    for name in ("sweep-fedavg/0", "sweep-fedprox/0"):
        run = tracked_run(tmp_path / "runs", group="sweep", name=name)
        play(Trackers([f"tensorboard={tmp_path / 'tb'}"], run), run)
        acc = read(tmp_path / "tb" / "sweep" / name)
        assert series(acc, "round/accuracy") == [(1, 0.5), (3, 0.75)]
        assert plugin_data(acc)["session_start_info"].group_name == "sweep"
        assert not (run.folder / "tensorboard").exists()


def test_a_logdir_that_cannot_be_written_fails_start_in_one_line(tmp_path):
    (tmp_path / "file").write_text("not a folder")  # a folder below a file: refused even to root
    trackers = Trackers([f"tensorboard={tmp_path / 'file'}"], tracked_run(tmp_path))
    start = time.perf_counter()
    with pytest.raises(TestbedError) as err:
        trackers.start()
    assert time.perf_counter() - start < 5
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"--track tensorboard={tmp_path / 'file'}: cannot write ")
    assert text.endswith("choose a LOGDIR you can write: --track tensorboard=LOGDIR")
