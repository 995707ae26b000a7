"""Cancelling a call at every place it can wait leaves nothing behind, and cancellation is never retried.

The places: the backoff sleep, the adaptive limiter's wait (after a throttle), a fixed rate limit's wait,
a waiting-mode quota's wait, and the attempt itself. Whatever the call held comes back: the tokens paid
for a retry that will now never happen, its place in a queue, a half-open breaker's probe slot. All on
asyncio and trio in virtual time, cancelled from a sibling task (a cancel scope *deadline* would make the
engine give up before sleeping instead, see the last tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asyncretry import (
    AdaptiveRateLimiter,
    BreakerState,
    CircuitBreakerConfig,
    CircuitOpenError,
    Classifier,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    RetryScheduled,
    ScopeStatistics,
    history_of,
)
from asyncretry.testing import fixed_random


class ServiceError(Exception):
    """A scripted service error carrying an AWS error code."""

    def __init__(self, code: str = "ServiceUnavailable") -> None:
        self.error_code = code
        super().__init__(code)


class Stop(BaseException):
    """A BaseException that is not an Exception (like KeyboardInterrupt)."""


CLASSIFIER = Classifier(transient=(ServiceError,))


def _scope(retrier: Retrier) -> ScopeStatistics:
    scopes = retrier.statistics().scopes
    assert len(scopes) == 1
    return scopes[0]


def _quota(retrier: Retrier) -> float:
    quota = _scope(retrier).quota
    assert quota is not None
    return quota.available


async def _wait_until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(60):
        while not condition():
            await anyio.sleep(0.001)


async def _cancel_when(
    call: Callable[[], Awaitable[Any]], condition: Callable[[], bool]
) -> tuple[list[Any], float]:
    """Run ``call`` in a task, cancel it once ``condition`` holds; return (what it returned, cancel time)."""
    returned: list[Any] = []

    async def run() -> None:
        returned.append(await call())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await _wait_until(condition)
        cancelled_at = anyio.current_time()
        tg.cancel_scope.cancel()
    return returned, cancelled_at


def _failing(counter: list[int], *, fail: int = 1_000, code: str = "ServiceUnavailable") -> Callable[[], Any]:
    async def operation() -> str:
        counter.append(1)
        await anyio.lowlevel.checkpoint()
        if len(counter) <= fail:
            raise ServiceError(code)
        return "ok"

    return operation


# ------------------------------------------------------------------------------------ the waits
@pytest.mark.anyio
@pytest.mark.parametrize("way", ["call", "attempts"])
@pytest.mark.parametrize("waiting_mode", [False, True], ids=["circuit-breaker-mode", "waiting-mode"])
async def test_cancel_during_the_backoff_sleep_refunds_the_retry(way: str, waiting_mode: bool) -> None:
    """Cancelled while sleeping before a retry: the 5 tokens paid for it come back, nothing is retried."""
    config = RetryQuotaConfig(circuit_breaker_mode=not waiting_mode, refill_units_per_second=0.01)
    retrier = Retrier(RetryPolicy(classifier=CLASSIFIER, quota=config), rng=fixed_random(0.5))
    scheduled: list[RetryScheduled] = []
    retrier.subscribe(lambda e: scheduled.append(e) if isinstance(e, RetryScheduled) else None)
    made: list[int] = []
    operation = _failing(made)

    async def call() -> Any:
        if way == "call":
            return await retrier.call(operation)
        async for attempt in retrier.attempts():
            async with attempt:
                return await operation()
        return None

    started = anyio.current_time()
    sleeping: list[float] = []

    def in_the_sleep() -> bool:
        # Paid for (495 left) and half-way through the 0.5 s backoff.
        if scheduled and not sleeping:
            sleeping.append(anyio.current_time())
        return bool(sleeping) and anyio.current_time() >= sleeping[0] + 0.25

    returned, cancelled_at = await _cancel_when(call, in_the_sleep)
    assert returned == []
    assert scheduled[0].delay == 0.5
    assert cancelled_at - started < 0.5
    assert len(made) == 1
    assert _quota(retrier) == 500
    quota = _scope(retrier).quota
    assert quota is not None
    assert (quota.acquired_total, quota.released_total) == (5, 5)


@pytest.mark.anyio
async def test_cancel_while_the_adaptive_limiter_makes_a_retry_wait() -> None:
    """Cancelled in the limiter's queue after a throttle: the retry cost comes back and the queue is empty."""
    policy = RetryPolicy(mode="adaptive", classifier=CLASSIFIER)
    # The limiter's bucket starts with no token at all (its random phase pinned at 0): the retry must wait.
    limiter = AdaptiveRateLimiter(policy.limiter_config, rng=lambda: 0.0)
    retrier = Retrier(policy, rng=fixed_random(0.1), limiter=limiter)
    made: list[int] = []

    def waiting_for_a_token() -> bool:
        limiter = _scope(retrier).limiter if made else None
        return limiter is not None and limiter.waiting == 1

    returned, _ = await _cancel_when(
        lambda: retrier.call(_failing(made, fail=1, code="ThrottlingException")), waiting_for_a_token
    )
    assert returned == []
    assert len(made) == 1
    scope = _scope(retrier)
    assert scope.limiter is not None
    assert scope.limiter.enabled
    assert scope.limiter.waiting == 0
    assert _quota(retrier) == 500  # the throttling retry's 5 tokens came back
    # Nobody is left in line: the next call gets the next token and goes through.
    more: list[int] = []
    assert await retrier.call(_failing(more, fail=0)) == "ok"
    assert _scope(retrier).limiter.waiting == 0  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_cancel_during_a_fixed_rate_limit_wait_before_a_retry() -> None:
    """Cancelled waiting for the rate limit's next token: the retry cost comes back, no waiter remains."""
    policy = RetryPolicy(classifier=CLASSIFIER, rate_limit=1.0)
    retrier = Retrier(policy, rng=fixed_random(0.1))
    made: list[int] = []

    def waiting_for_a_token() -> bool:
        bucket = _scope(retrier).rate_limit if made else None
        return bucket is not None and bucket.waiting == 1

    started = anyio.current_time()
    returned, cancelled_at = await _cancel_when(lambda: retrier.call(_failing(made)), waiting_for_a_token)
    assert returned == []
    assert len(made) == 1
    assert cancelled_at - started < 1.0  # before the bucket's next token
    bucket = _scope(retrier).rate_limit
    assert bucket is not None
    assert bucket.waiting == 0
    assert bucket.cancelled == 1
    assert _quota(retrier) == 500


