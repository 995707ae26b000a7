"""The synchronous decorator beside tenacity's and stamina's: a success, and 503, 503, 200.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_sync [--quick]

Each row decorates a plain function with its library's synchronous form, zero delays, three attempts:
``@asyncretry.retry`` (AWS standard mode: the retry quota, made large enough never to run dry,
classification, history and events),
tenacity's ``@retry(stop=stop_after_attempt(3), wait=wait_none())`` and stamina's
``@retry(on=..., attempts=3)`` with waits off. The target: ours costs at most a third of tenacity's.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sys
import time
from collections.abc import Callable
from typing import Any

import stamina
import tenacity

import asyncretry
from asyncretry import NoBackoff, RetryQuotaConfig


class ServiceUnavailable(Exception):
    """A 503 with an AWS-style transient error code (asyncretry classifies it as transient)."""

    error_code = "ServiceUnavailable"


def _ok() -> str:
    return "ok"


def _flaky() -> Callable[[], str]:
    statuses = itertools.cycle((503, 503, 200))

    def operation() -> str:
        if next(statuses) == 503:
            raise ServiceUnavailable("503")
        return "ok"

    return operation


def cases(operation: Callable[[], str]) -> list[tuple[str, Callable[[], Any]]]:
    # A capacity so large that the quota never runs dry: each 503, 503, 200 call nets -5 tokens (SPEC 1.1).
    quota = RetryQuotaConfig(max_capacity=10**12)
    ours = asyncretry.retry(max_attempts=3, backoff=NoBackoff(), on=ServiceUnavailable, quota=quota)(operation)
    theirs = tenacity.retry(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none(),
                            retry=tenacity.retry_if_exception_type(ServiceUnavailable), reraise=True)(operation)
    stamina.set_testing(False)
    stamina.instrumentation.set_on_retry_hooks([])  # no log line per retry (the others log nothing either)
    theirs_too = stamina.retry(on=ServiceUnavailable, attempts=3, wait_initial=0.0, wait_max=0.0, wait_jitter=0.0)(
        operation
    )
    return [("asyncretry: @retry on a def", ours), ("tenacity: @retry", theirs), ("stamina: @retry", theirs_too)]


def measure(rows: list[tuple[str, Callable[[], Any]]], calls: int, rounds: int) -> dict[str, float]:
    for _, fn in rows:
        for _ in range(max(10, calls // 10)):
            fn()
    best = {name: float("inf") for name, _ in rows}
    for _ in range(rounds):
        for name, fn in rows:
            gc.collect()
            started = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter_ns() - started) / calls)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    args = parser.parse_args(argv)
    calls, rounds = (2_000, 3) if args.quick else (20_000, 7)
    print(f"asyncretry: synchronous decorators (Python {sys.version.split()[0]}, best of {rounds} rounds)")
    verdicts = []
    for group, operation in (("success", _ok), ("503, 503, 200", _flaky())):
        best = measure(cases(operation), calls if group == "success" else calls // 3, rounds)
        base = best["tenacity: @retry"]
        print(f"\n{group}")
        for name, ns in best.items():
            print(f"  {name:<32} {ns:>10,.0f} ns   {ns / base:>5.2f}x tenacity")
        ratio = best["asyncretry: @retry on a def"] / base
        verdicts.append(f"  [{'met ' if ratio <= 1 / 3 else 'MISS'}] {group}: ours <= 1/3 of tenacity: {ratio:.2f}")
    print()
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
