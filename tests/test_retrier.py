"""The retry engine follows SPEC 1.1 whatever the way in: order of checks, costs, delays, deadlines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal

import anyio
import anyio.lowlevel
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from asyncretry import (
    AdaptiveRateLimiter,
    AttemptFinished,
    Attempts,
    AttemptTimeout,
    BackendUnavailable,
    BreakerState,
    BreakerStateChanged,
    BreakerStatistics,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    Classifier,
    Event,
    FixedBackoff,
    GaveUp,
    GiveUpInfo,
    NoBackoff,
    Outcome,
    OutcomeKind,
    QuotaStatistics,
    RateLimitTimeout,
    Retrier,
    RetriesExhausted,
    RetryCapacityExceeded,
    RetryHistory,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    RetryScheduled,
    ScopeEvicted,
    Throttled,
    history_of,
    retry,
)
from asyncretry.testing import VirtualClock, fixed_random
from conftest import EventLog

pytestmark = pytest.mark.anyio

T = OutcomeKind
Way = Literal["call", "attempts", "decorator"]
WAYS: tuple[Way, ...] = ("call", "attempts", "decorator")


class ServiceError(Exception):
    """A service error carrying an AWS-style error code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Script:
    """An async operation that plays its steps in turn (the last one repeats).

    An exception class is raised fresh each time, an exception instance is raised as is, and anything
    else is returned. Each call checkpoints first, so a deadline can cancel it.
    """

    def __init__(self, *steps: Any, clock: VirtualClock | None = None) -> None:
        self.steps = steps
        self.calls = 0
        self.clock = clock
        self.times: list[float] = []
        self.raised: list[BaseException] = []

    async def __call__(self) -> Any:
        await anyio.lowlevel.checkpoint()
        self.calls += 1
        self.times.append(self.clock.now() if self.clock is not None else anyio.current_time())
        step = self.steps[min(self.calls, len(self.steps)) - 1]
        if isinstance(step, type) and issubclass(step, BaseException):
            step = step(f"attempt {self.calls}")
        if isinstance(step, BaseException):
            self.raised.append(step)
            raise step
        return step


async def hang() -> str:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def make(policy: RetryPolicy | None = None, **kwargs: Any) -> tuple[Retrier, VirtualClock]:
    """A retrier on a VirtualClock (sleeps recorded, never waited) with u = 0.5 for every jitter."""
    clock = VirtualClock()
    return Retrier(policy, clock=clock, rng=fixed_random(0.5), **kwargs), clock


async def run(way: Way, retrier: Retrier, op: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``op`` under ``retrier`` through one of the three ways in."""
    if way == "call":
        return await retrier.call(op)
    if way == "attempts":
        result = None
        async for attempt in retrier.attempts():
            async with attempt:
                result = await op()
        return result
    return await retry(retrier=retrier)(op)()


def small_quota(capacity: int, **changes: Any) -> RetryQuotaConfig:
    """A quota of ``capacity`` tokens with the 2020 costs, each cut to the capacity so that it validates."""
    costs = {"retry_cost": 5, "timeout_retry_cost": 10, "throttling_retry_cost": 5}
    fields: dict[str, Any] = {k: min(v, capacity) for k, v in costs.items()}
    return RetryQuotaConfig(max_capacity=capacity, **fields, **changes)


async def drive(attempts: Attempts, op: Callable[[], Awaitable[Any]]) -> None:
    """Run ``op`` in each attempt of ``attempts``."""
    async for attempt in attempts:
        async with attempt:
            await op()


def quota_of(retrier: Retrier, scope: str = "default") -> QuotaStatistics:
    """The statistics of one scope's quota."""
    for stats in retrier.statistics().scopes:
        if stats.key == scope:
            assert stats.quota is not None
            return stats.quota
    raise AssertionError(f"no scope {scope!r}")


def available(retrier: Retrier, scope: str = "default") -> float:
    return quota_of(retrier, scope).available


Recorder = EventLog  # every event of a bus, in order


# -- the three ways in


@pytest.mark.parametrize("way", WAYS)
async def test_a_call_that_recovers_returns_its_result(way: Way) -> None:
    """Two transient failures then a success: the result comes back after delays of 0.5 s and 1 s."""
    retrier, clock = make()
    op = Script(ConnectionResetError, ServiceError("RequestTimeout"), "done")
    assert await run(way, retrier, op) == "done"
    assert op.calls == 3
    assert clock.sleeps == [0.5, 1.0]
    stats = retrier.statistics()
    assert (stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures) == (1, 3, 2, 1, 0)


@pytest.mark.parametrize("way", WAYS)
async def test_a_call_that_gives_up_raises_the_real_last_error(way: Way) -> None:
    """Out of attempts, the caller gets the last real error itself (not a wrapper) with the history."""
    retrier, clock = make()
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError, match="attempt 3") as err:
        await run(way, retrier, op)
    assert err.value is op.raised[-1]
    history = history_of(err.value)
    assert history is not None
    assert [a.kind for a in history.attempts] == [T.CONNECTION] * 3
    assert history.gave_up == "max_attempts"
    assert clock.sleeps == [0.5, 1.0]


async def test_call_in_passes_arguments_and_uses_the_scope() -> None:
    """call_in(scope, fn, *args, **kwargs) calls fn with the arguments in that scope."""
    retrier, _ = make()

    async def add(a: int, b: int, *, c: int) -> int:
        return a + b + c

    assert await retrier.call_in("math", add, 1, 2, c=3) == 6
    assert await retrier.call(add, 1, 1, c=1) == 3
    assert sorted(retrier.scope_keys()) == ["default", "math"]


# -- SPEC 1.1: the order of checks


async def test_a_not_retryable_error_is_raised_at_once_untouched() -> None:
    """A validation-style error ends the call after one attempt: same object, no sleep, quota untouched."""
    retrier, clock = make()
    error = ValueError("bad input")
    op = Script(error)
    with pytest.raises(ValueError, match="bad input") as err:
        await retrier.call(op)
    assert err.value is error
    assert (error.args, error.__cause__, error.__context__) == (("bad input",), None, None)
    assert op.calls == 1
    assert clock.sleeps == []
    assert available(retrier) == 500
    history = history_of(error)
    assert history is not None
    assert history.gave_up == "not_retryable"


async def test_not_retryable_is_checked_before_max_attempts() -> None:
    """With one attempt allowed, a not-retryable error still gives up as 'not_retryable'."""
    retrier, _ = make(RetryPolicy(max_attempts=1))
    with pytest.raises(KeyError) as err:
        await retrier.call(Script(KeyError))
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "not_retryable"


async def test_the_last_attempt_gives_up_without_sleeping_or_paying() -> None:
    """A failure on the last attempt gives up at once: no sleep after it, no quota taken for it."""
    retrier, clock = make(RetryPolicy(max_attempts=3))
    with pytest.raises(ConnectionResetError):
        await retrier.call(Script(ConnectionResetError))
    assert clock.sleeps == [0.5, 1.0]
    assert available(retrier) == 490  # two retries at 5, nothing for the third failure


async def test_max_attempts_is_checked_before_the_quota() -> None:
    """An empty quota on the last attempt still gives up with the real error, not RetryCapacityExceeded."""
    retrier, _ = make(RetryPolicy(max_attempts=2, quota=small_quota(5)))
    with pytest.raises(ConnectionResetError) as err:
        await retrier.call(Script(ConnectionResetError))
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "max_attempts"
    assert available(retrier) == 0


async def test_the_quota_is_checked_before_sleeping() -> None:
    """When the quota cannot pay for a retry the call gives up at once: it never sleeps and then gives up."""
    retrier, clock = make(RetryPolicy(max_attempts=5, quota=small_quota(7)))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError):
        await retrier.call(op)
    assert op.calls == 2
    assert clock.sleeps == [0.5]
    assert available(retrier) == 2


