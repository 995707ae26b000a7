"""One process of a fleet test: acquires from shared Redis token buckets until told to stop, prints its grants.

Run by :func:`conftest_redis.run_fleet` with a JSON config as its argument (``url``, ``prefix``,
``names``, ``rate``, ``capacity``, ``duration``, ``tasks``; optional ``cluster``, ``lease``,
``recovery_delay``: the backend's probe delay after a failure, for outage tests). It connects
and warms up (one round trip per bucket, which also loads the script), prints ``ready``, waits for a
line on stdin (the barrier), then runs ``tasks`` tasks per bucket for ``duration`` seconds and prints
``{"grants": {name: [wall-clock times]}, "round_trips": {name: n}, "stopped": time, "cpu": seconds,
"outages": [[share, fleet_size], ...]}`` (``stopped``: when it stopped recording grants, on the wall
clock; ``cpu``: the process's CPU time while it ran; ``outages``: what each BackendLost said).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from asyncretry import BackendLost, Event, EventBus
from asyncretry.redis import RedisBackend, RedisTokenBucket


async def main(config: dict[str, Any]) -> dict[str, Any]:
    delay = config.get("recovery_delay", 1.0)
    backend = RedisBackend(
        config["url"], prefix=config["prefix"], cluster=config.get("cluster", False), operation_timeout=2.0,
        recovery_delay=delay, max_recovery_delay=max(delay, 30.0 if delay >= 1.0 else delay),
    )
    outages: list[list[object]] = []
    bus = EventBus()

    def heard(event: Event) -> None:
        if isinstance(event, BackendLost):
            outages.append([event.share, event.fleet_size])

    bus.subscribe(heard)
    async with backend:
        buckets = [
            RedisTokenBucket(
                backend, config["rate"], config["capacity"], name=name, lease=config.get("lease", 1), events=bus
            )
            for name in config["names"]
        ]
        for bucket in buckets:
            await bucket.refresh()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        stop = time.monotonic() + config["duration"]
        stop_at = time.time() + config["duration"]
        cpu = time.process_time()
        grants: dict[str, list[float]] = {bucket.name: [] for bucket in buckets}

        async def worker(bucket: RedisTokenBucket) -> None:
            while True:
                await bucket.acquire()
                if time.monotonic() >= stop:
                    return
                grants[bucket.name].append(time.time())  # wall clock: comparable across the processes

        await asyncio.gather(*(worker(bucket) for bucket in buckets for _ in range(config["tasks"])))
        cpu = time.process_time() - cpu
        trips = {bucket.name: bucket.statistics().round_trips for bucket in buckets}
        for bucket in buckets:
            await bucket.aclose()  # unused leased tokens go back
    return {"grants": grants, "round_trips": trips, "stopped": stop_at, "cpu": cpu, "outages": outages}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