@pytest.mark.anyio
async def test_cancel_during_a_first_attempt_rate_limit_wait() -> None:
    """A call cancelled while queued for its very first attempt leaves the queue and the quota untouched."""
    retrier = Retrier(RetryPolicy(classifier=CLASSIFIER, rate_limit=1.0))
    first: list[int] = []
    assert await retrier.call(_failing(first, fail=0)) == "ok"  # takes the only token
    made: list[int] = []

    def queued() -> bool:
        bucket = _scope(retrier).rate_limit
        return bucket is not None and bucket.waiting == 1

    returned, _ = await _cancel_when(lambda: retrier.call(_failing(made, fail=0)), queued)
    assert returned == []
    assert made == []
    bucket = _scope(retrier).rate_limit
    assert bucket is not None
    assert (bucket.waiting, bucket.cancelled) == (0, 1)
    assert _quota(retrier) == 500


@pytest.mark.anyio
async def test_cancel_while_waiting_for_quota_in_waiting_mode() -> None:
    """Waiting mode: a retry cancelled while waiting for tokens takes none, and the quota keeps refilling."""
    config = RetryQuotaConfig(
        max_capacity=10, retry_cost=10, timeout_retry_cost=10, throttling_retry_cost=10,
        refill_units_per_second=1.0, circuit_breaker_mode=False,
    )
    quota = RetryQuota(config)
    assert quota.try_acquire(10)  # empty: the retry has to wait 10 s for its 10 tokens
    retrier = Retrier(RetryPolicy(classifier=CLASSIFIER), rng=fixed_random(0.5), quota=quota)
    made: list[int] = []
    started = anyio.current_time()
    returned, cancelled_at = await _cancel_when(
        lambda: retrier.call(_failing(made)), lambda: quota.statistics().waiting == 1 and
        anyio.current_time() >= started + 3.0
    )
    assert returned == []
    assert len(made) == 1
    stats = quota.statistics()
    assert stats.waiting == 0
    assert stats.acquired_total == 10  # only the initial drain: the cancelled retry took nothing
    assert stats.available == pytest.approx(cancelled_at - started, abs=1e-9)
    await anyio.sleep(20)
    assert quota.available == 10  # refilled to the brim; nothing leaked, nothing was counted twice


