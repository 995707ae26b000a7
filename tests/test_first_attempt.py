"""Retrier.begin_first (deprecated): a call's first attempt begun before the call has an object, under the same rules.

Every call now starts with ``retrier.attempts()``, whose first attempt begins at once when nothing
could make it wait. The old way stays, with a DeprecationWarning, for code that used it: whatever way
a call takes (a plain success that never makes the call's object, or :meth:`FirstAttempt.go_on` into a
full call), it leaves the same counters, quota, breaker samples, events and history as the same call
through ``retrier.attempts()``; and ``begin_first`` declines whenever something could make the first
attempt wait or refuse it.
"""

from __future__ import annotations

from typing import Any

import pytest

import asyncretry
from asyncretry import (
    AttemptFinished,
    BudgetStatistics,
    BudgetTicket,
    CircuitBreaker,
    CircuitBreakerConfig,
    Event,
    EventBus,
    NoBackoff,
    OutcomeKind,
    Retrier,
    RetryBudget,
    RetryBudgetConfig,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
)
from asyncretry._engine._first import FirstAttempt
from asyncretry.testing import VirtualClock

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:.*begin_first.*:DeprecationWarning")]


def test_the_old_ways_in_warn_and_still_work() -> None:
    """begin_first, asyncretry.FirstAttempt and Attempts.begin_now warn that they are deprecated and still work."""
    retrier = Retrier(clock=VirtualClock())
    with pytest.warns(DeprecationWarning, match=r"begin_first\(\) is deprecated"):
        first = retrier.begin_first()
    assert first is not None
    with pytest.warns(DeprecationWarning, match="FirstAttempt is deprecated"):
        assert asyncretry.FirstAttempt is FirstAttempt
    assert isinstance(first.succeeded(), FirstAttempt)
    assert "FirstAttempt" not in asyncretry.__all__
    with pytest.warns(DeprecationWarning, match=r"begin_now\(\) is deprecated"):
        attempt = retrier.attempts().begin_now()
    assert attempt is not None
    assert attempt.number == 1


def retrier_with_spent_quota(clock: VirtualClock, **parts: Any) -> tuple[Retrier, RetryQuota]:
    """A standard-mode retrier whose shared quota is 20 tokens short, so that a refund shows."""
    quota = RetryQuota(RetryQuotaConfig(), clock=clock)
    assert quota.try_acquire(20)
    policy = RetryPolicy(backoff=NoBackoff(), breaker=CircuitBreakerConfig())
    return Retrier(policy, clock=clock, quota=quota, **parts), quota


def counters(retrier: Retrier) -> tuple[int, int, int, int, int]:
    stats = retrier.statistics()
    return stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures


def finished(events: list[Event]) -> list[tuple[int, str, str | None]]:
    return [(e.attempt, e.outcome, e.target) for e in events if isinstance(e, AttemptFinished)]


async def test_a_plain_first_success_leaves_what_the_same_success_through_attempts_leaves() -> None:
    results = []
    for way in ("first", "attempts"):
        clock = VirtualClock()
        seen: list[Event] = []
        bus = EventBus()
        bus.subscribe(seen.append)
        retrier, quota = retrier_with_spent_quota(clock, events=bus)
        if way == "first":
            first = retrier.begin_first(scope="api")
            assert first is not None
            clock.advance(0.25)  # the attempt's work
            record: Any = first.succeeded(lambda: "GET https://api/x")
        else:
            record = retrier.attempts(scope="api", label=lambda: "GET https://api/x")
            async for attempt in record:
                async with attempt:
                    clock.advance(0.25)
        (breaker,) = [s.breaker for s in retrier.statistics().scopes]
        assert breaker is not None
        history = record.history()
        results.append((
            counters(retrier), quota.available, breaker.successes, finished(seen), record.number, record.gave_up,
            record.total_delay, record.scope_key,
            [(a.number, a.kind, a.duration, a.delay_after) for a in history.attempts], history.elapsed,
        ))
    first_way, attempts_way = results
    assert first_way == attempts_way
    assert first_way[:4] == ((1, 1, 0, 1, 0), 481, 1, [(1, "success", "GET https://api/x")])


async def test_go_on_continues_as_a_call_with_the_first_attempt_already_begun() -> None:
    clock = VirtualClock()
    retrier, quota = retrier_with_spent_quota(clock)
    first = retrier.begin_first(scope="api")
    assert first is not None
    attempts, attempt = first.go_on(label=lambda: "GET https://api/x")
    assert attempt.number == 1
    async with attempt:
        attempt.retry_result("503", reason="HTTP 503")
    assert attempts.retrying
    async for attempt in attempts:
        async with attempt:
            attempt.result = "200"
    assert attempts.gave_up is None
    assert [(a.number, a.kind) for a in attempts.history().attempts] == [
        (1, OutcomeKind.TRANSIENT), (2, OutcomeKind.SUCCESS),
    ]
    assert counters(retrier) == (1, 2, 1, 1, 0)  # one call, counted once
    assert quota.available == 480  # the retry paid 5 and its success gave the 5 back: 480 as before


