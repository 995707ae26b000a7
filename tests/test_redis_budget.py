"""RedisRetryBudget: one retry budget for a fleet, so that the fleet's retries stay a share of its requests."""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import re
import uuid
from datetime import timedelta
from typing import Any

import anyio
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import (
    BackendLost,
    BackendRecovered,
    BackendUnavailable,
    BudgetExhausted,
    BudgetRestored,
    BudgetTicket,
    FixedBackoff,
    Retrier,
    RetryBudget,
    RetryBudgetConfig,
    RetryPolicy,
)
from asyncretry._primitives._shared import RemoteBudget
from asyncretry.redis import RedisBackend, RedisRetryBudget
from asyncretry.testing import VirtualClock
from conftest import EventLog
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

# A window long enough that no test (on a loaded machine) sees a slice leave it unless it moves time itself.
LONG = RetryBudgetConfig(ratio=0.1, min_retries_per_second=0.1, window=600)


class Recorder(EventLog):
    """An event bus keeping the events it hears."""

    def kinds(self) -> list[str]:
        return self.names(BudgetExhausted, BudgetRestored, BackendLost, BackendRecovered)


def age(server: RedisServer, key: str, seconds: float) -> None:
    """Move the window's origin ``seconds`` into the past, as if that much time had gone by on the server."""
    with redis.Redis.from_url(server.url) as client:
        origin = client.hget(key, "origin")
        assert origin is not None
        client.hset(key, "origin", repr(float(origin) - seconds))


async def spend_all(budget: RedisRetryBudget, limit: int = 10_000) -> int:
    allowed = 0
    while allowed < limit and await budget.try_spend():
        allowed += 1
    return allowed


@pytest.mark.anyio
async def test_two_processes_share_one_floor_and_one_window(redis_server: RedisServer, prefix: str) -> None:
    """Two clients of one name share the floor: 60 retries between them, not 60 each."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        budgets = [RedisRetryBudget(b, LONG, name="api") for b in (one, two)]
        allowed = [await budgets[i % 2].try_spend() for i in range(61)]
        assert allowed == [True] * 60 + [False]
        assert not await budgets[0].try_spend()
        assert isinstance(budgets[0], RemoteBudget)


@pytest.mark.anyio
async def test_requests_of_every_process_earn_retries(redis_server: RedisServer, prefix: str) -> None:
    """Requests recorded by either process earn ratio retries each for the whole fleet."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        config = RetryBudgetConfig(ratio=0.5, min_retries_per_second=0, window=600)
        first = RedisRetryBudget(one, config, name="api", sync_interval=0)
        second = RedisRetryBudget(two, config, name="api", sync_interval=0)
        assert not await first.try_spend()
        for _ in range(10):
            await first.record_request()
            await second.record_request()
        assert await spend_all(second) == 10
        stats = await first.flush()
        assert (stats.requests, stats.retries, stats.allowance, stats.available) == (20, 10, 10, 0)
        assert (stats.requests_total, stats.retries_total, stats.refused) == (10, 0, 1)


@pytest.mark.anyio
async def test_requests_wait_for_the_sync_interval_or_the_next_retry(redis_server: RedisServer, prefix: str) -> None:
    """Within sync_interval requests stay here (pending); the next try_spend sends them before it asks."""
    clock = VirtualClock()
    async with redis_server.backend(prefix) as backend:
        config = RetryBudgetConfig(ratio=1, min_retries_per_second=0, window=600)
        budget = RedisRetryBudget(backend, config, name="api", sync_interval=5, clock=clock)
        await budget.record_request()  # the first one goes at once
        trips = budget.statistics().round_trips
        for _ in range(3):
            await budget.record_request()
        stats = budget.statistics()
        assert (stats.round_trips, stats.pending, stats.requests) == (trips, 3, 4)
        clock.advance(5)
        await budget.record_request()  # sync_interval is over: the five go together
        assert (budget.statistics().round_trips, budget.statistics().pending) == (trips + 1, 0)
        await budget.record_request()
        assert await spend_all(budget) == 6


