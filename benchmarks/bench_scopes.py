"""What a new scope key costs at 1,000, 10,000 and 50,000 live scopes, beside a known key.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_scopes [--quick]

A retrier whose table is full of scopes that are all in use (none idle) gets a stream of new keys; each
one must evict a scope. In earlier versions every new key swept and sorted the whole table (3.5 ms at
10,000 scopes, 17 ms at 50,000). The target: a new key costs within 2x of a known key's lookup plus
the construction of the scope it needs (its quota), at any table size.
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio

from asyncretry import Retrier, RetryPolicy, RetryQuota


def _per_key(retrier: Retrier, keys: list[str]) -> float:
    """Nanoseconds per ``attempts()`` call (the scope lookup, the call object) over ``keys``."""
    started = time.perf_counter_ns()
    for key in keys:
        retrier.attempts(scope=key)
    return (time.perf_counter_ns() - started) / len(keys)


async def measure(size: int, rounds: int, keys_per_round: int) -> tuple[float, float, float]:
    """(known key, a scope's construction, new key), nanoseconds, best of rounds."""
    retrier = Retrier(RetryPolicy(), max_scopes=size, scope_idle_timeout=1e9)  # nothing ever idle
    for n in range(size):
        retrier.attempts(scope=f"live-{n}")
    known = [f"live-{n % size}" for n in range(keys_per_round)]
    best_known = best_new = best_make = float("inf")
    fresh = 0
    for _ in range(rounds):
        best_known = min(best_known, _per_key(retrier, known))
        new = [f"new-{fresh + n}" for n in range(keys_per_round)]
        fresh += keys_per_round
        best_new = min(best_new, _per_key(retrier, new))
        started = time.perf_counter_ns()
        for _ in range(keys_per_round):
            RetryQuota(name="scope")
        best_make = min(best_make, (time.perf_counter_ns() - started) / keys_per_round)
    assert len(retrier.scope_keys()) <= size
    return best_known, best_make, best_new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds: rough figures, fast")
    args = parser.parse_args(argv)
    rounds, per_round = (3, 500) if args.quick else (7, 2_000)
    print(f"asyncretry: the cost of a scope key (Python {sys.version.split()[0]}, asyncio, best of {rounds} rounds)")
    header = ("live scopes", "known key ns", "+ a scope ns", "new key ns", "new / (known + scope)")
    print(f"{header[0]:>12} {header[1]:>13} {header[2]:>13} {header[3]:>11} {header[4]:>22}")
    met = True
    for size in (1_000, 10_000, 50_000):
        known, make, new = anyio.run(measure, size, rounds, per_round)
        ratio = new / (known + make)
        met = met and ratio <= 2.0
        print(f"{size:>12,} {known:>13.0f} {make:>13.0f} {new:>11.0f} {ratio:>22.2f}")
    print(f"target: a new key within 2x of a known key plus the scope's construction: {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
