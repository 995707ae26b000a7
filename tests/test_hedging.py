"""Hedged calls in the engine: when a hedge is sent, who wins, what it costs, and what is recorded.

Every async test runs on asyncio and trio in virtual time: the operations sleep scripted latencies, so
every time asserted is exact.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import (
    Attempt,
    AttemptFinished,
    AttemptTimeout,
    BreakerStatistics,
    CircuitBreaker,
    Classifier,
    Event,
    FixedBackoff,
    GaveUp,
    HedgeSent,
    HedgingConfig,
    OutcomeKind,
    QuotaStatistics,
    Retrier,
    RetryPolicy,
    RetryQuota,
    history_of,
    retry,
)
from asyncretry._engine._hedging import LatencyTracker

pytestmark = pytest.mark.anyio

ALWAYS = 1.0  # a budget that allows a hedge on every call (two with max_hedges=2)


class Unavailable(Exception):
    """A transient failure (retried); a ValueError is final."""


TRANSIENT = Classifier(transient=(Unavailable,))


def hedging(delay: float = 0.1, **changes: Any) -> HedgingConfig:
    changes.setdefault("budget_ratio", ALWAYS * changes.get("max_hedges", 1))
    return HedgingConfig(delay=delay, **changes)


def retrier(config: HedgingConfig | None = None, **changes: Any) -> Retrier:
    changes.setdefault("backoff", FixedBackoff(0.5))
    changes.setdefault("quota", False)
    changes.setdefault("classifier", TRANSIENT)
    return Retrier(RetryPolicy(hedging=config if config is not None else hedging(), **changes))


class Script:
    """An operation whose n-th start sleeps the n-th latency, then returns its number or raises."""

    def __init__(self, *steps: float | tuple[float, BaseException]) -> None:
        self.steps = list(steps)
        self.started: list[float] = []
        self.cancelled: list[int] = []
        self.finished: list[int] = []

    async def __call__(self) -> int:
        number = len(self.started) + 1
        self.started.append(anyio.current_time())
        step = self.steps[number - 1]
        latency, error = step if isinstance(step, tuple) else (step, None)
        try:
            await anyio.sleep(latency)
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(number)
            raise
        self.finished.append(number)
        if error is not None:
            raise error
        return number


def approx(expected: float) -> Any:
    """Virtual time is exact up to float rounding (0.1 + 0.05 == 0.15000000000000002)."""
    return pytest.approx(expected)


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    began = anyio.current_time()
    result = await fn()
    return result, anyio.current_time() - began


# ---------------------------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"delay": 0.0}, r"delay must be > 0 and <= 3600, got 0.0"),
        ({"delay": -1}, r"delay must be > 0 and <= 3600, got -1"),
        ({"delay": 7200}, r"delay must be > 0 and <= 3600, got 7200"),
        ({"quantile": 0.0}, r"quantile must be > 0 and < 1, got 0.0"),
        ({"quantile": 1.0}, r"quantile must be > 0 and < 1, got 1.0"),
        ({"samples": 5}, r"samples must be an integer >= 10 and <= 10000, got 5"),
        ({"min_samples": 0}, r"min_samples must be an integer >= 1 and <= 200, got 0"),
        ({"samples": 50, "min_samples": 51}, r"min_samples must be an integer >= 1 and <= 50, got 51"),
        ({"max_hedges": 0}, r"max_hedges must be an integer >= 1 and <= 10, got 0"),
        ({"max_hedges": 11}, r"max_hedges must be an integer >= 1 and <= 10, got 11"),
        ({"budget_ratio": 0.0}, r"budget_ratio must be > 0 and <= 1, got 0.0"),
        ({"budget_ratio": 1.5}, r"budget_ratio must be > 0 and <= 1, got 1.5"),
        ({"max_hedges": 2, "budget_ratio": 2.5}, r"budget_ratio must be > 0 and <= 2, got 2.5"),
        ({"budget_window": 0}, r"budget_window must be > 0 and <= 86400, got 0"),
        ({"delay": math.nan}, r"delay must be a finite number \(> 0 and <= 3600\), got nan"),
    ],
)
def test_bad_settings_fail_at_construction_naming_the_parameter(changes: dict[str, Any], message: str) -> None:
    """Each out-of-range setting is a ValueError naming the parameter, the value and the allowed range."""
    settings = {"delay": 0.1, **changes}
    with pytest.raises(ValueError, match=message):
        HedgingConfig(**settings)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"delay": "0.1"}, r"delay must be a number, got '0.1'"),
        ({"max_hedges": 1.0}, r"max_hedges must be an integer, got 1.0"),
        ({"quantile": True}, r"quantile must be a number, got True"),
    ],
)
def test_settings_of_the_wrong_type_are_type_errors(changes: dict[str, Any], message: str) -> None:
    """A string delay, a float count or a bool quantile is a TypeError naming the parameter."""
    with pytest.raises(TypeError, match=message):
        HedgingConfig(**{"delay": 0.1, **changes})


def test_durations_accept_timedelta_and_are_kept_as_seconds() -> None:
    """delay and budget_window take a timedelta; the config keeps float seconds, and p95() builds a quantile."""
    config = HedgingConfig(delay=timedelta(milliseconds=50), budget_window=timedelta(minutes=1))
    assert (config.delay, config.budget_window) == (0.05, 60.0)
    assert HedgingConfig.p95(fallback=0.2) == HedgingConfig(delay=0.2, quantile=0.95)


def test_a_policy_takes_only_a_hedging_config() -> None:
    """RetryPolicy(hedging=...) refuses anything but a HedgingConfig or None, with a TypeError."""
    with pytest.raises(TypeError, match=r"hedging must be a HedgingConfig or None, got 0.1"):
        RetryPolicy(hedging=0.1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- latencies
def test_the_tracker_keeps_the_last_latencies_in_bounded_memory() -> None:
    """Past its size the ring forgets the oldest latency: 1,000 records keep 10, the quantile of the last 10."""
    tracker = LatencyTracker(10)
    for value in range(1000):
        tracker.record(float(value))
    assert (len(tracker), tracker.count) == (10, 1000)
    assert tracker.quantile(0.5) == 994.0
    assert tracker.quantile(0.95) == 999.0
    assert math.isnan(LatencyTracker(10).quantile(0.5))


@given(st.lists(st.floats(0.0, 100.0), min_size=1, max_size=60), st.floats(0.01, 0.99))
def test_a_small_tracker_gives_the_nearest_rank_quantile_of_what_it_keeps(values: list[float], q: float) -> None:
    """With a ring of 10 (re-sorted on every record) the quantile is exactly the nearest rank of the last 10."""
    tracker = LatencyTracker(10)
    for value in values:
        tracker.record(value)
    kept = sorted(values[-10:])
    assert tracker.quantile(q) == kept[max(0, math.ceil(q * len(kept)) - 1)]


async def test_the_quantile_replaces_the_fixed_delay_once_enough_latencies_are_known() -> None:
    """With quantile=0.9 and min_samples=10, the first 10 calls hedge after the fixed delay, later ones after p90."""
    config = HedgingConfig(delay=0.5, quantile=0.9, min_samples=10, samples=10, budget_ratio=ALWAYS)
    shared = retrier(config)
    for _ in range(10):
        assert await shared.call(Script(0.1)) == 1  # each answers in 0.1 s: no hedge
    (scope,) = shared.statistics().scopes
    (stats,) = scope.hedging
    assert (stats.delay, stats.latencies, stats.calls, stats.hedges) == (0.1, 10, 10, 0)
    slow = Script(2.0, 0.1)
    result, elapsed = await timed(lambda: shared.call(slow))
    assert (result, elapsed) == (2, approx(0.2))
    assert slow.started == [approx(slow.started[0]), approx(slow.started[0] + 0.1)]


# ----------------------------------------------------------------------------------- the race
async def test_an_answer_within_the_delay_sends_no_hedge() -> None:
    """A call that answers before the hedging delay is one attempt, as without hedging."""
    shared = retrier()
    op = Script(0.05)
    assert await shared.call(op) == 1
    stats = shared.statistics()
    assert (stats.attempts, stats.hedges, len(op.started)) == (1, 0, 1)


async def test_a_slow_attempt_is_hedged_and_the_first_answer_wins() -> None:
    """No answer after 0.1 s: a hedge goes; it answers at 0.15 s, wins, and the first attempt is cancelled."""
    shared = retrier()
    op = Script(1.0, 0.05)
    result, elapsed = await timed(lambda: shared.call(op))
    assert (result, elapsed) == (2, approx(0.15))
    assert (op.cancelled, op.finished) == ([1], [2])
    stats = shared.statistics()
    assert (stats.calls, stats.attempts, stats.hedges, stats.retries, stats.successes) == (1, 2, 1, 0, 1)


async def test_the_first_attempt_still_wins_when_it_answers_before_the_hedge() -> None:
    """Hedged at 0.1 s, the first attempt answers at 0.12 s and wins; the hedge (0.5 s) is cancelled."""
    op = Script(0.12, 0.5)
    result, elapsed = await timed(lambda: retrier().call(op))
    assert (result, elapsed) == (1, approx(0.12))
    assert (op.finished, op.cancelled) == ([1], [2])


async def test_the_history_marks_hedges_and_the_attempts_that_overlapped() -> None:
    """The hedge fails at 0.15 s while #1 runs; #1 fails at 0.3 s and ends the call: both recorded, no delays."""
    op = Script((0.3, Unavailable("1")), (0.05, Unavailable("2")))
    with pytest.raises(Unavailable, match="1") as caught:
        await retrier(max_attempts=2).call(op)
    history = history_of(caught.value)
    assert history is not None
    assert [(a.number, a.kind, a.hedge, a.delay_after, a.duration) for a in history.attempts] == [
        (1, OutcomeKind.TRANSIENT, False, None, approx(0.3)),
        (2, OutcomeKind.TRANSIENT, True, None, approx(0.05)),
    ]
    assert (history.gave_up, history.hedges, history.elapsed) == ("max_attempts", 1, approx(0.3))