async def test_max_attempts_one_disables_retries() -> None:
    """max_attempts=1 makes exactly one attempt."""
    retrier, clock = make(RetryPolicy(max_attempts=1))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError):
        await retrier.call(op)
    assert (op.calls, clock.sleeps) == (1, [])


# -- SPEC 1.1: what retries cost and what successes give back


async def test_a_first_try_success_adds_the_success_increment() -> None:
    """A success without retries gives back initial_try_success_increment (1)."""
    quota = RetryQuota(RetryQuotaConfig(), clock=VirtualClock())
    assert quota.try_acquire(100)
    retrier, _ = make(quota=quota)
    await retrier.call(Script("ok"))
    assert quota.available == 401


async def test_only_the_last_acquisition_is_refunded_on_success() -> None:
    """A transient retry (5) then a timeout retry (10) then success: only the last 10 come back."""
    retrier, _ = make(RetryPolicy(max_attempts=3))
    await retrier.call(Script(ConnectionResetError, TimeoutError, "ok"))
    quota = quota_of(retrier)
    assert (quota.available, quota.acquired_total, quota.released_total) == (495, 15, 10)


async def test_a_final_failure_refunds_nothing() -> None:
    """A call that gives up leaves its retry costs spent and releases nothing."""
    retrier, _ = make(RetryPolicy(max_attempts=4))
    with pytest.raises(TimeoutError):
        await retrier.call(Script(TimeoutError))
    quota = quota_of(retrier)
    assert (quota.available, quota.released_total) == (470, 0)


async def test_throttling_and_timeout_retries_cost_their_profile_costs() -> None:
    """2026 profile: a throttling retry costs 5, a transient or timeout retry 14."""
    retrier, _ = make(RetryPolicy(profile="2026", max_attempts=4))
    with pytest.raises(TimeoutError):
        await retrier.call(Script(ServiceError("Throttling"), ConnectionResetError, TimeoutError))
    assert available(retrier) == 500 - 5 - 14 - 14


async def test_a_not_retryable_error_leaves_the_quota_alone() -> None:
    """A not-retryable failure takes nothing and gives nothing back."""
    retrier, _ = make()
    with pytest.raises(ValueError):
        await retrier.call(Script(ValueError))
    stats = quota_of(retrier)
    assert (stats.available, stats.acquired_total, stats.released_total) == (500, 0, 0)


async def test_a_first_attempt_cost_is_taken_and_refused_when_empty() -> None:
    """With initial_try_cost, a first attempt pays too; an empty quota refuses the call before any attempt."""
    quota = RetryQuota(small_quota(3, initial_try_cost=2), clock=VirtualClock())
    retrier, _ = make(RetryPolicy(quota=quota.config), quota=quota)
    op = Script("ok")
    await retrier.call(op)
    assert quota.available == 2  # 3 - 2 + success increment 1
    quota.try_acquire(2)
    with pytest.raises(RetryCapacityExceeded):
        await retrier.call(op)
    assert op.calls == 1


async def test_legacy_mode_has_no_quota() -> None:
    """Legacy mode never runs dry: a long outage retries every time, with no quota in the scope."""
    retrier, clock = make(RetryPolicy.aws_legacy(max_attempts=50))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError):
        await retrier.call(op)
    assert op.calls == 50
    assert len(clock.sleeps) == 49
    assert max(clock.sleeps) == 10.0  # u * 20 s cap
    assert retrier.statistics().scopes[0].quota is None


# -- adaptive mode


class SpyLimiter(AdaptiveRateLimiter):
    """An adaptive limiter that logs every admission (a granted try_acquire(), or acquire()) and update()."""

    def __init__(self, log: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log

    def try_acquire(self) -> bool:
        granted = super().try_acquire()
        if granted:
            self.log.append("acquire")
        return granted

    async def acquire(self, *, timeout: float | timedelta | None = None) -> None:
        self.log.append("acquire")
        await super().acquire(timeout=timeout)

    def update(
        self, throttled: bool, *, reason: str = "throttling", sent_at: float | None = None, failed: bool = False
    ) -> None:
        self.log.append(f"update({throttled})")
        super().update(throttled, reason=reason, failed=failed)


async def test_adaptive_mode_acquires_before_every_attempt_and_updates_after_every_response() -> None:
    """The limiter is asked before each attempt (the first included) and told after each response."""
    log: list[str] = []
    limiter = SpyLimiter(log)
    retrier = Retrier(RetryPolicy(mode="adaptive", max_attempts=4), rng=fixed_random(0.5), limiter=limiter)

    class Logged(Script):
        async def __call__(self) -> Any:
            log.append("send")
            return await super().__call__()

    await retrier.call(Logged(ServiceError("ThrottlingException"), ConnectionResetError, "ok"))
    assert log == [
        "acquire", "send", "update(True)",
        "acquire", "send", "update(False)",
        "acquire", "send", "update(False)",
    ]
    assert limiter.enabled


async def test_adaptive_mode_updates_after_a_not_retryable_response_too() -> None:
    """A final, not-retryable response is still a response: the limiter hears about it."""
    log: list[str] = []
    retrier = Retrier(RetryPolicy(mode="adaptive"), limiter=SpyLimiter(log))
    with pytest.raises(ValueError):
        await retrier.call(Script(ValueError))
    assert log == ["acquire", "update(False)"]


async def test_adaptive_mode_keeps_a_limiter_per_scope() -> None:
    """A throttle in one scope enables that scope's limiter only."""
    retrier = Retrier(RetryPolicy(mode="adaptive"), rng=fixed_random(0.5))
    await retrier.call_in("table-a", Script(ServiceError("ThrottlingException"), "ok"))
    await retrier.call_in("table-b", Script("ok"))
    limiters = {s.key: s.limiter for s in retrier.statistics().scopes}
    assert limiters["table-a"] is not None
    assert limiters["table-a"].enabled
    assert limiters["table-b"] is not None
    assert not limiters["table-b"].enabled


async def test_adaptive_throttle_events_carry_the_outcome_reason() -> None:
    """In adaptive mode, the Throttled event says why the response counted as a throttle."""
    retrier = Retrier(RetryPolicy(mode="adaptive"), rng=fixed_random(0.5))
    recorder = Recorder(retrier.events)
    await retrier.call_in("t", Script(ServiceError("SlowDown"), "ok"))
    throttled = recorder.of(Throttled)
    assert len(throttled) == 1
    assert isinstance(throttled[0], Throttled)
    assert (throttled[0].source, throttled[0].reason) == ("t", "SlowDown")


# -- delays


async def test_a_zero_delay_does_not_call_sleep() -> None:
    """With zero backoff, retries follow at once and the clock's sleep() is never called."""
    for backoff in (NoBackoff(), FixedBackoff(0)):
        retrier, clock = make(RetryPolicy(backoff=backoff, max_attempts=4))
        op = Script(ConnectionResetError, ConnectionResetError, ConnectionResetError, "ok")
        assert await retrier.call(op) == "ok"
        assert clock.sleeps == []


async def test_the_delay_before_each_attempt_is_reported_on_the_attempt() -> None:
    """Attempt.number counts from 1 and Attempt.delay_before is the sleep that preceded it."""
    retrier, _ = make(RetryPolicy(max_attempts=3))
    seen: list[tuple[int, float]] = []
    op = Script(ConnectionResetError, ConnectionResetError, "ok")
    async for attempt in retrier.attempts():
        async with attempt:
            seen.append((attempt.number, attempt.delay_before))
            await op()
    assert seen == [(1, 0.0), (2, 0.5), (3, 1.0)]


async def test_throttling_errors_use_the_throttling_backoff() -> None:
    """2026 profile: a transient failure waits u * 0.05 s, a throttling failure u * 1 s."""
    retrier, clock = make(RetryPolicy(profile="2026", max_attempts=3))
    await retrier.call(Script(ConnectionResetError, ServiceError("Throttling"), "ok"))
    assert clock.sleeps == pytest.approx([0.025, 1.0])


# -- deadlines


async def test_the_deadline_stops_a_sleep_that_would_end_past_it() -> None:
    """A retry whose sleep would end after the deadline is not attempted: the real last error is raised."""
    retrier = Retrier(RetryPolicy.aws_legacy(backoff=FixedBackoff(4), max_attempts=10, deadline=10))
    op = Script(ConnectionResetError)
    start = anyio.current_time()
    with pytest.raises(ConnectionResetError, match="attempt 3") as err:
        await retrier.call(op)
    assert anyio.current_time() - start == pytest.approx(8.0)
    assert [t - start for t in op.times] == pytest.approx([0, 4, 8])
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "deadline"
    assert [a.delay_after for a in history.attempts] == [4.0, 4.0, None]


async def test_no_attempt_is_started_with_no_time_left() -> None:
    """A sleep that would end exactly at the deadline is not started either: it leaves no time to try."""
    retrier = Retrier(RetryPolicy.aws_legacy(backoff=FixedBackoff(4), max_attempts=10, deadline=8))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError, match="attempt 2") as err:
        await retrier.call(op)
    assert op.calls == 2
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "deadline"


