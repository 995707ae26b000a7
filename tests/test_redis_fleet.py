"""Four processes share one 100 requests/s RedisTokenBucket: together they get 100/s, not 400/s."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest_redis import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

RATE = 100.0
PROCESSES = 4
DURATION = 4.0

WORKER = """
import asyncio, json, sys, time
from asyncretry.redis import RedisBackend, RedisTokenBucket

async def main() -> None:
    url, prefix = sys.argv[1], sys.argv[2]
    start_at, duration, tasks = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    grants = []
    async with RedisBackend(url, prefix=prefix) as backend:
        bucket = RedisTokenBucket(backend, float(sys.argv[6]), 1, name="fleet")
        await asyncio.sleep(max(0.0, start_at - time.time()))
        stop = start_at + duration

        async def worker() -> None:
            while True:
                await bucket.acquire()
                now = time.time()  # wall clock: comparable across the processes of one machine
                if now >= stop:
                    return
                grants.append(now)

        await asyncio.gather(*(worker() for _ in range(tasks)))
        trips = bucket.statistics().round_trips
    print(json.dumps({"grants": grants, "round_trips": trips}))

asyncio.run(main())
"""


def test_four_processes_share_one_100_per_second_bucket(redis_server: RedisServer, prefix: str) -> None:
    """4 processes x 8 tasks acquire for 4 s: the aggregate admitted rate is within 5% of 100/s, each gets a share."""
    start_at = time.time() + 1.5  # time for the interpreters to start and import
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, redis_server.url, prefix, repr(start_at), repr(DURATION), "8", repr(RATE)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    grants = sorted(t for result in results for t in result["grants"])
    # Leave out the first half second (the bucket starts with its one-token burst) and the last tenth.
    low, high = start_at + 0.5, start_at + DURATION - 0.1
    admitted = sum(1 for t in grants if low <= t < high)
    rate = admitted / (high - low)
    assert rate == pytest.approx(RATE, rel=0.05)
    # No process was starved: each got at least 15% of the grants.
    for result in results:
        assert len(result["grants"]) >= 0.15 * len(grants)
        # one round trip per grant (plus at most one EVAL and one reservation per task left at the end)
        assert len(result["grants"]) <= result["round_trips"] <= len(result["grants"]) + 8 + 1