async def test_a_hedged_call_cut_by_a_deadline_gives_up_with_its_attempts() -> None:
    """A hedged call cancelled by an enclosing deadline records its running attempts as CANCELLED; the error an
    integration makes for it (Attempts.give_up) carries that history with why, counted and reported once."""
    op = Script(1.0, 1.0)
    shared = retrier()
    ended: list[Any] = []
    shared.subscribe(lambda event: ended.append(event.why) if isinstance(event, GaveUp) else None)
    attempts = shared.attempts()
    with anyio.move_on_after(0.3) as scope:
        await attempts.hedged(hedging(), lambda _attempt: op())
    assert scope.cancelled_caught
    assert sorted(op.cancelled) == [1, 2]
    error = TimeoutError("the call's deadline")
    await attempts.give_up(error, "deadline")
    history = history_of(error)
    assert history is not None
    assert [(a.number, a.kind, a.reason, a.hedge, a.duration) for a in history.attempts] == [
        (1, OutcomeKind.CANCELLED, "cancelled", False, approx(0.3)),
        (2, OutcomeKind.CANCELLED, "cancelled", True, approx(0.2)),
    ]
    assert (history.gave_up, ended, shared.statistics().failures) == ("deadline", ["deadline"], 1)
    with pytest.raises(RuntimeError, match="already ended \\(deadline\\)"):
        await attempts.give_up(TimeoutError(), "deadline")


