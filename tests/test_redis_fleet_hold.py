"""A quota one process hears announced spent holds the whole fleet that shares a Redis limiter, and the fleet
is released after the hold as one limiter would be.

The hold travels with the answer that announced it (the engine awaits the report; by hand, with the
process's next round trip); every other process holds from its own next one. The real scripts run on the
suite's Redis, reading the virtual clock (:class:`VirtualTimeBackend`), on asyncio and trio alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import httpx
import pytest
import redis

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    EventBus,
    LimiterHeld,
    RateLimitTimeout,
    Retrier,
    RetryPolicy,
)
from asyncretry.httpx import AsyncRetryTransport
from asyncretry.redis import RedisAdaptiveRateLimiter
from asyncretry.redis._backend import _Unavailable
from asyncretry.redis._scripts import Script
from conftest import EventLog
from conftest_redis import RedisServer, VirtualTimeBackend, virtual_fleet

pytestmark = [pytest.mark.redis, pytest.mark.anyio]

PROFILES = ["asyncretry", "aws"]


@pytest.fixture
def backends(redis_server: RedisServer, prefix: str) -> Iterator[list[VirtualTimeBackend]]:
    """Three processes, as far as Redis can tell: three backends on one key prefix."""
    with virtual_fleet(redis_server, prefix, 3) as made:
        yield made


def fleet(
    backends: list[VirtualTimeBackend], profile: str = "asyncretry"
) -> list[tuple[RedisAdaptiveRateLimiter, EventLog]]:
    """One limiter per process, all sharing the name ``api``, each with its own bus."""
    made = []
    for backend in backends:
        log = EventLog(EventBus())
        made.append((RedisAdaptiveRateLimiter(backend, AdaptiveLimiterConfig(profile=profile), name="api",
                                              events=log.bus), log))
    return made


async def enable(limiter: RedisAdaptiveRateLimiter) -> None:
    """Serve 1.5 s at 100/s, then report a throttle: the fleet's limiter is enabled."""
    for _ in range(150):
        await limiter.acquire()
        limiter.update(False, sent_at=anyio.current_time())
        await anyio.sleep(0.01)
    limiter.update(True, sent_at=anyio.current_time())
    await limiter.refresh()
    assert limiter.enabled


@pytest.mark.parametrize("profile", PROFILES)
async def test_another_process_holds_from_its_next_round_trip_until_the_announced_end(
    backends: list[VirtualTimeBackend], profile: str
) -> None:
    """The process that heard the quota spent reports its hold before it waits it out; another process's
    next round trip tells it the same end, which it waits for, under the reason "held by the fleet"."""
    (first, first_log), (second, second_log), _ = fleet(backends, profile)
    await second.refresh()  # a round trip: the second process's next is due in sync_interval
    start = anyio.current_time()
    first.hold(8.0, reason="HTTP 429")
    first.hold(3.0)  # shorter: changes nothing
    done: dict[str, float] = {}

    async def call(name: str, limiter: RedisAdaptiveRateLimiter) -> None:
        await limiter.acquire()
        done[name] = anyio.current_time() - start

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "first", first)
        await anyio.sleep(0.5)
        tg.start_soon(call, "second", second)
    assert done == {"first": pytest.approx(8.0), "second": pytest.approx(8.0)}
    assert [e.reason for e in first_log.of(LimiterHeld)] == ["HTTP 429"]
    assert first.statistics().holds_heard == 0  # its own hold comes back as the one it has
    assert [(e.reason, e.seconds) for e in second_log.of(LimiterHeld)] == [("held by the fleet", pytest.approx(7.5))]
    stats = second.statistics()
    assert (stats.holds, stats.holds_heard, stats.waits, stats.acquires) == (1, 1, 1, 1)
    assert stats.wait_time == pytest.approx(7.5)


async def test_a_fleet_keeps_the_latest_end_any_process_announced(backends: list[VirtualTimeBackend]) -> None:
    """Announcements from two processes, a shorter one last: a third process holds to the latest end, as one
    in-process limiter told all of them does."""
    (a, _), (b, _), (c, _) = fleet(backends)
    local = AdaptiveRateLimiter(events=EventBus())
    for limiter, seconds, pause in ((a, 5.0, 1.0), (b, 9.0, 2.0), (a, 4.0, 0.0)):
        limiter.hold(seconds)
        local.hold(seconds)
        await limiter.refresh()
        await anyio.sleep(pause)
    await c.refresh()
    assert c.statistics().held == pytest.approx(local.statistics().held)
    assert c.time_until_available() == pytest.approx(7.0)  # b's 9 s, said 2 s ago


