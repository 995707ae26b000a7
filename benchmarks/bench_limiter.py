"""The adaptive limiter's bookkeeping per response, beside botocore's ``ClientRateLimiter``.

Every response of an adaptive-mode call goes through ``update()`` (send-rate measurement and CUBIC),
so its cost is paid on every request. Measured on the real asyncio loop, best of several rounds:

* ``update(throttled=False)`` while not yet enabled (no throttle seen: the common case);
* ``update()`` with a throttle every 100 responses: the rate changes (CUBIC, or the asyncretry
  profile's rules) on top of the measurement. Pacing waits are not measured: only the bookkeeping.

Run: ``.venv/bin/python -m benchmarks.bench_limiter [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from botocore.retries import bucket, throttling
from botocore.retries.adaptive import ClientRateLimiter, RateClocker

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter


class _Detector:
    """Stands in for botocore's throttling detector: says what the benchmark tells it."""

    def __init__(self) -> None:
        self.throttled = False

    def is_throttling_error(self, **kwargs: Any) -> bool:
        return self.throttled


def _botocore() -> tuple[ClientRateLimiter, _Detector]:
    clock = bucket.Clock()
    detector = _Detector()
    limiter = ClientRateLimiter(
        rate_adjustor=throttling.CubicCalculator(starting_max_rate=0, start_time=clock.current_time()),
        rate_clocker=RateClocker(clock),
        token_bucket=bucket.TokenBucket(max_rate=1, clock=clock),
        throttling_detector=detector,
        clock=clock,
    )
    return limiter, detector


def _best(rounds: int, calls: int, run: Callable[[int], None]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run(calls)
        best = min(best, (time.perf_counter() - started) / calls * 1e9)
    return best


async def _measure(calls: int, rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    for profile in ("aws", "asyncretry"):
        limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile=profile))

        def quiet(n: int, limiter: AdaptiveRateLimiter = limiter) -> None:
            for _ in range(n):
                limiter.update(False)

        results[f"update, not enabled: asyncretry ({profile})"] = _best(rounds, calls, quiet)

        throttling = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile=profile))

        def busy(n: int, limiter: AdaptiveRateLimiter = throttling) -> None:
            for i in range(n):
                limiter.update(i % 100 == 99)

        results[f"update, a throttle every 100: asyncretry ({profile})"] = _best(rounds, calls, busy)

    boto, _ = _botocore()

    def boto_quiet(n: int) -> None:
        for _ in range(n):
            boto.on_receiving_response()

    results["update, not enabled: botocore"] = _best(rounds, calls, boto_quiet)
    boto2, detector2 = _botocore()

    def boto_busy(n: int) -> None:
        for i in range(n):
            detector2.throttled = i % 100 == 99
            boto2.on_receiving_response()

    results["update, a throttle every 100: botocore"] = _best(rounds, calls, boto_busy)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    args = parser.parse_args(argv)
    calls, rounds = (2_000, 3) if args.quick else (20_000, 7)
    results = asyncio.run(_measure(calls, rounds))
    print(f"adaptive limiter bookkeeping, ns per response ({calls} calls, best of {rounds} rounds)")
    for group in ("update, not enabled", "update, a throttle every 100"):
        peer = results[f"{group}: botocore"]
        for name, value in results.items():
            if name.startswith(group):
                print(f"  {name:52s} {value:9.0f} ns  {value / peer:5.2f}x botocore")
    print("note: botocore's limiter is synchronous and thread-locked; ours is awaitable, FIFO and lock-free.")


if __name__ == "__main__":
    main()