async def test_a_call_that_succeeded_cannot_give_up() -> None:
    """Attempts.give_up is refused, clearly, for a call that already ended with a success."""
    attempts = retrier().attempts()
    assert await attempts.hedged(hedging(), lambda _attempt: Script(0.01)()) == 1
    with pytest.raises(RuntimeError, match="already ended \\(succeeded\\)"):
        await attempts.give_up(TimeoutError(), "deadline")


async def test_a_won_race_records_the_loser_as_cancelled() -> None:
    """After a hedge wins, the first attempt's record is CANCELLED with the winner named, lasting until the win."""
    op = Script(1.0, 0.05)
    attempts = retrier().attempts()
    assert await attempts.hedged(hedging(), lambda _attempt: op()) == 2
    history = attempts.history()
    assert [(a.number, a.kind, a.reason, a.hedge, a.duration) for a in history.attempts] == [
        (1, OutcomeKind.CANCELLED, "attempt #2 answered first", False, approx(0.15)),
        (2, OutcomeKind.SUCCESS, "ok", True, approx(0.05)),
    ]
    assert (history.elapsed, history.gave_up) == (approx(0.15), None)


async def test_a_failing_hedge_does_not_end_the_call_while_the_first_attempt_runs() -> None:
    """The hedge fails at 0.11 s; the first attempt goes on and answers at 0.3 s: the call succeeds with it."""
    shared = retrier()
    op = Script(0.3, (0.01, Unavailable("hedge failed")))
    result, elapsed = await timed(lambda: shared.call(op))
    assert (result, elapsed) == (1, approx(0.3))
    assert shared.statistics().failures == 0


