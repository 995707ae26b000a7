"""Redis Cluster: every primitive works with its keys spread over three Valkey nodes, and a dead node is
an outage of the primitives whose keys it holds, not of the others.

The suite forms the cluster itself (``conftest_redis.ValkeyCluster``: ``CLUSTER ADDSLOTSRANGE`` and
``CLUSTER MEET``, no extra tools). Names are chosen so that the keys of each kind land on every node.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from asyncretry import (
    AdaptiveLimiterConfig,
    BackendLost,
    BackendUnavailable,
    CircuitBreakerConfig,
    CircuitOpenError,
    ConfigurationError,
    Event,
    EventBus,
    RetryQuotaConfig,
)
from asyncretry.redis import (
    RedisAdaptiveRateLimiter,
    RedisBackend,
    RedisCircuitBreaker,
    RedisRetryQuota,
    RedisTokenBucket,
)
from conftest_redis import ValkeyCluster, command, run_fleet, until_redis_answers
from conftest_redis import anyio_backend as anyio_backend
from conftest_redis import own_valkey_cluster as own_valkey_cluster
from conftest_redis import valkey_cluster as valkey_cluster
from test_redis_fleet import admitted_rate

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

WORKER = Path(__file__).with_name("fleet_worker.py")
SLOW = 2.0  # operation_timeout: a cluster client's first call also reads the topology, on a loaded machine


def spread(cluster: ValkeyCluster, prefix: str, kind: str) -> list[str]:
    """Three names whose keys ``{prefix}{kind}:{name}`` live on the three different nodes, in node order."""
    found: dict[int, str] = {}
    index = 0
    while len(found) < len(cluster.nodes):
        name = f"{kind}{index}"
        index += 1
        node = cluster.node_of_slot(key_slot(f"{prefix}{kind}:{name}".encode()))
        found.setdefault(cluster.nodes.index(node), name)
    return [found[i] for i in range(len(cluster.nodes))]


def holder(cluster: ValkeyCluster, key: str) -> int:
    """The index of the node that stores ``key`` (every node is asked how many keys it holds in the slot)."""
    slot = key_slot(key.encode())
    counts = []
    for node in cluster.nodes:
        with redis.Redis(port=node.port) as client:
            counts.append(int(client.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)))
    (index,) = [i for i, count in enumerate(counts) if count]
    return index


@pytest.mark.anyio
async def test_every_primitive_works_with_its_keys_on_every_node(valkey_cluster: ValkeyCluster, prefix: str) -> None:
    """Buckets, quotas, breakers and limiters on all three nodes: each runs its script where its key lives."""
    async with RedisBackend(valkey_cluster.url, cluster=True, prefix=prefix, operation_timeout=SLOW) as backend:
        assert backend.cluster
        for index, name in enumerate(spread(valkey_cluster, prefix, "bucket")):
            bucket = RedisTokenBucket(backend, 10, 2, name=name)
            await bucket.acquire()
            assert await bucket.try_acquire()
            assert not await bucket.try_acquire()
            assert holder(valkey_cluster, bucket.key) == index
        for index, name in enumerate(spread(valkey_cluster, prefix, "quota")):
            quota = RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name=name)
            assert await quota.try_acquire(10)
            assert not await quota.try_acquire(5)
            assert holder(valkey_cluster, quota.key) == index
        for index, name in enumerate(spread(valkey_cluster, prefix, "breaker")):
            breaker = RedisCircuitBreaker(backend, CircuitBreakerConfig(consecutive_failures=1), name=name)
            await breaker.record(success=False, probe=await breaker.acquire())
            with pytest.raises(CircuitOpenError):
                await breaker.acquire()
            assert holder(valkey_cluster, breaker.key) == index
        for index, name in enumerate(spread(valkey_cluster, prefix, "limiter")):
            limiter = RedisAdaptiveRateLimiter(backend, AdaptiveLimiterConfig(profile="aws"), name=name)
            await limiter.acquire()
            limiter.update(True)
            assert (await limiter.refresh()).enabled
            assert holder(valkey_cluster, limiter.key) == index
        assert backend.up


@pytest.mark.anyio
async def test_a_shared_quota_pays_exactly_capacity_over_cost_retries_on_every_node(
    valkey_cluster: ValkeyCluster, prefix: str
) -> None:
    """Two clients share each node's quota: 500 tokens at 5 a retry pay exactly 100 retries per quota."""
    async with (
        RedisBackend(valkey_cluster.url, cluster=True, prefix=prefix, operation_timeout=SLOW) as one,
        RedisBackend(
            redis.asyncio.RedisCluster.from_url(valkey_cluster.nodes[2].url), prefix=prefix, operation_timeout=SLOW
        ) as two,
    ):
        for name in spread(valkey_cluster, prefix, "quota"):
            quotas = [RedisRetryQuota(backend, name=name) for backend in (one, two)]
            paid = [await quotas[i % 2].try_acquire(5) for i in range(110)]
            assert paid.count(True) == 100
            assert paid[:100] == [True] * 100
        await two.client.aclose()


