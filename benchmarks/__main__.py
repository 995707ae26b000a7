"""Run every benchmark, one after the other, each in its own process: ``python -m benchmarks [--quick]``.

Each benchmark prints its own table with ratios against the peers measured in the same run; this runner
adds the machine they ran on. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = (
    ("bench_bucket", "token bucket vs aiolimiter"),
    ("bench_engine", "retry engine vs tenacity, stamina, httpx-retries"),
    ("bench_transport", "httpx transport vs httpx-retries and the bare transport"),
    ("bench_aiohttp", "aiohttp middleware vs a bare ClientSession and aiohttp-retry"),
    ("bench_httpx2", "httpx2 against httpx through the same transport code"),
    ("bench_floor", "the work a success must do, piece by piece, against the targets' budgets"),
    ("trace_hops", "the asyncretry calls a 503, 503, 200 runs through AsyncRetryTransport"),
    ("bench_adaptive_http", "50 clients against a throttling local server"),
    ("bench_limiter", "adaptive limiter bookkeeping vs botocore's ClientRateLimiter"),
    ("adaptive_sim", "adaptive profiles in virtual time, AWS vs asyncretry"),
    ("bench_adaptive_fleet", "fleets of independent clients over a grid, beside aws, no limiter and AIMD"),
    ("bench_quota_window", "fleets against a fixed-window quota that announces itself (RateLimit headers)"),
    ("bench_budget", "retry budget vs AWS quota vs tenacity: outage load, brown-out goodput"),
    ("bench_scopes", "a new scope key at 1,000 / 10,000 / 50,000 live scopes"),
    ("bench_sync", "the synchronous decorator vs tenacity's and stamina's"),
    ("bench_e2e", "end to end through httpx.AsyncClient to a local uvicorn server"),
    ("bench_hedging", "hedged requests against a slow tail: p50/p99 and extra requests"),
    ("bench_redis", "Redis token bucket vs the in-process bucket"),
    ("bench_redis_fleet", "4 processes share the default adaptive profile through Redis"),
    ("bench_observability", "success path with and without OpenTelemetry"),
    ("bench_grpc", "grpc.aio interceptors vs the bare channel and gRPC's retryPolicy; hedging a slow replica"),
    ("bench_aws", "asyncretry as the AWS SDK's retry handler vs the SDK's own: success path, 8 clients throttled"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every asyncretry benchmark.")
    parser.add_argument("--quick", action="store_true", help="rough figures, fast (passed to each benchmark)")
    parser.add_argument("--only", help="comma-separated benchmark names to run")
    args = parser.parse_args(argv)
    chosen = set(args.only.split(",")) if args.only else None
    here = Path(__file__).resolve().parent
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()} ({platform.python_implementation()})"
    )
    failures = 0
    for name, what in BENCHMARKS:
        if chosen is not None and name not in chosen:
            continue
        if not (here / f"{name}.py").exists():
            print(f"\n=== {name}: missing", flush=True)
            failures += 1
            continue
        print(f"\n=== {name}: {what}", flush=True)
        started = time.monotonic()
        command = [sys.executable, "-m", f"benchmarks.{name}", *(["--quick"] if args.quick else [])]
        code = subprocess.run(command, cwd=here.parent, check=False).returncode
        print(f"--- {name}: exit {code}, {time.monotonic() - started:.0f} s", flush=True)
        failures += code != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