async def test_a_first_attempt_ends_once_and_is_a_record_only_after_its_success() -> None:
    retrier = Retrier(RetryPolicy(), clock=VirtualClock())
    first = retrier.begin_first()
    assert first is not None
    with pytest.raises(RuntimeError, match="only a first attempt that succeeded"):
        first.history()
    first.succeeded()
    with pytest.raises(RuntimeError, match="already ended"):
        first.succeeded()
    with pytest.raises(RuntimeError, match="already ended"):
        first.go_on()
    went_on = retrier.begin_first()
    assert went_on is not None
    went_on.go_on()
    with pytest.raises(RuntimeError, match="already ended"):
        went_on.succeeded()
    assert repr(first) == "<FirstAttempt scope='default' succeeded>"
    assert repr(went_on) == "<FirstAttempt scope='default' went on>"
    assert isinstance(first, FirstAttempt)


@pytest.mark.parametrize(
    ("why", "policy"),
    [
        ("a deadline times the call", RetryPolicy(deadline=5.0)),
        ("a per-attempt timeout times the call", RetryPolicy(attempt_timeout=1.0)),
        ("two rate limits may make it wait", RetryPolicy(mode="adaptive", rate_limit=10.0)),
        ("the first attempt costs quota tokens", RetryPolicy(quota=RetryQuotaConfig(initial_try_cost=1))),
    ],
)
async def test_begin_first_declines_what_could_make_the_first_attempt_wait(why: str, policy: RetryPolicy) -> None:
    retrier = Retrier(policy, clock=VirtualClock())
    assert retrier.begin_first() is None, why
    assert counters(retrier) == (0, 0, 0, 0, 0)  # nothing was begun


async def test_a_rate_limit_admits_the_first_attempt_when_it_has_a_token_and_declines_when_it_would_wait() -> None:
    clock = VirtualClock()
    retrier = Retrier(RetryPolicy(rate_limit=10.0, rate_limit_burst=1.0), clock=clock)  # one token, 10 a second
    assert retrier.begin_first() is not None  # the token, taken
    assert retrier.begin_first() is None  # the next one would wait 0.1 s: the general way waits for it
    (scope,) = retrier.statistics().scopes
    assert scope.rate_limit is not None
    assert scope.rate_limit.available == 0.0
    assert counters(retrier) == (1, 1, 0, 0, 0)  # the declined one began nothing
    clock.advance(0.1)
    assert retrier.begin_first() is not None


async def test_the_adaptive_limiter_admits_the_first_attempt_at_once_until_it_would_make_it_wait() -> None:
    clock = VirtualClock()
    retrier = Retrier(RetryPolicy(mode="adaptive"), clock=clock)
    first = retrier.begin_first()
    assert first is not None  # no throttle seen yet: the limiter admits every attempt
    _, attempt = first.go_on()
    async with attempt:
        attempt.retry_result("429", reason="HTTP 429", kind=OutcomeKind.THROTTLING)
    (scope,) = retrier.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.enabled  # the throttle enabled it: its bucket starts (nearly) empty
    while retrier.begin_first() is not None:  # the tokens it holds are taken at once ...
        pass
    assert retrier.begin_first() is None  # ... then the first attempt would wait: the general way waits


async def test_begin_first_declines_while_the_breaker_is_not_closed() -> None:
    clock = VirtualClock()
    breaker = CircuitBreaker(CircuitBreakerConfig(), clock=clock)
    retrier = Retrier(RetryPolicy(), clock=clock, breaker=breaker)
    assert retrier.begin_first() is not None
    breaker.isolate()
    assert retrier.begin_first() is None  # acquire() would refuse it: the general way reports that


async def test_begin_first_takes_a_per_call_policy_and_tells_a_local_budget_of_the_request() -> None:
    clock = VirtualClock()
    budget = RetryBudget(RetryBudgetConfig(), clock=clock)
    retrier = Retrier(RetryPolicy(), clock=clock, budget=budget)
    assert retrier.begin_first(policy=RetryPolicy(deadline=1.0)) is None
    first = retrier.begin_first(policy=RetryPolicy(max_attempts=5))
    assert first is not None
    assert first.policy.max_attempts == 5
    assert budget.statistics().requests == 1


class ServerBudget:
    """A retry budget kept "on a server" (the RemoteBudget protocol over a local budget), counting calls."""

    def __init__(self, clock: VirtualClock) -> None:
        self._budget = RetryBudget(RetryBudgetConfig(), clock=clock, name="fleet")
        self.recorded = 0

    @property
    def name(self) -> str:
        return self._budget.name

    @property
    def config(self) -> RetryBudgetConfig:
        return self._budget.config

    async def record_request(self) -> None:
        self.recorded += 1
        self._budget.record_request()

    async def spend(self) -> BudgetTicket | None:
        return self._budget.spend()

    def refund(self, ticket: BudgetTicket) -> None:
        self._budget.refund(ticket)

    def statistics(self) -> BudgetStatistics:
        return self._budget.statistics()


async def test_a_budget_on_a_server_hears_of_every_call_even_when_nothing_paces_the_first_attempt() -> None:
    clock = VirtualClock()
    budget = ServerBudget(clock)
    retrier = Retrier(RetryPolicy(), clock=clock, budget=budget)
    assert retrier.begin_first() is None  # telling it is a round trip: the async driver awaits it
    for _ in range(3):
        async for attempt in retrier.attempts():
            async with attempt:
                pass
    assert budget.recorded == 3