def test_four_processes_hold_a_shared_rate_on_every_node(valkey_cluster: ValkeyCluster, prefix: str) -> None:
    """4 processes x 3 buckets (one per node) at 40/s each: no bucket admits over 40/s, and each serves its rate.

    (The upper bound is the promise; the lower one allows for processes a loaded machine runs late.)
    """
    names = spread(valkey_cluster, prefix, "bucket")
    config = {"url": valkey_cluster.url, "cluster": True, "prefix": prefix, "names": names, "rate": 40.0,
              "capacity": 1, "duration": 3.0, "tasks": 4}
    results = run_fleet(WORKER, [config] * 4)
    for name in names:
        assert 0.75 * 40.0 <= admitted_rate(results, name, burst=1) <= 40.0 * 1.05


@pytest.mark.anyio
async def test_a_killed_node_is_an_outage_of_its_keys_only(own_valkey_cluster: ValkeyCluster, prefix: str) -> None:
    """Node 0 killed mid-run: its keys' primitives fail open or closed as chosen, the others go on sharing."""
    seen: list[Event] = []
    bus = EventBus()
    bus.subscribe(seen.append)
    async with RedisBackend(
        own_valkey_cluster.url, cluster=True, prefix=prefix, recovery_delay=0.2, operation_timeout=SLOW
    ) as backend:
        names = spread(own_valkey_cluster, prefix, "bucket")
        closed = [RedisTokenBucket(backend, 100, 5, name=n, on_unavailable="fail_closed") for n in names]
        opened = RedisRetryQuota(
            backend, name=spread(own_valkey_cluster, prefix, "quota")[0], events=bus
        )
        for bucket in closed:
            await bucket.acquire()
        assert await opened.try_acquire(5)
        own_valkey_cluster.nodes[0].kill()
        with anyio.fail_after(4 * SLOW):  # no hang, whatever the client does about the dead node
            with pytest.raises(BackendUnavailable):
                await closed[0].acquire()
            for bucket in closed[1:]:
                await bucket.acquire()  # served by the live nodes
                assert not bucket.statistics().degraded
            assert await opened.try_acquire(5)  # fail open: the local quota pays
        assert opened.statistics().degraded
        assert [type(event) for event in seen if isinstance(event, BackendLost)] == [
            BackendLost
        ]
        assert not backend.up


@pytest.mark.anyio
async def test_a_single_node_client_on_a_cluster_fails_loudly(valkey_cluster: ValkeyCluster, prefix: str) -> None:
    """A plain client given one node's URL: a key on another node is a ConfigurationError in both modes, not MOVED."""
    async with RedisBackend(valkey_cluster.nodes[0].url, prefix=prefix, operation_timeout=SLOW) as backend:
        name = spread(valkey_cluster, prefix, "bucket")[1]
        for choice in ("fail_open", "fail_closed"):
            bucket = RedisTokenBucket(backend, 10, 1, name=name, on_unavailable=choice)
            with pytest.raises(ConfigurationError, match="cluster=True"):
                await bucket.acquire()
        assert backend.up  # a setting to fix, not an outage


