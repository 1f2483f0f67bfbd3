"""The asynchronous server's state changes only through functions that return the next state
(testbed/protocols/async_state.py); a state, once made, is never changed."""
import dataclasses

import pytest

from testbed.protocols.async_state import AsyncState, InFlight, Window, dispatched, task_ended, ticked, waking_at


def flight(device: int, version: int, number: int) -> InFlight:
    task = dataclasses.make_dataclass("T", ["device"])(device)   # only the device is read here
    return InFlight(task, None, None, version, number)


def test_an_ended_task_is_buffered_with_its_staleness_or_kept_as_dropped_or_stale():
    a, b, c = flight(3, 1, 1), flight(5, 2, 2), flight(7, 4, 3)
    state = AsyncState(Window(0.0), version=4, in_flight={3: a, 5: b, 7: c})
    after, buffered = task_ended(state, b, "arrived", max_staleness=2)          # tau = 4 - 2 = 2: kept
    assert buffered and after.buffer == [(b, 2)] and list(after.in_flight) == [3, 7]
    after, buffered = task_ended(after, a, "arrived", max_staleness=2)          # tau = 3 > 2: stale
    assert not buffered and after.window.ended == [(a, "stale")] and list(after.in_flight) == [7]
    after, buffered = task_ended(after, c, "dropped", max_staleness=2)
    assert not buffered and after.window.ended == [(a, "stale"), (c, "dropped")] and after.in_flight == {}
    assert state.in_flight == {3: a, 5: b, 7: c} and state.buffer == [] and state.window.ended == []  # unchanged


def test_a_dispatch_counts_its_tasks_and_keeps_the_models_it_delivered():
    old = flight(2, 0, 1)
    state = AsyncState(Window(0.0, selected=1), version=1, in_flight={2: old}, started=1, dispatches=1,
                       received={0: {"fp32": "m0"}})
    again, new = flight(2, 0, 1), flight(4, 1, 2)
    after = dispatched(state, [new], [again], {"fp32": "m1"})
    assert (after.dispatches, after.started, after.window.selected) == (2, 2, 2)
    assert after.in_flight == {2: again, 4: new} and after.in_flight[2] is again
    assert after.received == {0: {"fp32": "m0"}, 1: {"fp32": "m1"}}
    assert ticked(after).next_tick == 2 and waking_at(after, 9.5).wake_at == 9.5 and after.wake_at is None
    assert (state.dispatches, state.started, list(state.in_flight.values())) == (1, 1, [old])


def test_a_state_cannot_be_changed_in_place():
    state = AsyncState(Window(0.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.version = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.window.selected = 3


def test_a_checkpoint_that_names_the_classes_where_they_used_to_live_is_read(tmp_path, monkeypatch):
    """An older testbed pickled the window and the tasks in flight under testbed.protocols.asynchronous
    (testbed/migrations.py's MOVED): such a file is read, as the classes they are now."""
    import torch

    from testbed import safe_load

    monkeypatch.setattr(Window, "__module__", "testbed.protocols.asynchronous")   # pickled under the old name
    torch.save({"window": Window(1.5, selected=2)}, tmp_path / "old.pt")
    monkeypatch.undo()
    assert "testbed.protocols.asynchronous.Window" in torch.serialization.get_unsafe_globals_in_checkpoint(
        tmp_path / "old.pt")
    assert safe_load.load(tmp_path / "old.pt", "checkpoint") == {"window": Window(1.5, selected=2)}
