"""``asyncretry simulate``: the demo's comparison in virtual time, minutes of traffic in seconds.

The clients, the retry configurations and the server's logic are the demo's own; only the wire and the
clock differ: requests reach the server in memory (``httpx.MockTransport``) and the event loop jumps
straight to the next timer (:func:`asyncretry.testing.virtual_time_loop`), so nothing waits for real.
The capacity scripts are the demo's (scaled to the demand) or the adaptive limiter's scenarios from
:mod:`asyncretry._simulation`, or one given with ``--capacity``.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Callable

import anyio
import httpx
from rich.console import Console

from .._engine._hedging import HedgingConfig
from .._simulation import SCENARIOS, Scenario
from ..testing import virtual_time_loop
from ._common import UsageError, pyplot
from ._demo import describe
from ._report import COLUMNS_NOTE, footnotes, live_progress, plot_runs, results_table
from ._server import DemoServer, demo_scenario
from ._workload import Configuration, RunResult, Tally, Workload, configurations, run_configuration

__all__ = ["run", "scenario_from"]

_DEFAULT_DURATION = 120.0


def scenario_from(args: argparse.Namespace, demand: float) -> Scenario:
    """The capacity script the arguments ask for.

    Raises:
        UsageError: ``--duration`` does not outlast the script's last change.
    """
    if args.capacity is not None:
        duration = args.duration if args.duration is not None else max(_DEFAULT_DURATION, 2 * args.capacity[-1][0])
        name = "custom"
        schedule = args.capacity
        last = schedule[-1][0]
        option = "--capacity"
    elif args.scenario == "demo":
        return demo_scenario(args.duration if args.duration is not None else _DEFAULT_DURATION, demand)
    else:
        base = SCENARIOS[args.scenario]
        if args.duration is None:
            return base
        duration, name, schedule, last = args.duration, base.name, base.schedule, base.schedule[-1][0]
        option = f"--scenario {base.name}"
    if duration <= last:
        raise UsageError(
            f"argument --duration: must be longer than the last change of {option} ({last:g} s), got {duration:g}"
        )
    return Scenario(name=name, schedule=schedule, duration=duration)


def hedged(configs: list[Configuration], hedge: tuple[str, float], latency: float) -> list[Configuration]:
    """Each configuration that retries, and after it its twin with hedged requests (``--hedge``)."""
    kind, value = hedge
    fallback = value if kind == "delay" else max(0.001, 3 * latency)  # until 20 latencies are known
    config = HedgingConfig(delay=fallback, quantile=value if kind == "quantile" else None)
    how = f"after {value:g} s" if kind == "delay" else f"after the p{round(value * 100)} of recent latencies"
    result: list[Configuration] = []
    for c in configs:
        result.append(c)
        if c.policy.max_attempts > 1:  # a hedge is an attempt: one attempt leaves no room for it
            result.append(Configuration(
                f"{c.name} + hedging", c.policy.replace(hedging=config),
                f"{c.description}; a second send {how} without an answer (<= 10% extra)",
            ))
    return result


def rate_limited(configs: list[Configuration], rate: float, layout: str) -> list[Configuration]:
    """Each configuration, and after it its twin behind a fixed rate limit of ``rate`` per second with a burst
    of one call (``--rate-limit``): a known quota in front of the client."""
    per = "client" if layout == "independent" else "transport"
    result: list[Configuration] = []
    for c in configs:
        result.append(c)
        result.append(Configuration(
            f"{c.name} @ {rate:g}/s", c.policy.replace(rate_limit=rate, rate_limit_burst=1.0),
            f"{c.description}; at most {rate:g} requests/s per {per} (a known quota, a burst of one call)",
        ))
    return result


async def _simulate(
    configuration: Configuration, workload: Workload, scenario: Scenario, latency: float, transient: float,
    on_tick: Callable[[Tally], None], slow: float = 0.0,
) -> RunResult:
    server = DemoServer(
        scenario, latency=latency, transient=transient, rng=random.Random(workload.seed).random,
        bin_width=max(0.25, scenario.duration / 200), slow=slow,
    )
    transport = httpx.MockTransport(server.handle)
    return await run_configuration(configuration, workload, server, transport, "http://server.invalid",
                                   on_tick=on_tick)


def run(args: argparse.Namespace, console: Console) -> int:
    """Run the simulation; returns the exit status."""
    if args.plot is not None:
        pyplot()
    workload = Workload(clients=args.clients, rate=args.rate, duration=_DEFAULT_DURATION, seed=args.seed,
                        layout=args.layout)
    scenario = scenario_from(args, workload.demand)
    workload = dataclasses.replace(workload, duration=scenario.duration)
    configs = configurations(args.configs, profiles=args.profile, breaker=args.breaker)
    if args.rate_limit is not None:
        configs = rate_limited(configs, args.rate_limit, args.layout)
    if args.hedge is not None:
        configs = hedged(configs, args.hedge, args.latency)
    probe = DemoServer(scenario, latency=args.latency, transient=args.transient, slow=args.slow)
    console.print("[bold]asyncretry simulate[/bold] (virtual time): " + describe(workload, probe))
    started = time.perf_counter()
    results: list[RunResult] = []
    with live_progress(console, configs, scenario.duration, unit="virtual s") as tick_for:
        for index, configuration in enumerate(configs):
            results.append(anyio.run(
                _simulate, configuration, workload, scenario, args.latency, args.transient, tick_for(index), args.slow,
                backend="asyncio", backend_options={"loop_factory": virtual_time_loop},
            ))
    elapsed = time.perf_counter() - started
    console.print()
    console.print(results_table(
        results,
        title=f"asyncretry simulate: {workload.clients} clients, {scenario.duration:g} virtual s per configuration",
        caption=f"{len(configs)} x {scenario.duration:g} s of traffic simulated in {elapsed:.1f} s of real time. "
        + COLUMNS_NOTE,
    ))
    for line in footnotes(results):
        console.print(line, style="dim")
    if args.plot is not None:
        plot_runs(results, args.plot, time_label="virtual time (s)")
        console.print(f"Plot written to {args.plot}")
    return 0