async def test_a_final_error_of_a_hedge_waits_for_the_attempt_still_running() -> None:
    """Even a non-retryable failure of the hedge decides nothing while the first attempt still runs."""
    op = Script(0.3, (0.01, ValueError("final")))
    assert await retrier().call(op) == 1


async def test_when_every_attempt_of_a_round_fails_the_call_retries_after_the_backoff() -> None:
    """Both attempts of round 1 fail (at 0.2 s and 0.15 s); the retry begins 0.5 s after the last failure."""
    shared = retrier(max_attempts=3)
    op = Script((0.2, Unavailable("1")), (0.05, Unavailable("2")), 0.01)
    result, elapsed = await timed(lambda: shared.call(op))
    assert (result, elapsed) == (3, approx(0.71))
    assert op.started[2] - op.started[0] == approx(0.7)
    stats = shared.statistics()
    assert (stats.attempts, stats.hedges, stats.retries) == (3, 1, 1)


async def test_hedges_count_towards_max_attempts() -> None:
    """With max_attempts=2, the first attempt and its hedge are all the call may send: both fail, it gives up."""
    shared = retrier(max_attempts=2)
    op = Script((0.2, Unavailable("1")), (0.05, Unavailable("2")))
    with pytest.raises(Unavailable, match="1"):
        await shared.call(op)
    assert len(op.started) == 2
    assert shared.statistics().failures == 1


async def test_no_hedge_is_sent_when_the_policy_allows_one_attempt() -> None:
    """max_attempts=1 leaves no attempt for a hedge: the slow call simply takes its time."""
    op = Script(1.0)
    result, elapsed = await timed(lambda: retrier(max_attempts=1).call(op))
    assert (result, elapsed, len(op.started)) == (1, approx(1.0), 1)


async def test_several_hedges_go_one_delay_apart() -> None:
    """With max_hedges=2, hedges go at 0.1 s and 0.2 s; the third attempt answers first at 0.25 s."""
    op = Script(1.0, 1.0, 0.05)
    result, elapsed = await timed(lambda: retrier(hedging(max_hedges=2), max_attempts=3).call(op))
    assert (result, elapsed) == (3, approx(0.25))
    assert [t - op.started[0] for t in op.started] == [0.0, approx(0.1), approx(0.2)]
    assert sorted(op.cancelled) == [1, 2]


