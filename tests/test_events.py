"""Events reach listeners up the bus tree, cost nothing unheard, and never break the emitter."""

from __future__ import annotations

import logging

import pytest

import asyncretry
from asyncretry import GLOBAL_EVENTS, BreakerState, Event, EventBus, GaveUp, Retrier, RetryPolicy, RetryScheduled, retry
from asyncretry.testing import fixed_random, test_mode


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


# ------------------------------------------------------------------------- log lines and breaker states
class _Flaky:
    """Fails with ConnectionResetError once, then returns "ok"."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionResetError("once")
        return "ok"


class Store:
    """A class whose methods are retried, so that their qualified names are ``Store.<name>``."""

    def __init__(self) -> None:
        self.flaky = _Flaky()

    @retry(retrier=Retrier(RetryPolicy(), rng=fixed_random(0.123456789)))
    async def load(self) -> str:
        return self.flaky()

    @retry(retrier=Retrier(RetryPolicy(), rng=fixed_random(0.123456789)))
    def save(self) -> str:
        return self.flaky()


def _retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.getMessage().startswith("RetryScheduled")]


@pytest.mark.anyio
async def test_log_lines_of_retry_name_the_function_and_round_the_delay(caplog: pytest.LogCaptureFixture) -> None:
    """A retried method's log line names it by qualified name, with its delay rounded (the extra keeps it)."""
    caplog.set_level(logging.INFO, logger="asyncretry")
    with test_mode():
        assert await Store().load() == "ok"
    (line,) = _retry_lines(caplog)
    assert "target='Store.load'" in line
    assert "delay=0.1235," in line
    (record,) = [r for r in caplog.records if r.getMessage() == line]
    assert record.asyncretry_delay == pytest.approx(0.123456789)  # type: ignore[attr-defined]


def test_log_lines_of_a_retried_plain_function_name_it(caplog: pytest.LogCaptureFixture) -> None:
    """The synchronous decorator names its function in the same way."""
    caplog.set_level(logging.INFO, logger="asyncretry")
    with test_mode():
        assert Store().save() == "ok"
    (line,) = _retry_lines(caplog)
    assert "target='Store.save'" in line
    assert "delay=0.1235," in line


def test_breaker_events_carry_breaker_states_as_statistics_do() -> None:
    """BreakerStateChanged's states are BreakerState, the type of BreakerStatistics.state, and still equal strings."""
    bus = EventBus(parent=None)
    seen: list[asyncretry.BreakerStateChanged] = []
    bus.subscribe(seen.append)  # type: ignore[arg-type]
    config = asyncretry.CircuitBreakerConfig(consecutive_failures=1, failure_ratio=None)
    breaker = asyncretry.CircuitBreaker(config, events=bus)
    breaker.record_failure(breaker.acquire())
    (event,) = seen
    assert type(event.old_state) is type(event.new_state) is type(breaker.statistics().state) is BreakerState
    assert (event.old_state, event.new_state) == (BreakerState.CLOSED, BreakerState.OPEN)
    assert (event.old_state, event.new_state) == ("closed", "open")  # a str enum: old comparisons hold
    assert event.new_state == breaker.statistics().state
    assert "old_state='closed', new_state='open'" in event.message()


def test_breaker_events_built_from_strings_hold_states_and_refuse_unknown_ones() -> None:
    """An event built with state strings (a breaker kept on a server) holds BreakerState; a bad state is refused."""
    event = asyncretry.BreakerStateChanged(time=0.0, source="s", old_state="half_open", new_state="closed", reason="r")  # type: ignore[arg-type]
    assert event.old_state is BreakerState.HALF_OPEN
    with pytest.raises(ValueError, match="'ajar' is not a valid BreakerState"):
        asyncretry.BreakerStateChanged(time=0.0, source="s", old_state="ajar", new_state="closed", reason="r")  # type: ignore[arg-type]