@pytest.mark.anyio
async def test_cancel_during_an_attempt_is_not_retried_and_spends_the_retry_it_made() -> None:
    """Cancelled in the middle of attempt 2: no attempt 3; attempt 2 happened, so its 5 tokens stay spent."""
    retrier = Retrier(RetryPolicy(classifier=CLASSIFIER), rng=fixed_random(0.5))
    made: list[int] = []

    async def operation() -> None:
        made.append(1)
        if len(made) == 1:
            raise ServiceError()
        await anyio.sleep_forever()

    returned, _ = await _cancel_when(lambda: retrier.call(operation), lambda: len(made) == 2)
    assert returned == []
    await anyio.sleep(60)  # nothing left running would make a further attempt
    assert len(made) == 2
    assert _quota(retrier) == 495
    stats = retrier.statistics()
    assert (stats.attempts, stats.retries, stats.successes, stats.failures) == (2, 1, 0, 0)


@pytest.mark.anyio
async def test_cancel_during_a_half_open_probe_frees_the_probe_slot() -> None:
    """A probe cancelled mid-attempt frees its half-open slot: the next call probes and closes the circuit."""
    breaker = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=5.0)
    retrier = Retrier(RetryPolicy(max_attempts=1, classifier=CLASSIFIER, breaker=breaker))
    with pytest.raises(ServiceError):
        await retrier.call(_failing([]))
    await anyio.sleep(5.0)
    probe_started = anyio.Event()

    async def hang() -> None:
        probe_started.set()
        await anyio.sleep_forever()

    def probing() -> bool:
        stats = _scope(retrier).breaker
        return probe_started.is_set() and stats is not None and stats.probes_in_flight == 1

    async def run_probe() -> None:
        await retrier.call(hang)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_probe)
        await _wait_until(probing)
        with pytest.raises(CircuitOpenError):  # the only probe slot is taken
            await retrier.call(_failing([], fail=0))
        tg.cancel_scope.cancel()

    stats = _scope(retrier).breaker
    assert stats is not None
    assert stats.probes_in_flight == 0
    assert stats.state is BreakerState.HALF_OPEN
    assert await retrier.call(_failing([], fail=0)) == "ok"
    closed = _scope(retrier).breaker
    assert closed is not None
    assert closed.state is BreakerState.CLOSED


# ------------------------------------------------------------------------- never retried
@pytest.mark.anyio
@pytest.mark.parametrize("attempt_timeout", [None, 30.0])
async def test_cancellation_is_never_retried_even_if_retry_if_says_yes(attempt_timeout: float | None) -> None:
    """A ``retry_if`` that retries everything never retries cancellation, attempt timeout or not."""
    policy = RetryPolicy(
        classifier=Classifier(retry_if=lambda error: True), attempt_timeout=attempt_timeout, max_attempts=5
    )
    retrier = Retrier(policy, rng=fixed_random(0.5))
    made: list[int] = []

    async def operation() -> None:
        made.append(1)
        await anyio.sleep(10)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(retrier.call, operation)
            await _wait_until(lambda: len(made) == 1)
            await anyio.sleep(1)
            scope.cancel()
    assert scope.cancelled_caught
    await anyio.sleep(60)
    assert len(made) == 1
    stats = retrier.statistics()
    assert (stats.attempts, stats.retries) == (1, 0)
    assert _quota(retrier) == 500


@pytest.mark.anyio
@pytest.mark.parametrize("error_type", [Stop, KeyboardInterrupt])
async def test_base_exceptions_pass_through_untouched_and_unretried(error_type: type[BaseException]) -> None:
    """A BaseException that is not an Exception propagates as is after one attempt, whatever retry_if says."""
    retrier = Retrier(RetryPolicy(classifier=Classifier(retry_if=lambda error: True)), rng=fixed_random(0.5))
    made: list[int] = []
    raised = error_type("stop")

    async def operation() -> None:
        made.append(1)
        raise raised

    with pytest.raises(error_type) as caught:
        await retrier.call(operation)
    assert caught.value is raised
    assert history_of(caught.value) is None
    assert len(made) == 1
    assert _quota(retrier) == 500


# ---------------------------------------------------------------------- cancel scope deadlines
@pytest.mark.anyio
async def test_an_enclosing_deadline_shorter_than_the_backoff_gives_up_at_once() -> None:
    """Under ``move_on_after(0.3)`` a 0.5 s backoff never starts: the real error comes at once, refunded."""
    retrier = Retrier(RetryPolicy(classifier=CLASSIFIER), rng=fixed_random(0.5))
    made: list[int] = []
    started = anyio.current_time()
    with anyio.move_on_after(0.3) as scope, pytest.raises(ServiceError) as caught:
        await retrier.call(_failing(made))
    assert not scope.cancelled_caught
    assert anyio.current_time() == started
    assert len(made) == 1
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "deadline"
    assert _quota(retrier) == 500
