"""End to end: what the retry transport adds to a real request, through httpx.AsyncClient to a local uvicorn server.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_e2e [--quick]

A uvicorn server on 127.0.0.1 (the project's fault server, answering every request 200) in a subprocess, so
that its work never waits for the client's interpreter lock (or the client for its), and one keep-alive
connection per client; rounds interleave the bare client and the retrying one, and the best round of each
counts. The target: with quota, breaker and classification on, the transport adds at most 3% to a
bare request. Shown beside it (no target): the same with a ``deadline``, whose sends each run in a task of
their own (so that a send the deadline cancels never costs httpcore's pool a connection).
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio
import httpx

from asyncretry import CircuitBreakerConfig, RetryPolicy
from asyncretry.httpx import AsyncRetryTransport
from benchmarks.bench_adaptive_http import ThrottlingServer

UNLIMITED = 1e9  # requests/s the server admits: every answer is a 200


async def _round(client: httpx.AsyncClient, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        response = await client.get("/items")
        assert response.status_code == 200
    return (time.perf_counter() - started) / requests * 1e6


async def measure(url: str, requests: int, rounds: int) -> tuple[float, float, float]:
    """Best microseconds per request: (bare client, retrying client, retrying client with a deadline)."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    policy = RetryPolicy(breaker=CircuitBreakerConfig())  # standard mode: quota, breaker, classification
    timed = policy.replace(deadline=30.0)
    async with (
        httpx.AsyncClient(base_url=url, limits=limits) as bare,
        httpx.AsyncClient(base_url=url, transport=AsyncRetryTransport(policy=policy, limits=limits)) as ours,
        httpx.AsyncClient(base_url=url, transport=AsyncRetryTransport(policy=timed, limits=limits)) as detached,
    ):
        clients = (bare, ours, detached)
        for client in clients:
            await _round(client, 50)  # warm: connections open, code paths hot
        best = [float("inf")] * len(clients)
        for _ in range(rounds):
            for index, client in enumerate(clients):
                best[index] = min(best[index], await _round(client, requests))
    return best[0], best[1], best[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds: rough figures, fast")
    args = parser.parse_args(argv)
    requests, rounds = (200, 3) if args.quick else (1_000, 7)
    with ThrottlingServer(UNLIMITED) as server:
        bare, ours, timed = anyio.run(measure, server.url, requests, rounds)
        server.stop()
    added = (ours - bare) / bare
    print(f"asyncretry end to end (Python {sys.version.split()[0]}, asyncio, uvicorn on 127.0.0.1 in a subprocess, "
          f"keep-alive, best of {rounds} interleaved rounds of {requests} requests)")
    print(f"  bare httpx.AsyncClient                    {bare:8.1f} us/request")
    print(f"  through AsyncRetryTransport (standard)    {ours:8.1f} us/request   {added:+.1%}")
    print(f"  with a deadline (each send in its own task) {timed:6.1f} us/request   {(timed - bare) / bare:+.1%}")
    print(f"  [{'met ' if added <= 0.03 else 'MISS'}] the transport adds at most 3% to a bare request: {added:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