async def test_the_deadline_cuts_a_hung_attempt_short() -> None:
    """An attempt still running at the deadline is stopped there and the call raises AttemptTimeout."""
    retrier = Retrier(RetryPolicy(deadline=timedelta(seconds=3)))
    start = anyio.current_time()
    with pytest.raises(AttemptTimeout) as err:
        await retrier.call(hang)
    assert anyio.current_time() - start == pytest.approx(3.0)
    assert isinstance(err.value, TimeoutError)
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "deadline"
    assert [a.kind for a in history.attempts] == [T.TIMEOUT]
    assert available(retrier) == 500  # the retry that could not happen is not paid for


@pytest.mark.parametrize("scope", ["move_on_after", "fail_after"])
async def test_an_enclosing_cancel_scope_deadline_is_honoured_like_the_policy_deadline(scope: str) -> None:
    """In move_on_after / fail_after no sleep past the scope's deadline starts; the real error is raised."""
    retrier = Retrier(RetryPolicy.aws_legacy(backoff=FixedBackoff(4), max_attempts=10))
    op = Script(ConnectionResetError)
    start = anyio.current_time()
    outer = anyio.move_on_after(10) if scope == "move_on_after" else anyio.fail_after(10)
    with pytest.raises(ConnectionResetError, match="attempt 3") as err, outer:
        await retrier.call(op)
    assert anyio.current_time() - start == pytest.approx(8.0)
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "deadline"


async def test_the_closer_of_the_two_deadlines_wins() -> None:
    """With both a policy deadline and an enclosing scope, the earlier one bounds the retries."""
    retrier = Retrier(RetryPolicy.aws_legacy(backoff=FixedBackoff(4), max_attempts=10, deadline=30))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError), anyio.fail_after(6):
        await retrier.call(op)
    assert op.calls == 2


# -- per-attempt timeout


async def test_a_hung_attempt_is_retried_as_a_timeout() -> None:
    """attempt_timeout cancels a hung attempt and retries it, paying the timeout cost."""
    retrier = Retrier(RetryPolicy(attempt_timeout=2.0), rng=fixed_random(0.5))
    recorder = Recorder(retrier.events)
    calls = 0

    async def sometimes_hangs() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep_forever()
        return "ok"

    start = anyio.current_time()
    assert await retrier.call(sometimes_hangs) == "ok"
    assert anyio.current_time() - start == pytest.approx(2.5)
    scheduled = recorder.of(RetryScheduled)
    assert [(e.outcome, e.reason) for e in scheduled if isinstance(e, RetryScheduled)] == [
        ("timeout", "attempt timeout")
    ]
    quota = quota_of(retrier)
    assert (quota.acquired_total, quota.available) == (10, 500)


async def test_giving_up_on_timeouts_raises_attempt_timeout_with_history() -> None:
    """When every attempt times out, the caller gets AttemptTimeout (a TimeoutError) and the history."""
    retrier = Retrier(RetryPolicy(attempt_timeout=1.5, max_attempts=2), rng=fixed_random(0.5))
    with pytest.raises(TimeoutError) as err:
        await retrier.call(hang)
    assert isinstance(err.value, AttemptTimeout)
    assert err.value.timeout == 1.5
    history = history_of(err.value)
    assert history is not None
    assert [(a.kind, a.reason) for a in history.attempts] == [(T.TIMEOUT, "attempt timeout")] * 2
    assert [a.duration for a in history.attempts] == pytest.approx([1.5, 1.5])
    assert history.gave_up == "max_attempts"
    assert history.elapsed == pytest.approx(3.5)


async def test_a_quick_attempt_is_not_affected_by_attempt_timeout() -> None:
    """An attempt that finishes in time returns normally."""
    retrier = Retrier(RetryPolicy(attempt_timeout=5))

    async def quick() -> int:
        await anyio.sleep(1)
        return 7

    assert await retrier.call(quick) == 7


# -- server-directed delays


async def answer(retrier: Retrier, *marks: dict[str, Any]) -> tuple[Any, Any]:
    """Mark the first attempts' results retryable with the given retry_result() arguments, then succeed."""
    attempts = retrier.attempts()
    async for attempt in attempts:
        async with attempt:
            if attempt.number <= len(marks):
                attempt.retry_result(f"response {attempt.number}", **marks[attempt.number - 1])
    return attempts, attempts.history()


async def test_a_server_delay_is_followed() -> None:
    """retry_result(server_delay=3) waits 3 s instead of the backoff, shorter or longer."""
    retrier, clock = make()
    recorder = Recorder(retrier.events)
    await answer(
        retrier, {"reason": "HTTP 503", "server_delay": 3.0}, {"reason": "HTTP 503", "server_delay": 0.1}
    )
    assert clock.sleeps == [3.0, 0.1]
    scheduled = [e for e in recorder.of(RetryScheduled) if isinstance(e, RetryScheduled)]
    assert [(e.delay, e.server_directed, e.reason) for e in scheduled] == [
        (3.0, True, "HTTP 503"), (0.1, True, "HTTP 503")
    ]


async def test_an_integration_may_classify_a_result_with_an_outcome_it_made() -> None:
    """classify_result(outcome) judges the attempt as that outcome: kind, reason and server delay."""
    retrier, clock = make(RetryPolicy(max_attempts=2))
    attempts = retrier.attempts()
    async for attempt in attempts:
        async with attempt:
            attempt.classify_result(Outcome(T.THROTTLING, "HTTP 429", result="429", server_delay=2.0))
    assert clock.sleeps == [2.0]
    assert attempts.gave_up == "max_attempts"
    assert [(a.kind, a.reason) for a in attempts.history().attempts] == [(T.THROTTLING, "HTTP 429")] * 2
    assert attempts.outcome is not None
    assert attempts.outcome.result == "429"


async def test_classify_result_and_classify_error_refuse_the_wrong_outcome() -> None:
    """A result's outcome carries no error; an error's outcome must carry the exception."""
    retrier, _ = make()
    async for attempt in retrier.attempts():
        async with attempt:
            with pytest.raises(ValueError, match=r"outcome\.error must be None"):
                attempt.classify_result(Outcome(T.TRANSIENT, "x", error=ValueError()))
            with pytest.raises(ValueError, match=r"outcome\.error must be the exception"):
                attempt.classify_error(Outcome(T.TRANSIENT, "x"))


async def test_a_server_delay_is_capped_at_max_server_delay() -> None:
    """A server cannot park a client for hours: the delay is cut to max_server_delay."""
    retrier, clock = make(RetryPolicy(max_server_delay=30))
    await answer(retrier, {"server_delay": 3600.0})
    assert clock.sleeps == [30.0]


async def test_server_delays_can_be_ignored() -> None:
    """honour_server_delay=False keeps the computed backoff."""
    retrier, clock = make(RetryPolicy(honour_server_delay=False))
    await answer(retrier, {"server_delay": 9.0})
    assert clock.sleeps == [0.5]


