"""Observability without OpenTelemetry: the event catalogue, log levels and fields, zero cost, snapshots."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

import asyncretry
from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    AttemptFinished,
    BreakerState,
    BreakerStateChanged,
    CircuitBreaker,
    CircuitBreakerConfig,
    Event,
    EventBus,
    FixedBackoff,
    GaveUp,
    LimiterHeld,
    LimiterRateChanged,
    NoBackoff,
    QuotaExhausted,
    QuotaRestored,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    RetryScheduled,
    ScopeEvicted,
    Throttled,
    TokenBucket,
    statistics_to_dict,
)
from asyncretry.httpx import AsyncRetryTransport, RetryTransport
from asyncretry.testing import VirtualClock
from conftest import EventLog

CATALOGUE: dict[type[Event], int] = {
    AttemptFinished: logging.DEBUG,
    RetryScheduled: logging.INFO,
    GaveUp: logging.WARNING,
    QuotaExhausted: logging.WARNING,
    QuotaRestored: logging.INFO,
    Throttled: logging.DEBUG,
    LimiterRateChanged: logging.INFO,
    LimiterHeld: logging.INFO,
    BreakerStateChanged: logging.WARNING,
    ScopeEvicted: logging.DEBUG,
}
"""The documented events, with the highest level each class is logged at."""


class ServiceError(Exception):
    """A service error carrying an AWS-style error code (``SlowDown`` is throttling)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


Recorder = EventLog  # every event of a bus, in order


@pytest.fixture
def quiet_global_bus() -> Iterator[None]:
    """Fail loudly if a test leaves a listener on the global bus (it would defeat the zero-cost checks)."""
    before = asyncretry.GLOBAL_EVENTS._listeners
    assert before == (), f"an earlier test left listeners on the global bus: {before}"
    yield
    assert asyncretry.GLOBAL_EVENTS._listeners == before


def failing(*errors: BaseException | type[BaseException], result: Any = "ok") -> Any:
    """An async operation raising ``errors`` in turn, then returning ``result``."""
    steps = list(errors)

    async def op() -> Any:
        if steps:
            raise steps.pop(0)
        return result

    return op


# ------------------------------------------------------------------------------------ catalogue
def test_the_catalogue_is_exported_with_its_levels() -> None:
    """Every documented event is a public frozen dataclass with a class level as documented."""
    for kind, level in CATALOGUE.items():
        assert getattr(asyncretry, kind.__name__) is kind
        assert dataclasses.is_dataclass(kind)
        assert kind.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert kind.level == level, kind.__name__


