"""The adaptive limiter's profiles against a simulated throttling server, in virtual time.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.adaptive_sim                      # all scenarios, N = 10 and 50
    .venv/bin/python -m benchmarks.adaptive_sim --quick              # three scenarios, N = 50
    .venv/bin/python -m benchmarks.adaptive_sim --plot adaptive.png  # and draw the traces

The simulation itself is :mod:`asyncretry._simulation`: a server that admits ``C(t)`` requests per
second with a burst of ``C/10`` and throttles the rest, a fixed 20 ms latency, and N closed-loop
workers that each call through the real retry engine (``Retrier`` in adaptive mode, the real limiter,
quota and backoff), 120 virtual seconds per scenario. The table puts the ``"aws"`` profile
(``RetryPolicy.aws_adaptive()``) and the default profile (``RetryPolicy(mode="adaptive")``) side by
side with the physical limit (a client that knows ``C`` in advance), then checks the targets
for N = 50. Runs go to separate processes (``--jobs``), about a minute on 2 cores for everything.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from asyncretry import AdaptiveLimiterConfig, RetryPolicy
from asyncretry._simulation import (
    LAYOUTS,
    SCENARIOS,
    SimulationResult,
    format_table,
    limit_result,
    plot_results,
    run_simulation,
    target_failures,
)

QUICK_SCENARIOS = ("steady", "step-up", "outage")
DEFAULT_PROFILE = AdaptiveLimiterConfig().profile


def _policy(profile: str) -> RetryPolicy:
    # The two ways users get each profile: the AWS preset, and plain adaptive mode for the default.
    if profile == "aws":
        return RetryPolicy.aws_adaptive()
    if profile == DEFAULT_PROFILE:
        return RetryPolicy(mode="adaptive")
    return RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(profile=profile))


def _run(job: tuple[str, int, str, int, str]) -> SimulationResult:
    scenario, workers, profile, seed, layout = job
    return run_simulation(
        scenario, policy=_policy(profile), label=profile, workers=workers, seed=seed, layout=layout
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.adaptive_sim", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_SCENARIOS)} at N = 50")
    parser.add_argument("--plot", metavar="FILE.png", help="draw send rate, goodput, fill rate and capacity")
    parser.add_argument("--scenarios", help=f"comma-separated, from {', '.join(SCENARIOS)}")
    parser.add_argument("--workers", help="comma-separated numbers of workers (default 10,50)")
    parser.add_argument(
        "--profiles", default=f"aws,{DEFAULT_PROFILE}", help="comma-separated limiter profiles"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the engine's jitter (default 0)")
    parser.add_argument(
        "--layout", default="shared",
        help="comma-separated, from shared (one limiter for all workers, the default) and independent "
        "(a retrier and limiter per worker, as a fleet of separate clients)",
    )
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)"
    )
    args = parser.parse_args(argv)

    default_scenarios = QUICK_SCENARIOS if args.quick else tuple(SCENARIOS)
    scenarios = args.scenarios.split(",") if args.scenarios else list(default_scenarios)
    workers = [int(n) for n in args.workers.split(",")] if args.workers else [50] if args.quick else [10, 50]
    profiles = args.profiles.split(",")
    for name in scenarios:
        if name not in SCENARIOS:
            parser.error(f"unknown scenario {name!r}: choose from {', '.join(SCENARIOS)}")
    layouts = args.layout.split(",")
    for layout in layouts:
        if layout not in LAYOUTS:
            parser.error(f"unknown layout {layout!r}: choose from {', '.join(LAYOUTS)}")
    jobs = [(s, n, p, args.seed, lay) for s in scenarios for n in workers for lay in layouts for p in profiles]

    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(_run, jobs))
    elapsed = time.perf_counter() - began

    results: list[SimulationResult] = []
    for s in scenarios:
        for n in workers:
            results.extend(r for r in runs if r.scenario.name == s and r.workers == n)
            results.append(limit_result(s, workers=n))
    print(f"{len(runs)} runs of 120 virtual seconds in {elapsed:.1f} s real time ({args.jobs} processes)")
    print("goodput and steady: fraction of C served; steady leaves out 10 s after each change and outages;")
    print("reconverge: start / each change, until the trailing 5 s goodput stays within 10% of C;")
    print("vs limit: goodput minus the physical limit's (a client that knows C; min(C, N / 20 ms)).")
    print()
    print(format_table(results))
    print()
    checked = [r for r in runs if r.workers == 50]
    if checked:
        for profile in profiles:
            failures = [f for r in checked if r.label == profile for f in target_failures(r)]
            verdict = "all targets met" if not failures else f"{len(failures)} targets missed"
            print(f"targets (N = 50), {profile}: {verdict}")
            for failure in failures:
                print(f"    {failure}")
    if args.plot:
        plot_results(results, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