async def test_once_the_fleets_limiter_is_enabled_every_acquire_hears_the_hold(
    backends: list[VirtualTimeBackend],
) -> None:
    """Enabled, each acquire is a round trip: a process that sent a moment ago holds at its very next call."""
    (first, _), (second, _), _ = fleet(backends)
    await enable(first)
    await second.acquire()  # a round trip
    first.hold(4.0)
    await first.refresh()
    start = anyio.current_time()
    await second.acquire()
    assert anyio.current_time() - start == pytest.approx(4.0, abs=0.05)  # the hold, then its token


async def test_a_disabled_fleet_hears_within_sync_interval(backends: list[VirtualTimeBackend]) -> None:
    """Before any throttle, a process makes a round trip at most every sync_interval: an acquire between two goes
    free, the first after the interval holds."""
    first, second = (RedisAdaptiveRateLimiter(backend, name="api", sync_interval=0.25) for backend in backends[:2])
    await second.acquire()  # its next round trip is due in 0.25 s
    first.hold(6.0)
    await first.refresh()
    start = anyio.current_time()
    await anyio.sleep(0.1)
    await second.acquire()
    assert anyio.current_time() - start == pytest.approx(0.1)
    await anyio.sleep(0.15)
    await second.acquire()
    assert anyio.current_time() - start == pytest.approx(6.0)


async def test_a_fleet_hold_that_outlasts_the_timeout_refuses_the_call_and_gives_its_token_back(
    backends: list[VirtualTimeBackend],
) -> None:
    """A call that took its token from the fleet, then heard of a hold longer than its timeout: RateLimitTimeout at
    once, counted, and the token goes back with the next round trip."""
    (first, _), (second, _), _ = fleet(backends)
    await enable(first)
    await anyio.sleep(10.0)  # the bucket refills to its capacity
    first.hold(30.0)
    await first.refresh()
    before = (await second.refresh()).available
    second_fresh = RedisAdaptiveRateLimiter(backends[2], name="api")  # a process that has not heard yet
    start = anyio.current_time()
    with pytest.raises(RateLimitTimeout) as caught:
        await second_fresh.acquire(timeout=2.0)
    assert anyio.current_time() == start
    assert caught.value.timeout == pytest.approx(2.0)
    stats = second_fresh.statistics()
    assert (stats.timeouts, stats.acquires, stats.holds_heard) == (1, 0, 1)
    assert (await second_fresh.refresh()).available == pytest.approx(before, abs=0.01)


async def test_a_cancelled_wait_for_the_fleets_hold_gives_its_token_back(backends: list[VirtualTimeBackend]) -> None:
    (first, _), (second, _), _ = fleet(backends)
    await enable(first)
    await anyio.sleep(10.0)
    first.hold(30.0)
    await first.refresh()
    before = (await first.refresh()).available
    with anyio.move_on_after(1.0):
        await second.acquire()
    stats = second.statistics()
    assert (stats.acquires, stats.timeouts, stats.waiting) == (0, 0, 0)
    assert (await second.refresh()).available == pytest.approx(before, abs=0.01)


