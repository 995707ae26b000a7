"""A listener that raises never breaks the call, and is never silent: it is logged, or printed when nothing logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from asyncretry import Event, EventBus, Retrier, RetryPolicy, RetryScheduled
from asyncretry.testing import fixed_random


def _event() -> RetryScheduled:
    return RetryScheduled(time=0.0, source="api", attempt=1, delay=0.5, outcome="transient", reason="HTTP 503")


def _broken(event: Event) -> None:
    raise RuntimeError("listener bug")


@contextmanager
def unconfigured_logging() -> Iterator[None]:
    """Logging as in a script that never configured it: no handler but asyncretry's NullHandler gets its records.

    pytest attaches its capture handler to the root logger and to every non-propagating logger when each test
    phase starts, so this takes the asyncretry logger out of its reach inside the test body.
    """
    logger = logging.getLogger("asyncretry")
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers = [handler for handler in handlers if isinstance(handler, logging.NullHandler)]
    logger.propagate = False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def test_without_logging_configured_the_failure_is_printed_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """With no handler anywhere, the listener's error and traceback reach stderr (Python's last resort)."""
    bus = EventBus()
    got: list[Event] = []
    bus.subscribe(_broken)
    bus.subscribe(got.append)
    with unconfigured_logging():
        bus.emit(_event())
    err = capsys.readouterr().err
    assert "asyncretry event listener" in err
    assert "RuntimeError: listener bug" in err
    assert "Traceback" in err
    assert len(got) == 1  # the next listener still got the event


def test_a_logger_turned_down_on_purpose_stays_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """An application that set the asyncretry logger above ERROR chose silence: nothing is printed."""
    logger = logging.getLogger("asyncretry")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    bus = EventBus()
    bus.subscribe(_broken)
    try:
        with unconfigured_logging():
            bus.emit(_event())
    finally:
        logger.setLevel(previous)
    assert capsys.readouterr().err == ""


def test_with_logging_configured_the_failure_is_an_error_record_only(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a handler configured, the failure is one ERROR record with its traceback, and not printed twice."""
    bus = EventBus()
    bus.subscribe(_broken)
    with caplog.at_level(logging.ERROR, logger="asyncretry"):
        bus.emit(_event())
    [record] = [r for r in caplog.records if r.name == "asyncretry"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert "listener bug" not in capsys.readouterr().err


@pytest.mark.anyio
async def test_a_broken_listener_does_not_change_the_call(capsys: pytest.CaptureFixture[str]) -> None:
    """A call with a broken listener on its policy retries and returns as if the listener were not there."""
    failures = [ConnectionResetError()]

    async def flaky() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    retrier = Retrier(RetryPolicy(mode="legacy", quota=False, listeners=(_broken,)), rng=fixed_random(0.5))
    with unconfigured_logging():
        assert await retrier.call(flaky) == "ok"
    assert retrier.statistics().retries == 1
    assert "RuntimeError: listener bug" in capsys.readouterr().err
