"""Events reach listeners up the bus tree, cost nothing unheard, and never break the emitter."""

from __future__ import annotations

import logging

import pytest

from asyncretry import GLOBAL_EVENTS, Event, EventBus, GaveUp, RetryScheduled


def _retry(source: str = "s") -> RetryScheduled:
    return RetryScheduled(time=1.0, source=source, attempt=1, delay=0.5, outcome="transient", reason="503")


def test_events_reach_the_bus_and_its_ancestors() -> None:
    """A child bus delivers to its own listeners first, then to its parent's and the global bus."""
    seen: list[tuple[str, Event]] = []
    parent = EventBus()
    child = EventBus(parent=parent)
    undo_child = child.subscribe(lambda e: seen.append(("child", e)))
    undo_parent = parent.subscribe(lambda e: seen.append(("parent", e)))
    undo_global = GLOBAL_EVENTS.subscribe(lambda e: seen.append(("global", e)))
    try:
        event = _retry()
        child.emit(event)
    finally:
        undo_child()
        undo_parent()
        undo_global()
    assert seen == [("child", event), ("parent", event), ("global", event)]


def test_an_unheard_event_is_not_wanted(caplog: pytest.LogCaptureFixture) -> None:
    """With no listener and the logger off for the level, wants() is False (emitters skip the event)."""
    caplog.set_level(logging.WARNING, logger="asyncretry")
    bus = EventBus()
    assert not bus.wants(RetryScheduled)
    assert bus.wants(GaveUp)  # a warning reaches the logger
    undo = bus.subscribe(lambda e: None)
    assert bus.wants(RetryScheduled)
    undo()
    assert not bus.wants(RetryScheduled)


def test_a_failing_listener_is_logged_and_does_not_stop_delivery(caplog: pytest.LogCaptureFixture) -> None:
    """A listener that raises is logged; the next listener still gets the event."""
    bus = EventBus()
    got: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    bus.subscribe(broken)
    bus.subscribe(got.append)
    with caplog.at_level(logging.ERROR, logger="asyncretry"):
        bus.emit(_retry())
    assert len(got) == 1
    assert "listener" in caplog.text


def test_events_are_logged_with_structured_fields(caplog: pytest.LogCaptureFixture) -> None:
    """The global bus logs each event at its level, with its fields under asyncretry_* extras."""
    with caplog.at_level(logging.DEBUG, logger="asyncretry"):
        EventBus().emit(_retry(source="api.example"))
    (record,) = [r for r in caplog.records if r.name == "asyncretry"]
    assert record.levelno == logging.INFO
    assert record.asyncretry_event == "RetryScheduled"  # type: ignore[attr-defined]
    assert record.asyncretry_delay == 0.5  # type: ignore[attr-defined]
    assert "api.example" in record.getMessage()
