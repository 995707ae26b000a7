"""A virtual-time simulation: closed-loop clients, through the real retry engine, against a throttling server.

The model:

* The server is a token bucket: it admits ``C(t)`` requests per second with a burst of ``burst * C(t)``
  and throttles the rest. ``C(t)`` follows a :class:`Scenario` (steps, outages).
* Every request takes a fixed ``latency``; the server decides when the request arrives (its send time).
* ``workers`` closed-loop workers each make one call after another through a real
  :class:`~asyncretry.Retrier` in adaptive mode: the real limiter, the real retry quota and the real
  backoff. A throttled attempt raises an error that declares itself throttling, so the engine retries it
  like any throttling error.
* The event loop runs in virtual time (:class:`~asyncretry.testing.VirtualTimeEventLoop`, or trio's
  ``MockClock(autojump_threshold=0)``): a 120 s scenario takes about a second of real time (ten at
  1,000 requests per second).

:func:`run_simulation` runs one scenario; :func:`compute_metrics` turns its trace into the
figures; :func:`format_table` prints runs side by side, :func:`target_failures` checks the
targets and :func:`plot_results` draws the traces (these three live in :mod:`._simulation_report`).
``benchmarks/adaptive_sim.py`` is the command-line runner.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from ._engine._policy import RetryPolicy
from ._engine._retrier import Retrier
from ._events import EventBus
from ._primitives._clock import DEFAULT_CLOCK
from ._primitives._limiter import AdaptiveLimiterConfig, AdaptiveRateLimiter
from ._simulation_report import format_table as format_table
from ._simulation_report import plot_results as plot_results
from ._simulation_report import target_failures as target_failures
from ._validate import check_choice, check_int, check_number

__all__ = [
    "LAYOUTS",
    "SCENARIOS",
    "Scenario",
    "SimulatedServer",
    "SimulatedThrottle",
    "SimulationMetrics",
    "SimulationResult",
    "compute_metrics",
    "format_table",
    "limit_result",
    "plot_results",
    "run_simulation",
    "target_failures",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A server capacity script.

    Args:
        name: a short name for tables and plots.
        schedule: ``(start time, capacity)`` pairs, seconds and requests per second, the first at 0 and
            the times increasing; each capacity holds until the next pair. A capacity of 0 is an outage.
        duration: the length of the run, seconds (after the last start time); default 120.
        description: one line for humans.

    Raises:
        ValueError: the schedule does not start at 0, its times do not increase, a capacity is
            negative, or the run ends before the last change.
    """

    name: str
    schedule: tuple[tuple[float, float], ...]
    duration: float = 120.0
    description: str = ""

    def __post_init__(self) -> None:
        if not self.schedule or self.schedule[0][0] != 0:
            raise ValueError(f"schedule must start at time 0, got {self.schedule!r}")
        times = [start for start, _ in self.schedule]
        if any(later <= earlier for earlier, later in itertools.pairwise(times)):
            raise ValueError(f"schedule times must increase, got {times!r}")
        for _, capacity in self.schedule:
            check_number("capacity", capacity, low=0.0)
        check_number("duration", self.duration, low=times[-1], low_open=True)

    def capacity_at(self, time: float) -> float:
        """The capacity at ``time`` (seconds since the start), requests per second."""
        capacity = self.schedule[0][1]
        for start, value in self.schedule:
            if start > time:
                break
            capacity = value
        return capacity

    def segments(self) -> list[tuple[float, float, float]]:
        """``(start, end, capacity)`` of each stretch of constant capacity."""
        ends = [start for start, _ in self.schedule[1:]] + [self.duration]
        return [(start, end, capacity) for (start, capacity), end in zip(self.schedule, ends, strict=True)]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(name="steady", schedule=((0.0, 100.0),), description="C = 100/s throughout"),
        Scenario(name="step-down", schedule=((0.0, 200.0), (60.0, 50.0)), description="C 200 -> 50 at 60 s"),
        Scenario(name="step-up", schedule=((0.0, 50.0), (60.0, 200.0)), description="C 50 -> 200 at 60 s"),
        Scenario(name="c1000", schedule=((0.0, 1000.0),), description="C = 1,000/s throughout"),
        Scenario(
            name="outage",
            schedule=((0.0, 100.0), (60.0, 0.0), (65.0, 100.0)),
            description="C = 100/s, nothing from 60 to 65 s",
        ),
    )
}
"""The five scenarios of the adaptive limiter's targets, 120 virtual seconds each."""


