"""When Redis cannot be reached: fail open to a local twin or fail closed, never hang, and come back."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc
import pytest
import redis

from asyncretry import (
    BackendLost,
    BackendRecovered,
    BackendUnavailable,
    BreakerState,
    CircuitBreakerConfig,
    CircuitOpenError,
    ConfigurationError,
    Event,
    RetryQuotaConfig,
)
from asyncretry.redis import (
    OnUnavailable,
    RedisAdaptiveRateLimiter,
    RedisBackend,
    RedisCircuitBreaker,
    RedisRetryQuota,
    RedisTokenBucket,
)
from conftest import EventLog
from conftest_redis import RedisServer, server_binary, until_redis_answers
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

TIMEOUT = 0.2  # operation_timeout of the backends below


class Recorder(EventLog):
    """Keeps the backend events of a bus as (kind, source, detail) tuples."""

    def keep(self, event: Event) -> Any:
        if isinstance(event, BackendLost):
            return ("unavailable", event.source, event.fallback)
        if isinstance(event, BackendRecovered):
            return ("recovered", event.source, f"{event.down_for:.3f}")
        return None

    def kinds(self, source: str) -> list[str]:
        return [kind for kind, src, _ in self.events if src == source]


def backend(url: str, prefix: str = "test:", **options: Any) -> RedisBackend:
    options = {"operation_timeout": TIMEOUT, "recovery_delay": 0.1, "max_recovery_delay": 0.3, **options}
    return RedisBackend(url, prefix=prefix, **options)


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.monotonic()
    await call()
    return time.monotonic() - started


# -- a server nobody runs


@pytest.mark.anyio
async def test_fail_open_limits_with_a_local_bucket_when_nothing_listens(closed_port: int) -> None:
    """Nothing on the port: the bucket serves from a local bucket of the same rate, says so once, and never stalls."""
    recorder = Recorder()
    async with backend(f"redis://127.0.0.1:{closed_port}") as down:
        bucket = RedisTokenBucket(down, 10, 2, name="api", events=recorder.bus)
        started = time.monotonic()
        for _ in range(3):  # two from the burst, the third 0.1 s later: the local bucket paces
            await bucket.acquire()
        elapsed = time.monotonic() - started
        stats = bucket.statistics()
    assert 0.08 <= elapsed < 1.0  # paced by the local bucket (a loaded machine's margin above the 0.1 s)
    assert stats.degraded
    assert stats.round_trips == 0
    assert stats.grants == 3
    assert recorder.events == [("unavailable", "api", "a local in-process token bucket")]


@pytest.mark.anyio
async def test_fail_closed_raises_backend_unavailable_at_once(closed_port: int) -> None:
    """Nothing on the port and fail_closed: every acquire raises BackendUnavailable within milliseconds."""
    recorder = Recorder()
    async with backend(f"redis://127.0.0.1:{closed_port}") as down:
        bucket = RedisTokenBucket(down, 10, 2, name="api", on_unavailable="fail_closed", events=recorder.bus)
        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="failing closed"):
                await bucket.acquire()
            assert time.monotonic() - started < TIMEOUT * 0.9  # never waited for the operation timeout
        assert down.statistics().failures == 1  # the next two did not even try: no probe was due
    assert recorder.events == [("unavailable", "api", "none: calls fail with BackendUnavailable")]


@pytest.mark.anyio
async def test_a_dead_server_is_probed_after_a_growing_delay_not_on_every_call(closed_port: int) -> None:
    """Hundreds of calls during an outage lead to a handful of connection attempts, spaced 0.1 s doubling to 0.3 s."""
    async with backend(f"redis://127.0.0.1:{closed_port}") as down:
        bucket = RedisTokenBucket(down, 1e6, 1e6, name="api")
        calls = 0
        with anyio.move_on_after(1.0):
            while True:
                await bucket.acquire()
                calls += 1
                await anyio.sleep(0.002)
        stats = down.statistics()
    assert calls > 200
    assert 3 <= stats.failures <= 8  # 0, ~0.1, ~0.2..0.3, then every 0.15-0.3 s
    assert not stats.up
    assert stats.outages == 1


@pytest.mark.anyio
async def test_fail_closed_applies_to_every_primitive_but_outcomes_never_fail(closed_port: int) -> None:
    """Quota, breaker and limiter refuse admissions when failing closed; refunds and outcome reports do not raise."""
    async with backend(f"redis://127.0.0.1:{closed_port}") as down:
        quota = RedisRetryQuota(down, name="q", on_unavailable="fail_closed")
        breaker = RedisCircuitBreaker(down, name="b", on_unavailable="fail_closed")
        limiter = RedisAdaptiveRateLimiter(down, name="l", on_unavailable="fail_closed")
        with pytest.raises(BackendUnavailable):
            await quota.try_acquire(5)
        with pytest.raises(BackendUnavailable):
            await breaker.acquire()
        with pytest.raises(BackendUnavailable):
            await limiter.acquire()
        await quota.release(5)  # kept for Redis
        await breaker.record(success=False, probe=False)  # dropped
        assert quota.statistics().released_total == 5
        with pytest.raises(BackendUnavailable, match="needs Redis"):
            await breaker.isolate()


@pytest.mark.anyio
async def test_fail_open_breaker_and_quota_judge_locally_meanwhile(closed_port: int) -> None:
    """Failing open, the breaker trips on this process's failures and the quota pays from a local budget."""
    async with backend(f"redis://127.0.0.1:{closed_port}") as down:
        quota = RedisRetryQuota(down, RetryQuotaConfig(max_capacity=10), name="q")
        breaker = RedisCircuitBreaker(down, CircuitBreakerConfig(consecutive_failures=2), name="b")
        assert [await quota.try_acquire(5) for _ in range(3)] == [True, True, False]
        for _ in range(2):
            probe = await breaker.acquire()
            await breaker.record(success=False, probe=probe)
        with pytest.raises(CircuitOpenError):
            await breaker.acquire()
        assert breaker.statistics().state is BreakerState.OPEN
        assert breaker.statistics().degraded
        assert quota.statistics().available == 0


