"""The retry budget in the engine: retries bounded as a share of recent calls, on every way in."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable

import anyio
import pytest

from asyncretry import (
    FixedBackoff,
    GaveUp,
    NoBackoff,
    Retrier,
    RetryBudget,
    RetryBudgetConfig,
    RetryPolicy,
    history_of,
)
from asyncretry.testing import VirtualClock

pytestmark = pytest.mark.anyio

TIGHT = RetryBudgetConfig(ratio=0.1, min_retries_per_second=0.1, window=10.0)  # a floor of one retry per window


class Down(ConnectionError):
    """The server is down."""


async def down() -> None:
    raise Down("503")


def down_sync() -> None:
    raise Down("503")


async def test_a_budget_refusal_gives_up_with_the_real_error() -> None:
    """Once the budget's share is spent, a failing call gives up at once with its real error, with
    history (why: budget) and a GaveUp(why='budget')."""
    events: list[GaveUp] = []
    retrier = Retrier(RetryPolicy(quota=False, budget=TIGHT, backoff=NoBackoff(), max_attempts=3))
    retrier.subscribe(lambda e: events.append(e) if isinstance(e, GaveUp) else None)
    with pytest.raises(Down) as caught:
        await retrier.call(down)  # the window's one retry (the floor) is spent, the next is refused
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "budget"
    assert len(history.attempts) == 2
    assert [e.why for e in events] == ["budget"]
    assert retrier.statistics().scopes[0].budget is not None


async def test_the_outage_bound_holds_through_the_engine() -> None:
    """A total outage at 100 calls/s for 30 s: attempts per call stay within 1 + ratio + floor / rate."""
    config = RetryBudgetConfig(ratio=0.1, min_retries_per_second=10.0, window=10.0)
    retrier = Retrier(RetryPolicy(quota=False, budget=config, backoff=NoBackoff(), max_attempts=3))
    attempts = 0

    async def failing() -> None:
        nonlocal attempts
        attempts += 1
        raise Down("503")

    calls = 0
    async with anyio.create_task_group() as tg:
        for _ in range(30 * 100):
            calls += 1
            tg.start_soon(_swallow, retrier, failing)
            await anyio.sleep(0.01)
    assert attempts / calls <= 1 + 0.1 + 10.0 / 100 + 1e-9
    assert attempts / calls > 1.15  # the floor and the share were used, not refused outright


async def _swallow(retrier: Retrier, fn: Callable[[], Awaitable[None]]) -> None:
    with contextlib.suppress(Down):
        await retrier.call(fn)


async def test_a_budget_shared_between_retriers_counts_both() -> None:
    """One RetryBudget given to two retriers is one allowance: the second retrier finds it spent."""
    clock = VirtualClock()
    budget = RetryBudget(TIGHT, clock=clock)
    first = Retrier(RetryPolicy(quota=False, backoff=NoBackoff(), max_attempts=2), budget=budget, clock=clock)
    second = Retrier(RetryPolicy(quota=False, backoff=NoBackoff(), max_attempts=2), budget=budget, clock=clock)
    with pytest.raises(Down):
        await first.call(down)  # spends the window's only retry
    with pytest.raises(Down) as caught:
        await second.call(down)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "budget"
    assert budget.statistics().retries == 1


async def test_a_cancelled_wait_gives_the_budget_place_back() -> None:
    """A retry allowed by the budget and then cancelled during its backoff gives its place back."""
    budget = RetryBudget(TIGHT)
    retrier = Retrier(RetryPolicy(quota=False, max_attempts=2, backoff=FixedBackoff(1.0)), budget=budget)
    async with anyio.create_task_group() as tg:
        tg.start_soon(retrier.call, down)
        await anyio.sleep(0.5)  # the call sleeps its 1 s backoff, its retry paid for
        assert budget.statistics().retries == 1
        tg.cancel_scope.cancel()
    assert budget.statistics().retries == 0


async def test_many_calls_cancelled_in_their_backoff_leave_no_retry_in_the_window() -> None:
    """100 calls whose retries were paid for and then cancelled during the backoff give back all 100 places."""
    budget = RetryBudget(RetryBudgetConfig(ratio=1.0, min_retries_per_second=0.1, window=10.0))
    retrier = Retrier(RetryPolicy(quota=False, max_attempts=2, backoff=FixedBackoff(1.0)), budget=budget)
    async with anyio.create_task_group() as tg:
        for _ in range(100):
            tg.start_soon(retrier.call, down)
        await anyio.sleep(0.5)  # every call sleeps its 1 s backoff, its retry paid for
        assert budget.statistics().retries == 100
        tg.cancel_scope.cancel()
    stats = budget.statistics()
    assert (stats.retries, stats.retries_total, stats.requests) == (0, 0, 100)


async def test_calls_cancelled_in_any_order_give_back_exactly_their_own_places() -> None:
    """Half the calls cancelled in their backoff, the others retried: the window keeps only the retries made."""
    budget = RetryBudget(RetryBudgetConfig(ratio=1.0, min_retries_per_second=0.1, window=10.0))
    retrier = Retrier(RetryPolicy(quota=False, max_attempts=2, backoff=FixedBackoff(1.0)), budget=budget)
    made = [0]

    async def flaky() -> None:
        made[0] += 1
        raise Down("503")

    async def one(index: int) -> None:
        with anyio.move_on_after(0.5 if index % 2 else 5.0), contextlib.suppress(Down):
            await retrier.call(flaky)

    async with anyio.create_task_group() as tg:
        for index in range(40):
            tg.start_soon(one, index)
    stats = budget.statistics()
    assert made[0] - 40 == stats.retries == stats.retries_total == 20


def test_sync_calls_in_threads_give_back_every_retry_the_deadline_dropped() -> None:
    """Synchronous calls in 8 threads whose paid retries the deadline drops give back every place (the sync twin
    refunds its call's own ticket too)."""
    budget = RetryBudget(RetryBudgetConfig(ratio=1.0, min_retries_per_second=0.1, window=60.0))
    policy = RetryPolicy(quota=False, max_attempts=2, backoff=FixedBackoff(30.0), deadline=10.0)
    retrier = Retrier(policy, budget=budget)

    def calls() -> None:
        for _ in range(20):
            with contextlib.suppress(Down):
                retrier.sync_call(down_sync)

    threads = [threading.Thread(target=calls) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stats = budget.statistics()
    assert (stats.retries, stats.retries_total, stats.requests) == (0, 0, 160)


def test_the_sync_loop_spends_the_budget_too() -> None:
    """Synchronous attempts take their retries from the same budget."""
    budget = RetryBudget(TIGHT)
    retrier = Retrier(RetryPolicy(quota=False, backoff=NoBackoff(), max_attempts=3), budget=budget)
    def fail_twice() -> None:
        for attempt in retrier.sync_attempts():
            with attempt:
                raise Down("503")

    with pytest.raises(Down) as caught:
        fail_twice()
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "budget"
    assert budget.statistics().retries == 1


def test_a_budget_that_is_not_one_is_refused_at_construction() -> None:
    """budget= must be a RetryBudget (or a factory); the policy's budget a RetryBudgetConfig."""
    with pytest.raises(TypeError, match="budget"):
        Retrier(budget=0.1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="budget"):
        RetryPolicy(budget=0.1)  # type: ignore[arg-type]
