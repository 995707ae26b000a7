"""Hedged requests against a local server with a slow tail: p50/p99 latency and extra requests.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_hedging                  # 2,000 requests per mode, about a minute
    .venv/bin/python -m benchmarks.bench_hedging --quick          # 600 requests per mode
    .venv/bin/python -m benchmarks.bench_hedging --backend trio --latency 0.02 --clients 20

The server is :class:`asyncretry._testserver.FaultyApp` under uvicorn on 127.0.0.1, in a subprocess (so
that it does not share the clients' GIL): every request waits ``--latency`` seconds (10 ms by default),
and 5% of them (``--slow-rate``, drawn per arrival, hedges included) wait 20 times as long. ``--clients``
clients (10) each send GETs back to back through one ``AsyncRetryTransport``, in each mode in turn:

* no hedging: ``RetryPolicy()``, the baseline every ratio is taken against;
* fixed delay: ``HedgingConfig(delay=3 * latency)``;
* p90 / p95: ``HedgingConfig(delay=3 * latency, quantile=q)``: after the q quantile of the recent
  latencies (the fixed delay until 20 are known).

Each hedging mode keeps the default budget: at most 10% extra requests over 10 s.

Figures: p50 and p99 of the client-side latency, each as a ratio to the no-hedging run of the same
invocation (the target: p99 at most a third, for at most 10% extra requests); extra requests as
the server counted them (arrivals per call, minus one); and whether the connection pool was back at
rest after the run (no request queued, every connection idle or closed).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from asyncretry import HedgingConfig, RetryPolicy
from asyncretry.httpx import AsyncRetryTransport
from benchmarks._common import server_url

SERVER = r"""
import json, sys
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
latency, slow_rate = float(sys.argv[1]), float(sys.argv[2])
app = FaultyApp(ServerConfig(latency=latency, slow_rate=slow_rate, slow_delay=19 * latency, seed=int(sys.argv[3])))
with FaultServer(app) as server:
    print(server.url, flush=True)
    for line in sys.stdin:  # "reset" between modes, "stop" at the end
        if line.strip() == "stop":
            break
        print(json.dumps({"requests": app.statistics().requests}), flush=True)
        app.reset()
"""


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    policy: RetryPolicy


@dataclass(frozen=True, slots=True)
class Result:
    mode: str
    latencies: tuple[float, ...]  # sorted, seconds
    calls: int
    sends: int  # requests the measured calls sent (hedges and retries included)
    hedges: int  # of those, hedges
    pool_at_rest: bool
    server_saw: int  # requests the server received in the whole run (the warm-up included)
    client_sent: int  # requests the client sent in the whole run: equal unless a request was lost

    def quantile(self, q: float) -> float:
        values = self.latencies
        return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]

    @property
    def extra(self) -> float:
        """Requests sent per call, minus one."""
        return self.sends / self.calls - 1.0


def modes(latency: float) -> list[Mode]:
    fallback = 3 * latency
    return [
        Mode("no hedging", RetryPolicy()),
        Mode(f"fixed delay {fallback * 1000:g} ms", RetryPolicy(hedging=HedgingConfig(delay=fallback))),
        Mode("p90 of recent latencies", RetryPolicy(hedging=HedgingConfig(delay=fallback, quantile=0.9))),
        Mode("p95 of recent latencies", RetryPolicy(hedging=HedgingConfig(delay=fallback, quantile=0.95))),
    ]


def _pool_at_rest(inner: httpx.AsyncHTTPTransport) -> bool:
    pool: Any = inner._pool  # httpcore's pool: what tests/test_httpx_integration.py checks too
    return not pool._requests and all(c.is_idle() or c.is_closed() for c in pool.connections)


async def run_mode(url: str, mode: Mode, clients: int, calls: int) -> tuple[list[float], int, int, int, bool]:
    """``calls`` GETs shared among ``clients`` closed-loop clients, after a warm-up: the latencies, the
    requests and hedges they sent, the requests sent in all, and whether the pool is at rest at the end."""
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=4 * clients))
    transport = AsyncRetryTransport(inner, policy=mode.policy)
    latencies: list[float] = []
    left = calls
    async with httpx.AsyncClient(transport=transport, base_url=url, timeout=10.0) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                began = time.perf_counter()
                response = await client.get("/items")
                latencies.append(time.perf_counter() - began)
                response.raise_for_status()

        for _ in range(max(20, calls // 20)):  # warm up: connections open, the quantile learnt
            await client.get("/items")
        before = transport.statistics()
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(worker)
        after = transport.statistics()
        at_rest = _pool_at_rest(inner)
    return latencies, after.attempts - before.attempts, after.hedges - before.hedges, after.attempts, at_rest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="600 requests per mode instead of 2,000")
    parser.add_argument("--calls", type=int, default=None, help="requests per mode")
    parser.add_argument("--clients", type=int, default=10, help="concurrent closed-loop clients")
    parser.add_argument("--latency", type=float, default=0.01, help="the server's usual latency, seconds")
    parser.add_argument("--slow-rate", type=float, default=0.05, help="the share of requests 20x slower")
    parser.add_argument("--seed", type=int, default=1, help="the server's seed")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = parser.parse_args(argv)
    calls = args.calls or (600 if args.quick else 2000)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(args.latency), str(args.slow_rate), str(args.seed)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    results: list[Result] = []
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        url = server_url(server.stdout.readline())
        for mode in modes(args.latency):
            server.stdin.write("reset\n")
            server.stdin.flush()
            server.stdout.readline()
            started = time.perf_counter()
            latencies, sends, hedges, sent, at_rest = anyio.run(
                run_mode, url, mode, args.clients, calls, backend=args.backend
            )
            server.stdin.write("reset\n")
            server.stdin.flush()
            arrivals = json.loads(server.stdout.readline())["requests"]
            results.append(Result(mode.name, tuple(sorted(latencies)), calls, sends, hedges, at_rest, arrivals, sent))
            print(f"  ran {mode.name} ({time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)
        server.stdin.write("stop\n")
        server.stdin.flush()
    except BaseException:
        server.kill()
        raise
    finally:
        server.wait(10)
    print(render(results, args, calls))


def render(results: list[Result], args: argparse.Namespace, calls: int) -> str:
    base = results[0]
    width = max(len(r.mode) for r in results)
    lines = [
        f"hedging benchmark: {args.clients} clients, {calls} GETs per mode, server latency {args.latency * 1000:g} ms, "
        f"{args.slow_rate:.0%} of requests 20x slower; {args.backend}, Python {sys.version.split()[0]}",
        "",
        f"  {'mode':<{width}}  {'p50 ms':>7}  {'p99 ms':>7}  {'p50 ratio':>9}  {'p99 ratio':>9}  "
        f"{'extra requests':>14}  {'hedges':>6}  pool at rest",
    ]
    for r in results:
        p50, p99 = r.quantile(0.5), r.quantile(0.99)
        lines.append(
            f"  {r.mode:<{width}}  {p50 * 1000:>7.1f}  {p99 * 1000:>7.1f}  {p50 / base.quantile(0.5):>9.2f}  "
            f"{p99 / base.quantile(0.99):>9.2f}  {r.extra:>14.1%}  {r.hedges:>6}  {'yes' if r.pool_at_rest else 'NO'}"
        )
    lines += [
        "",
        "target: p99 ratio <= 0.33 for <= 10% extra requests; the pool at rest after every run",
        "",
        "requests the server received / the client sent, whole run (a hedge cancelled while its connection was",
        "still opening never reached the server):",
    ]
    lines += [f"  {r.mode}: {r.server_saw} / {r.client_sent}" for r in results]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