async def test_the_budget_bounds_hedges_to_a_share_of_calls() -> None:
    """budget_ratio=0.1: 40 calls that would all be hedged send 4 hedges (10% extra requests), no more."""
    shared = retrier(HedgingConfig(delay=0.1, budget_ratio=0.1, budget_window=60.0))
    for _ in range(40):
        await shared.call(Script(0.5, 0.05))
    stats = shared.statistics()
    assert (stats.calls, stats.hedges, stats.attempts) == (40, 4, 44)
    (hedge_stats,) = stats.scopes[0].hedging
    assert (hedge_stats.hedges, hedge_stats.refused) == (4, 36)


async def test_a_hedge_never_waits_for_the_rate_limit() -> None:
    """With a rate limit of 1 per second (burst 1) the first attempt takes the token: no hedge is sent."""
    op = Script(1.0)
    result, elapsed = await timed(lambda: retrier(rate_limit=1.0).call(op))
    assert (result, elapsed, len(op.started)) == (1, approx(1.0), 1)


async def test_no_hedge_goes_when_the_delay_reaches_past_the_deadline() -> None:
    """A 0.1 s deadline leaves no room for a hedge after 0.1 s: the one attempt times out."""
    op = Script(1.0)
    with pytest.raises(AttemptTimeout):
        await retrier(deadline=0.1, max_attempts=1).call(op)
    assert len(op.started) == 1


async def test_each_attempt_has_its_own_time_limit() -> None:
    """attempt_timeout=0.3: attempt 1 times out at 0.3 s, its hedge (sent at 0.1 s) answers at 0.35 s."""
    op = Script(1.0, 0.25)
    shared = retrier(attempt_timeout=0.3)
    result, elapsed = await timed(lambda: shared.call(op))
    assert (result, elapsed) == (2, approx(0.35))


async def test_cancelling_the_caller_cancels_every_attempt() -> None:
    """Cancelled at 0.5 s, the call stops the first attempt and its hedge at once; nothing is left running."""
    shared = retrier()
    op = Script(1.0, 1.0)
    with anyio.move_on_after(0.5) as scope:
        await shared.call(op)
    assert scope.cancelled_caught
    assert (sorted(op.cancelled), op.finished) == ([1, 2], [])
    await anyio.sleep(2.0)
    assert op.finished == []
    stats = shared.statistics()
    assert (stats.attempts, stats.hedges, stats.successes, stats.failures) == (2, 1, 0, 0)


async def test_results_that_lose_the_race_are_discarded() -> None:
    """Both attempts answer at 0.2 s: one wins, the other's result goes to discard, so it can be released."""
    shared = retrier()
    discarded: list[int] = []
    op = Script(0.2, 0.1)

    async def discard(value: int) -> None:
        discarded.append(value)

    attempts = shared.attempts()
    winner = await attempts.hedged(hedging(), lambda _attempt: op(), discard)
    assert sorted([winner, *discarded]) == [1, 2]
    assert len(discarded) == 1


async def test_a_failed_attempt_overlapped_by_another_is_discarded_too() -> None:
    """The hedge's failing result (a retryable result) is discarded while the first attempt runs on and wins."""
    shared = retrier()
    discarded: list[int] = []
    op = Script(0.3, 0.01)

    async def send(attempt: Attempt) -> int:
        number = await op()
        if number == 2:
            attempt.retry_result(number, reason="not ready")
        return number

    async def discard(value: int) -> None:
        discarded.append(value)

    assert await shared.attempts().hedged(hedging(), send, discard) == 1
    assert discarded == [2]


async def test_hedges_are_events_and_counted() -> None:
    """HedgeSent names the hedge, the attempt it hedges and the delay; only attempts that ended are AttemptFinished."""
    shared = retrier()
    events: list[Event] = []
    shared.subscribe(events.append)
    await shared.call(Script(1.0, 0.05))
    sent = [e for e in events if isinstance(e, HedgeSent)]
    assert [(e.attempt, e.hedging, e.delay, e.source) for e in sent] == [(2, 1, approx(0.1), "default")]
    assert sent[0].log_level == 10  # DEBUG: hedges are routine
    assert [(e.attempt, e.outcome) for e in events if isinstance(e, AttemptFinished)] == [(2, "success")]


