"""RedisTokenBucket: one token bucket for a fleet, one server-side script per acquire, on the server's clock."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import redis
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import RateLimitTimeout, TokenBucket
from asyncretry._primitives._shared import RemoteBucket
from asyncretry.redis import RedisBackend, RedisTokenBucket
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]


class CommandCounter:
    """Counts the commands a client sends (one per round trip: nothing here pipelines)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.commands: list[str] = []
        client: Any = backend.client
        original: Callable[..., Awaitable[Any]] = client.execute_command

        async def counting(*args: Any, **options: Any) -> Any:
            self.commands.append(str(args[0]))
            return await original(*args, **options)

        client.execute_command = counting


def stored(server: RedisServer, key: str) -> dict[str, float]:
    """The hash a primitive keeps on the server, read with a separate synchronous client."""
    with redis.Redis.from_url(server.url) as client:
        raw: dict[bytes, bytes] = client.hgetall(key)
    return {k.decode(): float(v) for k, v in raw.items()}


def pttl(server: RedisServer, key: str) -> int:
    with redis.Redis.from_url(server.url) as client:
        return int(client.pttl(key))


# -- the shared budget


@pytest.mark.anyio
async def test_the_burst_is_free_then_calls_are_paced_at_the_rate(redis_server: RedisServer, prefix: str) -> None:
    """Capacity 5 at 50/s: five acquires pass at once, ten more take 10/50 = 0.2 s."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 50, 5, name="api")
        # The clock starts before the first acquire: the refill runs from its script on, so a loaded
        # machine's delay over the burst's five round trips would otherwise read as tokens that came early.
        started = time.monotonic()
        for _ in range(5):
            await bucket.acquire()
        burst = bucket.statistics()
        for _ in range(10):
            await bucket.acquire()
        paced = time.monotonic() - started
        after = bucket.statistics()
    assert (burst.grants, burst.waits) == (5, 0)  # the burst: nobody waited
    assert (after.grants, after.waits) == (15, 10)  # then every call waited for its token ...
    assert 0.18 <= paced < 1.0  # ... and the ten beyond the five held take 0.2 s at 50/s (a loaded machine adds)


@pytest.mark.anyio
async def test_buckets_with_the_same_name_share_one_budget(redis_server: RedisServer, prefix: str) -> None:
    """Two clients (two processes, as far as Redis knows) draw on one capacity of 10 tokens together."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        a = RedisTokenBucket(one, 0.01, 10, name="shared")
        b = RedisTokenBucket(two, 0.01, 10, name="shared")
        taken = [await (a if i % 2 else b).try_acquire(1) for i in range(10)]
        assert all(taken)
        assert not await a.try_acquire(1)
        assert not await b.try_acquire(1)


@pytest.mark.anyio
async def test_prefixes_and_names_keep_buckets_apart(redis_server: RedisServer, prefix: str) -> None:
    """The key is ``{prefix}bucket:{name}``; another prefix or another name is another bucket."""
    async with (
        redis_server.backend(prefix + "a:") as first,
        redis_server.backend(prefix + "b:") as second,
    ):
        api = RedisTokenBucket(first, 0.01, 1, name="api")
        other_name = RedisTokenBucket(first, 0.01, 1, name="db")
        other_prefix = RedisTokenBucket(second, 0.01, 1, name="api")
        assert api.key == f"{prefix}a:bucket:api"
        assert await api.try_acquire()
        assert not await api.try_acquire()
        assert await other_name.try_acquire()
        assert await other_prefix.try_acquire()
    fields = set(stored(redis_server, f"{prefix}a:bucket:api"))
    members = {field for field in fields if field.startswith("m:")}
    assert len(members) == 1  # the process's presence, for the fleet size
    assert fields - members == {"tokens", "ts", "pr"}  # pr: when members who left are next dropped


