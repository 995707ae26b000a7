"""RedisAdaptiveRateLimiter: one CUBIC rate for a fleet, fed by every process's responses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    ConfigurationError,
    Event,
    EventBus,
    LimiterRateChanged,
    RateLimitTimeout,
    Throttled,
)
from asyncretry._primitives._shared import RemoteLimiter
from asyncretry.redis import RedisAdaptiveRateLimiter, RedisTokenBucket
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend
from test_redis_bucket import CommandCounter

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

AWS = AdaptiveLimiterConfig(profile="aws")


@asynccontextmanager
async def fleet(
    server: RedisServer, prefix: str, size: int = 2, **options: Any
) -> AsyncIterator[list[RedisAdaptiveRateLimiter]]:
    """``size`` limiters with one name on as many clients: a fleet of processes, as far as Redis can tell."""
    async with AsyncExitStack() as stack:
        backends = [
            await stack.enter_async_context(server.backend(prefix))
            for _ in range(size)
        ]
        yield [RedisAdaptiveRateLimiter(b, name="api", **options) for b in backends]


@pytest.mark.anyio
async def test_acquire_is_free_until_a_throttle_except_a_sync_every_interval(
    redis_server: RedisServer, prefix: str
) -> None:
    """Before any throttle, 100 acquires over 0.3 s make a round trip only every sync_interval (0.1 s)."""
    async with redis_server.backend(prefix) as backend:
        counter = CommandCounter(backend)
        limiter = RedisAdaptiveRateLimiter(backend, name="free", sync_interval=0.1)
        for _ in range(100):
            await limiter.acquire()
            limiter.update(False)
            await anyio.sleep(0.003)
    assert 3 <= len(counter.commands) <= 6
    assert not limiter.enabled
    assert limiter.statistics().acquires == 100


@pytest.mark.anyio
async def test_a_throttle_in_one_process_slows_the_whole_fleet(redis_server: RedisServer, prefix: str) -> None:
    """A's throttle enables the fleet's limiter; B learns it at its next sync and both see one fill rate."""
    async with fleet(redis_server, prefix, sync_interval=0.05, config=AWS) as (a, b):
        for _ in range(60):  # both send for 1.2 s, so that the fleet's measurement settles
            for limiter in (a, b):
                await limiter.acquire()
                limiter.update(False)
            await anyio.sleep(0.02)
        a.update(True)
        await a.acquire()  # the throttle travels with this round trip
        assert a.enabled
        # the fleet sent about 2 x 45 = 90 responses/s: the cut is beta x the fleet's rate, not one process's
        assert a.last_max_rate > 55
        assert a.fill_rate == pytest.approx(0.7 * a.last_max_rate)
        await anyio.sleep(0.06)
        await b.acquire()
        assert b.enabled
        await a.refresh()  # nothing left to report: reads the fleet's state as it is
        assert b.fill_rate == a.fill_rate


@pytest.mark.anyio
async def test_a_hold_in_one_process_reaches_another_on_the_servers_clock(
    redis_server: RedisServer, prefix: str
) -> None:
    """On the real clocks (the script reads Redis's TIME): B's next round trip after A reported its hold of 30 s
    holds B until about the same end, whatever B's own clock reads."""
    async with fleet(redis_server, prefix) as (a, b):
        a.hold(30.0, reason="HTTP 429")
        await a.refresh()
        told = time.monotonic()
        await b.refresh()
        held = b.statistics().held
        assert 30.0 - (time.monotonic() - told) - 1.0 <= held <= 30.0
        assert (b.statistics().holds_heard, a.statistics().holds_heard) == (1, 0)
        with pytest.raises(RateLimitTimeout):
            await b.acquire(timeout=1.0)


@pytest.mark.anyio
async def test_the_fleet_shares_one_bucket_at_the_fill_rate(redis_server: RedisServer, prefix: str) -> None:
    """Once enabled, two processes together get at most the fill rate (20/s here), not twice it.

    (An upper bound only: a loaded machine may grant fewer, never more; the rate a fleet reaches is
    ``benchmarks/bench_redis.py``'s figure.)"""
    config = AdaptiveLimiterConfig(profile="aws", min_fill_rate=20.0, min_capacity=1.0)
    async with fleet(redis_server, prefix, config=config) as (a, b):
        a.update(True)  # enabled at the floor: 20 tokens/s for the fleet
        await a.refresh()
        granted: list[float] = []

        async def worker(limiter: RedisAdaptiveRateLimiter) -> None:
            while True:
                await limiter.acquire()
                granted.append(time.monotonic())

        started = time.monotonic()
        with anyio.move_on_after(1.0):
            async with anyio.create_task_group() as tg:
                for limiter in (a, b, a, b):
                    tg.start_soon(worker, limiter)
    in_window = [t for t in granted if started + 0.2 <= t < started + 1.0]
    assert 0 < len(in_window) <= 20 * 0.8 * 1.15


@asynccontextmanager
async def paced_at_5_per_second(server: RedisServer, prefix: str) -> AsyncIterator[RedisAdaptiveRateLimiter]:
    """A fleet of one, throttled once: 5/s from an empty bucket, its first token taken (the next is ~0.2 s away)."""
    config = AdaptiveLimiterConfig(profile="aws", min_fill_rate=5.0)
    async with fleet(server, prefix, size=1, config=config) as (limiter,):
        limiter.update(True)
        await limiter.refresh()
        await limiter.acquire()
        yield limiter


@pytest.mark.anyio
async def test_a_wait_beyond_the_timeout_fails_and_a_cancelled_wait_hands_its_token_back(
    redis_server: RedisServer, prefix: str
) -> None:
    """RateLimitTimeout when the fleet's token is too far away; a cancelled sleeper's token returns to the fleet."""
    async with paced_at_5_per_second(redis_server, prefix) as limiter:
        with pytest.raises(RateLimitTimeout):
            await limiter.acquire(timeout=0.05)
        with anyio.move_on_after(0.05):
            await limiter.acquire()
        assert limiter.statistics().waiting == 0
        await limiter.refresh()  # carries the token back
        assert limiter.statistics().timeouts == 1
        assert limiter.time_until_available() < 0.2


@pytest.mark.anyio
async def test_a_call_that_waits_for_a_hold_then_for_its_token_is_one_wait(
    redis_server: RedisServer, prefix: str
) -> None:
    """Waiting for the hold and then for the fleet's token adds one wait to the counters, not two."""
    async with paced_at_5_per_second(redis_server, prefix) as limiter:
        before = limiter.statistics()
        limiter.hold(0.05)
        await limiter.acquire()  # the hold, then the rest of the way to the token
        after = limiter.statistics()
    assert after.waits - before.waits == 1
    assert after.wait_time - before.wait_time >= 0.1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("profile", "cut", "growth"),
    [("asyncretry", "start_up", ("recovery", "probe")), ("aws", "cubic_throttle", ("cubic_success",))],
)
async def test_throttles_and_rate_changes_are_announced_with_the_fleets_rule(
    redis_server: RedisServer, prefix: str, profile: str, cut: str, growth: tuple[str, ...]
) -> None:
    """update(True) emits Throttled at once; the round trip that changed the fleet's rate emits LimiterRateChanged
    naming the rule that set it, and every process's statistics name the fleet's last rule after its next sync."""
    seen: list[str] = []
    bus = EventBus()

    def record(event: Event) -> None:
        if isinstance(event, Throttled):
            seen.append("Throttled")
        elif isinstance(event, LimiterRateChanged):
            seen.append(f"LimiterRateChanged {event.rule}")

    bus.subscribe(record)
    config = AdaptiveLimiterConfig(profile=profile)
    async with fleet(redis_server, prefix, config=config, events=bus) as (limiter, other):
        for _ in range(5):
            await limiter.acquire()
            limiter.update(False)
            await anyio.sleep(0.12)
        seen.clear()  # the "aws" profile's successes move its rate too
        limiter.update(True, reason="HTTP 429")
        assert seen == ["Throttled"]
        await limiter.acquire()
        assert seen[-1] == f"LimiterRateChanged {cut}"
        assert limiter.statistics().rule == cut
        await other.refresh()
        assert other.statistics().rule == cut
        await anyio.sleep(0.12)
        await other.acquire()
        other.update(False)
        await other.refresh()
        assert seen[-1] in [f"LimiterRateChanged {rule}" for rule in growth]  # the probe, on a loaded machine
        assert other.statistics().rule == seen[-1].split()[-1]


