"""The retry engine on Redis state: Retrier(quota=, breaker=, rate_limit=, limiter=) shares them per scope."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    CircuitBreakerConfig,
    CircuitOpenError,
    NoBackoff,
    Retrier,
    RetryPolicy,
    RetryQuotaConfig,
    history_of,
)
from asyncretry.httpx import RetryTransport
from asyncretry.redis import (
    RedisAdaptiveRateLimiter,
    RedisBackend,
    RedisCircuitBreaker,
    RedisRetryQuota,
    RedisTokenBucket,
)
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

POLICY = RetryPolicy(max_attempts=5, backoff=NoBackoff(), quota=RetryQuotaConfig(max_capacity=10))


class Unavailable(Exception):
    """A transient failure (is_retryable, as the Kotlin SDK's error metadata)."""

    is_retryable = True


class SlowDown(Exception):
    """A throttling failure."""

    is_throttling = True


def counting(error: Exception | None = None) -> tuple[Callable[[], Any], list[int]]:
    """An operation that fails with ``error`` (or succeeds with None) and counts its calls."""
    calls: list[int] = []

    async def operation() -> str:
        calls.append(1)
        if error is not None:
            raise error
        return "ok"

    return operation, calls


@asynccontextmanager
async def two_processes(
    server: RedisServer, prefix: str, policy: RetryPolicy = POLICY, **parts: Callable[[RedisBackend], Any]
) -> AsyncIterator[tuple[Retrier, Retrier]]:
    """Two retriers on two clients, whose shared state is made per scope by the given factories."""
    async with (
        server.backend(prefix) as one,
        server.backend(prefix) as two,
    ):
        retriers = tuple(
            Retrier(policy, name=f"process-{i}", **{part: make(backend) for part, make in parts.items()})
            for i, backend in enumerate((one, two))
        )
        yield retriers  # type: ignore[misc]


def quota_of(backend: RedisBackend) -> Callable[[str], Any]:
    return lambda scope: RedisRetryQuota(backend, RetryQuotaConfig(max_capacity=10), name=scope)


@pytest.mark.anyio
async def test_an_outage_spends_one_quota_for_the_fleet(redis_server: RedisServer, prefix: str) -> None:
    """Ten tokens at 5 a retry: process 0 gets two retries, then process 1 gets none; both end with the real
    error, their histories saying the quota stopped them."""
    async with two_processes(redis_server, prefix, quota=quota_of) as (first, second):
        operation, calls = counting(Unavailable("down"))
        with pytest.raises(Unavailable) as caught:
            await first.call(operation)
        assert len(calls) == 3
        history = history_of(caught.value)
        assert history is not None
        assert (len(history.attempts), history.gave_up) == (3, "quota")
        with pytest.raises(Unavailable) as again:
            await second.call(operation)
        assert len(calls) == 4  # one attempt, no retry
        history = history_of(again.value)
        assert history is not None
        assert (len(history.attempts), history.gave_up) == (1, "quota")


@pytest.mark.anyio
async def test_successes_refund_the_fleets_quota(redis_server: RedisServer, prefix: str) -> None:
    """A success after a retry gives its cost back to the shared quota, which the other process can then spend."""
    async with two_processes(redis_server, prefix, quota=quota_of) as (first, second):
        failures = [Unavailable("once")]

        async def flaky() -> str:
            if failures:
                raise failures.pop()
            return "ok"

        assert await first.call(flaky) == "ok"
        operation, calls = counting(Unavailable("down"))
        with pytest.raises(Unavailable):
            await second.call(operation)
        assert len(calls) == 3  # the full 10 tokens were back: two retries


@pytest.mark.anyio
async def test_one_processs_failures_open_the_breaker_for_the_other(redis_server: RedisServer, prefix: str) -> None:
    """Failures in process 0 trip the shared breaker; process 1 is rejected without calling the backend."""
    config = CircuitBreakerConfig(consecutive_failures=3, failure_ratio=None, break_duration=30)

    def breaker_of(backend: RedisBackend) -> Callable[[str], Any]:
        return lambda scope: RedisCircuitBreaker(backend, config, name=scope)

    policy = RetryPolicy(max_attempts=3, backoff=NoBackoff(), quota=False)
    async with two_processes(redis_server, prefix, policy, breaker=breaker_of) as (first, second):
        operation, calls = counting(Unavailable("down"))
        with pytest.raises(Unavailable):
            await first.call(operation)
        assert len(calls) == 3
        with pytest.raises(CircuitOpenError) as caught:
            await second.call(operation)
        assert len(calls) == 3
        assert caught.value.retry_after > 25


@pytest.mark.anyio
async def test_two_processes_share_one_rate_limit(redis_server: RedisServer, prefix: str) -> None:
    """With a shared 50/s bucket (burst 1), 20 calls split between two retriers take about 19/50 s."""

    def bucket_of(backend: RedisBackend) -> Callable[[str], Any]:
        return lambda scope: RedisTokenBucket(backend, 50, 1, name=scope)

    async with two_processes(redis_server, prefix, rate_limit=bucket_of) as (first, second):
        operation, calls = counting()
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon((first if i % 2 else second).call, operation)
        elapsed = time.monotonic() - started
    assert len(calls) == 20
    assert 0.35 <= elapsed < 2.0  # 19/50 s: one shared rate (two separate buckets would take half that)


@pytest.mark.anyio
async def test_callers_take_turns_at_a_rate_limit_shared_through_redis(redis_server: RedisServer, prefix: str) -> None:
    """A rate limit on Redis (20/s, burst 1) with a caller per call: the light caller's call is among the first
    three admitted, not behind the heavy caller's eight; each caller's calls keep their order."""
    async with redis_server.backend(prefix) as backend:
        retrier = Retrier(POLICY, rate_limit=lambda scope: RedisTokenBucket(backend, 20, 1, name=scope))
        order: list[str] = []

        async def one(name: str, caller: str) -> None:
            async for attempt in retrier.attempts(caller=caller):
                async with attempt:
                    order.append(name)

        async with anyio.create_task_group() as tg:
            for name, caller in [*((f"heavy{k}", "heavy") for k in range(8)), ("light", "light")]:
                tg.start_soon(one, name, caller)
                await anyio.lowlevel.checkpoint()
    assert order.index("light") <= 2
    assert [name for name in order if name != "light"] == [f"heavy{k}" for k in range(8)]
    turns = retrier.statistics().scopes[0].turns
    assert turns is not None
    assert (turns.callers, turns.waiting) == (0, 0)


@pytest.mark.anyio
async def test_a_throttle_in_one_process_enables_the_fleets_limiter(redis_server: RedisServer, prefix: str) -> None:
    """Adaptive mode with a Redis limiter per scope: process 0's throttled attempt enables process 1's limiter."""
    config = AdaptiveLimiterConfig(profile="aws")

    def limiter_of(backend: RedisBackend) -> Callable[[str], RedisAdaptiveRateLimiter]:
        return lambda scope: RedisAdaptiveRateLimiter(backend, config, name=scope, sync_interval=0.05)

    policy = RetryPolicy.aws_adaptive(max_attempts=2, backoff=NoBackoff(), throttling_backoff=NoBackoff())
    async with two_processes(redis_server, prefix, policy, limiter=limiter_of) as (first, second):
        throttled, _ = counting(SlowDown("429"))
        with pytest.raises(SlowDown):
            await first.call(throttled)
        await anyio.sleep(0.06)
        fine, _ = counting()
        assert await second.call(fine) == "ok"
        (scope,) = second.statistics().scopes
        assert scope.limiter is not None
        assert scope.limiter.enabled


@pytest.mark.anyio
async def test_a_fail_closed_quota_stops_the_call_after_its_attempt(closed_port: int) -> None:
    """No Redis and a fail-closed quota: the retry cannot be paid for, and the call ends with its real error
    (why: backend)."""
    async with RedisBackend(f"redis://127.0.0.1:{closed_port}", operation_timeout=0.2) as down:
        retrier = Retrier(
            POLICY, quota=lambda scope: RedisRetryQuota(down, name=scope, on_unavailable="fail_closed")
        )
        operation, calls = counting(Unavailable("down"))
        with pytest.raises(Unavailable) as caught:
            await retrier.call(operation)
        assert len(calls) == 1
        history = history_of(caught.value)
        assert history is not None
        assert history.gave_up == "backend"


@pytest.mark.anyio
async def test_a_fail_open_quota_keeps_retrying_on_a_local_budget(closed_port: int) -> None:
    """No Redis and a fail-open quota: the local quota (10 tokens) pays for two retries, as in-process."""
    async with RedisBackend(f"redis://127.0.0.1:{closed_port}", operation_timeout=0.2) as down:
        retrier = Retrier(POLICY, quota=quota_of(down))
        operation, calls = counting(Unavailable("down"))
        with pytest.raises(Unavailable):
            await retrier.call(operation)
        assert len(calls) == 3


def test_the_synchronous_transport_refuses_redis_state(redis_server: RedisServer) -> None:
    """Shared state needs the async driver: the sync httpx transport says so instead of blocking on I/O."""
    retrier = Retrier(POLICY, quota=lambda scope: RedisRetryQuota(redis_server.url, name=scope))
    transport = RetryTransport(
        retrier=retrier, transport=httpx.MockTransport(lambda request: httpx.Response(200))
    )
    with httpx.Client(transport=transport) as client, pytest.raises(TypeError, match="async"):
        client.get("https://example.invalid/")
