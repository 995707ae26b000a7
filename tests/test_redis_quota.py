"""RedisRetryQuota: the retry quota of a whole fleet, so that an outage gets a bounded number of retries in total."""

from __future__ import annotations

import asyncio
import time
import uuid

import anyio
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import (
    Event,
    EventBus,
    OutcomeKind,
    QuotaExhausted,
    QuotaRestored,
    RetryCapacityExceeded,
    RetryQuota,
    RetryQuotaConfig,
)
from asyncretry._primitives._shared import RemoteQuota
from asyncretry.redis import RedisBackend, RedisRetryQuota
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]


def stored_tokens(server: RedisServer, key: str, missing: float = -1.0) -> float:
    """The balance kept on the server (``missing`` when no script has created the key yet)."""
    with redis.Redis.from_url(server.url) as client:
        value = client.hget(key, "tokens")
    return missing if value is None else float(value)


@pytest.mark.anyio
async def test_a_total_outage_gets_100_retries_in_the_whole_fleet(redis_server: RedisServer, prefix: str) -> None:
    """Two processes share 500 tokens at 5 a retry: 100 retries between them, then both are refused."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        quotas = [RedisRetryQuota(b, name="api") for b in (one, two)]
        cost = quotas[0].cost_of(OutcomeKind.TRANSIENT)
        paid = [await quotas[i % 2].try_acquire(cost) for i in range(101)]
        assert paid == [True] * 100 + [False]
        assert not await quotas[0].try_acquire(cost)
        assert quotas[1].statistics().available == 0


@pytest.mark.anyio
async def test_successes_refund_up_to_the_capacity(redis_server: RedisServer, prefix: str) -> None:
    """release() adds tokens back, never beyond max_capacity."""
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=20), name="api")
        assert await quota.try_acquire(10)
        await quota.release(4)
        assert stored_tokens(redis_server, quota.key) == 14
        await quota.release(100)
        assert stored_tokens(redis_server, quota.key) == 20
        stats = quota.statistics()
        assert (stats.acquired_total, stats.released_total, stats.available) == (10, 104, 20)


@pytest.mark.anyio
async def test_the_quota_refills_with_time_on_the_servers_clock(redis_server: RedisServer, prefix: str) -> None:
    """With refill_units_per_second=100 a drained quota holds about 10 tokens 0.1 s later."""
    async with redis_server.backend(prefix) as backend:
        config = RetryQuotaConfig(max_capacity=50, refill_units_per_second=100)
        quota = RedisRetryQuota(backend, config, name="refill")
        assert await quota.try_acquire(50)
        await anyio.sleep(0.1)
        assert await quota.try_acquire(8)
        assert not await quota.try_acquire(8)


@pytest.mark.anyio
async def test_circuit_breaker_mode_refuses_at_once(redis_server: RedisServer, prefix: str) -> None:
    """acquire() in circuit-breaker mode raises RetryCapacityExceeded when the fleet's quota cannot pay."""
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="cb")
        await quota.acquire(10)
        with pytest.raises(RetryCapacityExceeded, match="5 tokens"):
            await quota.acquire(5)


@pytest.mark.anyio
async def test_waiting_mode_waits_for_the_refill(redis_server: RedisServer, prefix: str) -> None:
    """A waiting-mode retry that finds the quota empty waits for the server-computed refill (5 tokens at 50/s)."""
    async with redis_server.backend(prefix) as backend:
        config = RetryQuotaConfig(max_capacity=10, refill_units_per_second=50, circuit_breaker_mode=False)
        quota = RedisRetryQuota(backend, config, name="wait")
        await quota.acquire(10)
        started = time.monotonic()
        await quota.acquire(5)
        assert 0.08 <= time.monotonic() - started < 1.0  # 5 tokens at 50/s: 0.1 s (a loaded machine may add)
        assert quota.statistics().waiting == 0


