"""The grpc.aio interceptors: the success path against the bare channel and gRPC's own ``retryPolicy``, and
hedging against a slow replica.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_grpc            # about a minute
    .venv/bin/python -m benchmarks.bench_grpc --quick    # rough figures

A grpc.aio server on 127.0.0.1 (generic handlers, bytes messages) runs in a subprocess, so that it does not
share the client's event loop or GIL. Every call is a unary-unary echo of 16 bytes.

The interceptor alone: its own work per successful call, with a continuation that answers at once (no
network), against an interceptor that only calls its continuation; with a timeout, and with hedging (a
hedged call runs its attempts in a task group, which is most of its cost).

Success path: sequential calls that all succeed, best of rounds (round-robin over the cases), per call:

* ``bare``: the channel with gRPC's retries off and no interceptor: the baseline of every ratio;
* ``grpc retryPolicy``: gRPC's built-in retries (service config: 5 attempts on UNAVAILABLE);
* ``no-op interceptor``: an interceptor that only calls its continuation (what grpc.aio's interceptor
  machinery costs by itself: it runs every intercepted call in a task of its own);
* ``asyncretry``: :class:`~asyncretry.grpc.RetryInterceptors` with the default policy;
* ``asyncretry + timeout``: the same, each call with ``timeout=10`` (the deadline path).

Hedging: the server answers at once, but one call in 20 (its first attempt, counted by the server) waits
``--slow`` seconds; calls are sent one after the other, without hedging and with
``HedgingConfig(delay=--hedge-delay)``. Figures: p50 and p99 client latency, as ratios to no hedging.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import time
from typing import Any

from grpc import aio

from asyncretry import HedgingConfig, RetryPolicy
from asyncretry.grpc import CHANNEL_OPTIONS, RetryInterceptors
from benchmarks._common import Once, measure

SERVER = r"""
import asyncio, sys, grpc
from grpc import aio
slow = float(sys.argv[1])
count = 0
async def echo(request, context):
    return request
async def tail(request, context):
    global count
    count += 1
    previous = dict(context.invocation_metadata()).get("grpc-previous-rpc-attempts")
    if previous is None and count % 20 == 0:
        await asyncio.sleep(slow)
    return request
