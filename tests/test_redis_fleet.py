"""Four processes share one 100 requests/s RedisTokenBucket: together they get at most 100/s, not 400/s.

The processes start on a barrier (each says it is ready, then all are told to go) and the rate is
measured from the first grant, so a slow interpreter start on a loaded machine changes nothing. Only the
upper bound is asserted (a loaded machine may grant fewer, never more): how close a fleet comes to the
rate is ``benchmarks/bench_redis.py``'s fleet figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest_redis import RedisServer, run_fleet

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

WORKER = Path(__file__).with_name("fleet_worker.py")
RATE = 100.0
PROCESSES = 4
DURATION = 3.0


def admitted_rate(results: list[dict[str, Any]], name: str, burst: float) -> float:
    """Grants per second from the first grant to the first process's stop, the initial burst left out."""
    grants: list[float] = sorted(t for result in results for t in result["grants"][name])
    first = grants[0]
    end: float = min(result["stopped"] for result in results)
    admitted = sum(1 for t in grants if t < end)
    return (admitted - burst) / (end - first)


def test_four_processes_share_one_100_per_second_bucket(redis_server: RedisServer, prefix: str) -> None:
    """4 processes x 8 tasks acquire for 3 s: together they are admitted at most 100/s, each gets a share."""
    config = {"url": redis_server.url, "prefix": prefix, "names": ["fleet"], "rate": RATE, "capacity": 1,
              "duration": DURATION, "tasks": 8}
    results = run_fleet(WORKER, [config] * PROCESSES)
    assert 0 < admitted_rate(results, "fleet", burst=1) <= RATE * 1.05
    total = sum(len(result["grants"]["fleet"]) for result in results)
    for result in results:
        granted = len(result["grants"]["fleet"])
        assert granted >= 0.15 * total  # no process was starved
        # one round trip per grant (plus the warm-up, at most one EVAL and one reservation per task at the end)
        assert granted <= result["round_trips"]["fleet"] <= granted + 1 + 1 + 8


def test_leased_batches_cut_round_trips_and_keep_the_rate(redis_server: RedisServer, prefix: str) -> None:
    """With lease=10 the same fleet stays within 100/s while Redis runs at most a fifth of the scripts."""
    config = {"url": redis_server.url, "prefix": prefix, "names": ["leased"], "rate": RATE, "capacity": 10,
              "lease": 10, "duration": DURATION, "tasks": 8}
    results = run_fleet(WORKER, [config] * PROCESSES)
    assert 0 < admitted_rate(results, "leased", burst=10) <= RATE * 1.05
    grants = sum(len(result["grants"]["leased"]) for result in results)
    trips = sum(result["round_trips"]["leased"] for result in results)
    assert trips <= grants / 5
