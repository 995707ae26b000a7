"""The pace a server announces is one rule for both limiters: the same cases fed to the in-process one and the one
shared through Redis, and what the retry engine makes of an announcement.

A server that says its quota over a 1-s window in whole seconds (``RateLimit-Policy: "s";q=20;w=1``) cannot be
waited for (its reset, ``t=1``, may come at any moment of the next second): the limiter then fills its bucket no
faster than ``q / w``. The limiter cases run on virtual clocks against the suite's real Redis (asyncio only, as
every Redis test); the engine cases through the httpx transport, on asyncio and trio.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    EventBus,
    HedgingConfig,
    LimiterPaced,
    Retrier,
    RetryPolicy,
)
from asyncretry.httpx import AsyncRetryTransport, RetryTransport
from asyncretry.redis import RedisAdaptiveRateLimiter
from asyncretry.testing import VirtualClock
from conftest import EventLog
from conftest_redis import RedisServer, VirtualTimeBackend, virtual_fleet

Limiter = AdaptiveRateLimiter | RedisAdaptiveRateLimiter
Case = Callable[[Limiter, VirtualClock], Awaitable[object]]


@asynccontextmanager
async def both(
    server: RedisServer, prefix: str, config: AdaptiveLimiterConfig
) -> AsyncIterator[list[tuple[Limiter, VirtualClock, EventLog]]]:
    """An in-process limiter and a Redis-shared one, each on its own virtual clock and bus."""
    clocks = [VirtualClock(100.0), VirtualClock(100.0)]
    buses = [EventBus(), EventBus()]
    backend = VirtualTimeBackend(server.url, prefix, now=clocks[1].now)
    try:
        yield [(AdaptiveRateLimiter(config, clock=clocks[0], name="api", events=buses[0], rng=lambda: 0.0),
                clocks[0], EventLog(buses[0])),
               (RedisAdaptiveRateLimiter(backend, config, name="api", clock=clocks[1], events=buses[1]), clocks[1],
                EventLog(buses[1]))]
    finally:
        backend.close_sync()


async def enabled_fast(limiter: Limiter, clock: VirtualClock) -> None:
    """Served 100 a second for a second, then throttled: the limiter is enabled."""
    for _ in range(100):
        limiter.update(False)
        clock.advance(0.01)
    limiter.update(True, sent_at=clock.now())
    await limiter.acquire()


async def gaps(limiter: Limiter, clock: VirtualClock, calls: int = 6) -> list[float]:
    """The time between each call let go and the next, of ``calls`` calls one after the other (the first two
    are left out: they take what the bucket held)."""
    times = []
    for _ in range(calls):
        await limiter.acquire()
        times.append(clock.now())
    return [round(later - earlier, 9) for earlier, later in itertools.pairwise(times[2:])]


async def sends_no_faster_than_the_pace(limiter: Limiter, clock: VirtualClock) -> object:
    await enabled_fast(limiter, clock)
    limiter.pace(0.25)  # below the lowest fill rate (0.5 a second) of either profile
    return await gaps(limiter, clock), limiter.statistics().paced


async def a_later_pace_replaces_it(limiter: Limiter, clock: VirtualClock) -> object:
    await enabled_fast(limiter, clock)
    limiter.pace(0.25, reason="HTTP 200")
    limiter.pace(0.25, reason="HTTP 429")  # the same pace again: it lasts longer, and no event says so
    slow = await gaps(limiter, clock)
    limiter.pace(0.4, reason="HTTP 200")
    return slow, await gaps(limiter, clock), limiter.statistics().paced


async def keeps_no_burst(limiter: Limiter, clock: VirtualClock) -> object:
    await enabled_fast(limiter, clock)
    limiter.pace(0.25)
    clock.advance(20.0)  # idle for 20 s: the pace would have brought five tokens, the bucket keeps one
    start = clock.now()
    times, waits = [], [limiter.time_until_available()]
    for _ in range(3):
        await limiter.acquire()
        times.append(round(clock.now() - start, 9))
        waits.append(round(limiter.time_until_available(), 9))
    return times, waits


async def lapses_a_minute_after_it_was_announced(limiter: Limiter, clock: VirtualClock) -> object:
    await enabled_fast(limiter, clock)
    limiter.pace(4.0)
    clock.advance(59.0)
    await limiter.acquire()
    still = limiter.statistics().paced
    clock.advance(1.0)
    await limiter.acquire()
    return still, limiter.statistics().paced


async def refuses_a_senseless_rate(limiter: Limiter, clock: VirtualClock) -> object:
    refused: list[str] = []
    for rate in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="rate") as caught:
            limiter.pace(rate)
        refused.append(str(caught.value))
    return refused, limiter.statistics().paced


async def leaves_a_limiter_not_enabled_free(limiter: Limiter, clock: VirtualClock) -> object:
    limiter.pace(1.0)
    times = []
    for _ in range(3):
        await limiter.acquire()
        times.append(clock.now())
    return times, limiter.statistics().paced


CASES: list[Case] = [sends_no_faster_than_the_pace, a_later_pace_replaces_it, keeps_no_burst,
                     lapses_a_minute_after_it_was_announced, refuses_a_senseless_rate,
                     leaves_a_limiter_not_enabled_free]


@pytest.mark.anyio
@pytest.mark.redis
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("profile", ["asyncretry", "aws"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
async def test_both_limiters_pace_alike(redis_server: RedisServer, prefix: str, case: Case, profile: str) -> None:
    async with both(redis_server, prefix, AdaptiveLimiterConfig(profile=profile)) as limiters:
        results = [await case(limiter, clock) for limiter, clock, _ in limiters]
        events = [[(e.source, e.rate, e.reason) for e in log.of(LimiterPaced)] for _, _, log in limiters]
    assert results[0] == results[1]
    assert events[0] == events[1]


@pytest.mark.anyio
async def test_the_cases_say_what_a_pace_does() -> None:
    """The expected values, on the in-process limiter alone (the parity test above compares the two)."""

    bus = EventBus()
    log = EventLog(bus)

    def fresh() -> tuple[AdaptiveRateLimiter, VirtualClock]:
        clock = VirtualClock(100.0)
        return AdaptiveRateLimiter(clock=clock, events=bus, rng=lambda: 0.0), clock

    assert await sends_no_faster_than_the_pace(*fresh()) == ([4.0, 4.0, 4.0], 0.25)
    assert await a_later_pace_replaces_it(*fresh()) == ([4.0, 4.0, 4.0], [2.5, 2.5, 2.5], 0.4)
    assert [(e.rate, e.reason) for e in log.of(LimiterPaced)] == [(0.25, "quota pace"), (0.25, "HTTP 200"),
                                                                  (0.4, "HTTP 200")]
    assert await keeps_no_burst(*fresh()) == ([0.0, 4.0, 8.0], [0.0, 4.0, 4.0, 4.0])
    assert await lapses_a_minute_after_it_was_announced(*fresh()) == (4.0, None)
    limiter, clock = fresh()
    assert await refuses_a_senseless_rate(limiter, clock) == (
        ["rate must be > 0, got 0.0", "rate must be > 0, got -1.0", "rate must be a finite number (> 0), got nan",
         "rate must be a finite number (> 0), got inf"], None)
    assert await leaves_a_limiter_not_enabled_free(*fresh()) == ([100.0, 100.0, 100.0], 1.0)


# ------------------------------------------------------------------- a fleet sharing a Redis limiter
@pytest.mark.anyio
@pytest.mark.redis
@pytest.mark.parametrize("profile", ["asyncretry", "aws"])
async def test_one_process_paces_the_fleet(redis_server: RedisServer, prefix: str, profile: str) -> None:
    """The pace one process heard paces another that never heard it: its calls, after an idle spell, go one
    per 4 s (a burst of one call), and its statistics show the fleet's pace, until the pace lapses."""
    config = AdaptiveLimiterConfig(profile=profile)
    with virtual_fleet(redis_server, prefix, 2) as backends:
        heard, other = (RedisAdaptiveRateLimiter(backend, config, name="api", events=EventBus())
                        for backend in backends)
        for _ in range(100):  # served 100 a second, then throttled: the fleet's limiter is enabled
            await heard.acquire()
            heard.update(False, sent_at=anyio.current_time())
            await anyio.sleep(0.01)
        heard.update(True, sent_at=anyio.current_time())
        heard.pace(0.25, reason="HTTP 200")
        await heard.refresh()  # the pace goes with this process's round trip
        await anyio.sleep(20.0)
        start = anyio.current_time()
        times = []
        for _ in range(3):
            await other.acquire()
            times.append(round(anyio.current_time() - start, 6))
        paced = other.statistics().paced
        await anyio.sleep(60.0)
        await other.refresh()
    assert times == [0.0, 4.0, 8.0]
    assert paced == 0.25
    assert other.statistics().paced is None