async def test_a_hold_that_could_not_be_reported_goes_with_the_next_round_trip(
    backends: list[VirtualTimeBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis was down when the hold was to be reported: the process holds on its own (fail open), and tells the
    fleet at its next round trip that reaches Redis, as long as the hold runs."""
    (first, _), (second, _), _ = fleet(backends)
    down = [True]
    run = VirtualTimeBackend.run

    async def flaky(self: VirtualTimeBackend, script: Script, key: str, args: list[str]) -> list[object]:
        if down[0] and self is backends[0]:
            raise _Unavailable("connection refused", sent=False)
        return await run(self, script, key, args)

    monkeypatch.setattr(VirtualTimeBackend, "run", flaky)
    first.hold(10.0)
    await first.refresh()
    assert first.statistics().degraded
    await second.refresh()
    assert second.statistics().held == 0.0
    down[0] = False
    await anyio.sleep(2.0)
    await first.refresh()
    await second.refresh()
    assert second.statistics().held == pytest.approx(8.0)


async def test_a_hold_whose_report_was_cancelled_on_its_way_goes_with_the_next_round_trip(
    backends: list[VirtualTimeBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call that carried the report was cancelled before Redis ran it: the next round trip reports it."""
    (first, _), (second, _), _ = fleet(backends)
    slow = [True]
    run = VirtualTimeBackend.run

    async def late(self: VirtualTimeBackend, script: Script, key: str, args: list[str]) -> list[object]:
        if slow[0] and self is backends[0]:
            await anyio.sleep(1.0)  # the round trip is on its way when the call is cancelled
        return await run(self, script, key, args)

    monkeypatch.setattr(VirtualTimeBackend, "run", late)
    first.hold(10.0)
    with anyio.move_on_after(0.5):
        await first.acquire()
    assert (await second.refresh()).held == 0.0
    slow[0] = False
    await first.refresh()
    assert (await second.refresh()).held == pytest.approx(9.5)


async def test_the_fleets_state_outlives_key_ttl_while_a_hold_runs(
    backends: list[VirtualTimeBackend], redis_server: RedisServer
) -> None:
    """An hourly quota spent: the state is kept for the hold, not only key_ttl (1 s here), so a process that
    comes later still holds."""
    limiter = RedisAdaptiveRateLimiter(backends[0], name="api", key_ttl=1.0)
    limiter.hold(3600.0)
    await limiter.refresh()
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.pttl(limiter.key) > 3_590_000


@pytest.mark.parametrize("sends_again", [True, False], ids=["sends-again", "sends-nothing-more"])
async def test_a_success_that_spends_the_quota_in_one_process_holds_the_others_calls(
    backends: list[VirtualTimeBackend], sends_again: bool
) -> None:
    """Two processes, each with its transport and the fleet's Redis limiter: the first hears a 200 take the
    window's last request and holds. The engine tells the fleet with that answer, whether or not the first
    process sends again, and the second process's call waits for the reset instead of meeting the spent
    window."""
    answers: list[tuple[float, str]] = []
    spends = {"first"}  # the first process's first answer takes the window's last request

    def handler(request: httpx.Request) -> httpx.Response:
        who = request.headers["x-process"]
        answers.append((anyio.current_time(), who))
        left = "0" if who in spends else "5"
        spends.discard(who)
        return httpx.Response(200, headers={"RateLimit": f'"w";r={left};t=8', "RateLimit-Policy": '"w";q=10;w=10'})

    def client(backend: VirtualTimeBackend, name: str) -> httpx.AsyncClient:
        retrier = Retrier(RetryPolicy(mode="adaptive"),
                          limiter=lambda key: RedisAdaptiveRateLimiter(backend, name=key))
        return httpx.AsyncClient(transport=AsyncRetryTransport(httpx.MockTransport(handler), retrier=retrier),
                                 headers={"x-process": name})

    async with client(backends[0], "first") as first, client(backends[1], "second") as second:
        await second.get("https://api.test/")  # the second process's round trip: its next is due in 0.25 s
        answers.clear()
        start = anyio.current_time()
        assert (await first.get("https://api.test/")).status_code == 200  # r=0: the first process holds 8 s
        async with anyio.create_task_group() as tg:
            if sends_again:
                tg.start_soon(first.get, "https://api.test/")  # waits out the hold
            await anyio.sleep(0.5)
            tg.start_soon(second.get, "https://api.test/")
    assert sorted((round(at - start, 6), who) for at, who in answers) == [
        (0.0, "first"), *([(8.0, "first")] if sends_again else []), (8.0, "second")]


@dataclass
class Held:
    """Two processes, ``a`` and ``b``, served 8 over 4 s between them (after a hold, one call per 0.5 s); at
    start + 4, ``a`` holds 4 s and tells the fleet; now it is start + 5. ``sent``: when each call went, by
    which process."""

    a: RedisAdaptiveRateLimiter
    b: RedisAdaptiveRateLimiter
    start: float
    sent: list[tuple[float, str]] = field(default_factory=list)

    async def send(self, limiter: RedisAdaptiveRateLimiter | None = None) -> None:
        limiter = limiter or self.b
        await limiter.acquire()
        self.sent.append((anyio.current_time() - self.start, "a" if limiter is self.a else "b"))

    @property
    def times(self) -> list[float]:
        return sorted(at for at, _ in self.sent)


async def held(backends: list[VirtualTimeBackend], profile: str = "asyncretry", *, b_served: bool = True) -> Held:
    """The fleet of :class:`Held` (``b_served=False``: ``a`` was served all 8)."""
    (a, _), (b, _), _ = fleet(backends, profile)
    start = anyio.current_time()
    for _ in range(4):
        a.update(False)
        (b if b_served else a).update(False)
        await anyio.sleep(1.0)
    await b.refresh()
    await a.hold(4.0, reason="HTTP 429")  # awaited: the fleet hears of it now
    await anyio.sleep(1.0)  # b's next round trip is due
    return Held(a, b, start)


@pytest.mark.parametrize("profile", PROFILES)
async def test_the_fleet_is_released_after_a_hold_as_one_limiter_is(
    backends: list[VirtualTimeBackend], profile: str
) -> None:
    """After the hold, the fleet's calls go out one per 0.5 s, in the order they asked, whichever process
    sends them (each process alone was served one a second), as one in-process limiter shared by all their
    tasks releases."""
    fleet_ = await held(backends, profile)
    async with anyio.create_task_group() as tg:
        for limiter in (fleet_.b, fleet_.a):
            for _ in range(3):
                tg.start_soon(fleet_.send, limiter)
                await anyio.lowlevel.checkpoint()
    assert [at for at, _ in fleet_.sent] == pytest.approx([8.0, 8.5, 9.0, 9.5, 10.0, 10.5])
    assert sorted(who for _, who in fleet_.sent) == ["a"] * 3 + ["b"] * 3
    await fleet_.a.refresh()
    assert fleet_.a.time_until_available() == pytest.approx(0.5)  # the fleet's next place
    assert fleet_.b.statistics().holds_heard == 1


async def test_a_place_in_the_release_beyond_the_timeout_is_refused_and_taken_by_no_one(
    backends: list[VirtualTimeBackend],
) -> None:
    """The third call's place would come 3.8 s later, past its 3.5-s timeout: RateLimitTimeout at once, and
    the next call takes the place it would have had."""
    fleet_ = await held(backends)
    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(fleet_.send)
            await anyio.sleep(0.1)
        with pytest.raises(RateLimitTimeout) as caught:
            await fleet_.b.acquire(timeout=3.5)
        assert (caught.value.wait, anyio.current_time() - fleet_.start) == pytest.approx((3.8, 5.2))
        tg.start_soon(fleet_.send)
    assert fleet_.times == pytest.approx([8.0, 8.5, 9.0])
    assert fleet_.b.statistics().timeouts == 1


async def test_a_process_that_served_nothing_goes_at_the_fleets_pace(backends: list[VirtualTimeBackend]) -> None:
    """A process with no success of its own (it would release its waiters together) takes places in the
    fleet's release: the other process's 8 served over 4 s set one call per 0.5 s."""
    fleet_ = await held(backends, b_served=False)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(fleet_.send)
    assert fleet_.times == pytest.approx([8.0, 8.5, 9.0])


@pytest.mark.parametrize("announcer", ["b", "a"])
async def test_a_call_whose_place_a_new_hold_overtook_takes_a_place_in_the_next_release(
    backends: list[VirtualTimeBackend], announcer: str
) -> None:
    """Places at 8, 8.5 and 9; at 8.2 the fresh window is spent again (a hold of 2 s, with nothing served since
    the last: one release per 2 s). The calls still waiting go at 10.2 and 12.2, one per place, not together
    when the new hold ends; when the other process announced it, not at 8.5 and 9 either: they hear of it
    from the fleet (they ask before they go)."""
    fleet_ = await held(backends)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(fleet_.send)
        await anyio.sleep(3.2)
        await getattr(fleet_, announcer).hold(2.0)
    assert fleet_.times == pytest.approx([8.0, 10.2, 12.2])
    assert fleet_.b.statistics().holds_heard == (2 if announcer == "a" else 1)


async def test_a_place_after_the_end_of_a_newer_hold_is_taken_again_in_its_release(
    backends: list[VirtualTimeBackend],
) -> None:
    """Six places, 8 to 10.5; at 8.2 a hold to 10.2 (one release per 2 s after it). The call placed at 10.5
    wakes after that hold is over, but its place belongs to the release before: it takes one in the new
    release, after the calls that waited for the hold, instead of going alongside them."""
    fleet_ = await held(backends)
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(fleet_.send)
        await anyio.sleep(3.2)
        await fleet_.a.hold(2.0)
    assert fleet_.times == pytest.approx([8.0, 10.2, 12.2, 14.2, 16.2, 18.2])
