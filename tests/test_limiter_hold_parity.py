"""The hold is one rule for both limiters: the same cases fed to the in-process one and the one shared through Redis.

Both keep the hold of :mod:`asyncretry._primitives._hold`; this test holds them together where they use it
(waiting, timeouts, growth, statistics, events, refusals, the paced release). The clock is virtual
(``VirtualClock``: a sleep moves it), Redis is the suite's real server; asyncio only, as every Redis test
(redis-py's client).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from asyncretry import AdaptiveRateLimiter, EventBus, LimiterHeld, RateLimitTimeout
from asyncretry.redis import RedisAdaptiveRateLimiter
from asyncretry.testing import VirtualClock
from conftest import EventLog
from conftest_redis import RedisServer, VirtualTimeBackend
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

Limiter = AdaptiveRateLimiter | RedisAdaptiveRateLimiter
Case = Callable[[Limiter, VirtualClock], Awaitable[object]]


@asynccontextmanager
async def both(server: RedisServer, prefix: str) -> AsyncIterator[list[tuple[Limiter, VirtualClock, EventLog]]]:
    """An in-process limiter and a Redis-shared one, each on its own virtual clock and bus (the fleet's state
    on Redis keeps the Redis limiter's clock)."""
    clocks = [VirtualClock(100.0), VirtualClock(100.0)]
    backend = VirtualTimeBackend(server.url, prefix, now=clocks[1].now)
    buses = [EventBus(), EventBus()]
    try:
        built: list[Limiter] = [AdaptiveRateLimiter(clock=clocks[0], name="api", events=buses[0]),
                                RedisAdaptiveRateLimiter(backend, name="api", clock=clocks[1], events=buses[1])]
        made = [(limiter, clock, EventLog(bus)) for limiter, clock, bus in zip(built, clocks, buses, strict=True)]
        yield made
    finally:
        backend.close_sync()


async def waits_out_the_hold(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.hold(5.0, reason="HTTP 429")
    before = (limiter.time_until_available(), limiter.statistics().held)
    await limiter.acquire()
    stats = limiter.statistics()
    return before, clock.now(), stats.held, stats.holds, stats.waits, stats.wait_time


async def keeps_the_longest(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.hold(4.0)
    limiter.hold(1.0)
    limiter.hold(6.0, reason="HTTP 200")
    await limiter.acquire()
    return clock.now(), limiter.statistics().holds


async def refuses_what_outlasts_the_timeout(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.hold(10.0)
    with pytest.raises(RateLimitTimeout) as caught:
        await limiter.acquire(timeout=2.0)
    stats = limiter.statistics()
    return caught.value.wait, caught.value.timeout, clock.now(), stats.timeouts, stats.acquires


async def refuses_a_senseless_length(limiter: Limiter, clock: VirtualClock) -> object:
    refused = []
    for seconds in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="seconds") as caught:
            limiter.hold(seconds)
        refused.append(str(caught.value))
    return refused, limiter.statistics().holds


async def is_over_at_its_end(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.hold(3.0)
    clock.advance(3.0)
    return limiter.time_until_available(), limiter.statistics().held


async def sent(limiter: Limiter, clock: VirtualClock, calls: int = 3) -> list[float]:
    """When each of ``calls`` calls, one after the other, was let go."""
    times = []
    for _ in range(calls):
        await limiter.acquire()
        times.append(clock.now())
    return times


async def paces_the_release(limiter: Limiter, clock: VirtualClock) -> object:
    for _ in range(4):  # 4 served in 4 s: after the hold, one release a second
        limiter.update(False)
        clock.advance(1.0)
    limiter.hold(4.0)
    return await sent(limiter, clock), limiter.time_until_available()


async def releases_a_limiter_never_served_together(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.hold(2.0)
    return await sent(limiter, clock), limiter.time_until_available()


async def paces_one_per_span_after_a_cycle_served_nothing(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.update(False)
    clock.advance(1.0)
    limiter.hold(2.0)
    await limiter.acquire()  # at 103
    for _ in range(2):  # nothing served since the hold began at 101: the next release goes one per 4 s,
        limiter.update(False, failed=True)  # paced for the 4 s the hold lasts
        clock.advance(1.0)
    limiter.hold(4.0)
    return await sent(limiter, clock), limiter.statistics().holds


CASES: list[Case] = [waits_out_the_hold, keeps_the_longest, refuses_what_outlasts_the_timeout,
                     refuses_a_senseless_length, is_over_at_its_end, paces_the_release,
                     releases_a_limiter_never_served_together, paces_one_per_span_after_a_cycle_served_nothing]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
async def test_both_limiters_hold_alike(redis_server: RedisServer, prefix: str, case: Case) -> None:
    async with both(redis_server, prefix) as limiters:
        results = [await case(limiter, clock) for limiter, clock, _ in limiters]
        events = [[(e.time, e.source, e.seconds, e.reason) for e in log.of(LimiterHeld)] for _, _, log in limiters]
    assert results[0] == results[1]
    assert events[0] == events[1]


async def test_the_cases_say_what_a_hold_does() -> None:
    """The expected values, on the in-process limiter alone (the parity test above compares the two)."""
    clock = VirtualClock(100.0)
    local = AdaptiveRateLimiter(clock=clock, events=EventBus())
    assert await waits_out_the_hold(local, clock) == ((5.0, 5.0), 105.0, 0.0, 1, 1, 5.0)
    clock = VirtualClock(100.0)
    assert await keeps_the_longest(AdaptiveRateLimiter(clock=clock, events=EventBus()), clock) == (106.0, 2)
    clock = VirtualClock(100.0)
    assert await refuses_what_outlasts_the_timeout(AdaptiveRateLimiter(clock=clock, events=EventBus()), clock) == (
        10.0, 2.0, 100.0, 1, 0)
    clock = VirtualClock(100.0)
    assert await paces_the_release(AdaptiveRateLimiter(clock=clock, events=EventBus()), clock) == (
        [108.0, 109.0, 110.0], 1.0)
    clock = VirtualClock(100.0)
    assert await releases_a_limiter_never_served_together(AdaptiveRateLimiter(clock=clock, events=EventBus()),
                                                          clock) == ([102.0, 102.0, 102.0], 0.0)
    clock = VirtualClock(100.0)
    assert await paces_one_per_span_after_a_cycle_served_nothing(
        AdaptiveRateLimiter(clock=clock, events=EventBus()), clock) == ([109.0, 113.0, 113.0], 2)
