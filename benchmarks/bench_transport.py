"""What AsyncRetryTransport adds to each httpx request, against httpx-retries and the bare transport in the same run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_transport            # about half a minute
    .venv/bin/python -m benchmarks.bench_transport --quick    # rough figures in a few seconds

The inner transport is a trivial in-memory ``httpx.AsyncBaseTransport`` that returns a fresh fixed
response (no network), so the figures are the cost of the client and of the retry layers alone.
Everything runs on asyncio (httpx-retries sleeps with ``asyncio.sleep`` even for zero delays, so it
does not run on trio). Each figure is the best of several rounds; the rounds go round-robin over the
cases so that a slow spell of the machine hits every case alike.

Groups:

* ``success via AsyncClient``: ``await client.get(...)`` answered 200 at once. The reference is a bare
  ``httpx.AsyncClient`` over the in-memory transport; the *overhead* column is what a retry layer adds
  per request. Ours runs with everything on: the retry quota (AWS standard mode), a circuit breaker
  (``CircuitBreakerConfig()``) and the full HTTP classification. Target: through the
  transport alone, our overhead <= 2x httpx-retries' (which checks only the method and the status).
* ``success via the transport``: the same, calling ``handle_async_request`` directly (no client), which
  isolates the layer's own cost.
* ``503, 503, 200``: two 503s then a 200 with zero backoff, for both (ours: quota and classification
  on, and a breaker that such a sequence does not trip).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_retries import Retry
from httpx_retries import RetryTransport as HttpxRetriesTransport

from asyncretry import CircuitBreakerConfig, NoBackoff, RetryPolicy, RetryQuotaConfig
from asyncretry.httpx import AsyncRetryTransport
from benchmarks._common import Once, Row, measure, table


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    label: str
    once: Once


class Fixed(httpx.AsyncBaseTransport):
    """Answers every request with a fresh response from a repeating script of statuses (default: 200)."""

    def __init__(self, *statuses: int) -> None:
        self._statuses = itertools.cycle(statuses or (200,))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(self._statuses), content=b"ok")


def full_policy() -> RetryPolicy:
    """Standard mode with its retry quota, a circuit breaker and the default (full) HTTP classification."""
    return RetryPolicy(breaker=CircuitBreakerConfig())


def flaky_policy() -> RetryPolicy:
    # 503, 503, 200 fails 2 attempts in 3: a breaker at the default ratio (0.5) would open, so this one
    # trips at 0.9; the quota is large enough never to run dry (each call nets -5 tokens).
    return RetryPolicy(
        backoff=NoBackoff(),
        quota=RetryQuotaConfig(max_capacity=10**12),
        breaker=CircuitBreakerConfig(failure_ratio=0.9),
    )


# -------------------------------------------------------------------------------------------- cases
def client_cases(clients: list[httpx.AsyncClient]) -> list[Case]:
    def client(transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
        made = httpx.AsyncClient(transport=transport, base_url="https://example.test")
        clients.append(made)
        return made

    bare = client(Fixed())
    theirs = client(HttpxRetriesTransport(transport=Fixed(), retry=Retry(total=2, backoff_factor=0.0)))
    ours = client(AsyncRetryTransport(Fixed(), policy=full_policy()))
    adaptive = client(AsyncRetryTransport(Fixed(), policy=RetryPolicy(mode="adaptive", breaker=CircuitBreakerConfig())))
    legacy = client(AsyncRetryTransport(Fixed(), policy=RetryPolicy.aws_legacy()))

    def get(c: httpx.AsyncClient) -> Once:
        async def once() -> Any:
            return await c.get("/items")

        return once

    return [
        Case("client/bare", "bare httpx.AsyncClient over the in-memory transport", get(bare)),
        Case("client/httpx-retries", "httpx-retries RetryTransport(total=2)", get(theirs)),
        Case("client/ours", "asyncretry: standard + quota + breaker + classification", get(ours)),
        Case("client/ours-adaptive", "asyncretry: adaptive mode + quota + breaker", get(adaptive)),
        Case("client/ours-legacy", "asyncretry: legacy mode (no quota, no breaker)", get(legacy)),
    ]


def transport_cases() -> list[Case]:
    inner = Fixed()
    theirs = HttpxRetriesTransport(transport=Fixed(), retry=Retry(total=2, backoff_factor=0.0))
    ours = AsyncRetryTransport(Fixed(), policy=full_policy())
    request = httpx.Request("GET", "https://example.test/items")

    def send(transport: httpx.AsyncBaseTransport) -> Once:
        async def once() -> Any:
            # A fresh request each time: both layers keep per-request state in request.extensions.
            return await transport.handle_async_request(httpx.Request("GET", request.url))

        return once

    return [
        Case("transport/bare", "inner transport alone (request built, response made)", send(inner)),
        Case("transport/httpx-retries", "httpx-retries RetryTransport", send(theirs)),
        Case("transport/ours", "asyncretry AsyncRetryTransport (quota + breaker + classification)", send(ours)),
    ]


def flaky_cases(clients: list[httpx.AsyncClient]) -> list[Case]:
    def client(transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
        made = httpx.AsyncClient(transport=transport, base_url="https://example.test")
        clients.append(made)
        return made

    theirs = client(HttpxRetriesTransport(transport=Fixed(503, 503, 200), retry=Retry(total=2, backoff_factor=0.0)))
    ours = client(AsyncRetryTransport(Fixed(503, 503, 200), policy=flaky_policy()))
    bare = client(Fixed())

    def get(c: httpx.AsyncClient, check: bool = True) -> Once:
        async def once() -> Any:
            response = await c.get("/items")
            if check and response.status_code != 200:
                raise AssertionError(f"expected 200 after two retries, got {response.status_code}")
            return response

        return once

    return [
        Case("503/httpx-retries", "httpx-retries: 503, 503, 200 (backoff_factor=0)", get(theirs)),
        Case("503/ours", "asyncretry: 503, 503, 200 (NoBackoff, quota, breaker)", get(ours)),
        Case("503/bare", "(one plain GET, no retry layer, for scale)", get(bare, check=False)),
    ]


# ------------------------------------------------------------------------------------------ measuring
async def run(calls: int, rounds: int) -> list[Row]:
    clients: list[httpx.AsyncClient] = []
    groups = [
        ("success via AsyncClient", client_cases(clients), calls),
        ("success via the transport", transport_cases(), calls * 2),
        ("503, 503, 200 via AsyncClient", flaky_cases(clients), max(calls // 3, 50)),
    ]
    rows: list[Row] = []
    try:
        for group, cases, n in groups:
            best = await measure([(c.key, c.once) for c in cases], n, rounds)
            rows += [Row(group, c.key, c.label, best[c.key]) for c in cases]
    finally:
        for client in clients:
            await client.aclose()
    return rows


def render(rows: list[Row]) -> str:
    lines = [
        f"asyncretry httpx transport benchmark: Python {sys.version.split()[0]}, httpx {httpx.__version__}, "
        "asyncio, best of rounds",
        "",
        *table(rows),
    ]
    by_key = {r.key: r.ns for r in rows}
    lines.append("")
    bare, ours = by_key["client/bare"], by_key["client/ours"]
    added = ours / bare - 1.0
    lines.append(f"  [{'met ' if added <= 0.10 else 'MISS'}] success path via AsyncClient (target: adds at most 10% "
                 f"to an in-memory AsyncClient.get): ours adds {added:+.1%}")
    ours_alone = by_key["transport/ours"] - by_key["transport/bare"]
    theirs_alone = by_key["transport/httpx-retries"] - by_key["transport/bare"]
    lines.append(f"  [info] success path via the transport alone: ours adds {ours_alone / 1000:.2f} us, httpx-retries "
                 f"adds {theirs_alone / 1000:.2f} us (ours / theirs = {ours_alone / theirs_alone:.2f})")
    ratio = by_key["503/ours"] / by_key["503/httpx-retries"]
    lines.append(f"  [{'met ' if ratio <= 1.3 else 'MISS'}] 503, 503, 200 (target: at most 1.3x httpx-retries): "
                 f"ours / httpx-retries = {ratio:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    parser.add_argument("--calls", type=int, default=None, help="requests per round in the success groups")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (the best one counts)")
    args = parser.parse_args(argv)
    calls = args.calls or (1_000 if args.quick else 5_000)
    rounds = args.rounds or (3 if args.quick else 7)
    print(render(asyncio.run(run(calls, rounds))))


if __name__ == "__main__":
    main()
