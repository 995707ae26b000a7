"""Redis Sentinel: the primitives follow a failover to the new primary by themselves.

The suite starts a primary, its replica and three sentinels from the same binary
(``conftest_redis.SentinelGroup``), kills the primary mid-run and times how long calls take to reach
the promoted replica: sentinel's ``down-after-milliseconds`` (0.5 s here), its election and
promotion, then the backend's next recovery probe.
"""

from __future__ import annotations

import time

import anyio
import pytest
import redis

from asyncretry import BackendUnavailable, RetryQuotaConfig
from asyncretry.redis import RedisBackend, RedisRetryQuota, RedisTokenBucket
from conftest_redis import SERVICE, SentinelGroup, until_redis_answers
from conftest_redis import anyio_backend as anyio_backend
from conftest_redis import sentinel_group as sentinel_group

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

# down-after (0.5 s) + election and promotion (about 1-3 s) + one recovery delay (<= 0.5 s), with room
# for a loaded machine; docs/redis.md states the same bound.
FAILOVER_BUDGET = 15.0


@pytest.mark.anyio
async def test_after_a_failover_the_primitives_reach_the_new_primary(
    sentinel_group: SentinelGroup, prefix: str
) -> None:
    """Primary killed mid-run: calls fail closed or open as chosen (never raw, never hung), then share state again."""
    async with RedisBackend.sentinel(
        sentinel_group.addresses, SERVICE, prefix=prefix, operation_timeout=0.5, recovery_delay=0.2,
        max_recovery_delay=0.5,
    ) as backend:
        bucket = RedisTokenBucket(backend, 1000, 1000, name="failover", on_unavailable="fail_closed")
        quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name="failover")
        await until_redis_answers(backend, bucket.acquire)
        assert await quota.try_acquire(5)
        sentinel_group.primary.kill()
        started = time.monotonic()
        refused = 0
        with anyio.fail_after(FAILOVER_BUDGET):
            while True:
                try:
                    await bucket.acquire()  # fail closed: BackendUnavailable until the new primary answers
                except BackendUnavailable:
                    refused += 1
                else:
                    break
                assert await quota.try_acquire(0.01) in (True, False)  # fail open meanwhile: a local answer
                await anyio.sleep(0.05)
        took = time.monotonic() - started
        assert refused > 0
        assert took < FAILOVER_BUDGET
        assert backend.up
        # the promoted replica now holds the state, and every primitive uses it again
        with redis.Redis(port=sentinel_group.replica.port) as client:
            assert client.info("replication")["role"] == "master"
            assert client.exists(bucket.key)
        assert await quota.try_acquire(5)
        assert not quota.statistics().degraded