# ------------------------------------------------------------------- what the engine makes of an announcement
def window_server(policy: str) -> Callable[[httpx.Request], httpx.Response]:
    """20 requests per 1-s window from 0 on the loop's clock, announced in every answer with ``policy``."""
    used: dict[int, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        now = anyio.current_time()
        window = int(now)
        used[window] = used.get(window, 0) + 1
        left = max(0, 20 - used[window])
        headers = {"RateLimit": f'"s";r={left};t=1', "RateLimit-Policy": policy}
        return httpx.Response(200 if used[window] <= 20 else 429, headers=headers)

    return answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("config", "policy", "paced"),
    [(None, '"s";q=20;w=1', 20.0), (AdaptiveLimiterConfig(hold_spent_quota=False), '"s";q=20;w=1', None),
     (AdaptiveLimiterConfig(profile="aws"), '"s";q=20;w=1', None), (None, '"s";q=40;w=2', None),
     (None, '"s";w=1', None)],
    ids=["the default: paced", "hold_spent_quota=False: not", "the SDK-exact aws profile: not",
         "a 2-s window: held instead", "no quota said"],
)
async def test_an_answer_that_announces_a_short_window_paces_the_scope(
    config: AdaptiveLimiterConfig | None, policy: str, paced: float | None
) -> None:
    """Every answer (a success too) that says its quota over a 1-s window paces the scope's limiter, where the
    policy follows announced quotas; the other windows are held when spent, not paced."""
    retrier = Retrier(RetryPolicy(mode="adaptive", limiter=config))
    transport = AsyncRetryTransport(httpx.MockTransport(window_server(policy)), retrier=retrier)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("https://api.test/items")
    assert response.status_code == 200
    (scope,) = retrier.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.paced == paced


