"""Fleets against a server that announces its quota (a fixed window, ``RateLimit`` headers), in virtual time.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_quota_window             # the grid below, 4 seeds: about 21 minutes
    .venv/bin/python -m benchmarks.bench_quota_window --quick     # 100 per 10 s, N = 10 and 50, D = 2, 2 seeds
    .venv/bin/python -m benchmarks.bench_quota_window --windows 100/10 --clients 50 --rtts 0.1 --demands 2

The server admits ``Q`` requests per window of ``W`` seconds and answers 429 beyond (no ``Retry-After``);
every answer, 200 or 429, announces the window's quota: ``RateLimit: "window";r=<left>;t=<seconds to the
reset>`` (the IETF field, the reset rounded up to whole seconds), and by default its window too:
``RateLimit-Policy: "window";q=<Q>;w=<W>`` (``--policies``: ``sent``, ``unsent`` or both, to compare a
server that does not say its window). N clients call it through the real
``AsyncRetryTransport`` (an in-memory inner transport; each request takes one round trip, RTT), each asking
for its share of D times the quota's rate as Poisson arrivals (``--demands``: 0.9, under the quota on
average but over it in some windows, and 2, twice what the server admits). Layouts: ``independent`` (a
transport, so a limiter, per client: processes), ``shared`` (one transport for every client's calls:
the tasks of one process) and ``fleet`` (a transport per client, whose limiter is a
``RedisAdaptiveRateLimiter`` that every client shares: processes with one limiter through Redis; only with
``--layouts fleet``, which starts the test suite's Redis-compatible server. The limiter scripts read the
virtual clock, and a round trip to Redis takes no virtual time).

Controllers, in the same run:

* ``asyncretry``: adaptive mode, the default profile: the call that meets the spent quota retries at
  its reset, and the scope's limiter holds every call until then, from the answer that announces the
  quota spent, a 200 that took its last request included (``hold_spent_quota``; a reset of one
  whole second, which may come at any time within that second, holds nothing unless the window is known
  to be at least 2 s);
* ``no-hold``: the same with ``AdaptiveLimiterConfig(hold_spent_quota=False)``: only the call that met
  the spent quota waits for the reset;
* ``ignored``: adaptive mode with ``honour_server_delay=False``: announcements (and ``Retry-After``) ignored;
* ``aws``: ``RetryPolicy.aws_adaptive()``, the SDKs' own limiter; retries at the reset;
* ``standard``: standard mode, no limiter: the call that met the spent quota retries at its reset,
  the others go on sending.

Per cell, medians over the seeds (worst seed in brackets): goodput (requests served over the quota of
the run's windows), thr% (429s over all answers), Jain (Jain's index of the clients' served calls), served
and failed% (of the calls asked before the last two windows: those served, and those that ended with a
429 after their retries; the rest were still waiting when the run ended). With D = 2 at most half the
calls can be served: the server admits half of what is asked.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import random
import statistics
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import httpx

from asyncretry import AdaptiveLimiterConfig, Retrier, RetryPolicy
from asyncretry.httpx import AsyncRetryTransport
from asyncretry.redis import RedisAdaptiveRateLimiter
from asyncretry.testing import virtual_time_loop

from .bench_redis import _server_module, start_redis_server

CONTROLLERS: dict[str, RetryPolicy] = {
    "asyncretry": RetryPolicy(mode="adaptive"),
    "no-hold": RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(hold_spent_quota=False)),
    "ignored": RetryPolicy(mode="adaptive", honour_server_delay=False),
    "aws": RetryPolicy.aws_adaptive(),
    "standard": RetryPolicy(),
}
LAYOUTS = ("independent", "shared", "fleet")
DEFAULT_LAYOUTS = ("independent", "shared")
URL = "https://quota.test/items"


@dataclass(frozen=True)
class Cell:
    quota: int
    window: float
    clients: int
    rtt: float
    demand: float
    layout: str
    policy: bool  # the server sends RateLimit-Policy (the window's length)


@dataclass(frozen=True)
class Run:
    goodput: float
    served: float
    throttled: float
    jain: float
    failed: float


class WindowServer:
    """``quota`` requests per ``window`` seconds from ``start``; every answer announces what is left."""

    def __init__(self, quota: int, window: float, start: float, policy: bool) -> None:
        self.quota, self.window, self.start = quota, window, start
        self.policy = {"RateLimit-Policy": f'"window";q={quota};w={math.ceil(window)}'} if policy else {}
        self.number, self.used = 0, 0
        self.answers = self.throttles = 0

    def answer(self, now: float) -> httpx.Response:
        elapsed = now - self.start
        number = int(elapsed // self.window)
        if number != self.number:
            self.number, self.used = number, 0
        admitted = self.used < self.quota
        self.used += admitted
        reset = math.ceil((number + 1) * self.window - elapsed)
        self.answers += 1
        self.throttles += not admitted
        headers = {"RateLimit": f'"window";r={self.quota - self.used};t={reset}', **self.policy}
        return httpx.Response(200 if admitted else 429, headers=headers)


def _jain(values: Sequence[float]) -> float:
    total = sum(values)
    return total * total / (len(values) * sum(v * v for v in values)) if total else 0.0


# tests/conftest_redis.py (its VirtualTimeBackend: the limiter scripts read the loop's virtual clock through a
# synchronous client, so a round trip takes no virtual time), loaded once per worker process.
_redis_helpers = functools.cache(_server_module)


async def _simulate(cell: Cell, controller: str, seed: int, duration: float, redis_url: str | None) -> Run:
    start = anyio.current_time()
    server = WindowServer(cell.quota, cell.window, start, cell.policy)
    seeds = random.Random(seed)

    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(cell.rtt / 2)
        response = server.answer(anyio.current_time())
        await anyio.sleep(cell.rtt / 2)
        return response

    policy = CONTROLLERS[controller]
    prefix = f"quota-window-{uuid.uuid4().hex}:"
    backends: list[Any] = []  # the fleet layout's, one per client

    def transport() -> AsyncRetryTransport:
        rng = random.Random(seeds.random()).random
        if cell.layout != "fleet" or policy.limiter_config is None:
            return AsyncRetryTransport(httpx.MockTransport(handler), policy=policy, rng=rng)
        assert redis_url is not None
        backend, config = _redis_helpers().VirtualTimeBackend(redis_url, prefix), policy.limiter_config
        backend.offset = 0.0  # the server's clock is the loop's
        backends.append(backend)
        retrier = Retrier(policy, rng=rng, limiter=lambda key: RedisAdaptiveRateLimiter(backend, config, name=key))
        return AsyncRetryTransport(httpx.MockTransport(handler), retrier=retrier)

    shared = transport()
    clients = [shared if cell.layout == "shared" else transport() for _ in range(cell.clients)]
    served = [0] * cell.clients
    asked = failed = successes = 0
    rate = cell.demand * cell.quota / cell.window / cell.clients  # each client's arrivals per second
    last = start + duration - 2 * cell.window  # calls asked later may still wait for a reset at the end

    async def call(client: httpx.AsyncClient, index: int, counted: bool) -> None:
        nonlocal failed, successes
        ok = (await client.get(URL)).status_code == 200
        successes += ok
        if counted:
            served[index] += ok
            failed += not ok

    async def arrivals(index: int, tg: anyio.abc.TaskGroup) -> None:
        nonlocal asked
        rng = random.Random(seeds.random())
        async with httpx.AsyncClient(transport=clients[index]) as client:
            while True:
                await anyio.sleep(rng.expovariate(rate))
                counted = anyio.current_time() <= last
                asked += counted
                tg.start_soon(call, client, index, counted)

    async with anyio.create_task_group() as tg:
        for index in range(cell.clients):
            tg.start_soon(arrivals, index, tg)
        await anyio.sleep_until(start + duration)
        tg.cancel_scope.cancel()
    for backend in backends:
        backend.close_sync()
    return Run(
        goodput=successes / (cell.quota * duration / cell.window),
        served=sum(served) / asked if asked else 0.0,
        throttled=server.throttles / server.answers if server.answers else 0.0,
        jain=_jain(served),
        failed=failed / asked if asked else 0.0,
    )


def _job(job: tuple[Cell, str, int, float, str | None]) -> tuple[Cell, str, int, Run]:
    cell, controller, seed, duration, redis_url = job
    run = anyio.run(_simulate, cell, controller, seed, duration, redis_url, backend="asyncio",
                    backend_options={"loop_factory": virtual_time_loop})
    return cell, controller, seed, run


def _cells(windows: str, clients: str, rtts: str, demands: str, layouts: str, policies: str) -> list[Cell]:
    found = []
    for layout in layouts.split(","):
        for demand in demands.split(","):
            for window in windows.split(","):
                quota, _, seconds = window.partition("/")
                for rtt in rtts.split(","):
                    for n in clients.split(","):
                        found += [Cell(int(quota), float(seconds), int(n), float(rtt), float(demand), layout,
                                       policy == "sent") for policy in policies.split(",")]
    return found


def _row(controller: str, runs: list[Run]) -> str:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    goodput = [r.goodput for r in runs]
    served = [r.served for r in runs]
    throttled = [100 * r.throttled for r in runs]
    jain = [r.jain for r in runs]
    failed = [100 * r.failed for r in runs]
    return (f"  {controller:<11} goodput {median(goodput):4.2f} [{min(goodput):4.2f}]  "
            f"thr% {median(throttled):5.1f} [{max(throttled):5.1f}]  Jain {median(jain):4.2f} [{min(jain):4.2f}]  "
            f"served {median(served):4.2f} [{min(served):4.2f}]  failed% {median(failed):5.1f} [{max(failed):5.1f}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_quota_window",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="rough figures: 100 per 10 s, N = 10 and 50, RTT 100 ms, demand 2, 2 seeds")
    parser.add_argument("--windows", default="20/1,15/3,100/10,1200/60",
                        help="comma-separated quotas as REQUESTS/SECONDS (default 20/1,15/3,100/10,1200/60)")
    parser.add_argument("--clients", default="1,10,50", help="comma-separated client counts N (default 1,10,50)")
    parser.add_argument("--rtts", default="0.001,0.1", help="comma-separated round trips, seconds (default 0.001,0.1)")
    parser.add_argument("--demands", default="0.9,2",
                        help="comma-separated demands, as multiples of the quota's rate (default 0.9,2)")
    parser.add_argument("--layouts", default=",".join(DEFAULT_LAYOUTS),
                        help="comma-separated, from independent,shared,fleet (default independent,shared)")
    parser.add_argument("--policies", default="sent",
                        help="comma-separated, from sent,unsent: whether the server says its window (default sent)")
    parser.add_argument("--controllers", default=",".join(CONTROLLERS),
                        help=f"comma-separated, from {','.join(CONTROLLERS)}")
    parser.add_argument("--seeds", type=int, default=4, help="seeds per cell (default 4)")
    parser.add_argument("--windows-per-run", type=int, default=6,
                        help="each run lasts this many windows, and at least 60 virtual seconds (default 6); "
                        "calls asked in the last two windows are not counted")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    args = parser.parse_args(argv)
    if args.quick:
        args.windows, args.clients, args.rtts, args.demands, args.seeds = "100/10", "10,50", "0.1", "2", 2
    controllers = args.controllers.split(",")
    unknown = [c for c in controllers if c not in CONTROLLERS]
    if unknown:
        parser.error(f"--controllers must be comma-separated from {', '.join(CONTROLLERS)}, got {unknown}")
    if any(layout not in LAYOUTS for layout in args.layouts.split(",")):
        parser.error(f"--layouts must be comma-separated from {','.join(LAYOUTS)}, got {args.layouts!r}")
    if any(policy not in ("sent", "unsent") for policy in args.policies.split(",")):
        parser.error(f"--policies must be comma-separated from sent,unsent, got {args.policies!r}")
    try:
        cells = _cells(args.windows, args.clients, args.rtts, args.demands, args.layouts, args.policies)
    except ValueError as error:
        parser.error(f"--windows REQUESTS/SECONDS, --clients and --rtts must be numbers: {error}")
    if args.seeds < 1 or args.windows_per_run < 3:
        parser.error("--seeds must be at least 1 and --windows-per-run at least 3")
    if not all(math.isfinite(c.demand) and c.demand > 0 and c.rtt >= 0 and c.window > 0 and c.quota > 0 for c in cells):
        parser.error("--demands, --windows and --rtts must be positive numbers")
    server = start_redis_server() if "fleet" in args.layouts.split(",") else None
    url = server.url if server is not None else None
    jobs = []
    for cell in cells:
        duration = max(60.0, args.windows_per_run * cell.window)
        duration = cell.window * math.ceil(duration / cell.window)  # whole windows
        jobs += [(cell, controller, seed, duration, url) for controller in controllers for seed in range(args.seeds)]
    began = time.perf_counter()
    try:
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            done = list(pool.map(_job, jobs, chunksize=1))
    finally:
        if server is not None:
            server.close()
    print(f"{len(done)} runs in {time.perf_counter() - began:.0f} s real time ({args.jobs} processes); "
          f"medians over {args.seeds} seeds, worst seed in brackets")
    for cell in cells:
        print(f"\nQ = {cell.quota} per {cell.window:g} s, N = {cell.clients}, RTT {1000 * cell.rtt:g} ms, "
              f"demand {cell.demand:g}, {cell.layout}, RateLimit-Policy {'sent' if cell.policy else 'unsent'}")
        for controller in controllers:
            runs = [run for c, k, _, run in done if c == cell and k == controller]
            print(_row(controller, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
