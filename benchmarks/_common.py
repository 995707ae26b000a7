"""What the benchmarks share: the scripted operations and the round-robin best-of-rounds timer."""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Row:
    """One measured case: its group, key, label and time per call (ns)."""

    group: str
    key: str
    label: str
    ns: float


def table(rows: Sequence[Row], unit: str = "us/request") -> list[str]:
    """The rows as a table, group by group, each against its group's first row (ratio and overhead)."""
    width = max(len(r.label) for r in rows)
    lines = [f"  {'case':<{width}}  {unit:>10}  {'ratio':>6}  {'overhead us':>11}"]
    for group, members in itertools.groupby(rows, key=lambda r: r.group):
        batch = list(members)
        reference = batch[0].ns
        lines.append(group)
        for index, r in enumerate(batch):
            marker = "* " if index == 0 else "  "
            overhead = f"{(r.ns - reference) / 1000:>11.2f}" if index else f"{'':>11}"
            lines.append(f"{marker}{r.label:<{width}}  {r.ns / 1000:>10.2f}  {r.ns / reference:>6.2f}  {overhead}")
        lines.append("")
    lines.append("ratio: the row's time / its group's first row (*); overhead: the row's time minus that row's.")
    return lines
