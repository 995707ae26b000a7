"""httpx2 against httpx through the same asyncretry transport code, in one run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_httpx2            # about half a minute
    .venv/bin/python -m benchmarks.bench_httpx2 --quick    # rough figures in a few seconds

``asyncretry.httpx2`` is generated from ``asyncretry.httpx`` (the same code with the package's name
replaced), so the difference between the two is the client's own: each case runs once per package,
over an in-memory transport of that package answering a fresh fixed response (no network), on asyncio.
Each figure is the best of several rounds, the rounds going round-robin over the cases.

Groups (each: bare client, then our transport, per package):

* ``success via AsyncClient``: ``await client.get(...)`` answered 200 at once; our transport with the
  retry quota, a circuit breaker and the full HTTP classification.
* ``503, 503, 200 via AsyncClient``: two 503s then a 200, zero backoff.

The ratios printed at the end compare httpx2 with httpx for the same case, and each package's
transport with its own bare client.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from types import ModuleType
from typing import Any

import httpx
import httpx2

import asyncretry.httpx
import asyncretry.httpx2
from asyncretry import CircuitBreakerConfig, NoBackoff, RetryPolicy, RetryQuotaConfig
from benchmarks._common import Once, Row, measure, table

PACKAGES: tuple[tuple[str, ModuleType, ModuleType], ...] = (
    ("httpx", httpx, asyncretry.httpx),
    ("httpx2", httpx2, asyncretry.httpx2),
)


def fixed(client: Any, *statuses: int) -> Any:
    """An in-memory transport of the ``client`` package answering a repeating script of statuses."""
    script = itertools.cycle(statuses or (200,))

    class Fixed(client.AsyncBaseTransport):  # type: ignore[misc]
        async def handle_async_request(self, request: Any) -> Any:
            return client.Response(next(script), content=b"ok")

    return Fixed()


def flaky_policy() -> RetryPolicy:
    # As in bench_transport: a breaker that 2 failures in 3 do not trip, a quota that never runs dry.
    return RetryPolicy(
        backoff=NoBackoff(),
        quota=RetryQuotaConfig(max_capacity=10**12),
        breaker=CircuitBreakerConfig(failure_ratio=0.9),
    )


def cases(clients: list[Any]) -> list[tuple[str, list[tuple[str, str, Once]], int]]:
    """The groups: (name, [(key, label, once)], calls per round)."""
    success: list[tuple[str, str, Once]] = []
    flaky: list[tuple[str, str, Once]] = []
    for name, client, ours in PACKAGES:

        def make(transport: Any, client: Any = client) -> Any:
            made = client.AsyncClient(transport=transport, base_url="https://example.test")
            clients.append(made)
            return made

        def get(c: Any, check: bool = False) -> Once:
            async def once() -> Any:
                response = await c.get("/items")
                if check and response.status_code != 200:
                    raise AssertionError(f"expected 200 after two retries, got {response.status_code}")
                return response

            return once

        bare = make(fixed(client))
        transport = make(ours.AsyncRetryTransport(fixed(client), policy=RetryPolicy(breaker=CircuitBreakerConfig())))
        retried = make(ours.AsyncRetryTransport(fixed(client, 503, 503, 200), policy=flaky_policy()))
        success += [
            (f"success/{name}/bare", f"bare {name}.AsyncClient", get(bare)),
            (f"success/{name}/ours", f"{name}.AsyncClient over asyncretry.{name}.AsyncRetryTransport", get(transport)),
        ]
        flaky.append((f"503/{name}/ours", f"{name}: 503, 503, 200 through asyncretry.{name}", get(retried, True)))
    return [("success via AsyncClient", success, 0), ("503, 503, 200 via AsyncClient", flaky, 3)]


async def run(calls: int, rounds: int) -> list[Row]:
    clients: list[Any] = []
    rows: list[Row] = []
    try:
        for group, found, divisor in cases(clients):
            n = max(calls // divisor, 50) if divisor else calls
            best = await measure([(key, once) for key, _, once in found], n, rounds)
            rows += [Row(group, key, label, best[key]) for key, label, _ in found]
    finally:
        for client in clients:
            await client.aclose()
    return rows


def render(rows: list[Row]) -> str:
    by_key = {r.key: r.ns for r in rows}
    lines = [
        f"httpx2 against httpx through asyncretry's transport: Python {sys.version.split()[0]}, "
        f"httpx {httpx.__version__}, httpx2 {httpx2.__version__}, asyncio, best of rounds",
        "",
        *table(rows),
        "",
    ]
    for key, what in (("success/{}/bare", "bare client"), ("success/{}/ours", "success through our transport"),
                      ("503/{}/ours", "503, 503, 200 through our transport")):
        ratio = by_key[key.format("httpx2")] / by_key[key.format("httpx")]
        lines.append(f"  [info] {what}: httpx2 / httpx = {ratio:.2f}")
    for name, _, _ in PACKAGES:
        added = by_key[f"success/{name}/ours"] / by_key[f"success/{name}/bare"] - 1.0
        lines.append(f"  [info] {name}: our transport adds {added:+.1%} to a bare AsyncClient.get")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    parser.add_argument("--calls", type=int, default=None, help="requests per round in the success group")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (the best one counts)")
    args = parser.parse_args(argv)
    calls = args.calls or (1_000 if args.quick else 5_000)
    rounds = args.rounds or (3 if args.quick else 7)
    print(render(asyncio.run(run(calls, rounds))))


if __name__ == "__main__":
    main()