LAYOUTS = ("shared", "independent")
"""How the workers share limiters: ``"shared"``, one retrier (one limiter) for all; ``"independent"``, a
retrier and a limiter each, as a fleet of separate clients (pods, workers, functions) would have."""


class SimulatedThrottle(Exception):
    """The simulated server's throttling answer; it declares itself throttling to the classifier."""

    is_throttling = True


class SimulatedServer:
    """A token bucket with a scripted capacity: ``C(t)`` per second, up to ``burst * C(t)`` at once.

    Args:
        scenario: the capacity script.
        burst: the bucket's size as seconds of capacity (> 0); default 0.1. The bucket starts full.
        start: the clock time of the scenario's time 0.
    """

    __slots__ = ("_burst", "_changes", "_last", "_start", "_tokens", "scenario")

    def __init__(self, scenario: Scenario, *, burst: float = 0.1, start: float = 0.0) -> None:
        self.scenario = scenario
        self._burst = check_number("burst", burst, low=0.0, low_open=True)
        self._start = start
        self._changes = list(scenario.schedule)
        self._last = 0.0
        self._tokens = self._burst * scenario.schedule[0][1]

    def admit(self, now: float) -> bool:
        """Whether a request arriving at clock time ``now`` is served (``False``: throttled)."""
        t = now - self._start
        tokens, last, changes = self._tokens, self._last, self._changes
        # Refill stretch by stretch: the capacity may have changed since the last request.
        while len(changes) > 1 and changes[1][0] <= t:
            boundary, capacity = changes[1]
            tokens = min(tokens + (boundary - last) * changes[0][1], self._burst * changes[0][1])
            tokens = min(tokens, self._burst * capacity)
            last = boundary
            changes.pop(0)
        capacity = changes[0][1]
        if t > last:
            tokens = min(tokens + (t - last) * capacity, self._burst * capacity)
            last = t
        self._last = last
        admitted = tokens >= 1.0
        self._tokens = tokens - 1.0 if admitted else tokens
        return admitted


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationMetrics:
    """The figures of one run.

    Attributes:
        goodput: successful responses over the whole run, as a fraction of the capacity offered
            (the integral of ``C(t)``). It can exceed 1 by the server's initial burst.
        steady_goodput: the same outside the ``settle`` seconds (10) after each capacity change and
            outside outages: how well a capacity once found is held.
        throttled: throttled attempts as a fraction of all attempts sent.
        reconverge: for the start and each later change to a capacity ``C > 0``: seconds until the
            goodput over the trailing 5 s is within 10% of ``C`` and stays so until the next change
            (``inf``: never). The trailing window alone needs about 4.5 s after a step: see
            :func:`limit_result`.
        fairness: Jain's index over the workers' successful calls (1: perfectly even).
        longest_wait: the longest time one call spent waiting (for the limiter and in backoff: its
            duration less its attempts' latency), seconds.
        failed_calls: calls that gave up.
        limit: the goodput of the physical limit: a client that knows ``C(t)`` sends
            ``min(C(t), workers / latency)`` and is never throttled.
    """

    goodput: float
    steady_goodput: float
    throttled: float
    reconverge: tuple[float, ...]
    fairness: float
    longest_wait: float
    failed_calls: int
    limit: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """The trace of one run in bins of ``bin_width`` seconds, and its metrics.

    Attributes:
        scenario: what the server did.
        layout: how the workers shared limiters (see :data:`LAYOUTS`).
        label: the client's name in tables and plots (by default the limiter profile).
        workers: the number of closed-loop workers.
        latency: the latency of every request, seconds.
        bin_width: the width of a bin, seconds.
        sends: attempts sent per bin.
        successes: successful responses per bin (by response time).
        throttles: throttled responses per bin.
        fill_rate: the limiter's fill rate at the end of each bin (``nan`` while not enabled); with
            independent limiters, the sum of the enabled ones' rates.
        worker_successes: successful calls per worker.
        longest_wait: see :class:`SimulationMetrics`.
        failed_calls: calls that gave up.
        metrics: the figures, computed from the above.
    """

    scenario: Scenario
    label: str
    workers: int
    layout: str = "shared"
    latency: float
    bin_width: float
    sends: tuple[int, ...]
    successes: tuple[int, ...]
    throttles: tuple[int, ...]
    fill_rate: tuple[float, ...]
    worker_successes: tuple[int, ...]
    longest_wait: float
    failed_calls: int
    metrics: SimulationMetrics = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", compute_metrics(self))

    def times(self) -> list[float]:
        """The end time of each bin, seconds since the start."""
        return [(k + 1) * self.bin_width for k in range(len(self.sends))]


