"""``asyncretry demo``: the same clients and server, four ways of retrying, compared side by side.

A local HTTP server (uvicorn on 127.0.0.1, a free port) serves up to a capacity that changes over time,
throttles above it, fails a few requests and has a short outage; the clients go through
:class:`~asyncretry.httpx.AsyncRetryTransport` in each configuration in turn. Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import random

import anyio
import httpx
from rich.console import Console

from ._common import pyplot
from ._report import COLUMNS_NOTE, footnotes, live_progress, plot_runs, results_table
from ._server import DemoServer, demo_scenario, serve
from ._workload import Configuration, RunResult, Workload, configurations, run_configuration

__all__ = ["describe", "run"]


def describe(workload: Workload, server: DemoServer) -> str:
    """Two lines for humans: what the clients want and what the server does."""
    segments = server.scenario.segments()
    parts = []
    for start, _end, capacity in segments:
        what = "an outage (every request 503)" if capacity <= 0 else f"{capacity:g}/s"
        parts.append(f"{what} from {start:g} s" if start else what)
    return (
        f"{workload.clients} clients, each wanting {workload.rate:g} request(s)/s ({workload.demand:g}/s in all), "
        f"for {workload.duration:g} s per configuration.\n"
        f"Server capacity: {', '.join(parts)}. Above capacity: 429 with Retry-After: {server.retry_after}; "
        f"{server.transient:.0%} of the requests it serves fail with 503."
    )


async def _run_all(
    configs: list[Configuration], workload: Workload, server: DemoServer, console: Console
) -> list[RunResult]:
    results: list[RunResult] = []
    async with serve(server.asgi) as url:
        console.print(f"[dim]server: {url}[/dim]")
        with live_progress(console, configs, workload.duration) as tick_for:
            for index, configuration in enumerate(configs):
                limits = httpx.Limits(max_connections=workload.clients, max_keepalive_connections=workload.clients)
                transport = httpx.AsyncHTTPTransport(limits=limits)
                results.append(await run_configuration(
                    configuration, workload, server, transport, url, on_tick=tick_for(index)
                ))
    return results


def run(args: argparse.Namespace, console: Console) -> int:
    """Run the demo; returns the exit status."""
    workload = Workload(clients=args.clients, rate=args.rate, duration=args.duration, seed=args.seed,
                        layout=args.layout)
    if args.plot is not None:
        pyplot()  # a missing matplotlib should stop the demo before it runs, not after
    configs = configurations(args.configs, profiles=args.profile, breaker=args.breaker)
    server = DemoServer(
        demo_scenario(workload.duration, workload.demand),
        rng=random.Random(args.seed).random,
        bin_width=max(0.25, workload.duration / 200),
    )
    console.print("[bold]asyncretry demo[/bold]: " + describe(workload, server))
    for configuration in configs:
        console.print(f"  [bold]{configuration.name}[/bold]: {configuration.description}")
    results = anyio.run(_run_all, configs, workload, server, console, backend="asyncio")
    console.print()
    console.print(results_table(
        results,
        title=f"asyncretry demo: {workload.clients} clients, {workload.duration:g} s per configuration",
        caption=COLUMNS_NOTE,
    ))
    for line in footnotes(results):
        console.print(line, style="dim")
    if args.plot is not None:
        plot_runs(results, args.plot)
        console.print(f"Plot written to {args.plot}")
    return 0