@pytest.mark.anyio
async def test_the_window_slides_on_the_servers_clock(redis_server: RedisServer, prefix: str) -> None:
    """Once a window has gone by on the server, the old requests and retries no longer count."""
    async with redis_server.backend(prefix) as backend:
        config = RetryBudgetConfig(ratio=1, min_retries_per_second=0, window=600, slices=10)
        budget = RedisRetryBudget(backend, config, name="api", sync_interval=0)
        for _ in range(5):
            await budget.record_request()
        assert await spend_all(budget) == 5
        age(redis_server, budget.key, 300)  # half a window later: all of it still counts
        assert not await budget.try_spend()
        await budget.record_request()
        assert await budget.try_spend()
        age(redis_server, budget.key, 300)  # the first slice has left the window, the last request's has not
        stats = await budget.flush()
        assert (stats.requests, stats.retries) == (1, 1)
        age(redis_server, budget.key, 600)
        stats = await budget.flush()
        assert (stats.requests, stats.retries) == (0, 0)


@pytest.mark.anyio
async def test_a_refund_reaches_the_shared_window(redis_server: RedisServer, prefix: str) -> None:
    """refund(ticket) gives that retry back in the fleet's window with the next round trip, once."""
    async with redis_server.backend(prefix) as backend:
        budget = RedisRetryBudget(backend, LONG, name="api")
        assert await spend_all(budget, limit=59) == 59
        ticket = await budget.spend()
        assert ticket is not None
        budget.refund(ticket)
        budget.refund(ticket)  # a ticket is refunded once
        assert (await budget.flush()).retries == 59
        assert await budget.try_spend()
        assert not await budget.try_spend()
        assert budget.statistics().retries_total == 60


@pytest.mark.anyio
async def test_exhaustion_events_describe_what_this_process_saw(redis_server: RedisServer, prefix: str) -> None:
    """A refusal emits BudgetExhausted once; room again (others' requests) emits BudgetRestored."""
    recorder = Recorder()
    async with redis_server.backend(prefix) as backend:
        config = RetryBudgetConfig(ratio=1, min_retries_per_second=0, window=600)
        budget = RedisRetryBudget(backend, config, name="api", events=recorder.bus)
        other = RedisRetryBudget(backend, config, name="api", sync_interval=0)
        assert not await budget.try_spend()
        assert not await budget.try_spend()
        await other.record_request()
        assert await budget.try_spend()
        assert recorder.kinds() == ["BudgetExhausted", "BudgetRestored"]
        assert not budget.statistics().exhausted


@pytest.mark.anyio
async def test_fail_open_answers_from_this_processs_own_counts(closed_port: int) -> None:
    """With nothing listening, try_spend answers from the local budget, which counted this process's requests."""
    recorder = Recorder()
    async with RedisBackend(f"redis://127.0.0.1:{closed_port}", operation_timeout=0.2) as down:
        config = RetryBudgetConfig(ratio=0.5, min_retries_per_second=0, window=600)
        budget = RedisRetryBudget(down, config, name="api", events=recorder.bus)
        for _ in range(4):
            await budget.record_request()
        first = await budget.spend()
        assert first is not None
        assert await spend_all(budget) == 1
        budget.refund(first)
        assert await budget.try_spend()
        stats = budget.statistics()
        assert (stats.degraded, stats.requests, stats.retries, stats.exhausted) == (True, 4, 2, False)
        assert stats.fallbacks >= 5
        assert recorder.kinds()[0] == "BackendLost"
        assert "degraded" in repr(budget)


@pytest.mark.anyio
async def test_fail_closed_refuses_retries_but_never_requests(closed_port: int) -> None:
    """Failing closed, try_spend raises BackendUnavailable; record_request and refund still never raise."""
    async with RedisBackend(f"redis://127.0.0.1:{closed_port}", operation_timeout=0.2) as down:
        budget = RedisRetryBudget(down, name="api", on_unavailable="fail_closed")
        await budget.record_request()
        with pytest.raises(BackendUnavailable, match=r"Redis is unavailable for budget 'api'; failing closed"):
            await budget.spend()
        with pytest.warns(DeprecationWarning, match="pass the ticket"):
            budget.refund()  # no retry was allowed: nothing to take back
        assert budget.statistics().degraded