class _Recorder:
    """The counters of a running simulation."""

    __slots__ = (
        "bins", "failed", "fill", "latency", "longest_wait", "scale", "sends", "server", "start", "successes",
        "throttles", "worker_successes",
    )

    def __init__(
        self, server: SimulatedServer, bins: int, bin_width: float, workers: int, latency: float, start: float
    ) -> None:
        self.server = server
        self.bins = bins
        self.scale = 1.0 / bin_width
        self.start = start
        self.latency = latency
        self.sends = [0] * bins
        self.successes = [0] * bins
        self.throttles = [0] * bins
        self.fill = [math.nan] * bins
        self.worker_successes = [0] * workers
        self.longest_wait = 0.0
        self.failed = 0

    def _bin(self, now: float) -> int:
        return min(int((now - self.start) * self.scale), self.bins - 1)

    async def send(self) -> None:
        """One attempt: the server decides at once; the answer comes ``latency`` later."""
        now = DEFAULT_CLOCK.now()
        admitted = self.server.admit(now)
        self.sends[self._bin(now)] += 1
        await anyio.sleep(self.latency)
        if not admitted:
            self.throttles[self._bin(now + self.latency)] += 1
            raise SimulatedThrottle("throttled by the simulated server")
        self.successes[self._bin(now + self.latency)] += 1


async def _simulate(
    scenario: Scenario,
    policy: RetryPolicy,
    label: str,
    workers: int,
    latency: float,
    burst: float,
    bin_width: float,
    seed: int,
    layout: str,
) -> SimulationResult:
    clock = DEFAULT_CLOCK
    start = clock.now()
    bins = round(scenario.duration / bin_width)
    server = SimulatedServer(scenario, burst=burst, start=start)
    recorder = _Recorder(server, bins, bin_width, workers, latency, start)
    config = policy.limiter_config
    assert config is not None
    events = EventBus()
    seeds = random.Random(seed)
    clients = 1 if layout == "shared" else workers
    limiters: list[AdaptiveRateLimiter] = []
    retriers: list[Retrier] = []
    for index in range(clients):
        # Each client its own seeded randomness: the run is deterministic, the clients are not in step.
        rng = random.Random(seed if index == 0 else seeds.random()).random
        limiter = AdaptiveRateLimiter(
            config, name=f"client-{index}", events=events, rng=random.Random(seeds.random()).random
        )
        limiters.append(limiter)
        retriers.append(Retrier(policy, name=f"client-{index}", rng=rng, events=events, limiter=limiter))

    async def worker(index: int) -> None:
        send = recorder.send
        retrier = retriers[index % clients]
        while True:
            began = clock.now()
            attempts = retrier.attempts()
            try:
                async for attempt in attempts:
                    async with attempt:
                        await send()
            except Exception:
                recorder.failed += 1
            else:
                if attempts.gave_up is None:
                    recorder.worker_successes[index] += 1
                else:
                    recorder.failed += 1
            waited = clock.now() - began - attempts.number * latency
            if waited > recorder.longest_wait:
                recorder.longest_wait = waited

    async with anyio.create_task_group() as tg:
        for index in range(workers):
            tg.start_soon(worker, index)
        for k in range(bins):
            await anyio.sleep_until(start + (k + 1) * bin_width)
            enabled = [limiter.fill_rate for limiter in limiters if limiter.enabled]
            if enabled:
                recorder.fill[k] = sum(enabled)
        # Not a deadline around the workers: the engine would see it and refuse waits that outlast it.
        tg.cancel_scope.cancel()
    return SimulationResult(
        scenario=scenario,
        label=label,
        workers=workers,
        layout=layout,
        latency=latency,
        bin_width=bin_width,
        sends=tuple(recorder.sends),
        successes=tuple(recorder.successes),
        throttles=tuple(recorder.throttles),
        fill_rate=tuple(recorder.fill),
        worker_successes=tuple(recorder.worker_successes),
        longest_wait=recorder.longest_wait,
        failed_calls=recorder.failed,
    )