def test_both_profiles_run_on_redis_and_it_is_a_remote_limiter(redis_server: RedisServer) -> None:
    """The default profile is the default on Redis too, "aws" is selectable; bad durations are named; the
    fleet limiter is a RemoteLimiter built around a local one, not a local limiter (no try_acquire)."""
    with pytest.raises(ValueError, match="sync_interval"):
        RedisAdaptiveRateLimiter(redis_server.url, sync_interval=0)
    assert RedisAdaptiveRateLimiter(redis_server.url, AWS).config.profile == "aws"
    limiter = RedisAdaptiveRateLimiter(redis_server.url)
    assert isinstance(limiter, RemoteLimiter)
    assert AdaptiveRateLimiter not in type(limiter).__mro__
    assert not hasattr(limiter, "try_acquire")
    assert limiter.config.profile == "asyncretry"
    assert "RedisAdaptiveRateLimiter 'limiter'" in repr(limiter)
    asyncio.run(limiter.backend.aclose())


class CapacityServer:
    """A service that handles ``capacity`` requests per second in total and throttles the rest."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.tokens = capacity * 0.1
        self.last = time.monotonic()
        self.handled: list[float] = []

    def handle(self) -> bool:
        """True if served, False if throttled."""
        now = time.monotonic()
        self.tokens = min(self.capacity * 0.1, self.tokens + (now - self.last) * self.capacity)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            self.handled.append(now)
            return True
        return False


@pytest.mark.anyio
async def test_a_fleet_of_three_shares_one_rate_and_stops_flooding_a_throttled_service(
    redis_server: RedisServer, prefix: str
) -> None:
    """Twelve workers in three processes against a 60 req/s service: one fleet rate, sending near the capacity.

    Unlimited, the workers would send about 2,000 requests/s; three independent limiters would each
    converge on the capacity, three times too much together. The fleet sends at its one fill rate, which
    CUBIC keeps near the service's capacity (AWS dynamics: each throttle cuts, the cubic grows back).
    """
    service = CapacityServer(60)
    attempts: list[tuple[float, bool]] = []
    async with fleet(redis_server, prefix, size=3, config=AWS) as limiters:

        async def worker(limiter: RedisAdaptiveRateLimiter) -> None:
            while True:
                await limiter.acquire()
                served = service.handle()
                attempts.append((time.monotonic(), served))
                limiter.update(not served)
                await anyio.sleep(0.005)  # the request's latency

        started = time.monotonic()
        with anyio.move_on_after(4.0):
            async with anyio.create_task_group() as tg:
                for limiter in limiters * 4:
                    tg.start_soon(worker, limiter)
        for limiter in limiters:
            await limiter.refresh()  # report what is left ...
        rates = [(await limiter.refresh()).fill_rate for limiter in limiters]  # ... then all read one state
    late = [served for t, served in attempts if t >= started + 1.0]
    sent_rate = len(late) / 3.0
    assert max(rates) == min(rates)  # one rate for the fleet
    assert sent_rate <= 60 * 1.5
    assert sum(late) >= 0.9 * len(late)  # the service throttles less than one request in ten
    assert len(attempts) < 4 * 60 * 1.5 + 100  # the first throttles came after a burst, then the fleet held back


@pytest.mark.anyio
async def test_four_processes_share_one_default_profile_state_and_a_throttle_in_one_slows_all(
    redis_server: RedisServer, prefix: str
) -> None:
    """Four processes' default-profile limiters on Redis are one limiter: one process's throttle enables
    all four, all four read one fill rate, and a later congestion event seen by one lowers the rate the
    others get. (Counts and states only: the fleet's throughput is ``benchmarks/bench_redis_fleet.py``'s.)"""
    async with fleet(redis_server, prefix, size=4, sync_interval=0.05) as limiters:
        reporter = limiters[0]

        async def send_round() -> None:
            for limiter in limiters:
                await limiter.acquire()
                limiter.update(False, sent_at=anyio.current_time())

        async def read_all() -> list[float]:
            for limiter in limiters:
                await limiter.refresh()  # report what is left ...
            return [(await limiter.refresh()).fill_rate for limiter in limiters]  # ... then only read

        for _ in range(20):
            await send_round()
            await anyio.sleep(0.01)
        assert not any(limiter.enabled for limiter in limiters)  # successes alone never enable it
        reporter.update(True, sent_at=anyio.current_time())
        await reporter.refresh()
        rates = await read_all()
        assert all(limiter.enabled for limiter in limiters)
        assert len(set(rates)) == 1  # one state, one fill rate

        for _ in range(40):  # well past the start-up and reaction_time: the next throttle is a new event
            await send_round()
            await anyio.sleep(0.02)
        before = (await read_all())[-1]
        reporter.update(True, sent_at=anyio.current_time())
        await reporter.refresh()
        after = await read_all()
    assert len(set(after)) == 1
    assert after[-1] < before  # the last process slowed down for a throttle only the first one saw


@pytest.mark.parametrize("first", ["aws", "asyncretry"])
@pytest.mark.anyio
async def test_two_profiles_on_one_name_are_a_configuration_error_not_an_outage_of_the_backend(
    redis_server: RedisServer, prefix: str, first: str
) -> None:
    """A process whose limiter has another profile than the one that made the fleet's state is told so
    (ConfigurationError, in both modes); the backend stays up for every other primitive on it. (A script that
    failed on the other profile's fields was read as Redis being down: the whole backend failed open.)"""
    async with redis_server.backend(prefix) as backend:
        profiles = {"aws": AWS, "asyncretry": AdaptiveLimiterConfig()}
        made = RedisAdaptiveRateLimiter(backend, profiles[first], name="api")
        other = next(config for name, config in profiles.items() if name != first)
        bucket = RedisTokenBucket(backend, 100, 10, name="api")
        made.update(True)
        await made.refresh()
        for on_unavailable in ("fail_open", "fail_closed"):
            wrong = RedisAdaptiveRateLimiter(backend, other, name="api", on_unavailable=on_unavailable)
            with pytest.raises(ConfigurationError, match="profile"):
                await wrong.acquire()
            assert not wrong.statistics().degraded
        assert backend.up
        await bucket.acquire()
        assert not bucket.statistics().degraded
        assert (await made.refresh()).enabled


@pytest.mark.anyio
async def test_a_flushed_script_cache_is_taught_again_without_an_outage(redis_server: RedisServer, prefix: str) -> None:
    """SCRIPT FLUSH (as a restarted or failed-over server has): the next round trip gets NOSCRIPT, sends the
    script with EVAL and goes on from the fleet's state; nothing fails open."""
    async with redis_server.backend(prefix) as backend:
        limiter = RedisAdaptiveRateLimiter(backend, name="api")
        limiter.update(True)
        await limiter.refresh()
        assert limiter.enabled
        await backend.client.script_flush()
        before = backend.statistics().round_trips
        limiter.update(False)
        await limiter.refresh()
        stats = limiter.statistics()
        assert (stats.enabled, stats.degraded, stats.fallbacks) == (True, False, 0)
        assert backend.statistics().round_trips == before + 2  # EVALSHA refused, then EVAL
        assert backend.up