@pytest.mark.anyio
async def test_every_event_of_the_catalogue_is_emitted_by_the_real_objects() -> None:
    """A scripted run through a retrier with quota, limiter and breaker produces every catalogue event."""
    clock = VirtualClock()
    bus = EventBus()
    recorder = Recorder(bus)
    policy = RetryPolicy(
        mode="adaptive", backoff=NoBackoff(), throttling_backoff=NoBackoff(),
        quota=RetryQuotaConfig(max_capacity=5, retry_cost=5, throttling_retry_cost=5, timeout_retry_cost=5),
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=2, break_duration=1.0),
    )
    # The limiters' token phase pinned (no token at the first throttle), so that the run is the same every time.
    retrier = Retrier(policy, clock=clock, events=bus, max_scopes=1, limiter=lambda key: AdaptiveRateLimiter(
        policy.limiter_config, clock=clock, name=key, events=bus, rng=lambda: 0.0
    ))
    # Throttled twice: the first retry takes the whole quota, the second finds it dry; the breaker opens.
    with pytest.raises(ServiceError):
        await retrier.call_in("a", failing(ServiceError("SlowDown"), ServiceError("SlowDown")))
    clock.advance(1.0)  # the break is over: the next call is the probe that closes the circuit
    for _ in range(5):  # each success gives the quota one token back: five restore it
        assert await retrier.call_in("a", failing()) == "ok"
    assert await retrier.call_in("b", failing()) == "ok"  # a second scope, with max_scopes=1, evicts "a"
    # A throttle that announces the quota spent for 2 s: the limiter holds, the retry waits for the reset.
    spent = ServiceError("SlowDown")
    spent.headers = {"RateLimit": '"q";r=0;t=2'}  # type: ignore[attr-defined]  # as aiohttp's errors carry them
    assert await retrier.call_in("b", failing(spent)) == "ok"
    assert {type(e) for e in recorder.events} == set(CATALOGUE)
    assert [type(e).__name__ for e in recorder.events if not isinstance(e, (AttemptFinished, LimiterRateChanged))] == [
        "Throttled", "RetryScheduled",
        "Throttled", "BreakerStateChanged", "QuotaExhausted", "GaveUp",
        "BreakerStateChanged", "BreakerStateChanged", "QuotaRestored",
        "ScopeEvicted",
        "Throttled", "LimiterHeld", "RetryScheduled",
    ]
    assert [(e.source, e.seconds, e.reason) for e in recorder.of(LimiterHeld)] == [("b", 2.0, "SlowDown")]
    assert [(e.old_state, e.new_state) for e in recorder.of(BreakerStateChanged)] == [
        ("closed", "open"), ("open", "half_open"), ("half_open", "closed"),
    ]
    assert [(e.source, e.why, e.attempts, e.reason) for e in recorder.of(GaveUp)] == [("a", "quota", 2, "SlowDown")]
    assert [(e.source, e.available, e.cost) for e in recorder.of(QuotaExhausted)] == [("a", 0.0, 5)]
    assert [(e.source, e.available) for e in recorder.of(QuotaRestored)] == [("a", 5.0)]
    assert [e.source for e in recorder.of(ScopeEvicted)] == ["a"]
    # The first throttle came before any success: the rate starts from a share of what was sent (not the
    # floor); the second, sent after a wait for a token, cuts it; then the successes grow the rate.
    changes = [e for e in recorder.of(LimiterRateChanged) if e.source == "a"]
    assert [e.throttled for e in changes[:3]] == [True, True, False]
    assert changes[0].new_rate > changes[0].old_rate
    assert changes[1].new_rate < changes[1].old_rate
    assert all(not e.throttled and e.new_rate > e.old_rate for e in changes[2:])
    times = [e.time for e in recorder.events]
    assert times == sorted(times)
    recorder.undo()


@pytest.mark.anyio
async def test_a_refusal_before_any_attempt_gives_a_bounded_reason() -> None:
    """GaveUp's reason is a classification (the refusing error's class), never a message with numbers in it."""
    config = RetryQuotaConfig(max_capacity=10, initial_try_cost=10)
    quota = RetryQuota(config)
    assert quota.try_acquire(10)
    bus = EventBus()
    recorder = Recorder(bus)
    retrier = Retrier(RetryPolicy(quota=config), clock=VirtualClock(), quota=quota, events=bus)
    with pytest.raises(asyncretry.RetryCapacityExceeded):
        await retrier.call(failing())
    assert [(e.attempts, e.why, e.outcome, e.reason) for e in recorder.of(GaveUp)] == [
        (0, "quota", "none", "RetryCapacityExceeded"),
    ]


# ----------------------------------------------------------------------------------------- levels
@pytest.mark.parametrize(
    ("why", "attempts", "level"),
    [
        ("not_retryable", 1, logging.DEBUG),  # an HTTP 404: nothing was retried, the caller sees it
        ("max_attempts", 1, logging.DEBUG),  # retries disabled (max_attempts=1 or {"retry": False})
        ("not_retryable", 3, logging.WARNING),  # retried, then a final error: the retries did not help
        ("max_attempts", 3, logging.WARNING),
        ("deadline", 1, logging.WARNING),
        ("server_delay", 2, logging.WARNING),
        ("rate_limit", 0, logging.WARNING),
        ("quota", 0, logging.INFO),  # QuotaExhausted already warned once for the episode
        ("quota", 2, logging.INFO),
        ("breaker", 0, logging.INFO),  # BreakerStateChanged already warned when it opened
    ],
)
def test_gave_up_is_logged_at_a_level_that_depends_on_why(why: str, attempts: int, level: int) -> None:
    """A first attempt that was final is DEBUG, refusals inside a warned episode INFO, failed retries WARNING."""
    event = GaveUp(time=0.0, source="s", attempts=attempts, why=why, outcome="transient", reason="r", elapsed=0.0)
    assert event.log_level == level