# -- a server that dies and comes back


@pytest.mark.anyio
async def test_killed_and_restarted_fail_open_keeps_limiting_then_resumes_shared_state(
    own_redis_server: RedisServer, prefix: str
) -> None:
    """Killed mid-run, every primitive serves locally and no call stalls; restarted, they all use Redis again."""
    recorder = Recorder()
    # A killed server refuses connections at once, so no call here waits for the operation timeout: a
    # patient one keeps a loaded machine's slow round trip, while the server is up, from counting as an outage.
    patient = 2.0
    async with backend(own_redis_server.url, prefix, operation_timeout=patient) as shared:
        bucket = RedisTokenBucket(shared, 1000, 1000, name="bucket", events=recorder.bus)
        quota = RedisRetryQuota(shared, name="quota", events=recorder.bus)
        breaker = RedisCircuitBreaker(shared, name="breaker", events=recorder.bus)
        limiter = RedisAdaptiveRateLimiter(shared, name="limiter", sync_interval=0.01, events=recorder.bus)

        async def one_round() -> None:
            await bucket.acquire()
            assert await quota.try_acquire(5)
            await quota.release(5)
            probe = await breaker.acquire()
            await breaker.record(success=True, probe=probe)
            await limiter.acquire()
            limiter.update(False)

        parts = (bucket, quota, breaker, limiter)
        slowest = {"up": 0.0, "down": 0.0}
        for phase, seconds in (("up", 0.3), ("down", 0.6)):
            if phase == "down":
                own_redis_server.kill()
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                slowest[phase] = max(slowest[phase], await timed(one_round))
                await anyio.sleep(0.005)
        own_redis_server.restart()
        # Back: rounds go on until every part uses Redis again (a loaded machine restarts the server
        # slowly: bounded by a count of rounds, not by a guess at the time it takes).
        for _ in range(2000):
            await one_round()
            if not any(p.statistics().degraded for p in parts):
                break
            await anyio.sleep(0.005)
        statistics = [p.statistics() for p in parts]
    assert slowest["down"] < patient  # refused at once: no call waited for the timeout
    assert slowest["up"] < patient
    assert not any(s.degraded for s in statistics)
    for source in ("bucket", "quota", "breaker", "limiter"):
        assert recorder.kinds(source) == ["unavailable", "recovered"], source
    with redis.Redis.from_url(own_redis_server.url) as client:
        assert client.exists(f"{prefix}bucket:bucket", f"{prefix}quota:quota", f"{prefix}breaker:breaker") == 3


@pytest.mark.anyio
async def test_killed_and_restarted_fail_closed_refuses_fast_then_resumes(
    own_redis_server: RedisServer, prefix: str
) -> None:
    """Killed mid-run, a fail-closed bucket refuses every call quickly; restarted, calls pass again."""
    async with backend(own_redis_server.url, prefix) as shared:
        bucket = RedisTokenBucket(shared, 1000, 1000, name="bucket", on_unavailable="fail_closed")
        await until_redis_answers(shared, bucket.acquire)
        own_redis_server.kill()
        refusals = 0
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            started = time.monotonic()
            with pytest.raises(BackendUnavailable):
                await bucket.acquire()
            assert time.monotonic() - started < TIMEOUT + 0.5  # refused, never hung (a margin for a loaded machine)
            refusals += 1
            await anyio.sleep(0.01)
        own_redis_server.restart()
        with anyio.fail_after(2):
            while True:
                try:
                    await bucket.acquire()
                except BackendUnavailable:
                    await anyio.sleep(0.02)
                else:
                    break
        assert refusals > 10
        assert not bucket.statistics().degraded