@pytest.mark.parametrize(
    ("hint", "expected"), [(0.5, 2.0), (4.0, 4.0), (7.0, 7.0), (10.0, 7.0)]
)
async def test_an_amz_retry_after_hint_is_clamped_around_the_backoff(hint: float, expected: float) -> None:
    """x-amz-retry-after becomes clamp(hint, t, t + 5) around the computed backoff t (here 2 s)."""
    retrier, clock = make(RetryPolicy(profile="2026", backoff=FixedBackoff(2.0)))
    await answer(retrier, {"server_delay": hint, "server_delay_is_hint": True})
    assert clock.sleeps == [expected]


async def test_an_amz_hint_is_ignored_unless_honoured() -> None:
    """With the 2020 profile (honour_amz_retry_after off) the hint is ignored; the backoff is used."""
    retrier, clock = make(RetryPolicy(profile="2020", backoff=FixedBackoff(2.0)))
    await answer(retrier, {"server_delay": 6.0, "server_delay_is_hint": True})
    assert clock.sleeps == [2.0]
    retrier, clock = make(RetryPolicy(profile="2020", backoff=FixedBackoff(2.0), honour_amz_retry_after=True))
    await answer(retrier, {"server_delay": 6.0, "server_delay_is_hint": True})
    assert clock.sleeps == [6.0]


async def test_an_amz_hint_is_capped_too() -> None:
    """The clamped hint never exceeds max_server_delay (nor goes below the backoff)."""
    retrier, clock = make(RetryPolicy(profile="2026", backoff=FixedBackoff(2.0), max_server_delay=3))
    await answer(retrier, {"server_delay": 10.0, "server_delay_is_hint": True})
    assert clock.sleeps == [3.0]


async def test_a_server_delay_past_the_deadline_gives_up_at_once() -> None:
    """A Retry-After longer than the time left ends the call at once with why='server_delay'."""
    retrier, clock = make(RetryPolicy(deadline=10))
    attempts, history = await answer(retrier, {"server_delay": 30.0})
    assert clock.sleeps == []
    assert attempts.gave_up == "server_delay"
    assert history.gave_up == "server_delay"
    assert attempts.outcome is not None
    assert attempts.outcome.result == "response 1"


# -- the retry quota runs dry


async def test_an_empty_quota_ends_the_call_with_the_real_error() -> None:
    """An empty quota ends the call with the last real error itself, its history saying why (quota)."""
    retrier, _ = make(RetryPolicy(max_attempts=5, quota=small_quota(5)))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError) as err:
        await retrier.call(op)
    assert err.value is op.raised[-1]
    history = history_of(err.value)
    assert history is not None
    assert (len(history.attempts), history.gave_up) == (2, "quota")
    assert history_of(op.raised[-1]) == history


async def test_an_outage_gets_100_retries_from_a_full_quota_then_stops_retrying() -> None:
    """500 tokens at 5 a retry: a total outage lets 100 retries through, then calls fail fast."""
    retrier, _ = make(RetryPolicy(backoff=NoBackoff()))
    op = Script(ConnectionResetError)
    exceeded = 0
    for _ in range(60):
        try:
            await retrier.call(op)
        except ConnectionResetError as error:
            history = history_of(error)
            assert history is not None
            exceeded += history.gave_up == "quota"
    assert op.calls - 60 == 100  # every call made one first attempt; retries on top
    assert exceeded == 10  # 50 calls used their 2 retries each, the last 10 were refused theirs
    assert available(retrier) == 0


async def test_a_retryable_result_with_an_empty_quota_raises_retries_exhausted() -> None:
    """call() on results judged retryable raises RetriesExhausted(why='quota') when the quota runs dry."""
    policy = RetryPolicy(
        max_attempts=5, quota=small_quota(5),
        classifier=Classifier(retry_if_result=lambda r: r == "busy"),
    )
    retrier, _ = make(policy)
    with pytest.raises(RetriesExhausted) as err:
        await retrier.call(Script("busy"))
    assert (err.value.why, err.value.last_result) == ("quota", "busy")
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "quota"


async def test_a_waiting_quota_waits_for_capacity() -> None:
    """With circuit_breaker_mode=False, a retry waits for the time-based refill instead of failing."""
    config = small_quota(5, refill_units_per_second=1, circuit_breaker_mode=False)
    retrier = Retrier(RetryPolicy(max_attempts=3, quota=config, backoff=NoBackoff()))
    op = Script(ConnectionResetError, ConnectionResetError, "ok")
    start = anyio.current_time()
    assert await retrier.call(op) == "ok"
    assert [t - start for t in op.times] == pytest.approx([0, 0, 5])


async def test_a_waiting_quota_gives_up_when_the_deadline_comes_first() -> None:
    """A wait for capacity longer than the time left ends the call with the real error (why: quota)."""
    config = small_quota(5, refill_units_per_second=1, circuit_breaker_mode=False)
    retrier = Retrier(RetryPolicy(max_attempts=3, quota=config, backoff=NoBackoff(), deadline=2))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError) as err:
        await retrier.call(op)
    assert err.value is op.raised[-1]
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "quota"
    assert op.calls == 2


# -- the circuit breaker


def breaker_policy(**changes: Any) -> RetryPolicy:
    config = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=2, break_duration=30)
    changes.setdefault("max_attempts", 1)
    return RetryPolicy(breaker=config, **changes)


async def test_an_open_breaker_rejects_calls_without_an_attempt() -> None:
    """After two failures the circuit opens and the next call raises CircuitOpenError, making no attempt."""
    retrier, _ = make(breaker_policy())
    op = Script(ConnectionResetError)
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            await retrier.call(op)
    with pytest.raises(CircuitOpenError) as err:
        await retrier.call(op)
    assert op.calls == 2
    assert (err.value.state, err.value.retry_after) == ("open", 30.0)
    history = history_of(err.value)
    assert history is not None
    assert (history.attempts, history.gave_up) == ((), "breaker")
    breaker = retrier.statistics().scopes[0].breaker
    assert breaker is not None
    assert breaker.state is BreakerState.OPEN


async def test_a_breaker_that_opens_mid_call_ends_it_with_the_real_error() -> None:
    """A call whose own failures trip the breaker ends with its last real error (why: breaker)."""
    retrier, _ = make(breaker_policy(max_attempts=5))
    op = Script(ConnectionResetError)
    with pytest.raises(ConnectionResetError) as err:
        await retrier.call(op)
    assert op.calls == 2
    assert err.value is op.raised[-1]
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "breaker"


async def test_a_retry_rejected_by_the_breaker_gives_its_quota_back() -> None:
    """The retry the breaker refused never happened, so the quota it paid for is returned."""
    retrier, _ = make(breaker_policy(max_attempts=5))
    with pytest.raises(ConnectionResetError):
        await retrier.call(Script(ConnectionResetError))
    assert available(retrier) == 495  # the retry that did happen (attempt 2) stays paid


async def test_a_half_open_breaker_lets_one_probe_through_and_closes_on_success() -> None:
    """After the break, one probe call is let through; its success closes the circuit."""
    retrier, clock = make(breaker_policy())
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            await retrier.call(Script(ConnectionResetError))
    clock.advance(30)
    assert await retrier.call(Script("probe ok")) == "probe ok"
    breaker = retrier.statistics().scopes[0].breaker
    assert breaker is not None
    assert breaker.state is BreakerState.CLOSED
    assert await retrier.call(Script("ok")) == "ok"


async def test_a_failed_probe_opens_the_breaker_again() -> None:
    """A probe that fails re-opens the circuit for another break."""
    retrier, clock = make(breaker_policy())
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            await retrier.call(Script(ConnectionResetError))
    clock.advance(30)
    with pytest.raises(ConnectionResetError):
        await retrier.call(Script(ConnectionResetError))
    with pytest.raises(CircuitOpenError):
        await retrier.call(Script("ok"))


