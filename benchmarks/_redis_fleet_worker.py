"""One process of ``bench_redis_fleet``: tasks that send GETs through the retrying transport until told to stop.

Run by :func:`bench_redis_fleet.run_fleet` (through ``tests/conftest_redis.run_fleet``) with a JSON config
as its argument: ``redis`` (the Redis URL), ``prefix``, ``server`` (the throttling HTTP server's URL),
``tasks``, ``duration`` and ``limiter`` (``"redis"``: one default-profile ``RedisAdaptiveRateLimiter``
shared by the whole fleet; ``"local"``: an in-process ``AdaptiveRateLimiter`` per process, for comparison).

It connects, warms up (one round trip to Redis and one request to the server), prints ``ready``, waits
for a line on stdin (the barrier), then runs ``tasks`` closed-loop tasks for ``duration`` seconds and
prints ``{"started": wall-clock time of the go, "stopped": ..., "successes": [...], "attempts": [...],
"throttled": [...], "failures": n, "round_trips": n, "trace": [...], "changes": [...]}``; the lists hold wall-clock
times of the answers (comparable across the processes); ``trace`` samples the limiter's view four times a second
(seconds since the go, fill rate, capacity estimate, waits, wait time), and ``changes`` lists the limiter's start
and its cuts (wall-clock time, the rule of ``LimiterRateChanged``, the new rate), for diagnosis.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx

from asyncretry import (
    AdaptiveRateLimiter,
    Event,
    EventBus,
    LimiterRateChanged,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    history_of,
)
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo
from asyncretry.redis import RedisAdaptiveRateLimiter, RedisBackend


def _record(out: dict[str, Any], info: RetryInfo | None, error: Exception | None, offset: float) -> None:
    history = info.history if info is not None else (history_of(error) if error is not None else None)
    if history is None:
        return
    for attempt in history.attempts:
        when = attempt.started + attempt.duration + offset  # the loop's clock -> the wall clock
        out["attempts"].append(when)
        if attempt.kind is OutcomeKind.THROTTLING:
            out["throttled"].append(when)


async def main(config: dict[str, Any]) -> dict[str, Any]:
    policy = RetryPolicy(mode="adaptive")
    changes: list[tuple[float, str, float]] = []

    def record_change(event: Event) -> None:  # the start and the cuts, by rule (not the growth in between)
        if isinstance(event, LimiterRateChanged) and (event.cut or event.rule == "start_up"):
            changes.append((time.time(), event.rule, event.new_rate))

    bus = EventBus()
    bus.subscribe(record_change)
    async with RedisBackend(config["redis"], prefix=config["prefix"], operation_timeout=2.0) as backend:
        limiter: RedisAdaptiveRateLimiter | AdaptiveRateLimiter
        if config["limiter"] == "redis":
            limiter = RedisAdaptiveRateLimiter(backend, name="api", events=bus)
            await limiter.refresh()  # connects and loads the script
        else:
            limiter = AdaptiveRateLimiter(name="api", events=bus)
        retrier = Retrier(policy, limiter=limiter)
        limits = httpx.Limits(max_connections=config["tasks"], max_keepalive_connections=config["tasks"])
        transport = AsyncRetryTransport(httpx.AsyncHTTPTransport(limits=limits), retrier=retrier)
        async with httpx.AsyncClient(transport=transport, base_url=config["server"], timeout=10.0) as client:
            await client.get("/items")  # one connection open before the start
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            loop = asyncio.get_running_loop()
            offset = time.time() - loop.time()
            out: dict[str, Any] = {"started": time.time(), "successes": [], "attempts": [], "throttled": [],
                                   "failures": 0}
            stop = loop.time() + config["duration"]

            async def worker() -> None:
                while loop.time() < stop:
                    try:
                        response = await client.get("/items")
                    except Exception as error:  # the call failed after its retries: counted, then go on
                        out["failures"] += 1
                        _record(out, None, error, offset)
                        continue
                    info = response.extensions.get(EXTENSION)
                    _record(out, info if isinstance(info, RetryInfo) else None, None, offset)
                    if response.status_code == 200:
                        out["successes"].append(loop.time() + offset)
                    else:
                        out["failures"] += 1

            async def sample() -> None:  # the limiter's view four times a second, for diagnosis
                while loop.time() < stop:
                    await asyncio.sleep(0.25)
                    view = limiter.statistics()
                    out["trace"].append((round(loop.time() + offset - out["started"], 2), view.fill_rate,
                                         view.last_max_rate, view.waits, round(view.wait_time, 2)))

            out["trace"] = []
            await asyncio.gather(sample(), *(worker() for _ in range(config["tasks"])))
            out["stopped"] = stop + offset
        statistics = limiter.statistics()
        out["round_trips"] = getattr(statistics, "round_trips", 0)
        out["changes"] = changes
        out["enabled"] = statistics.enabled
        out["fill_rate"] = statistics.fill_rate
        out["last_max_rate"] = statistics.last_max_rate
        out["waits"] = statistics.waits
        out["wait_time"] = statistics.wait_time
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