@pytest.mark.anyio
async def test_a_slot_moved_mid_run_is_followed_without_an_error(
    own_valkey_cluster: ValkeyCluster, prefix: str
) -> None:
    """A bucket's slot migrates from node 0 to node 1 (ASK while it moves, MOVED after): every call is served."""
    nodes = own_valkey_cluster.nodes
    async with RedisBackend(own_valkey_cluster.url, cluster=True, prefix=prefix, operation_timeout=SLOW) as backend:
        bucket = RedisTokenBucket(backend, 0.001, 10, name=spread(own_valkey_cluster, prefix, "bucket")[0])
        slot = key_slot(bucket.key.encode())
        assert await bucket.try_acquire()
        source, target = nodes[0].port, nodes[1].port
        source_id, target_id = command(source, "CLUSTER", "MYID"), command(target, "CLUSTER", "MYID")
        command(target, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id)
        command(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id)
        assert await bucket.try_acquire()  # the key is still on the source
        command(source, "MIGRATE", "127.0.0.1", str(target), "", "0", "5000", "KEYS", bucket.key)
        assert await bucket.try_acquire()  # ASK: the key is on the target, the slot not yet
        for node in nodes:
            command(node.port, "CLUSTER", "SETSLOT", str(slot), "NODE", target_id)
        assert await bucket.try_acquire()  # MOVED: the slot is the target's now
        assert int(command(target, "CLUSTER", "COUNTKEYSINSLOT", str(slot))) == 1
        assert (await bucket.refresh()).available == pytest.approx(6, abs=0.01)  # one state, carried over
        assert not bucket.statistics().degraded
        assert backend.up


async def _twelve_buckets_at_once(url: str, prefix: str) -> list[BaseException | None]:
    client = redis.asyncio.RedisCluster.from_url(url)
    try:
        async with RedisBackend(client, operation_timeout=1.0, prefix=prefix) as backend:
            buckets = [
                RedisTokenBucket(backend, 100, 10, name=f"b{i}", on_unavailable="fail_closed") for i in range(12)
            ]
            results: list[BaseException | None] = []

            async def acquire(bucket: RedisTokenBucket) -> None:
                try:
                    await bucket.acquire()
                except Exception as error:  # collected: the test asserts on every kind
                    results.append(error)
                else:
                    results.append(None)

            async with anyio.create_task_group() as group:
                for bucket in buckets:
                    group.start_soon(acquire, bucket)
            return results
    finally:
        await client.aclose()


@pytest.mark.anyio
async def test_twelve_buckets_at_once_on_a_new_cluster_client_never_raise_a_raw_client_error(
    valkey_cluster: ValkeyCluster, prefix: str
) -> None:
    """A user-built RedisCluster used by 12 buckets at once (1 s operation timeout, failing closed), 20 times:
    every acquire succeeds or raises BackendUnavailable; never a raw redis-py error (the client read its
    topology once per concurrent burst, which closed the connections other tasks were using)."""
    for run in range(20):
        results = await _twelve_buckets_at_once(valkey_cluster.url, f"{prefix}{run}:")
        assert len(results) == 12
        raw = [error for error in results if error is not None and not isinstance(error, BackendUnavailable)]
        assert raw == [], raw


@pytest.mark.anyio
async def test_anything_a_client_raises_is_an_outage_of_the_documented_kind(
    valkey_cluster: ValkeyCluster, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error from inside the client that is no redis-py error (an AttributeError, say) is an outage:
    BackendUnavailable failing closed, the local fallback failing open; the next round trip works again."""
    async with RedisBackend(valkey_cluster.url, cluster=True, prefix=prefix, operation_timeout=SLOW) as backend:
        closed = RedisTokenBucket(backend, 100, 10, name="closed", on_unavailable="fail_closed")
        opened = RedisTokenBucket(backend, 100, 10, name="open")
        await closed.acquire()

        async def broken(*args: object, **kwargs: object) -> object:
            raise AttributeError("'NoneType' object has no attribute 'writelines'")

        monkeypatch.setattr(backend.client, "evalsha", broken)
        with pytest.raises(BackendUnavailable, match="AttributeError"):
            await closed.acquire()
        await opened.acquire()
        assert opened.statistics().degraded
        monkeypatch.undo()

        async def both() -> None:
            await closed.acquire()
            await opened.acquire()

        await until_redis_answers(backend, both)
        assert backend.up
        assert not opened.statistics().degraded
