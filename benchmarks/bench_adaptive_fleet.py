"""Fleets of independent clients against one throttling server, over a grid of shapes, in virtual time.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_adaptive_fleet --quick     # 8 cells, 2 seeds, 20 s: minutes
    .venv/bin/python -m benchmarks.bench_adaptive_fleet             # the whole grid, 8 seeds, 60 s: hours
    .venv/bin/python -m benchmarks.bench_adaptive_fleet --rates 200 --clients 10,50 --rtts 0.1 --seeds 8
    .venv/bin/python -m benchmarks.bench_adaptive_fleet --layouts shared --clients 50 --demands equal \
        --shapes steady --controllers asyncretry,fair             # one limiter for the whole fleet
    .venv/bin/python -m benchmarks.bench_adaptive_fleet --demands mixed --light-floor 2   # light clients' floor
    .venv/bin/python -m benchmarks.bench_adaptive_fleet --layouts shared,callers --clients 50 --demands mixed \
        --shapes steady --controllers asyncretry,independent,fair   # one limiter, callers in turn

The server admits R requests per second from a token bucket holding 50 ms of R and answers 429 (a
throttling error) beyond. N clients, each with its own retrier and limiter (as separate processes have;
``--layouts shared``: one retrier and limiter for every client's calls, as the tasks of one process have;
``--layouts callers``: the same, each call naming its client as its caller, so that the limiter's line
takes the clients in turn),
call it through the real retry engine; every request takes one round trip (RTT). Demand is either equal
and saturating (closed-loop workers, enough of them per client to send twice its fair share) or
heterogeneous (a quarter of the clients want 4x the fair share, the rest 0.5x, as Poisson arrivals). A
"step" run halves R for its middle third. Each cell runs six controllers in the same run: the default
profile, the ``"independent"`` and ``"fair"`` profiles, the SDK-exact ``"aws"`` profile, no limiter (standard
mode) and a plain AIMD limiter (+1/s per second, x0.7 per congestion event); variants take settings after a
colon (``fair:fair_exponent=0+fair_probe=4``, ``independent:share_exponent=0.5``, ``asyncretry:fair_count=6``)
or leave rules of the default profile out (``asyncretry-without:RULE+RULE``; ``asyncretry-paced`` also drops
the engine's backoff once the limiter paces; both take settings too: ``asyncretry-paced:fair_step=4``);
``asyncretry-start:W`` is the default profile sending at most W attempts beyond twice the answers until its
first throttle (a start window, as TCP's slow start). ``--known-rate F`` puts a fixed rate limit of F times
each limiter's share of R (burst one call) in front of it, as a service that knows its quota sets.
``--light-floor F`` gives each light client of a heterogeneous cell a limiter that never paces it below F
times its demand (its ``min_fill_rate``, and ``fair_floor`` for the ``"fair"`` profile), as a service that
knows its own steady rate can set. Cells fan out over processes (``--jobs``); time is virtual.

Per cell, medians over the seeds (worst seed in brackets):

* goodput: served requests over R x duration, beside what uncoordinated clients can get
  (:func:`frontier`: about 0.7-0.8 R at R = 50, whose bucket holds 2.5 tokens, about R from 200 up);
* thr%: throttled attempts over all attempts;
* Jain: Jain's index of the clients' successes (equal demand), or of the big clients' (heterogeneous);
* starved: clients without a success (worst seed);
* small: heterogeneous demand, the lowest share of its calls a small client got served (worst seed);
  ``--grace S`` counts only the calls it asked for at least S seconds before the end of the run, so that a
  call still waiting for a short turn (or in a retry's backoff) when the run stops is not counted as lost;
* recover: step runs, seconds after each step until the served rate (1 s windows) is within 10% of
  what uncoordinated clients can get from the new capacity, the longer of the two (worst seed).

Targets, per run: goodput >= 0.97 of the frontier (shared layout: >= 0.99 R), thr% <= 15% (shared: 1%),
Jain >= 0.9, no client starved, every small client served >= 0.95 of its calls, recovered within 5 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter, LimiterRule, Retrier, RetryPolicy
from asyncretry._primitives._adaptive import RULES, AsyncretryRateController
from asyncretry._simulation import Scenario, SimulatedServer, SimulatedThrottle
from asyncretry.testing import virtual_time_loop

CONTROLLERS = ("asyncretry", "independent", "fair", "aws", "none", "aimd")
BURST = 0.05  # the server's bucket: 50 ms of its rate
QUICK = {"rates": (200, 800), "clients": (10, 50), "rtts": (0.001, 0.1), "demands": ("equal",),
         "shapes": ("steady",), "seeds": 2, "duration": 20.0}
FULL = {"rates": (50, 200, 800, 3200), "clients": (10, 50, 200), "rtts": (0.001, 0.1),
        "demands": ("equal", "mixed"), "shapes": ("steady", "step"), "seeds": 8, "duration": 60.0}


class AimdController:
    """A plain AIMD rate controller: +1 request/s per second while served, x0.7 per congestion event.

    A throttle of a request sent before the last cut is an echo of it (one cut per event); the first
    throttle starts the rate from the responses of the last second; the bucket holds 100 ms of the rate.
    """

    def __init__(self, start: float) -> None:
        self.enabled = False
        self.fill_rate = 0.5
        self.max_capacity = 1.0
        self.measured_rate = 0.0
        self.last_max_rate = 0.0
        self.last_throttle_time = start
        self.answers_backoff = False
        self.rule: LimiterRule | None = None  # named as the "fair" profile's steps, the same shape
        self._last = start
        self._answers: list[float] = []

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None:
        answers = self._answers
        answers.append(now)
        while answers[0] < now - 1.0:
            answers.pop(0)
        self.measured_rate = len(answers) / 1.0
        sent = sent_at if sent_at is not None else now
        if throttled:
            if not self.enabled:
                self.enabled = True
                self.fill_rate = max(self.measured_rate, 1.0)
            elif sent <= self.last_throttle_time:
                return
            self.last_max_rate = self.fill_rate
            self.fill_rate = max(0.7 * self.fill_rate, 0.5)
            self.last_throttle_time = now
            self.rule = "decrease"
        elif not failed and self.enabled:
            self.fill_rate += max(now - self._last, 0.0)
            self.rule = "increase"
        self._last = now
        self.max_capacity = max(0.1 * self.fill_rate, 1.0)


class StartWindowLimiter(AdaptiveRateLimiter):
    """The default profile behind a start window (TCP's slow start, counted in attempts): until the first
    throttle enables the limiter, at most ``window`` attempts go out beyond twice the answers so far; from
    then on, the limiter as it is. The benchmark's variant, to measure what sending freely until the first
    throttle costs and saves."""

    __slots__ = ("_answer", "_answers", "_sent", "_window")

    def __init__(self, *args: Any, window: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._window = window
        self._sent = self._answers = 0
        self._answer = anyio.Event()

    def _open(self) -> bool:
        return self.enabled or self._sent < self._window + 2 * self._answers

    def try_acquire(self) -> bool:
        if not self._open():
            return False
        self._sent += not self.enabled
        return super().try_acquire()

    async def acquire(self, *, timeout: float | timedelta | None = None) -> None:
        while not self._open():
            await self._answer.wait()  # (no deadline: the benchmark's calls have none)
        self._sent += not self.enabled
        await super().acquire(timeout=timeout)

    def update(self, throttled: bool, **kwargs: Any) -> None:
        super().update(throttled, **kwargs)
        self._answers += 1
        self._answer.set()
        self._answer = anyio.Event()


def _start_window(controller: str) -> int | None:
    """W of a variant named ``asyncretry-start:W``; ``None`` for the other controllers.

    Raises:
        ValueError: W is not a whole number >= 1.
    """
    if not controller.startswith("asyncretry-start:"):
        return None
    window = controller.split(":", 1)[1]
    if not (window.isdigit() and int(window) >= 1):
        raise ValueError(f"asyncretry-start:W takes a whole number of attempts W >= 1, got {controller!r}")
    return int(window)


LAYOUTS = ("independent", "shared", "callers")


@dataclass(frozen=True)
class Cell:
    rate: float
    clients: int
    rtt: float
    demand: str
    shape: str
    layout: str = "independent"

    def name(self) -> str:
        name = f"R={self.rate:g} N={self.clients} RTT={self.rtt * 1000:g}ms {self.demand} {self.shape}"
        if self.layout == "callers":
            return f"{name} shared, callers in turn"
        return name if self.layout == "independent" else f"{name} shared"


@dataclass(frozen=True)
class Run:
    goodput: float
    throttled: float
    jain: float
    starved: int
    small: float
    recover: float


_VARIANTS = ("asyncretry-without:", "asyncretry-paced")
"""The prefixes of the default-profile variants whose names list rules left out (and settings)."""


def _variant_items(controller: str) -> tuple[set[str], dict[str, float]]:
    """The rules left out and the settings of a default-profile variant: after the colon, ``+``-separated
    rule names and ``KEY=VALUE`` settings (``asyncretry-paced:fair_step=4``)."""
    left_out: set[str] = set()
    options: dict[str, float] = {}
    if ":" in controller:
        for item in controller.split(":", 1)[1].split("+"):
            if "=" in item:
                key, value = item.split("=")
                options[key] = float(value)
            else:
                left_out.add(item)
    return left_out, options


def _rules(controller: str) -> frozenset[str] | None:
    """The rules of a default-profile variant named ``asyncretry-without:RULE+RULE`` or ``asyncretry-paced``
    (the rest of the name as before, plus ``pace_without_backoff``: once enabled, no throttle needs an engine
    backoff); ``None`` for the other controllers."""
    if not controller.startswith(_VARIANTS):
        return None
    paced = {"pace_without_backoff"} if controller.startswith("asyncretry-paced") else set()
    left_out, _ = _variant_items(controller)
    unknown = left_out - set(RULES)
    if unknown:
        raise SystemExit(f"unknown rules {sorted(unknown)}: choose from {', '.join(RULES)}")
    return (frozenset(RULES) - left_out) | paced


def _config(controller: str) -> AdaptiveLimiterConfig:
    """The profile named before the colon, with constants from a name like ``fair:fair_step=2+fair_decrease=0.7``
    or ``asyncretry:fair_count=6``; a default-profile variant's settings (``asyncretry-paced:fair_step=4``)."""
    left_out, numbers = _variant_items(controller)
    options: dict[str, Any] = dict(numbers)  # numeric settings only: the config checks each
    if controller.startswith(_VARIANTS):
        return AdaptiveLimiterConfig(profile="asyncretry", **options)
    if left_out:
        raise SystemExit(f"{controller!r}: settings take the form KEY=VALUE, got {sorted(left_out)}")
    return AdaptiveLimiterConfig(profile=controller.split(":", 1)[0], **options)


def _policy(controller: str) -> RetryPolicy:
    if controller == "aws":
        return RetryPolicy.aws_adaptive()
    if controller == "none":
        return RetryPolicy()
    if controller.startswith(("fair", "independent", "asyncretry:", *_VARIANTS)):
        return RetryPolicy(mode="adaptive", limiter=_config(controller))
    return RetryPolicy(mode="adaptive")


def _jain(values: Sequence[float]) -> float:
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares > 0 else 1.0


@functools.cache
def frontier(rate: float, clients: int, *, burst: float = BURST, limit: float = 0.15, draws: int = 4) -> float:
    """What the server admits to uncoordinated clients, as a share of ``rate``: ``clients`` senders each
    perfectly paced at one common rate with its own random phase (the best a fleet does without talking),
    at the highest common rate whose throttled share is at most ``limit``; averaged over ``draws`` phase draws.

    With a burst of a few tokens the phases collide often (R = 50/s, 2.5 tokens: about 0.7-0.8 R); with
    tens of tokens it is about R.
    """
    span = max(2.0, 10_000 / rate)

    def served(offered: float) -> tuple[float, float]:
        ok = sent = 0
        for draw in range(draws):
            phases = random.Random(draw)
            period = clients / offered
            times = sorted(phases.random() * period + k * period for _ in range(clients)
                           for k in range(int(span / period)))
            server = SimulatedServer(Scenario(name="steady", schedule=((0.0, rate),), duration=span), burst=burst)
            ok += sum(server.admit(t) for t in times)
            sent += len(times)
        return ok / (draws * span * rate), 1.0 - ok / max(sent, 1)

    low, high = 0.3 * rate, 2.0 * rate  # throttled share: under the limit at low, over it at high
    for _ in range(14):
        middle = (low + high) / 2
        if served(middle)[1] <= limit:
            low = middle
        else:
            high = middle
    return min(1.0, served(low)[0])


def _scenario(cell: Cell, duration: float) -> Scenario:
    """The cell's capacity over time: R throughout, or halved for the middle third (a step run)."""
    third = duration / 3
    schedule = ((0.0, cell.rate),) if cell.shape == "steady" else (
        (0.0, cell.rate), (third, cell.rate / 2), (2 * third, cell.rate))
    return Scenario(name=cell.shape, schedule=schedule, duration=duration)


def cell_frontier(cell: Cell, duration: float) -> float:
    """The cell's :func:`frontier`, weighted by how much each stretch of its capacity schedule admits."""
    stretches = [(capacity, end - begin) for begin, end, capacity in _scenario(cell, duration).segments()]
    admitted = sum(frontier(rate, cell.clients) * rate * span for rate, span in stretches)
    return admitted / sum(rate * span for rate, span in stretches)


def _recovery(served: Sequence[int], width: float, steps: Iterable[tuple[float, float]]) -> float:
    """Seconds after each step until the served rate over 1 s windows is within 10% of the new target (what
    uncoordinated clients can get from the new capacity)."""
    worst = 0.0
    per = round(1.0 / width)
    for at, capacity in steps:
        first = round(at / width)
        took = math.inf
        for k in range(first, len(served) - per + 1):
            rate = sum(served[k : k + per]) / (per * width)
            if abs(rate - capacity) <= 0.1 * capacity:
                took = (k - first) * width
                break
        worst = max(worst, took)
    return worst


async def _simulate(
    cell: Cell,
    controller: str,
    seed: int,
    duration: float,
    light_floor: float = 0.0,
    grace: float = 0.0,
    known_rate: float = 0.0,
) -> Run:
    now = anyio.current_time
    start = now()
    scenario = _scenario(cell, duration)
    server = SimulatedServer(scenario, burst=BURST, start=start)
    width = 0.1
    served = [0] * (round(duration / width) + 1)
    seeds = random.Random(seed)
    policy = _policy(controller)
    n = cell.clients
    if known_rate > 0.0:  # a fixed rate limit of F times the client's share of R, with a burst of one call
        quota = known_rate * (cell.rate / n if cell.layout == "independent" else cell.rate)
        policy = dataclasses.replace(policy, rate_limit=quota, rate_limit_burst=1.0)
    share = cell.rate / n
    successes = [0] * n
    attempts = throttles = 0
    demands = [4 * share if i < n // 4 else 0.5 * share for i in range(n)]
    retriers: list[Retrier] = []
    for index in range(n):
        limiter: AdaptiveRateLimiter | None = None
        if retriers and cell.layout != "independent":
            retriers.append(retriers[0])  # one retrier, so one limiter, for every client's calls
            continue
        if controller != "none":
            config = policy.limiter_config or AdaptiveLimiterConfig()
            if light_floor > 0.0 and cell.demand == "mixed" and index >= n // 4:
                floor = light_floor * demands[index]  # a light client's floor, F times its demand
                config = dataclasses.replace(config, min_fill_rate=floor, fair_floor=floor)
            rng = random.Random(seeds.random()).random
            window = _start_window(controller)
            if window is not None:
                limiter = StartWindowLimiter(config, name=f"c{index}", rng=rng, window=window)
            else:
                limiter = AdaptiveRateLimiter(config, name=f"c{index}", rng=rng)
            rules = _rules(controller)
            if controller == "aimd":
                limiter._control = AimdController(start)  # the benchmark's own controller, for comparison
            elif rules is not None:  # a variant of the default profile with rules switched off (or paced)
                limiter._control = AsyncretryRateController(config, start, rules=rules)
        retriers.append(Retrier(policy, name=f"c{index}", rng=random.Random(seeds.random()).random,
                                limiter=limiter))

    async def send(client: int, counted: bool) -> None:
        nonlocal attempts, throttles
        sent = now()
        admitted = server.admit(sent)
        attempts += 1
        await anyio.sleep(cell.rtt)
        if not admitted:
            throttles += 1
            raise SimulatedThrottle("429")
        successes[client] += 1
        if counted:
            answered[client] += 1
        served[min(int((sent - start) / width), len(served) - 1)] += 1

    callers = [f"c{index}" if cell.layout == "callers" else None for index in range(n)]

    async def call(client: int, counted: bool = False) -> None:
        try:
            async for attempt in retriers[client].attempts(caller=callers[client]):
                async with attempt:
                    await send(client, counted)
        except Exception:
            pass

    async def closed_loop(client: int) -> None:
        while True:
            await call(client)

    wanted = [0] * n  # the calls each client's arrivals asked for (the realized demand) ...
    answered = [0] * n  # ... and those of them served, of the calls that came at least ``grace`` s before the end
    last_counted = start + duration - grace

    async def open_loop(client: int, tg: anyio.abc.TaskGroup) -> None:
        rng = random.Random(seeds.random())
        in_flight = [0]
        cap = max(8, math.ceil(4 * demands[client] * cell.rtt) + 8)

        async def one(counted: bool) -> None:
            in_flight[0] += 1
            try:
                await call(client, counted)
            finally:
                in_flight[0] -= 1

        while True:
            await anyio.sleep(rng.expovariate(demands[client]))
            counted = now() <= last_counted
            wanted[client] += counted
            if in_flight[0] < cap:
                tg.start_soon(one, counted)

    async with anyio.create_task_group() as tg:
        for client in range(n):
            if cell.demand == "equal":
                for _ in range(max(1, math.ceil(2 * share * cell.rtt))):
                    tg.start_soon(closed_loop, client)
            else:
                tg.start_soon(open_loop, client, tg)
        await anyio.sleep_until(start + duration)
        tg.cancel_scope.cancel()

    total = sum(successes)
    segments = scenario.segments()
    admissible = sum(capacity * (end - begin) for begin, end, capacity in segments)
    if cell.demand == "equal":
        jain = _jain(successes)
        small = math.nan
    else:
        big = successes[: n // 4]
        jain = _jain(big) if big else 1.0
        small = min(answered[i] / max(wanted[i], 1) for i in range(n // 4, n))
    # Each change of capacity, and the rate uncoordinated clients can get from the new one.
    steps = [(begin, capacity * frontier(capacity, n)) for begin, _, capacity in segments[1:]]
    return Run(
        goodput=total / admissible,
        throttled=throttles / attempts if attempts else 0.0,
        jain=jain,
        starved=sum(1 for s in successes if s == 0),
        small=small,
        recover=_recovery(served, width, steps),
    )


def _job(job: tuple[Cell, str, int, float, float, float, float]) -> tuple[Cell, str, int, Run]:
    cell, controller, seed, duration, light_floor, grace, known_rate = job
    run = anyio.run(_simulate, cell, controller, seed, duration, light_floor, grace, known_rate, backend="asyncio",
                    backend_options={"loop_factory": virtual_time_loop})
    return cell, controller, seed, run


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _misses(run: Run, cell: Cell, reach: float) -> list[str]:
    """The targets one run misses: goodput >= 0.97 of what uncoordinated clients can get (``reach``, the
    cell's frontier; shared layout: >= 0.99 R), <= 15% throttled (shared: 1%), Jain >= 0.9, no client
    starved; heterogeneous demand: every small client served >= 0.95 of its calls; capacity steps:
    recovered in 5 s."""
    misses = []
    shared = cell.layout != "independent"
    if cell.demand == "equal" and run.goodput < (0.99 if shared else 0.97 * reach):
        misses.append("goodput")
    if run.throttled > (0.01 if shared else 0.15):
        misses.append("thr%")
    if run.jain < 0.9:
        misses.append("Jain")
    if run.starved:
        misses.append("starved")
    if cell.demand != "equal" and run.small < 0.95:
        misses.append("small")
    if cell.shape != "steady" and run.recover > 5.0:
        misses.append("recover")
    return misses


def _row(controller: str, runs: list[Run], cell: Cell, reach: float, width: int) -> str:
    goodput = [r.goodput for r in runs]
    throttled = [r.throttled for r in runs]
    jain = [r.jain for r in runs]
    text = (f"  {controller:<{width}} goodput {_median(goodput):.2f} ({min(goodput):.2f})  "
            f"thr% {100 * _median(throttled):4.1f} ({100 * max(throttled):4.1f})  "
            f"Jain {_median(jain):.2f} ({min(jain):.2f})  starved {max(r.starved for r in runs)}")
    if cell.demand != "equal":
        text += f"  small {min(r.small for r in runs):.2f}"
    if cell.shape != "steady":
        text += f"  recover {max(r.recover for r in runs):.1f} s"
    missed = sorted({m for r in runs for m in _misses(r, cell, reach)})
    return text + ("  met" if not missed else f"  misses {'+'.join(missed)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_adaptive_fleet",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 equal-demand cells, 2 seeds, 20 s")
    parser.add_argument("--rates", help="comma-separated server rates R (default 50,200,800,3200)")
    parser.add_argument("--clients", help="comma-separated client counts N (default 10,50,200)")
    parser.add_argument("--rtts", help="comma-separated round trips, seconds (default 0.001,0.1)")
    parser.add_argument("--demands", help="comma-separated, from equal,mixed (default both)")
    parser.add_argument("--shapes", help="comma-separated, from steady,step (default both)")
    parser.add_argument(
        "--layouts", default="independent",
        help="comma-separated, from independent (a limiter per client, the default), shared (one limiter "
        "for every client's calls, as the tasks of one process or RedisAdaptiveRateLimiter have) and callers "
        "(shared, each call naming its client as its caller: the limiter's line takes the clients in turn)",
    )
    parser.add_argument(
        "--controllers", default=",".join(CONTROLLERS),
        help="comma-separated, from asyncretry, independent, fair, aws, none, aimd; PROFILE:KEY=VALUE+... "
        "(asyncretry, independent or fair with those settings); asyncretry-without:RULE+RULE (a variant of "
        f"the default profile without those rules: {', '.join(RULES)}); asyncretry-paced[:RULE+RULE]: the same "
        "with no engine backoff after any throttle (both also take KEY=VALUE settings among the rules, as in "
        "asyncretry-paced:fair_step=4); asyncretry-start:W: the default profile sending at most W "
        "attempts beyond twice the answers until the first throttle",
    )
    parser.add_argument("--seeds", type=int, help="seeds per cell (default 8)")
    parser.add_argument("--duration", type=float, help="virtual seconds per run (default 60)")
    parser.add_argument(
        "--light-floor", type=float, default=0.0, metavar="F",
        help="heterogeneous demand: each light client's limiter never paces it below F times its demand "
        "(its min_fill_rate, or fair_floor for the fair profile; default 0: the profile's own floor)",
    )
    parser.add_argument(
        "--grace", type=float, default=0.0, metavar="S",
        help="heterogeneous demand: measure a small client against the calls it asked for at least S seconds "
        "before the end of the run, served by the end (default 0: every call it asked for)",
    )
    parser.add_argument(
        "--known-rate", type=float, default=0.0, metavar="F",
        help="a fixed rate limit of F times R in front of each limiter (F times R/N per client with a limiter per "
        "client), with a burst of one call, as a service that knows its quota sets (default 0: none)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    args = parser.parse_args(argv)
    if not (args.light_floor >= 0.0 and math.isfinite(args.light_floor)):
        parser.error(f"--light-floor must be a finite number >= 0, got {args.light_floor}")
    if not (args.known_rate >= 0.0 and math.isfinite(args.known_rate)):
        parser.error(f"--known-rate must be a finite number >= 0, got {args.known_rate}")
    if not (args.grace >= 0.0 and math.isfinite(args.grace)):
        parser.error(f"--grace must be a finite number of seconds >= 0, got {args.grace}")
    layouts = args.layouts.split(",")
    if any(layout not in LAYOUTS for layout in layouts):
        parser.error(f"--layouts must be comma-separated from {', '.join(LAYOUTS)}, got {args.layouts!r}")
    base = QUICK if args.quick else FULL

    def pick(value: str | None, key: str, kind: type) -> tuple:  # type: ignore[type-arg]
        return tuple(kind(x) for x in value.split(",")) if value else base[key]  # type: ignore[return-value]

    cells = [Cell(r, n, rtt, d, s, lay) for lay in layouts
             for d in pick(args.demands, "demands", str) for s in pick(args.shapes, "shapes", str)
             for rtt in pick(args.rtts, "rtts", float) for r in pick(args.rates, "rates", float)
             for n in pick(args.clients, "clients", int)]
    seeds = args.seeds or int(base["seeds"])  # type: ignore[call-overload]
    duration = args.duration or float(base["duration"])  # type: ignore[arg-type]
    controllers = args.controllers.split(",")
    for controller in controllers:
        try:
            _start_window(controller)
        except ValueError as error:
            parser.error(str(error))
    jobs = [(c, k, s, duration, args.light_floor, args.grace, args.known_rate)
            for c in cells for k in controllers for s in range(seeds)]
    # The biggest runs first, so that the pool does not end on one long run.
    jobs.sort(key=lambda j: -j[0].rate * (1 + (j[1] == "none") * 2))
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(_job, jobs, chunksize=1))
    print(f"{len(done)} runs of {duration:g} virtual seconds in {time.perf_counter() - began:.0f} s real time "
          f"({args.jobs} processes); medians over {seeds} seeds, worst seed in brackets")
    if args.light_floor > 0.0:
        print(f"light clients' limiters never below {args.light_floor:g} times their demand")
    if args.known_rate > 0.0:
        print(f"a fixed rate limit of {args.known_rate:g} times each limiter's share of R, burst 1, in front of it")
    if args.grace > 0.0:
        print(f"small: the calls asked for at least {args.grace:g} s before the end of the run")
    reach = {cell: cell_frontier(cell, duration) for cell in cells}
    width = max(10, *(len(controller) for controller in controllers))  # the figures line up in columns
    for cell in cells:
        print(f"{cell.name()}  (uncoordinated clients can get {reach[cell]:.2f} R)")
        for controller in controllers:
            runs = [run for c, k, _, run in done if c == cell and k == controller]
            print(_row(controller, runs, cell, reach[cell], width))
    print("cells where every seed meets every target; medians over all runs of goodput, thr%, Jain:")
    for controller in controllers:
        pairs = [(c, run) for c, k, _, run in done if k == controller]
        met = sum(1 for cell in cells if not any(_misses(r, cell, reach[cell]) for c, r in pairs if c == cell))
        goodput = _median([r.goodput for _, r in pairs])
        throttled = 100 * _median([r.throttled for _, r in pairs])
        jain = _median([r.jain for _, r in pairs])
        print(f"  {controller:<{width}} {met}/{len(cells)} cells  goodput {goodput:.3f}  thr% {throttled:.1f}  "
              f"Jain {jain:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