async def test_only_one_probe_runs_while_half_open() -> None:
    """While the probe is in flight, a second call is rejected as half-open."""
    retrier = Retrier(breaker_policy())
    for _ in range(2):
        with pytest.raises(ConnectionResetError):
            await retrier.call(Script(ConnectionResetError))
    await anyio.sleep(30)

    async def slow_probe() -> str:
        await anyio.sleep(1)
        return "probe ok"

    results: list[str] = []

    async def probe() -> None:
        results.append(await retrier.call(slow_probe))

    async with anyio.create_task_group() as tg:
        tg.start_soon(probe)
        await anyio.sleep(0.5)
        with pytest.raises(CircuitOpenError) as err:
            await retrier.call(slow_probe)
        assert err.value.state == "half_open"
    assert results == ["probe ok"]
    assert await retrier.call(slow_probe) == "probe ok"


async def test_a_slow_probe_of_one_half_open_period_does_not_vote_in_the_next() -> None:
    """Three probes of which two decide: the third, still running when the circuit re-opened, fails later,
    in the next half-open period, and is not counted there (the engine passes the probe's ticket back)."""
    config = CircuitBreakerConfig(
        failure_ratio=None, consecutive_failures=1, break_duration=1.0, half_open_max_probes=3,
        half_open_successes_to_close=2, half_open_failures_to_reopen=2,
    )
    log = EventLog()
    retrier = Retrier(RetryPolicy(breaker=config, max_attempts=1), events=log.bus)

    def after(seconds: float, error: bool) -> Callable[[], Awaitable[str]]:
        async def op() -> str:
            await anyio.sleep(seconds)
            if error:
                raise ConnectionResetError("down")
            return "ok"
        return op

    outcomes: list[str] = []

    async def call(op: Callable[[], Awaitable[str]]) -> None:
        try:
            outcomes.append(await retrier.call(op))
        except ConnectionResetError:
            outcomes.append("failed")

    with pytest.raises(ConnectionResetError):
        await retrier.call(after(0, error=True))  # trips: open until t = 1
    async with anyio.create_task_group() as tg:
        await anyio.sleep(1.0)  # period 1: two quick failures re-open it, the slow third fails at t = 2.5
        for op in (after(0, True), after(0, True), after(1.5, True)):
            tg.start_soon(call, op)
        await anyio.sleep(1.0)  # period 2 (t = 2): one failure, two successes at t = 2.6
        for op in (after(0, True), after(0.6, False), after(0.6, False)):
            tg.start_soon(call, op)
    breaker = retrier.statistics().scopes[0].breaker
    assert breaker is not None
    assert breaker.state is BreakerState.CLOSED
    changes = [(e.old_state, e.new_state, e.reason) for e in log.events if isinstance(e, BreakerStateChanged)]
    assert changes[-3:] == [
        ("half_open", "open", "2 probes failed"),
        ("open", "half_open", "break of 1 s elapsed"),
        ("half_open", "closed", "2 probes succeeded"),
    ]
    assert sorted(outcomes) == ["failed"] * 4 + ["ok"] * 2


async def test_a_not_retryable_error_counts_as_a_breaker_success() -> None:
    """The breaker only counts retryable failures against the backend: a 4xx-style error does not trip it."""
    retrier, _ = make(breaker_policy())
    for _ in range(5):
        with pytest.raises(ValueError):
            await retrier.call(Script(ValueError))
    assert await retrier.call(Script("ok")) == "ok"


# -- history


async def test_the_history_records_every_attempt() -> None:
    """history_of() gives numbers, kinds, reasons, delays, start times, errors, elapsed time and why."""
    retrier, _ = make()
    op = Script(ServiceError("RequestTimeout"), ServiceError("SlowDown"), TimeoutError)
    with pytest.raises(TimeoutError) as err:
        await retrier.call(op)
    history = history_of(err.value)
    assert isinstance(history, RetryHistory)
    assert history.scope == "default"
    assert [a.number for a in history.attempts] == [1, 2, 3]
    assert [a.kind for a in history.attempts] == [T.TRANSIENT, T.THROTTLING, T.TIMEOUT]
    assert [a.reason for a in history.attempts] == ["RequestTimeout", "SlowDown", "TimeoutError"]
    assert [a.delay_after for a in history.attempts] == [0.5, 1.0, None]
    assert [a.started for a in history.attempts] == [0.0, 0.5, 1.5]
    assert [a.error for a in history.attempts] == [
        "ServiceError('RequestTimeout')", "ServiceError('SlowDown')", "TimeoutError('attempt 3')"
    ]
    assert (history.elapsed, history.gave_up, history.retries, history.total_delay) == (
        1.5, "max_attempts", 2, 1.5
    )


async def test_the_history_summary_is_added_as_an_exception_note() -> None:
    """The exception the caller sees carries a one-line summary note, shown in tracebacks."""
    retrier, _ = make()
    with pytest.raises(ConnectionResetError) as err:
        await retrier.call(Script(ConnectionResetError))
    assert err.value.__notes__ == [
        "asyncretry: gave up (max_attempts) after 3 attempt(s) in 1.500 s [default]: "
        "#1 ConnectionResetError, #2 ConnectionResetError, #3 ConnectionResetError"
    ]


async def test_an_error_that_was_never_retried_has_no_history() -> None:
    """history_of() is None for exceptions the engine did not give up on."""
    assert history_of(ValueError()) is None


async def test_the_attempts_object_exposes_the_history_of_a_success() -> None:
    """After a successful loop, Attempts.history() shows the attempts and gave_up None."""
    retrier, _ = make()
    attempts = retrier.attempts()
    op = Script(ConnectionResetError, "ok")
    async for attempt in attempts:
        async with attempt:
            await op()
    history = attempts.history()
    assert ([a.kind for a in history.attempts], history.gave_up) == ([T.CONNECTION, T.SUCCESS], None)
    assert (attempts.gave_up, attempts.total_delay) == (None, 0.5)


# -- the give-up hook


@pytest.mark.parametrize("style", ["sync", "async"])
async def test_on_give_up_gets_every_failure_end(style: str) -> None:
    """on_give_up (sync or async) receives a GiveUpInfo for each way a call can give up."""
    infos: list[GiveUpInfo] = []

    async def async_hook(info: GiveUpInfo) -> None:
        await anyio.lowlevel.checkpoint()
        infos.append(info)

    hook = infos.append if style == "sync" else async_hook
    quota = RetryQuota(clock=VirtualClock())
    breaker = CircuitBreaker(clock=VirtualClock())
    policy = RetryPolicy(max_attempts=2, on_give_up=hook, deadline=30)
    retrier, _ = make(policy, quota=quota, breaker=breaker)
    with pytest.raises(ConnectionResetError):  # max_attempts
        await retrier.call(Script(ConnectionResetError))
    with pytest.raises(ValueError):  # not_retryable
        await retrier.call(Script(ValueError))
    await answer(retrier, {"server_delay": 50.0})  # server_delay past the deadline
    quota.try_acquire(quota.available)
    with pytest.raises(ConnectionResetError):  # quota
        await retrier.call(Script(ConnectionResetError))
    breaker.isolate()
    with pytest.raises(CircuitOpenError):  # breaker
        await retrier.call(Script("ok"))
    assert [i.history.gave_up for i in infos] == [
        "max_attempts", "not_retryable", "server_delay", "quota", "breaker"
    ]
    assert all(i.scope == "default" for i in infos)
    assert isinstance(infos[0].outcome.error, ConnectionResetError)
    assert infos[0].outcome.kind is T.CONNECTION
    assert infos[2].outcome.result == "response 1"
    assert isinstance(infos[4].outcome.error, CircuitOpenError)


async def test_on_give_up_is_not_called_on_success() -> None:
    """A call that succeeds (after retries) does not call the hook."""
    infos: list[GiveUpInfo] = []
    retrier, _ = make(RetryPolicy(on_give_up=infos.append))
    await retrier.call(Script(ConnectionResetError, "ok"))
    assert infos == []


