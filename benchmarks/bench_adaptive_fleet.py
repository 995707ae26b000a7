"""Fleets of independent clients against one throttling server, over a grid of shapes, in virtual time.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_adaptive_fleet --quick     # 8 cells, 2 seeds, 20 s: minutes
    .venv/bin/python -m benchmarks.bench_adaptive_fleet             # the whole grid, 8 seeds, 60 s: hours
    .venv/bin/python -m benchmarks.bench_adaptive_fleet --rates 200 --clients 10,50 --rtts 0.1 --seeds 8

The server admits R requests per second from a token bucket holding 50 ms of R and answers 429 (a
throttling error) beyond. N clients, each with its own retrier and limiter (as separate processes have),
call it through the real retry engine; every request takes one round trip (RTT). Demand is either equal
and saturating (closed-loop workers, enough of them per client to send twice its fair share) or
heterogeneous (a quarter of the clients want 4x the fair share, the rest 0.5x, as Poisson arrivals). A
"step" run halves R for its middle third. Each cell runs five controllers in the same run: the default
profile, the ``"fair"`` profile, the SDK-exact ``"aws"`` profile, no limiter (standard mode) and a plain
AIMD limiter (+1/s per second, x0.7 per congestion event). Cells fan out over processes (``--jobs``); time is virtual.

Per cell, medians over the seeds (worst seed in brackets):

* goodput: served requests over R x duration;
* thr%: throttled attempts over all attempts;
* Jain: Jain's index of the clients' successes (equal demand), or of the big clients' (heterogeneous);
* starved: clients without a success (worst seed);
* small: heterogeneous demand, the lowest share of its demand a small client got (worst seed);
* recover: step runs, seconds after each step until the served rate (1 s windows) is within 10% of
  the new capacity, the longer of the two (worst seed).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import anyio

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter, Retrier, RetryPolicy
from asyncretry._primitives._adaptive import RULES, AsyncretryRateController
from asyncretry._simulation import Scenario, SimulatedServer, SimulatedThrottle
from asyncretry.testing import virtual_time_loop

CONTROLLERS = ("asyncretry", "fair", "aws", "none", "aimd")
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
        elif not failed and self.enabled:
            self.fill_rate += max(now - self._last, 0.0)
        self._last = now
        self.max_capacity = max(0.1 * self.fill_rate, 1.0)


@dataclass(frozen=True)
class Cell:
    rate: float
    clients: int
    rtt: float
    demand: str
    shape: str

    def name(self) -> str:
        return f"R={self.rate:g} N={self.clients} RTT={self.rtt * 1000:g}ms {self.demand} {self.shape}"


@dataclass(frozen=True)
class Run:
    goodput: float
    throttled: float
    jain: float
    starved: int
    small: float
    recover: float


class PacedController(AsyncretryRateController):
    """A default-profile variant whose every throttle, once enabled, needs no engine backoff: the bucket paces."""

    @property
    def answers_backoff(self) -> bool:
        return self.enabled


def _rules(controller: str) -> frozenset[str] | None:
    """The rules of a default-profile variant named ``asyncretry-without:RULE+RULE`` or ``asyncretry-paced``
    (the rest of the name as before); ``None`` for the other controllers."""
    if not controller.startswith(("asyncretry-without:", "asyncretry-paced")):
        return None
    if ":" not in controller:
        return frozenset(RULES)
    left_out = set(controller.split(":", 1)[1].split("+"))
    unknown = left_out - set(RULES)
    if unknown:
        raise SystemExit(f"unknown rules {sorted(unknown)}: choose from {', '.join(RULES)}")
    return frozenset(RULES) - left_out


def _fair_config(controller: str) -> AdaptiveLimiterConfig:
    """The ``"fair"`` profile, with constants from a name like ``fair:fair_step=2+repeat_decrease=0.8``."""
    options = {}
    if ":" in controller:
        for pair in controller.split(":", 1)[1].split("+"):
            key, value = pair.split("=")
            options[key] = float(value)
    return AdaptiveLimiterConfig(profile="fair", **options)


def _policy(controller: str) -> RetryPolicy:
    if controller == "aws":
        return RetryPolicy.aws_adaptive()
    if controller == "none":
        return RetryPolicy()
    if controller.startswith("fair"):
        return RetryPolicy(mode="adaptive", limiter=_fair_config(controller))
    return RetryPolicy(mode="adaptive")


def _jain(values: Sequence[float]) -> float:
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares > 0 else 1.0


def _recovery(served: Sequence[int], width: float, steps: Iterable[tuple[float, float]]) -> float:
    """Seconds after each step until the served rate over 1 s windows is within 10% of the new capacity."""
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


async def _simulate(cell: Cell, controller: str, seed: int, duration: float) -> Run:
    now = anyio.current_time
    start = now()
    third = duration / 3
    schedule = ((0.0, cell.rate),) if cell.shape == "steady" else (
        (0.0, cell.rate), (third, cell.rate / 2), (2 * third, cell.rate))
    server = SimulatedServer(Scenario(name=cell.shape, schedule=schedule, duration=duration), burst=BURST,
                             start=start)
    width = 0.1
    served = [0] * (round(duration / width) + 1)
    seeds = random.Random(seed)
    policy = _policy(controller)
    n = cell.clients
    share = cell.rate / n
    successes = [0] * n
    attempts = throttles = 0
    retriers = []
    for index in range(n):
        limiter = None
        if controller != "none":
            limiter = AdaptiveRateLimiter(policy.limiter_config, name=f"c{index}",
                                          rng=random.Random(seeds.random()).random)
            rules = _rules(controller)
            if controller == "aimd":
                limiter._control = AimdController(start)  # the benchmark's own controller, for comparison
            elif rules is not None:  # a variant of the default profile with rules switched off
                kind = PacedController if controller.startswith("asyncretry-paced") else AsyncretryRateController
                limiter._control = kind(AdaptiveLimiterConfig(), start, rules=rules)
        retriers.append(Retrier(policy, name=f"c{index}", rng=random.Random(seeds.random()).random,
                                limiter=limiter))

    async def send(client: int) -> None:
        nonlocal attempts, throttles
        sent = now()
        admitted = server.admit(sent)
        attempts += 1
        await anyio.sleep(cell.rtt)
        if not admitted:
            throttles += 1
            raise SimulatedThrottle("429")
        successes[client] += 1
        served[min(int((sent - start) / width), len(served) - 1)] += 1

    async def call(client: int) -> None:
        try:
            async for attempt in retriers[client].attempts():
                async with attempt:
                    await send(client)
        except Exception:
            pass

    async def closed_loop(client: int) -> None:
        while True:
            await call(client)

    demands = [4 * share if i < n // 4 else 0.5 * share for i in range(n)]

    async def open_loop(client: int, tg: anyio.abc.TaskGroup) -> None:
        rng = random.Random(seeds.random())
        in_flight = [0]
        cap = max(8, math.ceil(4 * demands[client] * cell.rtt) + 8)

        async def one() -> None:
            in_flight[0] += 1
            try:
                await call(client)
            finally:
                in_flight[0] -= 1

        while True:
            await anyio.sleep(rng.expovariate(demands[client]))
            if in_flight[0] < cap:
                tg.start_soon(one)

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
    admissible = sum(min(capacity, cell.rate) * (end - begin) for begin, end, capacity in
                     Scenario(name="s", schedule=schedule, duration=duration).segments())
    if cell.demand == "equal":
        jain = _jain(successes)
        small = math.nan
    else:
        big = successes[: n // 4]
        jain = _jain(big) if big else 1.0
        small = min(successes[i] / (demands[i] * duration) for i in range(n // 4, n))
    steps = [] if cell.shape == "steady" else [(third, cell.rate / 2), (2 * third, cell.rate)]
    return Run(
        goodput=total / admissible,
        throttled=throttles / attempts if attempts else 0.0,
        jain=jain,
        starved=sum(1 for s in successes if s == 0),
        small=small,
        recover=_recovery(served, width, steps),
    )


def _job(job: tuple[Cell, str, int, float]) -> tuple[Cell, str, int, Run]:
    cell, controller, seed, duration = job
    run = anyio.run(_simulate, cell, controller, seed, duration, backend="asyncio",
                    backend_options={"loop_factory": virtual_time_loop})
    return cell, controller, seed, run


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _misses(run: Run, cell: Cell) -> list[str]:
    """The targets one run misses: goodput >= 0.97, <= 15% throttled, Jain >= 0.9, no client starved;
    heterogeneous demand: every small client >= 0.95 of its demand; capacity steps: recovered in 5 s."""
    misses = []
    if cell.demand == "equal" and run.goodput < 0.97:
        misses.append("goodput")
    if run.throttled > 0.15:
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


def _row(controller: str, runs: list[Run], cell: Cell) -> str:
    goodput = [r.goodput for r in runs]
    throttled = [r.throttled for r in runs]
    jain = [r.jain for r in runs]
    text = (f"  {controller:<10} goodput {_median(goodput):.2f} ({min(goodput):.2f})  "
            f"thr% {100 * _median(throttled):4.1f} ({100 * max(throttled):4.1f})  "
            f"Jain {_median(jain):.2f} ({min(jain):.2f})  starved {max(r.starved for r in runs)}")
    if cell.demand != "equal":
        text += f"  small {min(r.small for r in runs):.2f}"
    if cell.shape != "steady":
        text += f"  recover {max(r.recover for r in runs):.1f} s"
    missed = sorted({m for r in runs for m in _misses(r, cell)})
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
        "--controllers", default=",".join(CONTROLLERS),
        help="comma-separated, from asyncretry, aws, none, aimd and asyncretry-without:RULE+RULE (a variant of "
        f"the default profile without those rules: {', '.join(RULES)}); asyncretry-paced[:RULE+RULE]: the same "
        "with no engine backoff after any throttle",
    )
    parser.add_argument("--seeds", type=int, help="seeds per cell (default 8)")
    parser.add_argument("--duration", type=float, help="virtual seconds per run (default 60)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL

    def pick(value: str | None, key: str, kind: type) -> tuple:  # type: ignore[type-arg]
        return tuple(kind(x) for x in value.split(",")) if value else base[key]  # type: ignore[return-value]

    cells = [Cell(r, n, rtt, d, s) for d in pick(args.demands, "demands", str) for s in pick(args.shapes, "shapes", str)
             for rtt in pick(args.rtts, "rtts", float) for r in pick(args.rates, "rates", float)
             for n in pick(args.clients, "clients", int)]
    seeds = args.seeds or int(base["seeds"])  # type: ignore[call-overload]
    duration = args.duration or float(base["duration"])  # type: ignore[arg-type]
    controllers = args.controllers.split(",")
    jobs = [(c, k, s, duration) for c in cells for k in controllers for s in range(seeds)]
    # The biggest runs first, so that the pool does not end on one long run.
    jobs.sort(key=lambda j: -j[0].rate * (1 + (j[1] == "none") * 2))
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(_job, jobs, chunksize=1))
    print(f"{len(done)} runs of {duration:g} virtual seconds in {time.perf_counter() - began:.0f} s real time "
          f"({args.jobs} processes); medians over {seeds} seeds, worst seed in brackets")
    for cell in cells:
        print(cell.name())
        for controller in controllers:
            runs = [run for c, k, _, run in done if c == cell and k == controller]
            print(_row(controller, runs, cell))
    print("cells where every seed meets every target; medians over all runs of goodput, thr%, Jain:")
    for controller in controllers:
        pairs = [(c, run) for c, k, _, run in done if k == controller]
        met = sum(1 for cell in cells if not any(_misses(r, cell) for c, r in pairs if c == cell))
        goodput = _median([r.goodput for _, r in pairs])
        throttled = 100 * _median([r.throttled for _, r in pairs])
        jain = _median([r.jain for _, r in pairs])
        print(f"  {controller:<10} {met}/{len(cells)} cells  goodput {goodput:.3f}  thr% {throttled:.1f}  "
              f"Jain {jain:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