@pytest.mark.anyio
async def test_after_an_outage_the_shared_window_is_used_again(own_redis_server: RedisServer, prefix: str) -> None:
    """Killed, the budget serves locally; restarted and probed, it reports BackendRecovered and shares again."""
    recorder = Recorder()
    clock = VirtualClock()  # the backend's recovery schedule, moved by hand
    # A killed server refuses at once: a patient timeout only keeps a loaded machine's slow round trip,
    # while the server is up, from counting as an outage.
    async with RedisBackend(own_redis_server.url, prefix=prefix, clock=clock, operation_timeout=2.0) as backend:
        budget = RedisRetryBudget(backend, LONG, name="api", events=recorder.bus)
        assert await budget.try_spend()
        own_redis_server.kill()
        assert await budget.try_spend()  # the local budget: its floor, less the one retry it mirrored
        assert budget.statistics().degraded
        own_redis_server.restart()
        clock.advance(60)
        assert await budget.try_spend()
        stats = budget.statistics()
        assert (stats.degraded, stats.retries) == (False, 1)  # a fresh server: a fresh window
    assert recorder.kinds() == ["BackendLost", "BackendRecovered"]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"on_unavailable": "ignore"}, ValueError, "on_unavailable must be one of 'fail_open', 'fail_closed'"),
        ({"name": ""}, ValueError, "name must be a non-empty str"),
        ({"sync_interval": -1.0}, ValueError, "sync_interval must be >= 0 and <= 1, got -1.0"),
        ({"sync_interval": 2}, ValueError, "sync_interval must be >= 0 and <= 1 (the slice width), got 2"),
        ({"sync_interval": 10**400}, ValueError, "sync_interval must be >= 0 and <= 1 (the slice width)"),
        ({"sync_interval": float("nan")}, ValueError, "sync_interval must be a finite number"),
        ({"sync_interval": True}, TypeError, "sync_interval must be a number"),
        ({"config": 0.1}, TypeError, "config must be a RetryBudgetConfig"),
    ],
)
def test_bad_settings_are_refused_at_construction(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Every setting is checked when the budget is made; the message names it and its range."""
    with pytest.raises(error, match=re.escape(message)):
        RedisRetryBudget("redis://127.0.0.1:1/0", **options)


def test_a_timedelta_sync_interval_is_seconds() -> None:
    """sync_interval accepts a timedelta; the repr names the key, the state and the failure choice."""
    budget = RedisRetryBudget("redis://127.0.0.1:1/0", name="api", sync_interval=timedelta(milliseconds=250))
    assert repr(budget) == (
        "<RedisRetryBudget 'api' key='asyncretry:budget:api' retries=0/100 requests=0 shared "
        "on_unavailable='fail_open'>"
    )


@settings(max_examples=25)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["request", "request", "spend", "spend", "refund", "age"]), st.integers(1, 12)),
        max_size=40,
    ),
    ratio=st.sampled_from([0.1, 0.29, 1.0]),
    floor=st.sampled_from([0.0, 0.005, 0.02]),
)
def test_the_script_answers_exactly_as_the_local_budget(
    redis_server: RedisServer, ops: list[tuple[str, int]], ratio: float, floor: float
) -> None:
    """Whatever the requests, retries, refunds and time, the Lua window gives the local budget's answers and counts."""
    config = RetryBudgetConfig(ratio=ratio, min_retries_per_second=floor, window=600, slices=10)

    async def run() -> None:
        clock = VirtualClock()
        local = RetryBudget(config, clock=clock)
        local.statistics()  # slice 0 starts now, as the key's does below
        own = f"prop:{uuid.uuid4().hex}:"  # a prefix of its own for each example
        async with redis_server.backend(own) as backend:
            shared = RedisRetryBudget(backend, config, name="property", sync_interval=0)
            await shared.flush()
            tickets: list[tuple[BudgetTicket, BudgetTicket]] = []
            for kind, amount in ops:
                if kind == "request":
                    local.record_request()
                    await shared.record_request()
                elif kind == "spend":
                    shared_ticket, local_ticket = await shared.spend(), local.spend()
                    assert (shared_ticket is None) is (local_ticket is None)
                    if shared_ticket is not None and local_ticket is not None:
                        tickets.append((shared_ticket, local_ticket))
                elif kind == "refund":
                    if tickets:  # the oldest first: any retry can be given back, not only the latest
                        shared_ticket, local_ticket = tickets.pop(0)
                        shared.refund(shared_ticket)
                        local.refund(local_ticket)
                else:  # whole slices of 60 s go by
                    age(redis_server, shared.key, amount * 60)
                    clock.advance(amount * 60)
                mine, theirs = local.statistics(), await shared.flush()
                assert (theirs.requests, theirs.retries) == (mine.requests, mine.retries)
                assert theirs.retries <= theirs.allowance + 1e-9
            await backend.client.delete(shared.key)

    asyncio.run(run())


# -- a fleet of four processes

FLEET = RetryBudgetConfig(ratio=0.1, min_retries_per_second=0.05, window=600)
CALLS = 150
PROCESSES = 4


def fleet_worker(url: str, prefix: str, barrier: Any, results: Any) -> None:
    """One process of the fleet: a total outage, every call asks for two retries."""

    async def main() -> None:
        async with RedisBackend(url, prefix=prefix) as backend:
            budget = RedisRetryBudget(backend, FLEET, name="fleet", sync_interval=0)
            await budget.flush()  # connected and the script loaded before the start
            await asyncio.to_thread(barrier.wait)
            allowed = 0
            for _ in range(CALLS):
                await budget.record_request()
                for _ in range(2):
                    if not await budget.try_spend():
                        break
                    allowed += 1
            stats = await budget.flush()
        results.put({"allowed": allowed, "requests": stats.requests_total, "refused": stats.refused})

    asyncio.run(main())


def test_four_processes_hold_the_bound_for_the_fleet(redis_server: RedisServer, prefix: str) -> None:
    """4 processes in a total outage, started on a barrier, get ratio x the fleet's requests + one floor in all."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=fleet_worker, args=(redis_server.url, prefix, barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    try:
        found = [results.get(timeout=50) for _ in workers]
    except queue.Empty:
        pytest.fail("a fleet worker did not report within 50 s")
    finally:
        for worker in workers:
            worker.join(timeout=10)
    assert all(worker.exitcode == 0 for worker in workers)
    requests = sum(r["requests"] for r in found)
    allowed = sum(r["allowed"] for r in found)
    bound = FLEET.allowance(requests)  # 0.1 x 600 + 0.05 x 600 = 90
    assert requests == PROCESSES * CALLS
    assert allowed <= bound
    assert allowed >= bound - 2  # the fleet used what it was allowed (its last asks saw every request)
    assert all(r["refused"] > 0 for r in found)  # every process was held back, not only the last
    with redis.Redis.from_url(redis_server.url) as client:
        stored = client.hmget(f"{prefix}budget:fleet", ["rq", "rt"])
    assert [int(v) for v in stored] == [requests, allowed]


@pytest.mark.anyio
async def test_many_calls_cancelled_in_their_backoff_leave_no_retry_in_the_fleets_window(
    redis_server: RedisServer, prefix: str
) -> None:
    """100 calls whose retries the shared window allowed, cancelled while they wait, give back all 100 places."""

    async def down() -> None:
        raise ConnectionError("503")

    config = RetryBudgetConfig(ratio=1.0, min_retries_per_second=0.1, window=600)
    # A wide operation timeout: 100 round trips at once on a loaded machine must not look like an outage.
    async with RedisBackend(redis_server.url, prefix=prefix, operation_timeout=20) as backend:
        budget = RedisRetryBudget(backend, config, name="api")
        retrier = Retrier(RetryPolicy(quota=False, max_attempts=2, backoff=FixedBackoff(60.0)), budget=budget)
        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(retrier.call, down)
            with anyio.fail_after(30):
                while budget.statistics().retries_total < 100:  # every call in its backoff, its retry paid
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        stats = await budget.flush()
        assert (stats.retries, stats.retries_total, stats.requests) == (0, 0, 100)