@pytest.mark.anyio
async def test_a_hedged_call_paces_its_scope_by_the_same_rule() -> None:
    """A hedge's answer is reported through the same rule: a hedge answered 429 with a 1-s window's quota
    while the first attempt still runs paces the scope, though the call ends with a plain 200."""
    sent: list[int] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        sent.append(len(sent))
        if len(sent) == 1:
            await anyio.sleep(1.0)  # the first attempt is slow and answers a plain 200
            return httpx.Response(200)
        return httpx.Response(429, headers={"RateLimit": '"s";r=0;t=1', "RateLimit-Policy": '"s";q=20;w=1'})

    policy = RetryPolicy(mode="adaptive", hedging=HedgingConfig(delay=0.1, max_hedges=1, budget_ratio=1.0))
    transport = AsyncRetryTransport(httpx.MockTransport(answer), policy=policy)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("https://api.test/items")
    assert response.status_code == 200
    assert len(sent) == 2
    (scope,) = transport.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.paced == 20.0


def test_the_sync_transport_paces_its_scope_by_the_same_rule() -> None:
    """The synchronous twin reads the same announcement and paces its scope's limiter alike."""
    transport = RetryTransport(httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"RateLimit": '"s";r=3;t=1', "RateLimit-Policy": '"s";q=20;w=1'})),
        policy=RetryPolicy(mode="adaptive"))
    with httpx.Client(transport=transport) as client:
        assert client.get("https://api.test/items").status_code == 200
    (scope,) = transport.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.paced == 20.0


@pytest.mark.anyio
async def test_a_fleet_of_tasks_keeps_to_the_pace_and_meets_no_spent_window() -> None:
    """Fifty tasks asking twice what a 20-per-second quota admits: once the first window ran out and enabled the
    limiter, no window runs out early again (without the pace, the adaptive rate probes above the quota), and
    once the limiter climbed back, each window gets its 20."""
    answer = window_server('"s";q=20;w=1')
    statuses: list[tuple[float, int]] = []

    def recorded(request: httpx.Request) -> httpx.Response:
        response = answer(request)
        statuses.append((anyio.current_time(), response.status_code))
        return response

    transport = AsyncRetryTransport(httpx.MockTransport(recorded), policy=RetryPolicy(mode="adaptive"))
    async with httpx.AsyncClient(transport=transport) as client:

        async def worker() -> None:
            while anyio.current_time() < 20.0:
                await client.get("https://api.test/items")
                await anyio.sleep(1.25)

        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(worker)
    later = [status for at, status in statuses if at >= 3.0]
    served = [sum(1 for at, status in statuses if int(at) == window and status == 200) for window in range(3, 20)]
    assert later.count(429) == 0
    assert served[-8:] == [20] * 8  # the limiter climbed back to the pace after the first window's throttles