@pytest.mark.anyio
async def test_the_key_expires_once_the_bucket_would_be_full_again(redis_server: RedisServer, prefix: str) -> None:
    """Two tokens short at 10/s, the bucket is full in 0.2 s: the key lives that long plus a second's margin,
    and at least as long as the fleet's members count (10 s after a process said it is there)."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 10, 2, name="ttl")
        await bucket.acquire(2)  # says the process is there
        assert 9800 < pttl(redis_server, bucket.key) <= 10_000
        with redis.Redis.from_url(redis_server.url) as client:
            client.delete(bucket.key)
        await bucket.acquire(2)  # within a second of the last: no presence sent, so no member to keep
        left = pttl(redis_server, bucket.key)
    assert 1000 < left <= 1200


@pytest.mark.anyio
async def test_every_acquire_is_one_round_trip_even_when_it_waits(redis_server: RedisServer, prefix: str) -> None:
    """EVALSHA once per acquire, waiting or not (on a server that knows the script; one that lacks it
    answers NOSCRIPT once, and the caller sends EVAL: tests/test_redis_limiter.py)."""
    async with redis_server.backend(prefix) as backend:
        await RedisTokenBucket(backend, 20, 2, name="warm-up").acquire()  # the server learns the script
        counter = CommandCounter(backend)
        bucket = RedisTokenBucket(backend, 20, 2, name="trips")
        # All at once, so that 18 of them queue for their tokens (up to 0.9 s out) however slow the machine
        # is: a token takes 50 ms, longer than a loaded machine's round trip.
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(bucket.acquire)
    assert counter.commands == ["EVALSHA"] * 20
    assert bucket.statistics().waits >= 17


@pytest.mark.anyio
async def test_waiters_are_served_in_the_order_they_reached_the_server(
    redis_server: RedisServer, prefix: str
) -> None:
    """Ten waiters from two clients, arriving one after the other, get their tokens in arrival order."""
    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        buckets = [RedisTokenBucket(b, 100, 1, name="fifo") for b in (one, two)]
        await buckets[0].acquire()  # empty now: everybody below waits
        served: list[int] = []

        async def waiter(i: int) -> None:
            await buckets[i % 2].acquire()
            served.append(i)

        async def reached_the_server(i: int, waits_before: int) -> None:
            # Waiter i's script has answered once it sleeps on its reservation (its bucket counts a wait)
            # or it was served at once: only then does the next waiter start, so arrivals are ordered
            # however long a round trip takes on a loaded machine.
            for _ in range(10_000):  # bounded: 10 s at most
                if buckets[i % 2].statistics().waits > waits_before or i in served:
                    return
                await anyio.sleep(0.001)
            raise AssertionError(f"waiter {i}'s reservation never came back")

        async with anyio.create_task_group() as tg:
            for i in range(10):
                waits_before = buckets[i % 2].statistics().waits
                tg.start_soon(waiter, i)
                await reached_the_server(i, waits_before)
    assert served == list(range(10))


# -- waits, timeouts and cancellation


@pytest.mark.anyio
async def test_a_wait_beyond_the_timeout_fails_at_once_and_reserves_nothing(
    redis_server: RedisServer, prefix: str
) -> None:
    """At 0.2/s with the bucket empty, acquire(timeout=1) fails at once and leaves the queue as it was."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 0.2, 1, name="timeout")
        await bucket.acquire()
        started = time.monotonic()
        with pytest.raises(RateLimitTimeout, match="timeout") as caught:
            await bucket.acquire(timeout=1.0)
        assert time.monotonic() - started < 0.9  # refused up front, not after waiting the 1 s (one round trip)
        assert caught.value.wait == pytest.approx(5.0, abs=0.5)
        assert await bucket.time_until_available() == pytest.approx(5.0, abs=0.5)  # not 10 s: nothing reserved
        assert bucket.statistics().timeouts == 1


@pytest.mark.anyio
async def test_a_cancelled_waiter_hands_its_reservation_back(redis_server: RedisServer, prefix: str) -> None:
    """A waiter cancelled in its sleep returns its tokens with the next round trip: the queue shrinks again."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 5, 1, name="cancel")
        await bucket.acquire()
        started = time.monotonic()
        with anyio.move_on_after(0.05):
            await bucket.acquire()  # reserved: due in 0.2 s
        assert bucket.statistics().cancelled == 1
        assert bucket.statistics().waiting == 0
        wait = await bucket.time_until_available()
        elapsed = time.monotonic() - started
    # The next token is due 0.2 s after the first acquire; without the hand-back it would be 0.4 s.
    assert wait == pytest.approx(max(0.0, 0.2 - elapsed), abs=0.08)


@pytest.mark.anyio
async def test_try_acquire_never_overtakes_a_sleeping_reservation(redis_server: RedisServer, prefix: str) -> None:
    """While a waiter sleeps on its reservation, a token that refilled meanwhile is already promised to it."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 10, 1, name="no-overtaking")
        await bucket.acquire()
        async with anyio.create_task_group() as tg:
            tg.start_soon(bucket.acquire)  # reserves the token due at +0.1 s; sleeps until then
            await anyio.sleep(0.12)  # a fresh bucket would hold 1.2 tokens by now
            assert not await bucket.try_acquire()
        assert bucket.statistics().grants == 2