async def test_on_give_up_sees_the_last_result_of_a_retryable_result() -> None:
    """When results run out, the hook gets the final result: SNS's dead-letter queue loses nothing."""
    infos: list[GiveUpInfo] = []
    retrier, _ = make(RetryPolicy(max_attempts=2, on_give_up=infos.append))
    attempts, _ = await answer(retrier, {"reason": "NOT_READY"}, {"reason": "NOT_READY"})
    assert len(infos) == 1
    assert (infos[0].outcome.result, infos[0].outcome.reason) == ("response 2", "NOT_READY")
    assert infos[0].history == attempts.history()


# -- events


async def test_events_reach_a_listener_in_order() -> None:
    """Throttled, AttemptFinished, RetryScheduled and GaveUp arrive in the order things happen."""
    retrier, _ = make()
    recorder = Recorder(retrier.events)
    with pytest.raises(ConnectionResetError):
        await retrier.call_in("api", Script(ServiceError("SlowDown"), ConnectionResetError))
    events = recorder.of(Throttled, AttemptFinished, RetryScheduled, GaveUp)
    assert [type(e).__name__ for e in events] == [
        "Throttled", "AttemptFinished", "RetryScheduled",
        "AttemptFinished", "RetryScheduled",
        "AttemptFinished", "GaveUp",
    ]
    assert all(e.source == "api" for e in events)
    finished = [e for e in events if isinstance(e, AttemptFinished)]
    assert [(e.attempt, e.outcome, e.reason) for e in finished] == [
        (1, "throttling", "SlowDown"), (2, "connection", "ConnectionResetError"), (3, "connection",
                                                                                  "ConnectionResetError"),
    ]
    scheduled = [e for e in events if isinstance(e, RetryScheduled)]
    assert [(e.attempt, e.delay, e.server_directed) for e in scheduled] == [(1, 0.5, False), (2, 1.0, False)]
    gave_up = events[-1]
    assert isinstance(gave_up, GaveUp)
    assert (gave_up.attempts, gave_up.why, gave_up.outcome, gave_up.elapsed) == (3, "max_attempts",
                                                                                 "connection", 1.5)
    assert [e.time for e in events] == sorted(e.time for e in events)


async def test_policy_listeners_are_subscribed_on_every_retrier() -> None:
    """Listeners given in the policy hear the events of each retrier that uses it."""
    seen: list[Event] = []
    policy = RetryPolicy(listeners=(seen.append,))
    for _ in range(2):
        retrier, _ = make(policy)
        await retrier.call(Script("ok"))
    assert [type(e).__name__ for e in seen] == ["AttemptFinished", "AttemptFinished"]


async def test_subscribe_returns_an_unsubscribe_function() -> None:
    """retrier.subscribe() adds a listener; calling what it returns removes it."""
    retrier, _ = make()
    seen: list[Event] = []
    undo = retrier.subscribe(seen.append)
    await retrier.call(Script("ok"))
    undo()
    await retrier.call(Script("ok"))
    assert len(seen) == 1


# -- scopes


async def test_scopes_are_isolated() -> None:
    """An outage that drains scope A's quota leaves scope B's quota full and its retries working."""
    retrier, _ = make(RetryPolicy(quota=small_quota(10), backoff=NoBackoff()))
    for _ in range(3):
        with pytest.raises((ServiceError, RetryCapacityExceeded)):
            await retrier.call_in("a", Script(ServiceError("Throttling")))
    assert available(retrier, "a") == 0
    assert await retrier.call_in("b", Script(ConnectionResetError, "ok")) == "ok"
    assert available(retrier, "b") == 10


async def test_a_quota_can_be_shared_between_retriers() -> None:
    """Two retriers given one RetryQuota draw on the same budget."""
    quota = RetryQuota(small_quota(10), clock=VirtualClock(), name="shared")
    first, _ = make(RetryPolicy(max_attempts=3), quota=quota)
    second, _ = make(RetryPolicy(max_attempts=3), quota=quota)
    with pytest.raises(ConnectionResetError):
        await first.call(Script(ConnectionResetError))
    assert quota.available == 0
    with pytest.raises(ConnectionResetError) as err:
        await second.call_in("elsewhere", Script(ConnectionResetError))
    history = history_of(err.value)
    assert history is not None
    assert (history.gave_up, len(history.attempts)) == ("quota", 1)


async def test_the_least_recently_used_scope_is_evicted_beyond_max_scopes() -> None:
    """With max_scopes=2, a third scope evicts the least recently used one and emits ScopeEvicted."""
    retrier, clock = make(max_scopes=2)
    recorder = Recorder(retrier.events)
    await retrier.call_in("a", Script("ok"))
    clock.advance(1)
    await retrier.call_in("b", Script("ok"))
    clock.advance(1)
    await retrier.call_in("a", Script("ok"))
    clock.advance(1)
    await retrier.call_in("c", Script("ok"))
    assert sorted(retrier.scope_keys()) == ["a", "c"]
    evicted = recorder.of(ScopeEvicted)
    assert len(evicted) == 1
    assert isinstance(evicted[0], ScopeEvicted)
    assert (evicted[0].source, evicted[0].idle_for) == ("b", 2.0)
    assert retrier.statistics().evicted_scopes == 1


async def test_idle_scopes_are_evicted_after_scope_idle_timeout() -> None:
    """A scope unused for scope_idle_timeout seconds is dropped when scopes are next swept."""
    retrier, clock = make(scope_idle_timeout=60)
    recorder = Recorder(retrier.events)
    await retrier.call_in("old", Script("ok"))
    clock.advance(30)
    await retrier.call_in("recent", Script("ok"))
    clock.advance(31)
    await retrier.call_in("new", Script("ok"))
    assert sorted(retrier.scope_keys()) == ["new", "recent"]
    evicted = [e for e in recorder.of(ScopeEvicted) if isinstance(e, ScopeEvicted)]
    assert [(e.source, e.idle_for) for e in evicted] == [("old", 61.0)]


async def test_an_evicted_scope_starts_afresh() -> None:
    """A scope that comes back after eviction gets a full quota again."""
    retrier, clock = make(RetryPolicy(quota=small_quota(10)), scope_idle_timeout=60)
    with pytest.raises(ConnectionResetError):
        await retrier.call_in("a", Script(ConnectionResetError))
    assert available(retrier, "a") == 0
    clock.advance(61)
    await retrier.call_in("b", Script("ok"))
    await retrier.call_in("a", Script("ok"))
    assert available(retrier, "a") == 10


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"max_scopes": 0}, ValueError, "max_scopes"),
        ({"max_scopes": 1.5}, TypeError, "max_scopes"),
        ({"scope_idle_timeout": 0}, ValueError, "scope_idle_timeout"),
        ({"scope_idle_timeout": -1}, ValueError, "scope_idle_timeout"),
        ({"policy": {"max_attempts": 3}}, TypeError, "policy"),
    ],
)
def test_bad_retrier_arguments_are_refused(kwargs: dict[str, Any], error: type[Exception], name: str) -> None:
    """Retrier validates its arguments; the message names the parameter."""
    with pytest.raises(error, match=name):
        Retrier(**kwargs)


# -- results judged retryable


async def test_retry_result_on_the_last_attempt_ends_the_loop_with_gave_up_set() -> None:
    """The async-for loop simply ends when the last attempt's result is still retryable."""
    retrier, clock = make(RetryPolicy(max_attempts=3))
    attempts, history = await answer(retrier, *[{"reason": "NOT_READY"}] * 3)
    assert attempts.gave_up == "max_attempts"
    assert attempts.outcome is not None
    assert (attempts.outcome.result, attempts.outcome.reason) == ("response 3", "NOT_READY")
    assert [a.reason for a in history.attempts] == ["NOT_READY"] * 3
    assert clock.sleeps == [0.5, 1.0]