async def test_the_decorator_hedges_with_a_hedging_policy() -> None:
    """@retry(policy) with hedging hedges the decorated coroutine function like Retrier.call."""
    op = Script(1.0, 0.05)

    @retry(RetryPolicy(hedging=hedging(), quota=False, classifier=TRANSIENT))
    async def fetch() -> int:
        return await op()

    result, elapsed = await timed(fetch)
    assert (result, elapsed) == (2, approx(0.15))


def test_synchronous_code_cannot_hedge() -> None:
    """sync_call and @retry on a plain function refuse a hedging policy with a ValueError that says why."""
    shared = retrier()
    with pytest.raises(ValueError, match="hedging"):
        shared.sync_call(lambda: 1)
    with pytest.raises(ValueError, match="hedging"):
        retry(RetryPolicy(hedging=hedging()))(lambda: 1)


# ------------------------------------------------------------------------------- remote shared state
class AwaitedQuota:
    """A quota kept "on a server" (the RemoteQuota protocol, every change awaited) over an in-process one."""

    def __init__(self) -> None:
        self.local = RetryQuota()
        self.name = "awaited"
        self.config = self.local.config

    @property
    def available(self) -> float:
        return self.local.available

    def cost_of(self, kind: OutcomeKind) -> int:
        return self.local.cost_of(kind)

    async def try_acquire(self, n: float) -> bool:
        await anyio.lowlevel.checkpoint()
        return self.local.try_acquire(n)

    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        await self.local.acquire(n, timeout=timeout)

    async def release(self, n: float) -> None:
        await anyio.lowlevel.checkpoint()
        self.local.release(n)

    def statistics(self) -> QuotaStatistics:
        return self.local.statistics()


class AwaitedBreaker:
    """A closed breaker kept "on a server" (the RemoteBreaker protocol)."""

    name = "awaited"

    async def acquire(self) -> int:
        return 0

    async def record(self, *, success: bool, probe: int) -> None:
        await anyio.lowlevel.checkpoint()

    def release(self, probe: int) -> None:
        pass

    def statistics(self) -> BreakerStatistics:
        return CircuitBreaker().statistics()


async def test_a_hedged_call_pays_and_refunds_a_remote_quota() -> None:
    """With the quota on a server: round 1 (the hedge fails first, then #1) pays a retry; round 2's success
    refunds it: the quota ends where it began."""
    quota = AwaitedQuota()
    policy = RetryPolicy(hedging=hedging(), backoff=FixedBackoff(0.5), classifier=TRANSIENT)
    shared = Retrier(policy, quota=quota)
    op = Script((0.3, Unavailable("1")), (0.05, Unavailable("2")), 0.01)
    result, elapsed = await timed(lambda: shared.call(op))
    assert (result, elapsed) == (3, approx(0.81))
    assert quota.available == quota.config.max_capacity
    stats = shared.statistics()
    assert (stats.attempts, stats.hedges, stats.retries) == (3, 1, 1)


async def test_a_scope_with_a_remote_breaker_is_not_hedged() -> None:
    """A breaker on a server would cost a round trip per hedge: such a scope's calls are sent once."""
    op = Script(1.0)
    policy = RetryPolicy(hedging=hedging(), quota=False, classifier=TRANSIENT)
    result, elapsed = await timed(lambda: Retrier(policy, breaker=AwaitedBreaker()).call(op))
    assert (result, elapsed, len(op.started)) == (1, approx(1.0), 1)


async def test_results_are_judged_by_the_policy_as_without_hedging() -> None:
    """retry_if_result applies to every attempt of a hedged call: a hedge answering "not ready" does not win."""
    classifier = Classifier(transient=(Unavailable,), retry_if_result=lambda result: result == 2)
    op = Script(0.3, 0.01)
    result, elapsed = await timed(lambda: retrier(classifier=classifier).call(op))
    assert (result, elapsed) == (1, approx(0.3))