@pytest.mark.parametrize(
    ("old", "new", "level"),
    [
        ("closed", "open", logging.WARNING),
        ("half_open", "open", logging.WARNING),
        ("closed", "isolated", logging.WARNING),
        ("open", "half_open", logging.INFO),
        ("half_open", "closed", logging.INFO),
        ("isolated", "closed", logging.INFO),
    ],
)
def test_a_breaker_warns_when_it_opens_and_informs_when_it_recovers(old: str, new: str, level: int) -> None:
    """Opening (or isolating) a circuit is a WARNING; half-opening and closing again are INFO."""
    event = BreakerStateChanged(
        time=0.0, source="s", old_state=BreakerState(old), new_state=BreakerState(new), reason="r"
    )
    assert event.log_level == level


@pytest.mark.parametrize(
    ("old", "new", "throttled", "level"),
    [(10.0, 7.0, True, logging.INFO), (7.0, 7.5, False, logging.DEBUG), (0.5, 0.5, True, logging.DEBUG)],
)
def test_a_limiter_rate_cut_is_info_and_its_growth_debug(old: float, new: float, throttled: bool, level: int) -> None:
    """A throttle cutting the adaptive rate is INFO; CUBIC's growth between throttles is DEBUG."""
    event = LimiterRateChanged(
        time=0.0, source="s", old_rate=old, new_rate=new, measured_rate=1.0, throttled=throttled, enabled=True,
        rule="restart_below_capacity" if throttled else "recovery",
    )
    assert event.log_level == level


WHYS = ("not_retryable", "max_attempts", "quota", "breaker", "rate_limit", "deadline", "server_delay")


@given(
    why=st.sampled_from(WHYS),
    attempts=st.integers(0, 10),
    new_state=st.sampled_from(["closed", "open", "half_open", "isolated"]),
    rates=st.tuples(st.floats(0.5, 1e6), st.floats(0.5, 1e6)),
    throttled=st.booleans(),
)
def test_no_event_is_logged_above_its_class_level(
    why: str, attempts: int, new_state: str, rates: tuple[float, float], throttled: bool
) -> None:
    """wants() compares the class level, so an event's own level may never exceed it (or it would be lost)."""
    events: list[Event] = [
        GaveUp(time=0.0, source="s", attempts=attempts, why=why, outcome="none", reason="r", elapsed=0.0),
        BreakerStateChanged(
            time=0.0, source="s", old_state=BreakerState.CLOSED, new_state=BreakerState(new_state), reason="r"
        ),
        LimiterRateChanged(time=0.0, source="s", old_rate=rates[0], new_rate=rates[1], measured_rate=1.0,
                           throttled=throttled, enabled=True, rule="cubic_throttle" if throttled else "cubic_success"),
    ]
    for event in events:
        assert event.log_level <= type(event).level


@pytest.mark.anyio
async def test_a_non_retryable_first_failure_logs_nothing_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """An error that is not retried (a validation error, an HTTP 404) leaves the logs quiet above DEBUG."""
    caplog.set_level(logging.DEBUG, logger="asyncretry")
    retrier = Retrier(clock=VirtualClock())
    with pytest.raises(ValueError, match="bad input"):
        await retrier.call(failing(ValueError("bad input")))
    records = [r for r in caplog.records if r.name == "asyncretry"]
    assert [(r.levelno, r.asyncretry_event) for r in records] == [  # type: ignore[attr-defined]
        (logging.DEBUG, "AttemptFinished"), (logging.DEBUG, "GaveUp"),
    ]