async def test_call_raises_retries_exhausted_with_the_last_result() -> None:
    """call() on results that stay retryable raises RetriesExhausted carrying the last result and why."""
    classifier = Classifier(retry_if_result=lambda r: r["state"] != "done")
    policy = RetryPolicy(max_attempts=3, classifier=classifier)
    retrier, _ = make(policy)
    op = Script({"state": "pending", "n": 1}, {"state": "pending", "n": 2}, {"state": "pending", "n": 3})
    with pytest.raises(RetriesExhausted) as err:
        await retrier.call(op)
    assert err.value.last_result == {"state": "pending", "n": 3}
    assert err.value.why == "max_attempts"
    history = history_of(err.value)
    assert history is not None
    assert len(history.attempts) == 3


async def test_call_returns_the_first_result_accepted_by_retry_if_result() -> None:
    """retry_if_result retries results it judges retryable and returns the first one it accepts."""
    policy = RetryPolicy(classifier=Classifier(retry_if_result=lambda r: r is None))
    retrier, _ = make(policy)
    assert await retrier.call(Script(None, 42)) == 42


async def test_fail_result_ends_the_call_without_retrying() -> None:
    """attempt.fail_result() marks a final failure: the loop ends with gave_up 'not_retryable'."""
    retrier, _ = make()
    attempts = retrier.attempts()
    async for attempt in attempts:
        async with attempt:
            attempt.fail_result("FAILED", reason="FAILED")
    assert (attempts.number, attempts.gave_up) == (1, "not_retryable")


async def test_retry_result_refuses_a_final_kind() -> None:
    """retry_result(kind=...) must be a retryable kind."""
    retrier, _ = make()
    async for attempt in retrier.attempts():
        async with attempt:
            with pytest.raises(ValueError, match="kind must be a retryable OutcomeKind"):
                attempt.retry_result(None, kind=T.SUCCESS)


async def test_retry_result_with_a_kind_costs_and_waits_for_that_kind() -> None:
    """retry_result(kind=THROTTLING) is retried as throttling (throttling backoff, throttling cost)."""
    retrier, clock = make(RetryPolicy(profile="2026"))
    await answer(retrier, {"kind": T.THROTTLING, "reason": "THROTTLED"})
    assert clock.sleeps == [0.5]  # u * 1 s, the 2026 throttling base
    assert quota_of(retrier).acquired_total == 5


# -- misuse and the engine's own limits


async def test_asking_for_the_next_attempt_without_entering_this_one_is_an_error() -> None:
    """Iterating without `async with attempt:` raises RuntimeError instead of silently skipping attempts."""
    retrier, _ = make()
    attempts = retrier.attempts()
    await attempts.__anext__()
    with pytest.raises(RuntimeError, match="async with attempt"):
        await attempts.__anext__()


class Fatal(BaseException):
    """A BaseException that is not an Exception (like KeyboardInterrupt)."""


async def test_base_exceptions_are_never_retried_whatever_the_predicate_says() -> None:
    """A BaseException that is not an Exception passes through after one attempt, even if retry_if says so."""
    retrier, clock = make(RetryPolicy(classifier=Classifier(retry_if=lambda e: True)))
    op = Script(Fatal)
    with pytest.raises(Fatal):
        await retrier.call(op)
    assert (op.calls, clock.sleeps) == (1, [])
    assert history_of(op.raised[0]) is None


async def test_a_per_call_policy_overrides_attempts_and_backoff() -> None:
    """attempts(policy=...) uses that policy's attempts and delays for this call only."""
    retrier, clock = make(RetryPolicy(max_attempts=2))
    op = Script(ConnectionResetError)
    attempts = retrier.attempts(policy=RetryPolicy(max_attempts=4, backoff=FixedBackoff(1)))
    with pytest.raises(ConnectionResetError):
        await drive(attempts, op)
    assert (op.calls, clock.sleeps) == (4, [1.0, 1.0, 1.0])


async def test_interleaved_calls_keep_their_own_attempt_state() -> None:
    """Two calls on one retrier, stepped alternately, each count their own attempts and delays."""
    retrier, _ = make(RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)))
    first, second = retrier.attempts(), retrier.attempts()
    a1 = await first.__anext__()
    b1 = await second.__anext__()
    async with a1:
        raise ConnectionResetError
    async with b1:
        pass
    a2 = await first.__anext__()
    async with a2:
        pass
    assert (a1.number, a2.number, b1.number) == (1, 2, 1)
    assert [r.kind for r in first.history().attempts] == [T.CONNECTION, T.SUCCESS]
    assert [r.kind for r in second.history().attempts] == [T.SUCCESS]


async def test_a_fixed_rate_limit_spaces_calls() -> None:
    """rate_limit=2 with burst 1 lets one call through every half second in each scope."""
    retrier = Retrier(RetryPolicy(rate_limit=2, rate_limit_burst=1))
    op = Script("ok")
    start = anyio.current_time()
    for _ in range(3):
        await retrier.call(op)
    assert [t - start for t in op.times] == pytest.approx([0, 0.5, 1.0])


async def test_a_rate_limit_wait_past_the_deadline_raises_rate_limit_timeout() -> None:
    """A rate-limit wait longer than the time left fails at once with RateLimitTimeout."""
    retrier = Retrier(RetryPolicy(rate_limit=0.1, rate_limit_burst=1))
    await retrier.call(Script("ok"))
    with pytest.raises(RateLimitTimeout) as err, anyio.fail_after(5):
        await retrier.call(Script("ok"))
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "rate_limit"


# -- statistics


async def test_statistics_count_calls_attempts_retries_successes_and_failures() -> None:
    """statistics() counts since the retrier was made, and snapshots each scope."""
    retrier, _ = make(RetryPolicy(max_attempts=2))
    await retrier.call(Script("ok"))
    await retrier.call(Script(ConnectionResetError, "ok"))
    with pytest.raises(ConnectionResetError):
        await retrier.call_in("other", Script(ConnectionResetError))
    with pytest.raises(ValueError):
        await retrier.call(Script(ValueError))
    stats = retrier.statistics()
    assert stats.name == "retrier"
    assert (stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures) == (4, 6, 2, 2, 2)
    assert sorted(s.key for s in stats.scopes) == ["default", "other"]
    assert all(s.limiter is None and s.breaker is None and s.rate_limit is None for s in stats.scopes)


def test_a_retrier_has_a_useful_repr() -> None:
    """repr() shows the name, mode, scopes and calls."""
    retrier = Retrier(RetryPolicy(mode="legacy"), name="s3")
    assert repr(retrier) == "<Retrier 's3' mode=legacy scopes=0 calls=0>"


# -- invariants


class ThrottlingException(Exception):
    """Classified as throttling by its class name, like a modelled AWS SDK exception."""