@pytest.mark.anyio
async def test_the_bucket_is_a_remote_bucket_built_around_a_local_one(redis_server: RedisServer, prefix: str) -> None:
    """It implements the RemoteBucket protocol and is no TokenBucket: no synchronous call that cannot work."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 1, 1, name="protocol")
        assert isinstance(bucket, RemoteBucket)
        typed: RemoteBucket = bucket  # and mypy checks the signatures
        assert typed is bucket
        anything: object = bucket
        assert not isinstance(anything, TokenBucket)
        assert await bucket.try_acquire()
        assert not await bucket.try_acquire()


@pytest.mark.anyio
async def test_a_synchronous_release_travels_with_the_next_round_trip(
    redis_server: RedisServer, prefix: str
) -> None:
    """release_later() is local and instant; the tokens reach Redis with the bucket's next script."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 0.01, 5, name="deferred")
        await bucket.acquire(5)
        bucket.release_later(2)
        assert stored(redis_server, bucket.key)["tokens"] == pytest.approx(0, abs=0.01)
        assert bucket.available == pytest.approx(2, abs=0.01)
        assert await bucket.try_acquire(2)
        assert not await bucket.try_acquire(1)


# -- leased batches (lease=k)


@pytest.mark.anyio
async def test_a_leased_batch_serves_k_calls_with_one_round_trip_at_the_rate(
    redis_server: RedisServer, prefix: str
) -> None:
    """lease=5 at 100/s: 5 calls cost one script; the next batch is reserved in the fleet's queue and paced."""
    async with redis_server.backend(prefix) as backend:
        counter = CommandCounter(backend)
        bucket = RedisTokenBucket(backend, 100, 5, name="leased", lease=5)
        # The clock starts before the burst's script: the refill runs from that script on, so times taken
        # from after the burst would read a loaded machine's delay in between as tokens that came early.
        started = time.monotonic()
        for _ in range(5):
            await bucket.acquire()  # the burst: one script leased all five
        assert bucket.statistics().round_trips == 1
        times = []
        for _ in range(5):
            await bucket.acquire()
            times.append(time.monotonic() - started)
        assert bucket.statistics().round_trips == 2
        assert len([c for c in counter.commands if c.startswith("EVAL")]) == 2 + counter.commands.count("EVAL")
        # the second batch's tokens come one every 10 ms after the burst, the first after 10 ms (never sooner)
        assert all(took >= 0.01 * (i + 1) - 0.001 for i, took in enumerate(times))
        assert times[-1] < 1.0  # 50 ms of pacing (a loaded machine may add to it)
        assert bucket.statistics().grants == 10


@pytest.mark.anyio
async def test_unused_leased_tokens_go_back_on_aclose(redis_server: RedisServer, prefix: str) -> None:
    """A process that leased 10 tokens and used 1 gives 9 back when it closes the bucket: nothing leased is lost."""
    async with redis_server.backend(prefix) as backend:
        async with RedisTokenBucket(backend, 0.001, 10, name="giveback", lease=10) as bucket:
            await bucket.acquire()
            assert stored(redis_server, bucket.key)["tokens"] == pytest.approx(0, abs=0.01)
            assert bucket.statistics().leased == 9
        assert stored(redis_server, bucket.key)["tokens"] == pytest.approx(9, abs=0.01)
        assert bucket.statistics().leased == 0


@pytest.mark.anyio
async def test_a_cancelled_call_on_a_leased_token_hands_it_to_the_next_call(
    redis_server: RedisServer, prefix: str
) -> None:
    """Cancelled while sleeping on a leased token: the token stays with this process for its next call."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 5, 2, name="cancel-lease", lease=2)
        await bucket.acquire(2)  # empty now
        await bucket.acquire()  # leases 2: this call's token at 0.2 s, the spare at 0.4 s
        assert bucket.statistics().leased == 1
        with anyio.move_on_after(0.01):
            await bucket.acquire()  # sleeps on the spare, cancelled
        assert bucket.statistics().leased == 1
        trips = bucket.statistics().round_trips
        await bucket.acquire()
        assert bucket.statistics().round_trips == trips  # served from the batch
        assert bucket.statistics().cancelled == 1


@pytest.mark.anyio
async def test_a_timeout_shorter_than_the_next_leased_token_fails_at_once(
    redis_server: RedisServer, prefix: str
) -> None:
    """The fleet's queue is behind this process's batch: a call that cannot wait for it fails without a round trip."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 2, 3, name="lease-timeout", lease=3)
        await bucket.acquire(3)
        await bucket.acquire()  # leases 3 tokens due at 0.5, 1.0 and 1.5 s
        trips = bucket.statistics().round_trips
        with pytest.raises(RateLimitTimeout):
            await bucket.acquire(timeout=0.05)
        assert bucket.statistics().round_trips == trips
        assert bucket.statistics().leased == 2


# -- configuration and introspection