@pytest.mark.anyio
async def test_a_retry_is_info_and_retries_that_did_not_help_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Each retry logs at INFO; the call that still failed after them logs GaveUp at WARNING."""
    caplog.set_level(logging.INFO, logger="asyncretry")
    retrier = Retrier(RetryPolicy(backoff=FixedBackoff(0.25)), clock=VirtualClock())
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    with pytest.raises(ConnectionResetError):
        await retrier.call(failing(*[ConnectionResetError()] * 3))
    records = [(r.levelno, r.asyncretry_event) for r in caplog.records if r.name == "asyncretry"]  # type: ignore[attr-defined]
    assert records == [
        (logging.INFO, "RetryScheduled"),
        (logging.INFO, "RetryScheduled"), (logging.INFO, "RetryScheduled"), (logging.WARNING, "GaveUp"),
    ]


def test_log_records_carry_every_field_as_structured_extra(caplog: pytest.LogCaptureFixture) -> None:
    """A logged event has asyncretry_event and one asyncretry_<field> per field, and a readable message."""
    caplog.set_level(logging.DEBUG, logger="asyncretry")
    event = GaveUp(time=12.5, source="https://api.example:443", attempts=3, why="max_attempts", outcome="transient",
                   reason="HTTP 503", elapsed=1.5)
    EventBus().emit(event)
    (record,) = [r for r in caplog.records if r.name == "asyncretry"]
    assert record.levelno == logging.WARNING
    extra = {k: v for k, v in vars(record).items() if k.startswith("asyncretry_")}
    assert extra == {
        "asyncretry_event": "GaveUp", "asyncretry_time": 12.5, "asyncretry_source": "https://api.example:443",
        "asyncretry_attempts": 3, "asyncretry_why": "max_attempts", "asyncretry_outcome": "transient",
        "asyncretry_reason": "HTTP 503", "asyncretry_elapsed": 1.5,
    }
    assert record.getMessage() == (
        "GaveUp [https://api.example:443] attempts=3, why='max_attempts', outcome='transient', "
        "reason='HTTP 503', elapsed=1.5"
    )


def test_an_event_below_the_logger_level_is_not_logged_even_when_its_class_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the logger at WARNING, GaveUp is wanted (it may warn) but a DEBUG-level instance is not logged."""
    caplog.set_level(logging.WARNING, logger="asyncretry")
    bus = EventBus()
    assert bus.wants(GaveUp)
    bus.emit(GaveUp(time=0.0, source="s", attempts=1, why="not_retryable", outcome="not_retryable", reason="HTTP 404",
                    elapsed=0.0))
    assert [r for r in caplog.records if r.name == "asyncretry"] == []


# -------------------------------------------------------------------------------------- zero cost
@pytest.fixture
def constructed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the events constructed while the test runs (every event class's __init__ counts)."""
    made: list[str] = []
    for kind in CATALOGUE:
        original = kind.__init__

        def counting(self: Event, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            made.append(type(self).__name__)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(kind, "__init__", counting)
    return made


@pytest.mark.anyio
@pytest.mark.usefixtures("quiet_global_bus")
async def test_no_event_is_even_constructed_when_nobody_listens(
    constructed: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """With no listener and the logger at WARNING, successes and retries that succeed construct no event."""
    caplog.set_level(logging.WARNING, logger="asyncretry")
    policy = RetryPolicy(
        mode="adaptive", backoff=NoBackoff(), breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=5)
    )
    retrier = Retrier(policy, clock=VirtualClock())
    for _ in range(50):
        assert await retrier.call(failing()) == "ok"
        assert await retrier.call(failing(ConnectionResetError(), TimeoutError())) == "ok"
    assert constructed == []
    assert retrier.statistics().retries == 100


@pytest.mark.anyio
@pytest.mark.usefixtures("quiet_global_bus")
async def test_a_listener_makes_the_events_appear(constructed: list[str], caplog: pytest.LogCaptureFixture) -> None:
    """The control for the zero-cost test: the same run with one listener constructs every event."""
    caplog.set_level(logging.WARNING, logger="asyncretry")
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()), clock=VirtualClock())
    recorder = Recorder(retrier.events)
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    assert constructed == ["AttemptFinished", "RetryScheduled", "AttemptFinished"]
    assert [type(e).__name__ for e in recorder.events] == constructed
    recorder.undo()