@pytest.mark.anyio
async def test_a_frozen_server_cannot_hang_a_call(own_redis_server: RedisServer, prefix: str) -> None:
    """A server that accepts but never answers (SIGSTOP): calls give up after the operation timeout."""
    async with backend(own_redis_server.url, prefix) as shared:
        open_bucket = RedisTokenBucket(shared, 1000, 1000, name="open")
        closed_bucket = RedisTokenBucket(shared, 1000, 1000, name="closed", on_unavailable="fail_closed")
        await until_redis_answers(shared, open_bucket.acquire)
        await until_redis_answers(shared, closed_bucket.acquire)
        own_redis_server.freeze()
        try:
            elapsed = await timed(open_bucket.acquire)
            assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 1.0  # waited the timeout, then gave up (never hung)
            started = time.monotonic()
            with pytest.raises(BackendUnavailable):
                await closed_bucket.acquire()
            assert time.monotonic() - started < TIMEOUT / 2  # the backend is known to be down: no second wait
        finally:
            own_redis_server.thaw()


@pytest.mark.anyio
async def test_a_refund_deferred_through_an_outage_reaches_redis_afterwards(
    own_redis_server: RedisServer, prefix: str
) -> None:
    """Refunds reach Redis once across an outage: a timed-out one is not resent, a deferred one is sent after."""
    async with backend(own_redis_server.url, prefix) as shared:
        quota = RedisRetryQuota(shared, RetryQuotaConfig(max_capacity=10), name="q", on_unavailable="fail_closed")
        warm_up = RedisRetryQuota(shared, name="warm-up", on_unavailable="fail_closed")
        await until_redis_answers(shared, lambda: warm_up.try_acquire(1))  # the connection and the script
        assert await quota.try_acquire(10)
        own_redis_server.freeze()
        try:
            await quota.release(5)  # times out, yet the server runs it once thawed: not sent again
            quota.release_later(3)  # the synchronous (cancellation) path: deferred, and nothing was sent
        finally:
            own_redis_server.thaw()
        await anyio.sleep(0.35)  # the next probe is due
        assert await quota.try_acquire(8)
        assert not await quota.try_acquire(1)


# -- settings that cannot work, and servers that answer something else


@pytest.fixture
def password_server() -> Iterator[RedisServer]:
    """A server of the test's own that requires the password ``secret``."""
    binary = server_binary()
    assert binary is not None
    server = RedisServer(binary, extra=["--requirepass", "secret"])
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.anyio
@pytest.mark.parametrize("credentials", ["", ":wrong@"], ids=["no-password", "wrong-password"])
@pytest.mark.parametrize("choice", ["fail_open", "fail_closed"])
async def test_a_wrong_password_fails_loudly_in_both_modes(
    password_server: RedisServer, prefix: str, credentials: str, choice: OnUnavailable
) -> None:
    """No or a wrong password is a ConfigurationError on every call, never a silent fallback; the backend stays up."""
    recorder = Recorder()
    url = f"redis://{credentials}127.0.0.1:{password_server.port}/0"
    async with backend(url, prefix) as shared:
        bucket = RedisTokenBucket(shared, 10, 10, name="auth", on_unavailable=choice, events=recorder.bus)
        for _ in range(2):
            with pytest.raises(ConfigurationError, match="credentials"):
                await bucket.acquire()
        assert shared.up
        assert not bucket.statistics().degraded
    assert recorder.events == []
    async with backend(f"redis://:secret@127.0.0.1:{password_server.port}/0", prefix) as right:
        await RedisTokenBucket(right, 10, 10, name="auth").acquire()


async def answer_in_http(stream: anyio.abc.SocketStream) -> None:
    """A server of another protocol: whatever it is sent, it answers an HTTP error and hangs up."""
    async with stream:
        await stream.receive()
        await stream.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


@pytest.mark.anyio
async def test_a_server_of_another_protocol_is_an_outage_in_both_modes(prefix: str) -> None:
    """An HTTP server on the port: the backend goes down, fail-open falls back with an event, fail-closed refuses."""
    recorder = Recorder()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer_in_http)
        async with backend(f"redis://127.0.0.1:{port}/0", prefix) as shared:
            closed = RedisTokenBucket(shared, 10, 10, name="closed", on_unavailable="fail_closed")
            with pytest.raises(BackendUnavailable, match=r"InvalidResponse|Protocol"):
                await closed.acquire()
            assert not shared.up
            opened = RedisTokenBucket(shared, 10, 10, name="opened", events=recorder.bus)
            await opened.acquire()  # served by the local bucket
            assert opened.statistics().degraded
        tg.cancel_scope.cancel()
    assert recorder.kinds("opened") == ["unavailable"]