@pytest.mark.anyio
async def test_rate_and_capacity_changes_apply_to_the_next_script(redis_server: RedisServer, prefix: str) -> None:
    """Setting rate and capacity re-parameterises this process's next scripts (and its local fallback)."""
    async with redis_server.backend(prefix) as backend:
        bucket = RedisTokenBucket(backend, 1, 1, name="reconfigure")
        await bucket.acquire()
        bucket.rate = 1000
        bucket.capacity = 3
        await anyio.sleep(0.01)
        assert await bucket.try_acquire(3)
        with pytest.raises(ValueError, match="rate"):
            bucket.rate = 0


@pytest.mark.anyio
async def test_statistics_and_repr_describe_the_shared_bucket(redis_server: RedisServer, prefix: str) -> None:
    """statistics() counts this process's grants and round trips; repr names the key, rate and failure mode."""
    async with redis_server.backend(prefix) as backend:
        # 1/s: the milliseconds a loaded machine takes between the calls barely refill the bucket
        bucket = RedisTokenBucket(backend, 1, 4, name="stats", on_unavailable="fail_closed")
        started = time.monotonic()
        await bucket.acquire(3)
        stats = bucket.statistics()
        assert (stats.name, stats.grants, stats.acquired_total, stats.round_trips) == ("stats", 1, 3.0, 1)
        assert stats.available == pytest.approx(1, abs=0.2)
        assert not stats.degraded
        assert f"key='{prefix}bucket:stats'" in repr(bucket)
        assert "fail_closed" in repr(bucket)
        until = await bucket.time_until_available(4)
        # three tokens at 1/s: 3 s from the acquire, less the time gone by since (measured from before it)
        assert 3.0 - (time.monotonic() - started) - 0.01 <= until <= 3.0 + 0.01


def test_bad_settings_are_refused_with_the_parameter_named(redis_server: RedisServer) -> None:
    """Constructor arguments are checked at once, and the message names the parameter."""
    url = redis_server.url
    with pytest.raises(ValueError, match="rate"):
        RedisTokenBucket(url, 0, 1)
    with pytest.raises(ValueError, match="capacity"):
        RedisTokenBucket(url, 1, 0)
    with pytest.raises(ValueError, match="on_unavailable"):
        RedisTokenBucket(url, 1, 1, on_unavailable="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        RedisTokenBucket(url, 1, 1, name="")
    with pytest.raises(ValueError, match="operation_timeout"):
        RedisBackend(url, operation_timeout=0)
    with pytest.raises(ValueError, match="max_recovery_delay"):
        RedisBackend(url, recovery_delay=5, max_recovery_delay=1)
    with pytest.raises(TypeError, match="prefix"):
        RedisBackend(url, prefix=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="client"):
        RedisBackend(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="redis"):
        RedisTokenBucket(42, 1, 1)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_bad_calls_are_refused_with_the_parameter_named(redis_server: RedisServer, prefix: str) -> None:
    """n above the capacity and negative timeouts are refused before any round trip."""
    async with redis_server.backend(prefix) as backend:
        counter = CommandCounter(backend)
        bucket = RedisTokenBucket(backend, 1, 2, name="bad")
        with pytest.raises(ValueError, match="n must be"):
            await bucket.acquire(3)
        with pytest.raises(ValueError, match="timeout"):
            await bucket.acquire(1, timeout=-1)
        with pytest.raises(ValueError, match="n must be"):
            await bucket.try_acquire(0)
    assert counter.commands == []


def test_trio_is_refused_with_a_clear_message(redis_server: RedisServer, prefix: str) -> None:
    """redis-py's asyncio client cannot run on trio: the bucket says so instead of failing open silently."""

    async def main() -> None:
        bucket = RedisTokenBucket(redis_server.backend(prefix), 1, 1)
        await bucket.acquire()

    with pytest.raises(RuntimeError, match="asyncio only"):
        trio.run(main)


@settings(max_examples=25)
@given(st.lists(st.tuples(st.sampled_from(["take", "give", "peek"]), st.integers(1, 4)), max_size=12))
def test_the_shared_balance_never_exceeds_the_capacity(
    redis_server: RedisServer, operations: list[tuple[str, int]]
) -> None:
    """Whatever mix of takes, gives and peeks, the stored balance stays within [0, capacity] (nobody reserved)."""

    async def run() -> None:
        own = f"prop:{uuid.uuid4().hex}:"  # a prefix of its own for each example
        async with redis_server.backend(own) as backend:
            bucket = RedisTokenBucket(backend, 0.001, 4, name="property")
            for op, n in operations:
                if op == "take":
                    await bucket.try_acquire(n)
                elif op == "give":
                    await bucket.release(n)
                else:
                    await bucket.time_until_available(n)
                tokens = stored(redis_server, bucket.key)["tokens"]
                assert -1e-9 <= tokens <= 4 + 1e-9
                assert not math.isnan(bucket.available)
            await backend.client.delete(bucket.key)

    asyncio.run(run())