async def main():
    server = aio.server()
    handlers = {"Echo": grpc.unary_unary_rpc_method_handler(echo), "Tail": grpc.unary_unary_rpc_method_handler(tail)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"127.0.0.1:{port}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)
asyncio.run(main())
"""

RETRY_POLICY = json.dumps({"methodConfig": [{"name": [{"service": "bench.Echo"}], "retryPolicy": {
    "maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "1s", "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}}]})
PAYLOAD = b"x" * 16


class NoOp(aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc has no type hints
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(details, request)


def _echo(channel: aio.Channel, **kwargs: Any) -> Once:
    method = channel.unary_unary("/bench.Echo/Echo")

    async def once() -> Any:
        return await method(PAYLOAD, **kwargs)

    return once


async def success_path(target: str, calls: int, rounds: int) -> None:
    channels = {
        "bare": aio.insecure_channel(target, options=CHANNEL_OPTIONS),
        "grpc retryPolicy": aio.insecure_channel(target, options=[("grpc.service_config", RETRY_POLICY)]),
        "no-op interceptor": aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=[NoOp()]),
        "asyncretry": aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=RetryInterceptors()),
    }
    cases = [(name, _echo(channel)) for name, channel in channels.items()]
    cases.append(("asyncretry + timeout", _echo(channels["asyncretry"], timeout=10.0)))
    best = await measure(cases, calls, rounds)
    for channel in channels.values():
        await channel.close()
    base = best["bare"]
    print(f"success path: {calls} sequential calls per round, best of {rounds} rounds")
    print(f"{'case':<24}{'us/call':>10}{'x bare':>9}{'added us':>10}")
    for name, _ in cases:
        print(f"{name:<24}{best[name] / 1000:>10.1f}{best[name] / base:>9.2f}{(best[name] - base) / 1000:>10.1f}")
    print(f"asyncretry / grpc retryPolicy: {best['asyncretry'] / best['grpc retryPolicy']:.2f}x; "
          f"asyncretry / no-op interceptor: {best['asyncretry'] / best['no-op interceptor']:.2f}x")


class _Done:
    """What a continuation returns for a call that already succeeded (no network): awaiting it is free."""

    def __await__(self) -> Any:
        return PAYLOAD
        yield  # type: ignore[unreachable]  # a generator, so that ``await`` works


async def _continuation(details: Any, request: Any) -> _Done:
    return _Done()


async def alone(calls: int, rounds: int) -> None:
    """The interceptors' own work per call, against a no-op interceptor, with a continuation that answers at once."""
    details = aio.ClientCallDetails(b"/bench.Echo/Echo", None, None, None, None)
    timed = details._replace(timeout=10.0)
    noop, retry = NoOp(), RetryInterceptors().unary_unary
    hedged = RetryInterceptors(policy=RetryPolicy(hedging=HedgingConfig(delay=0.005))).unary_unary
    cases: list[tuple[str, Once]] = [
        ("no-op interceptor", lambda: noop.intercept_unary_unary(_continuation, details, PAYLOAD)),
        ("asyncretry", lambda: retry.intercept_unary_unary(_continuation, details, PAYLOAD)),
        ("asyncretry + timeout", lambda: retry.intercept_unary_unary(_continuation, timed, PAYLOAD)),
    ]
    best = await measure(cases, calls, rounds)
    # A hedged call costs tens of times more: fewer of them, for the same time.
    hedging = ("asyncretry + hedging", lambda: hedged.intercept_unary_unary(_continuation, details, PAYLOAD))
    best.update(await measure([hedging], max(100, calls // 20), rounds))
    cases.append(hedging)
    print(f"the interceptor alone (a continuation that answers at once): best of {rounds} rounds of {calls} calls")
    for name, _ in cases:
        print(f"{name:<24}{best[name] / 1000:>10.2f} us/call")
    print()


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def hedging(target: str, calls: int, delay: float) -> None:
    results: dict[str, list[float]] = {}
    policy = RetryPolicy(hedging=HedgingConfig(delay=delay, budget_ratio=0.1))
    modes = {
        "no hedging": RetryInterceptors(), f"hedging after {delay * 1000:.0f} ms": RetryInterceptors(policy=policy),
    }
    for name, retry in modes.items():
        async with aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=retry) as channel:
            method = channel.unary_unary("/bench.Echo/Tail")
            latencies = []
            for _ in range(calls):
                start = time.perf_counter()
                await method(PAYLOAD)
                latencies.append(time.perf_counter() - start)
            results[name] = latencies
            hedges = retry.statistics().hedges
        print(f"{name:<24} p50 {_quantile(latencies, 0.5) * 1000:7.2f} ms   p99 "
              f"{_quantile(latencies, 0.99) * 1000:7.2f} ms   hedges {hedges}")
    (base, hedged) = results.values()
    print(f"hedged / not: p50 {_quantile(hedged, 0.5) / _quantile(base, 0.5):.2f}x, "
          f"p99 {_quantile(hedged, 0.99) / _quantile(base, 0.99):.2f}x")


async def run(target: str, args: argparse.Namespace) -> None:
    await alone(*((2000, 3) if args.quick else (20000, 5)))
    calls, rounds = (300, 3) if args.quick else (400, 15)
    await success_path(target, calls, rounds)
    print()
    await hedging(target, 200 if args.quick else 1000, args.hedge_delay)


def main(args: argparse.Namespace) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(args.slow)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        target = server.stdout.readline().strip()
        if not target.startswith("127.0.0.1:"):
            raise RuntimeError(f"the benchmark's server did not start: {target!r}")
        asyncio.run(run(target, args))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--slow", type=float, default=0.05, help="seconds the slow replica's calls wait (0.05)")
    parser.add_argument("--hedge-delay", type=float, default=0.005, help="hedging delay, seconds (0.005)")
    main(parser.parse_args())