def _scenario(scenario: Scenario | str) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    check_choice("scenario", scenario, tuple(SCENARIOS))
    return SCENARIOS[scenario]


def run_simulation(
    scenario: Scenario | str,
    *,
    limiter: AdaptiveLimiterConfig | str | None = None,
    policy: RetryPolicy | None = None,
    label: str | None = None,
    workers: int = 50,
    latency: float = 0.02,
    burst: float = 0.1,
    bin_width: float = 0.1,
    seed: int = 0,
    backend: str = "asyncio",
    layout: str = "shared",
) -> SimulationResult:
    """Run one scenario in virtual time (in a new event loop) and return its trace and metrics.

    Args:
        scenario: a :class:`Scenario`, or the name of one in :data:`SCENARIOS`.
        limiter: the limiter's settings, or just a profile name (``"asyncretry"``, ``"aws"``); default
            ``AdaptiveLimiterConfig()``. Ignored when ``policy`` is given.
        policy: the whole retry policy, in adaptive mode; default ``RetryPolicy(mode="adaptive",
            limiter=limiter)``.
        label: the client's name in tables and plots; default: the limiter profile.
        workers: closed-loop workers (>= 1); default 50.
        latency: the latency of every request, seconds (> 0); default 0.02.
        burst: the server's burst as seconds of capacity (> 0); default 0.1.
        bin_width: the resolution of the trace, seconds (> 0); default 0.1.
        seed: the seed of the engine's jitter: a run is deterministic for a given seed; default 0.
        backend: ``"asyncio"`` (asyncretry's virtual-time loop, the default) or ``"trio"`` (``MockClock``).
        layout: ``"shared"`` (the default): the workers share one retrier, so one limiter;
            ``"independent"``: each worker has its own retrier and limiter (see :data:`LAYOUTS`).

    Returns:
        The :class:`SimulationResult`.

    Raises:
        ValueError: a parameter is out of range, or ``policy`` is not in adaptive mode.
    """
    scenario = _scenario(scenario)
    if policy is None:
        if isinstance(limiter, str):
            limiter = AdaptiveLimiterConfig(profile=limiter)
        policy = RetryPolicy(mode="adaptive", limiter=limiter)
    if policy.limiter_config is None:
        raise ValueError(f"policy must be in mode='adaptive', got mode={policy.mode!r}")
    workers = check_int("workers", workers, low=1)
    latency = check_number("latency", latency, low=0.0, low_open=True)
    burst = check_number("burst", burst, low=0.0, low_open=True)
    bin_width = check_number("bin_width", bin_width, low=0.0, low_open=True)
    check_choice("backend", backend, ("asyncio", "trio"))
    check_choice("layout", layout, LAYOUTS)
    label = label or policy.limiter_config.profile
    args = (scenario, policy, label, workers, latency, burst, bin_width, seed, layout)
    if backend == "trio":
        import trio.testing

        clock = trio.testing.MockClock(autojump_threshold=0)
        return anyio.run(_simulate, *args, backend="trio", backend_options={"clock": clock})
    from .testing import virtual_time_loop

    return anyio.run(_simulate, *args, backend="asyncio", backend_options={"loop_factory": virtual_time_loop})


