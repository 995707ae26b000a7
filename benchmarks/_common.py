"""What the benchmarks share: the scripted operations and the round-robin best-of-rounds timer."""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Once = Callable[[], Awaitable[Any]]
"""One call of a case."""


class ServiceUnavailable(Exception):
    """What the scripted operation raises for a 503 (an AWS-style transient error code)."""

    error_code = "ServiceUnavailable"


async def ok() -> str:
    return "ok"


def flaky() -> Once:
    """An operation answering 503, 503, 200, 503, 503, 200, ... (calls never overlap in the benchmarks)."""
    statuses = itertools.cycle((503, 503, 200))

    async def operation() -> str:
        if next(statuses) == 503:
            raise ServiceUnavailable("503")
        return "ok"

    return operation


async def measure(cases: Sequence[tuple[str, Once]], calls: int, rounds: int) -> dict[str, float]:
    """Best of ``rounds`` rounds of ``calls`` sequential calls per case, in nanoseconds per call.

    The rounds go round-robin over the cases, so a slow spell of the machine hits all of them alike.
    """
    for _, once in cases:  # warm up caches and lazily built state
        for _ in range(max(10, calls // 10)):
            await once()
    best = {key: float("inf") for key, _ in cases}
    for _ in range(rounds):
        for key, once in cases:
            gc.collect()
            start = time.perf_counter_ns()
            for _ in range(calls):
                await once()
            best[key] = min(best[key], (time.perf_counter_ns() - start) / calls)
    return best


def server_url(line: str) -> str:
    """The URL a benchmark's server subprocess printed on its first line.

    Raises:
        RuntimeError: it printed something else (it failed to start).
    """
    url = line.strip()
    if not url.startswith("http://"):
        raise RuntimeError(f"the server did not start: {url!r}")
    return url