@pytest.mark.anyio
async def test_a_waiter_is_paid_by_another_processs_success(redis_server: RedisServer, prefix: str) -> None:
    """A refund from another client reaches a waiting retry long before the refill would (it re-checks every 0.1 s)."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        config = RetryQuotaConfig(max_capacity=10, refill_units_per_second=0.1, circuit_breaker_mode=False)
        waiter, other = RedisRetryQuota(one, config, name="api"), RedisRetryQuota(two, config, name="api")
        await waiter.acquire(10)
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter.acquire, 5)
            await anyio.sleep(0.05)
            assert waiter.statistics().waiting == 1
            await other.release(5)
        assert time.monotonic() - started < 2.0  # the refill alone would take 50 s


@pytest.mark.anyio
async def test_a_waiting_mode_timeout_is_refused_up_front(redis_server: RedisServer, prefix: str) -> None:
    """A predicted refill longer than the timeout fails at once with RetryCapacityExceeded."""
    async with redis_server.backend(prefix) as backend:
        config = RetryQuotaConfig(max_capacity=10, refill_units_per_second=1, circuit_breaker_mode=False)
        quota = RedisRetryQuota(backend, config, name="wait")
        await quota.acquire(10)
        started = time.monotonic()
        with pytest.raises(RetryCapacityExceeded):
            await quota.acquire(5, timeout=2.0)
        assert time.monotonic() - started < 1.5  # refused up front (5 s of refill), not after the 2 s timeout
        assert quota.statistics().refused == 1


@pytest.mark.anyio
async def test_exhaustion_and_restoration_events_describe_what_this_process_saw(
    redis_server: RedisServer, prefix: str
) -> None:
    """QuotaExhausted on the first refusal, QuotaRestored once the refused cost could be paid again."""
    events: list[str] = []
    bus = EventBus()

    def record(event: Event) -> None:
        if isinstance(event, (QuotaExhausted, QuotaRestored)):
            events.append(type(event).__name__)

    bus.subscribe(record)
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="ev", events=bus)
        assert await quota.try_acquire(10)
        assert not await quota.try_acquire(5)
        assert not await quota.try_acquire(5)
        assert quota.statistics().exhausted
        await quota.release(5)
        assert not quota.statistics().exhausted
    assert events == ["QuotaExhausted", "QuotaRestored"]


@pytest.mark.anyio
async def test_a_refund_booked_without_a_round_trip_settles_with_the_next_script(
    redis_server: RedisServer, prefix: str
) -> None:
    """release_later (a cancelled retry) counts at once locally and reaches Redis with the next script."""
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="sync")
        assert await quota.try_acquire(10)
        quota.release_later(3)
        assert quota.available == 3
        assert stored_tokens(redis_server, quota.key) == 0
        assert await quota.try_acquire(3)
        assert stored_tokens(redis_server, quota.key) == 0
        assert not await quota.try_acquire(1)


@pytest.mark.anyio
async def test_the_quota_is_a_remote_quota_built_around_a_local_one(redis_server: RedisServer, prefix: str) -> None:
    """It implements the RemoteQuota protocol, is no RetryQuota, and answers cost_of without a round trip."""
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, name="protocol")
        assert isinstance(quota, RemoteQuota)
        typed: RemoteQuota = quota  # and mypy checks the signatures
        assert typed is quota
        anything: object = quota
        assert not isinstance(anything, RetryQuota)
        assert quota.cost_of(OutcomeKind.THROTTLING) == quota.config.throttling_retry_cost
        assert quota.statistics().round_trips == 0


@pytest.mark.anyio
async def test_reset_fills_the_fleets_quota_and_refresh_reads_it(redis_server: RedisServer, prefix: str) -> None:
    """reset() refills the shared balance for every process; refresh() reads it in one round trip."""
    async with redis_server.backend(prefix) as backend:
        one = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="reset")
        two = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="reset")
        assert await one.try_acquire(10)
        assert (await two.refresh()).available == 0
        await one.reset()
        assert (await two.refresh()).available == 10


@pytest.mark.anyio
async def test_an_unused_quota_expires_after_key_ttl(redis_server: RedisServer, prefix: str) -> None:
    """The key lives key_ttl seconds after its last use; expired, the quota starts full again."""
    async with redis_server.backend(prefix) as backend:
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="ttl", key_ttl=0.2)
        assert await quota.try_acquire(10)
        with redis.Redis.from_url(redis_server.url) as client:
            assert 0 < int(client.pttl(quota.key)) <= 200
        await anyio.sleep(0.3)
        assert await quota.try_acquire(10)


def test_bad_settings_are_refused_with_the_parameter_named(redis_server: RedisServer) -> None:
    """key_ttl, on_unavailable and costs are checked at construction and call time."""
    with pytest.raises(ValueError, match="key_ttl"):
        RedisRetryQuota(redis_server.url, key_ttl=0)
    with pytest.raises(ValueError, match="on_unavailable"):
        RedisRetryQuota(redis_server.url, on_unavailable="open")  # type: ignore[arg-type]
    quota = RedisRetryQuota(redis_server.url)
    with pytest.raises(ValueError, match="n must be"):
        asyncio.run(quota.try_acquire(501))
    assert "RedisRetryQuota 'quota'" in repr(quota)
    asyncio.run(quota.backend.aclose())


@settings(max_examples=25)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10)), max_size=15))
def test_the_shared_balance_stays_within_zero_and_the_capacity(
    redis_server: RedisServer, operations: list[tuple[bool, int]]
) -> None:
    """Whatever takes and refunds, the stored balance stays within [0, max_capacity] and matches the accounting."""

    async def run() -> None:
        # (a long operation_timeout: this is about the stored arithmetic, not outages, which a loaded
        # machine's slow round trip would otherwise turn this into: the quota would pay locally)
        async with RedisBackend(redis_server.url, prefix=f"prop:{uuid.uuid4().hex}:", operation_timeout=10) as backend:
            quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="property")
            expected = 10
            for take, n in operations:
                if take:
                    paid = await quota.try_acquire(n)
                    assert paid == (n <= expected)
                    expected -= n if paid else 0
                else:
                    await quota.release(n)
                    expected = min(10, expected + n)
                assert stored_tokens(redis_server, quota.key, missing=10) == expected
            await backend.client.delete(quota.key)

    asyncio.run(run())