@pytest.mark.anyio
@pytest.mark.usefixtures("quiet_global_bus")
async def test_info_logging_constructs_only_the_events_it_logs(
    constructed: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """With the logger at INFO and no listener, a retried call builds its RetryScheduled but no AttemptFinished."""
    caplog.set_level(logging.INFO, logger="asyncretry")
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()), clock=VirtualClock())
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    assert constructed == ["RetryScheduled"]


# ------------------------------------------------------------------------------------- statistics
def _objects() -> dict[str, Any]:
    clock = VirtualClock()
    router = respx.MockRouter()
    router.get("https://api.example/").mock(return_value=httpx.Response(200))
    breaker = CircuitBreaker(CircuitBreakerConfig(), clock=clock, name="breaker")
    breaker.isolate()  # retry_after is infinite: JSON has no infinity
    sync_transport = RetryTransport(httpx.MockTransport(router.handler), policy=RetryPolicy(mode="adaptive"))
    with httpx.Client(transport=sync_transport) as client:
        assert client.get("https://api.example/").status_code == 200
    return {
        "bucket": TokenBucket(2.0, 5.0, clock=clock, name="bucket"),
        "quota": RetryQuota(clock=clock, name="quota"),
        "limiter": AdaptiveRateLimiter(AdaptiveLimiterConfig(), clock=clock, name="limiter"),
        "breaker": breaker,
        "retrier": Retrier(RetryPolicy(mode="adaptive", breaker=CircuitBreakerConfig()), clock=clock),
        "async transport": AsyncRetryTransport(httpx.MockTransport(router.async_handler)),
        "sync transport": sync_transport,
    }


@pytest.mark.parametrize("name", list(_objects()))
def test_every_stateful_object_gives_a_frozen_json_ready_snapshot(name: str) -> None:
    """statistics() is a frozen dataclass; statistics_to_dict() of it is standard JSON (no NaN or Infinity)."""
    target = _objects()[name]
    snapshot = target.statistics()
    assert dataclasses.is_dataclass(snapshot)
    assert not isinstance(snapshot, type)
    field = dataclasses.fields(snapshot)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(snapshot, field, None)
    assert isinstance(dataclasses.asdict(snapshot), dict)
    data = statistics_to_dict(target)
    assert data.keys() == statistics_to_dict(snapshot).keys()  # (the sync transport's clock is real: values move)
    assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_a_transport_snapshot_lists_its_scopes_with_their_parts() -> None:
    """The sync transport's statistics hold the origin scope it used, with its quota and limiter state."""
    data = statistics_to_dict(_objects()["sync transport"])
    assert (data["name"], data["calls"], data["successes"]) == ("httpx", 1, 1)
    (scope,) = data["scopes"]
    assert scope["key"] == "https://api.example:443"
    assert scope["quota"]["available"] == 500.0
    assert scope["limiter"]["enabled"] is False
    assert scope["breaker"] is None


@pytest.mark.anyio
async def test_a_snapshot_does_not_change_when_the_object_does() -> None:
    """A snapshot is a copy taken at one instant: later calls change the next snapshot, not this one."""
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()), clock=VirtualClock())
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    before = retrier.statistics()
    kept = statistics_to_dict(before)
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    assert statistics_to_dict(before) == kept
    assert (before.calls, retrier.statistics().calls) == (1, 2)


def test_snapshot_conversion_makes_enums_plain_and_infinities_null() -> None:
    """Enums become their values and non-finite floats None; nested tuples become lists."""
    breaker = CircuitBreaker(CircuitBreakerConfig(), clock=VirtualClock())
    breaker.isolate()
    data = statistics_to_dict(breaker)
    assert data["state"] == "isolated"
    assert type(data["state"]) is str
    assert data["retry_after"] is None
    assert math.isinf(breaker.statistics().retry_after)


@pytest.mark.parametrize("bad", [object(), 42, "text", Retrier])
def test_statistics_to_dict_refuses_what_is_no_snapshot(bad: object) -> None:
    """Anything that is neither a snapshot nor has statistics() is a TypeError naming the parameter."""
    with pytest.raises(TypeError, match="source must be a statistics snapshot"):
        statistics_to_dict(bad)