def limit_result(
    scenario: Scenario | str, *, workers: int = 50, latency: float = 0.02, bin_width: float = 0.1
) -> SimulationResult:
    """The physical limit as a trace: a client that knows ``C(t)`` in advance and is never throttled.

    It serves ``min(C(t), workers / latency)`` per second, spread evenly over the workers; its
    reconvergence times are what the 5 s trailing window alone costs.
    """
    scenario = _scenario(scenario)
    bins = round(scenario.duration / bin_width)
    ceiling = workers / latency
    served: list[int] = []
    total = 0.0
    for k in range(bins):
        # Whole requests per bin that add up to the exact integral.
        before = round(total)
        total += min(scenario.capacity_at(k * bin_width), ceiling) * bin_width
        served.append(round(total) - before)
    share, extra = divmod(sum(served), workers)
    return SimulationResult(
        scenario=scenario,
        label="limit",
        workers=workers,
        latency=latency,
        bin_width=bin_width,
        sends=tuple(served),
        successes=tuple(served),
        throttles=(0,) * bins,
        fill_rate=(math.nan,) * bins,
        worker_successes=tuple(share + (i < extra) for i in range(workers)),
        longest_wait=0.0,
        failed_calls=0,
    )


# --- metrics


def _jain(values: Sequence[float]) -> float:
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares else 1.0


def compute_metrics(
    result: SimulationResult, *, settle: float = 10.0, trailing: float = 5.0, tolerance: float = 0.1
) -> SimulationMetrics:
    """The figures of one trace.

    Args:
        result: the trace.
        settle: seconds after each capacity change left out of the steady state; default 10.
        trailing: the window of the goodput that decides reconvergence, seconds; default 5.
        tolerance: how close to ``C`` that goodput must come, as a fraction of ``C``; default 0.1.
    """
    width = result.bin_width
    successes = result.successes
    span = max(1, round(trailing / width))
    cumulative = [0]
    for count in successes:
        cumulative.append(cumulative[-1] + count)
    offered = steady_offered = 0.0
    steady_served = 0
    reconverge: list[float] = []
    for start, end, capacity in result.scenario.segments():
        offered += capacity * (end - start)
        if capacity <= 0:
            continue
        first, last = round(start / width), min(round(end / width), len(successes))
        settled = round((start + settle) / width)
        if settled < last:
            steady_offered += capacity * (last - settled) * width
            steady_served += cumulative[last] - cumulative[settled]
        stayed = first  # the first bin from whose end on the trailing goodput stays within the tolerance
        for k in range(first, last):
            low = max(0, k + 1 - span)
            trailing_goodput = (cumulative[k + 1] - cumulative[low]) / ((k + 1 - low) * width)
            if abs(trailing_goodput - capacity) > tolerance * capacity:
                stayed = k + 1
        reconverge.append(math.inf if stayed >= last else (stayed + 1) * width - start)
    sends = sum(result.sends)
    ceiling = result.workers / result.latency
    possible = sum(min(c, ceiling) * (e - s) for s, e, c in result.scenario.segments())
    return SimulationMetrics(
        goodput=cumulative[-1] / offered if offered else 1.0,
        steady_goodput=steady_served / steady_offered if steady_offered else 1.0,
        throttled=sum(result.throttles) / sends if sends else 0.0,
        reconverge=tuple(reconverge),
        fairness=_jain(result.worker_successes),
        longest_wait=result.longest_wait,
        failed_calls=result.failed_calls,
        limit=possible / offered if offered else 1.0,
    )