STEPS: dict[str, Any] = {
    "connection": ConnectionResetError,
    "timeout": TimeoutError,
    "throttling": ThrottlingException,
    "bad": ValueError,
    "ok": "ok",
}
KIND_OF = {"connection": T.CONNECTION, "timeout": T.TIMEOUT, "throttling": T.THROTTLING}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=8),
    max_attempts=st.integers(1, 6),
    profile=st.sampled_from(["2020", "2026"]),
    u=st.floats(0.0, 0.999),
)
@example(names=["connection", "ok"], max_attempts=3, profile="2026", u=5e-324)  # the 50 ms backoff underflows to 0
def test_any_sequence_of_outcomes_follows_spec_1_1(
    backend: str, names: list[str], max_attempts: int, profile: Literal["2020", "2026"], u: float
) -> None:
    """For any outcomes: attempts stop at success, a final error or max_attempts; costs and delays add up."""
    policy = RetryPolicy(profile=profile, max_attempts=max_attempts)
    clock = VirtualClock()
    retrier = Retrier(policy, clock=clock, rng=fixed_random(u))
    op = Script(*[STEPS[n] for n in names])

    async def main() -> Any:
        try:
            return await retrier.call(op)
        except Exception as error:
            return error

    outcome = anyio.run(main, backend=backend)

    # The model: SPEC 1.1 played by hand.
    played = [names[min(i, len(names) - 1)] for i in range(max_attempts)]
    end = next((i for i, n in enumerate(played) if n in ("ok", "bad")), max_attempts - 1)
    made = played[: end + 1]
    assert op.calls == len(made)
    quota = RetryQuota(RetryQuotaConfig.profile(profile), clock=VirtualClock())
    costs = [quota.cost_of(KIND_OF[n]) for n in made[:-1]]
    final = made[-1]
    if final == "ok":
        assert outcome == "ok"
        expected = min(500, 500 - sum(costs) + (costs[-1] if costs else 1))
    else:
        assert isinstance(outcome, Exception)
        assert outcome is op.raised[-1]
        expected = 500 - sum(costs)
    assert available(retrier) == expected
    assert all(0 < s <= 20 for s in clock.sleeps)
    # A retry sleeps its backoff unless that is 0 (u = 0, or a u so small that u * base underflows to 0).
    backoffs = [policy.throttling_backoff if n == "throttling" else policy.backoff for n in made[:-1]]
    delays = [backoff.delay(number, u) for number, backoff in enumerate(backoffs, 1)]  # type: ignore[union-attr]
    assert clock.sleeps == [delay for delay in delays if delay > 0]
    if final != "ok":
        history = history_of(outcome)
        assert history is not None
        assert [a.number for a in history.attempts] == list(range(1, len(made) + 1))
        assert history.gave_up == ("not_retryable" if final == "bad" else "max_attempts")


# ------------------------------------------------------------------- fixes from the design review
async def test_an_open_breaker_ends_the_call_before_the_sleep_not_after() -> None:
    """When the failure that trips the breaker is retryable, the call gives up at once with that
    failure (why: breaker), instead of sleeping and then being refused."""
    clock = VirtualClock()
    policy = RetryPolicy(
        max_attempts=5, backoff=FixedBackoff(1.0), throttling_backoff=FixedBackoff(1.0),
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=30.0),
    )
    retrier = Retrier(policy, clock=clock)

    async def down() -> None:
        raise ConnectionResetError("down")

    with pytest.raises(ConnectionResetError) as caught:
        await retrier.call(down)
    assert clock.sleeps == []
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "breaker"
    assert len(history.attempts) == 1
    quota = retrier.statistics().scopes[0].quota
    assert quota is not None
    assert quota.available == 500  # the retry it would have paid for was given back


async def test_a_breaker_that_reopens_before_the_delay_ends_still_allows_the_retry() -> None:
    """A breaker whose break ends before the backoff does lets the retry through (as a probe)."""
    clock = VirtualClock()
    policy = RetryPolicy(
        max_attempts=2, backoff=FixedBackoff(10.0), throttling_backoff=FixedBackoff(10.0),
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=5.0),
    )
    retrier = Retrier(policy, clock=clock)
    outcomes = iter([ConnectionResetError("once"), None])

    async def flaky() -> str:
        error = next(outcomes)
        if error is not None:
            raise error
        return "ok"

    assert await retrier.call(flaky) == "ok"
    assert clock.sleeps == [10.0]


async def test_retry_if_cannot_turn_an_exception_into_a_success() -> None:
    """An exception judged SUCCESS by retry_if is not retried and refunds nothing: it still fails."""
    policy = RetryPolicy(classifier=Classifier(retry_if=lambda e: OutcomeKind.SUCCESS))
    retrier = Retrier(policy, clock=VirtualClock())

    async def broken() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad") as caught:
        await retrier.call(broken)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    stats = retrier.statistics()
    assert (stats.successes, stats.failures) == (0, 1)


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_failing_give_up_hook_never_hides_the_real_error(
    is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook that raises is logged; the caller still gets the call's own last error."""

    def sync_hook(info: GiveUpInfo) -> None:
        raise RuntimeError("hook bug")

    async def async_hook(info: GiveUpInfo) -> None:
        raise RuntimeError("hook bug")

    policy = RetryPolicy(max_attempts=2, backoff=NoBackoff(), on_give_up=async_hook if is_async else sync_hook)
    retrier = Retrier(policy, clock=VirtualClock())

    async def down() -> None:
        raise ConnectionResetError("down")

    with pytest.raises(ConnectionResetError):
        await retrier.call(down)
    assert "on_give_up hook failed" in caplog.text


async def test_a_first_attempt_refused_by_the_initial_try_cost_has_a_history_and_reaches_the_hook() -> None:
    """With initial_try_cost > 0 and an empty quota, the call fails before any attempt, with history,
    a GaveUp reason of 'quota' and the on_give_up hook called."""
    seen: list[GiveUpInfo] = []
    config = RetryQuotaConfig(max_capacity=10, initial_try_cost=10)
    policy = RetryPolicy(quota=config, on_give_up=seen.append)
    quota = RetryQuota(config)
    assert quota.try_acquire(10)
    retrier = Retrier(policy, clock=VirtualClock(), quota=quota)

    async def never() -> None:
        raise AssertionError("no attempt may be made")

    with pytest.raises(RetryCapacityExceeded) as caught:
        await retrier.call(never)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "quota"
    assert history.attempts == ()
    assert [info.outcome.kind for info in seen] == [OutcomeKind.NOT_RETRYABLE]


class _DownQuota:
    """A remote quota (the RemoteQuota protocol) whose server cannot be reached and which fails closed."""

    def __init__(self) -> None:
        self._local = RetryQuota()

    name = "down"
    config = RetryQuota().config
    available = 0.0

    def cost_of(self, kind: OutcomeKind) -> int:
        return self._local.cost_of(kind)

    async def try_acquire(self, n: float) -> bool:
        raise BackendUnavailable("redis is down")

    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        raise BackendUnavailable("redis is down")

    async def release(self, n: float) -> None:
        raise BackendUnavailable("redis is down")

    def statistics(self) -> QuotaStatistics:
        return self._local.statistics()


class _DownBreaker:
    """A remote breaker (the RemoteBreaker protocol) whose server cannot be reached and which fails closed."""

    name = "down"

    async def acquire(self) -> int:
        raise BackendUnavailable("redis is down")

    async def record(self, *, success: bool, probe: int) -> None:
        raise BackendUnavailable("redis is down")

    def release(self, probe: int) -> None:
        pass

    def statistics(self) -> BreakerStatistics:
        return CircuitBreaker().statistics()


async def test_remote_state_failing_closed_after_an_attempt_is_a_give_up_with_history_and_hook() -> None:
    """BackendUnavailable from a remote quota ends the call like any refusal after an attempt: with the
    real error, its history (gave_up='backend'), a GaveUp event and the on_give_up hook."""
    seen: list[GiveUpInfo] = []
    events: list[Event] = []
    retrier = Retrier(RetryPolicy(on_give_up=seen.append), clock=VirtualClock(), quota=_DownQuota())
    retrier.subscribe(events.append)

    async def down() -> None:
        raise ConnectionResetError("down")

    with pytest.raises(ConnectionResetError) as caught:
        await retrier.call(down)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "backend"
    assert [info.history.gave_up for info in seen] == ["backend"]
    assert [e.why for e in events if isinstance(e, GaveUp)] == ["backend"]
    assert retrier.statistics().failures == 1


async def test_remote_breaker_failing_closed_before_an_attempt_is_a_give_up() -> None:
    """BackendUnavailable from a remote breaker before the first attempt: no attempt, history, hook."""
    seen: list[GiveUpInfo] = []
    retrier = Retrier(RetryPolicy(on_give_up=seen.append), clock=VirtualClock(), breaker=_DownBreaker())

    async def never() -> None:
        raise AssertionError("no attempt may be made")

    with pytest.raises(BackendUnavailable) as caught:
        await retrier.call(never)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "backend"
    assert history.attempts == ()
    assert len(seen) == 1
