"""A virtual-time simulation of closed-loop clients, behind the real retry engine, against a throttling server.

The model (issue #5):

* The server is a token bucket: it admits ``C(t)`` requests per second with a burst of ``burst * C(t)``
  and throttles the rest. ``C(t)`` follows a :class:`Scenario`'s schedule (steps, outages).
* Every request takes a fixed ``latency``; the server decides when the request arrives (its send time).
* ``workers`` closed-loop workers each send one call after another through a real
  :class:`~asyncretry.Retrier` in adaptive mode: the real limiter (:meth:`acquire` before each attempt,
  :meth:`update` after it), the real retry quota and the real backoff. A throttled attempt raises an
  error that declares itself throttling, so the engine retries it like any throttling error.
* The event loop runs in virtual time (asyncretry's :class:`~asyncretry.testing.VirtualTimeEventLoop`,
  or trio's ``MockClock(autojump_threshold=0)``): a 120 s scenario takes seconds of real time.

:func:`run_simulation` runs one scenario; :func:`compute_metrics` turns its trace into the figures the
issue asks for; :func:`format_table` prints them side by side and :func:`plot_results` draws them
(matplotlib, imported only there). ``benchmarks/adaptive_sim.py`` is the command-line runner.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import anyio

from ._engine._policy import RetryPolicy
from ._engine._retrier import Retrier
from ._events import EventBus
from ._primitives._clock import DEFAULT_CLOCK
from ._primitives._limiter import AdaptiveLimiterConfig, AdaptiveRateLimiter
from ._validate import check_int, check_number

__all__ = [
    "SCENARIOS",
    "Scenario",
    "SimulatedServer",
    "SimulationMetrics",
    "SimulationResult",
    "compute_metrics",
    "format_table",
    "ideal_result",
    "plot_results",
    "run_simulation",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A server capacity script.

    Args:
        name: a short name for tables and plots.
        schedule: ``(start time, capacity)`` pairs in seconds and requests per second, the first at 0;
            the capacity holds until the next pair. A capacity of 0 is an outage.
        duration: the length of the run, seconds (default 120).
        description: one line for humans.
    """

    name: str
    schedule: tuple[tuple[float, float], ...]
    duration: float = 120.0
    description: str = ""

    def __post_init__(self) -> None:
        if not self.schedule or self.schedule[0][0] != 0:
            raise ValueError(f"schedule must start at time 0, got {self.schedule!r}")
        times = [start for start, _ in self.schedule]
        if times != sorted(set(times)):
            raise ValueError(f"schedule times must increase, got {times!r}")
        for _, capacity in self.schedule:
            check_number("capacity", capacity, low=0.0)
        check_number("duration", self.duration, low=times[-1], low_open=True)

    def capacity_at(self, time: float) -> float:
        """The capacity at ``time`` (requests per second)."""
        capacity = self.schedule[0][1]
        for start, value in self.schedule:
            if start > time:
                break
            capacity = value
        return capacity

    def segments(self) -> list[tuple[float, float, float]]:
        """``(start, end, capacity)`` of each constant stretch."""
        ends = [start for start, _ in self.schedule[1:]] + [self.duration]
        return [(start, end, capacity) for (start, capacity), end in zip(self.schedule, ends, strict=True)]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(name="steady", schedule=((0.0, 100.0),), description="C = 100/s throughout"),
        Scenario(name="step-down", schedule=((0.0, 200.0), (60.0, 50.0)), description="C 200 -> 50 at 60 s"),
        Scenario(name="step-up", schedule=((0.0, 50.0), (60.0, 200.0)), description="C 50 -> 200 at 60 s"),
        Scenario(name="c1000", schedule=((0.0, 1000.0),), description="C = 1000/s throughout"),
        Scenario(
            name="outage", schedule=((0.0, 100.0), (60.0, 0.0), (65.0, 100.0)), description="C = 100, 0 for 60-65 s"
        ),
    )
}
"""The issue's five scenarios, 120 virtual seconds each."""


class SimulatedThrottle(Exception):
    """The simulated server's throttling response; declares itself throttling to the classifier."""

    is_throttling = True


class SimulatedServer:
    """A token bucket with a scripted capacity: ``C(t)`` per second, a burst of ``burst * C(t)``.

    Args:
        scenario: the capacity script.
        burst: the bucket's size as a fraction of one second of capacity (default 0.1).
        start: the clock time of the scenario's time 0.
    """

    __slots__ = ("_burst", "_changes", "_last", "_start", "_tokens", "scenario")

    def __init__(self, scenario: Scenario, *, burst: float = 0.1, start: float = 0.0) -> None:
        self.scenario = scenario
        self._burst = check_number("burst", burst, low=0.0, low_open=True)
        self._start = start
        self._changes = list(scenario.schedule)
        self._last = 0.0
        self._tokens = burst * scenario.schedule[0][1]  # starts full

    def admit(self, now: float) -> bool:
        """Whether a request arriving at clock time ``now`` is served (``False``: throttled)."""
        t = now - self._start
        tokens = self._tokens
        last = self._last
        changes = self._changes
        # Refill segment by segment: the capacity may have changed since the last request.
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
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationMetrics:
    """The figures of one run (issue #5).

    Attributes:
        goodput: successful responses over the whole run, as a fraction of the capacity offered
            (the integral of ``C(t)``).
        steady_goodput: the same, leaving out the ``settle`` seconds after every capacity change (and
            outages): how well the limiter holds a capacity it has found.
        throttled: throttled attempts as a fraction of all attempts sent.
        reconverge: per capacity change with ``C > 0`` (the start first), seconds until the trailing
            5 s goodput is within 10% of ``C`` and stays there until the next change; ``inf`` if never.
        fairness: Jain's index over the workers' successful calls (1 = perfectly fair).
        longest_wait: the longest time a call spent waiting (limiter and backoff: its duration less
            its attempts' latency), seconds.
        failed_calls: calls that gave up.
        limit: the physical limit of the goodput: a client that knows ``C`` sends ``min(C, workers /
            latency)`` and is never throttled.
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
    """The trace of one run, binned in ``bin_width`` seconds, and its metrics.

    Attributes:
        scenario: what the server did.
        label: the client's name in tables and plots (the limiter profile).
        workers: the number of closed-loop workers.
        latency: the fixed latency of every request, seconds.
        bin_width: the width of a trace bin, seconds.
        sends: attempts sent per bin.
        successes: successful responses per bin (by response time).
        throttles: throttled responses per bin.
        fill_rate: the limiter's fill rate at the end of each bin (``nan`` while it is not enabled).
        worker_successes: successful calls per worker.
        longest_wait: see :class:`SimulationMetrics`.
        failed_calls: calls that gave up.
        metrics: the figures computed from the above.
    """

    scenario: Scenario
    label: str
    workers: int
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
        """The end time of each bin, scenario seconds."""
        return [(k + 1) * self.bin_width for k in range(len(self.sends))]


class _Recorder:
    """Counts sends, successes and throttles per bin while the simulation runs."""

    __slots__ = (
        "bins",
        "failed",
        "fill",
        "latency",
        "longest_wait",
        "scale",
        "sends",
        "server",
        "start",
        "successes",
        "throttles",
        "worker_successes",
    )

    def __init__(self, server: SimulatedServer, bins: int, bin_width: float, workers: int, latency: float,
                 start: float) -> None:
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
        """One attempt: the server decides at once, the answer comes ``latency`` later."""
        now = DEFAULT_CLOCK.now()
        admitted = self.server.admit(now)
        self.sends[self._bin(now)] += 1
        await anyio.sleep(self.latency)
        if not admitted:
            self.throttles[self._bin(now + self.latency)] += 1
            raise SimulatedThrottle("simulated throttle")
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
) -> SimulationResult:
    clock = DEFAULT_CLOCK
    start = clock.now()
    bins = round(scenario.duration / bin_width)
    recorder = _Recorder(SimulatedServer(scenario, burst=burst, start=start), bins, bin_width, workers, latency,
                         start)
    assert policy.limiter_config is not None
    events = EventBus()
    limiter = AdaptiveRateLimiter(policy.limiter_config, name="sim", events=events)
    retrier = Retrier(policy, name="sim", rng=random.Random(seed).random, events=events, limiter=limiter)
    end = start + scenario.duration

    async def worker(index: int) -> None:
        send = recorder.send
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
                if attempts.gave_up is None and clock.now() <= end:
                    recorder.worker_successes[index] += 1
                elif attempts.gave_up is not None:
                    recorder.failed += 1
            waited = clock.now() - began - attempts.number * latency
            if waited > recorder.longest_wait:
                recorder.longest_wait = waited

    async def sample() -> None:
        fill = recorder.fill
        for k in range(bins):
            await anyio.sleep_until(start + (k + 1) * bin_width)
            if limiter.enabled:
                fill[k] = limiter.fill_rate

    async with anyio.create_task_group() as tg:
        for index in range(workers):
            tg.start_soon(worker, index)
        await sample()
        # Not a deadline around the workers: the engine would see it and refuse waits that outlast it.
        tg.cancel_scope.cancel()
    return SimulationResult(
        scenario=scenario,
        label=label,
        workers=workers,
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
) -> SimulationResult:
    """Run one scenario in virtual time and return its trace and metrics.

    Args:
        scenario: a :class:`Scenario` or the name of one in :data:`SCENARIOS`.
        limiter: the limiter's settings, or just a profile name (``"aws"``, ``"asyncretry"``); default
            ``AdaptiveLimiterConfig()``. Ignored if ``policy`` is given.
        policy: the whole retry policy (must be adaptive); default ``RetryPolicy(mode="adaptive",
            limiter=limiter)``.
        label: the client's name in tables and plots; default: the limiter profile.
        workers: closed-loop workers (>= 1); default 50.
        latency: the fixed latency of every request, seconds (> 0); default 0.02.
        burst: the server's burst as a fraction of one second of capacity (> 0); default 0.1.
        bin_width: the trace's resolution, seconds (> 0); default 0.1.
        seed: the seed of the engine's jitter (the run is deterministic for a given seed); default 0.
        backend: ``"asyncio"`` (asyncretry's virtual-time loop, the default) or ``"trio"`` (``MockClock``).

    Returns:
        The :class:`SimulationResult`.

    Raises:
        ValueError: a parameter is out of range, or ``policy`` is not adaptive.
    """
    if isinstance(scenario, str):
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(map(repr, SCENARIOS))}, got {scenario!r}")
        scenario = SCENARIOS[scenario]
    if policy is None:
        if isinstance(limiter, str):
            limiter = AdaptiveLimiterConfig(profile=limiter)
        policy = RetryPolicy(mode="adaptive", limiter=limiter if limiter is not None else AdaptiveLimiterConfig())
    if policy.limiter_config is None:
        raise ValueError(f"policy must be in mode='adaptive', got mode={policy.mode!r}")
    workers = check_int("workers", workers, low=1)
    latency = check_number("latency", latency, low=0.0, low_open=True)
    burst = check_number("burst", burst, low=0.0, low_open=True)
    bin_width = check_number("bin_width", bin_width, low=0.0, low_open=True)
    if label is None:
        label = policy.limiter_config.profile
    args = (scenario, policy, label, workers, latency, burst, bin_width, seed)
    if backend == "asyncio":
        from .testing import virtual_time_loop

        return anyio.run(_simulate, *args, backend="asyncio", backend_options={"loop_factory": virtual_time_loop})
    if backend == "trio":
        import trio.testing

        return anyio.run(
            _simulate, *args, backend="trio", backend_options={"clock": trio.testing.MockClock(autojump_threshold=0)}
        )
    raise ValueError(f"backend must be 'asyncio' or 'trio', got {backend!r}")


# --- metrics


def _jain(values: Sequence[float]) -> float:
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares else 1.0


def _trailing(successes: Sequence[float], k: int, span: int, bin_width: float) -> float:
    first = max(0, k + 1 - span)
    return sum(successes[first : k + 1]) / ((k + 1 - first) * bin_width)


def compute_metrics(result: SimulationResult, *, settle: float = 10.0, trailing: float = 5.0,
                    tolerance: float = 0.1) -> SimulationMetrics:
    """The issue's figures for one run.

    Args:
        result: the trace.
        settle: seconds after each capacity change left out of the steady state (default 10).
        trailing: the window of the goodput that decides reconvergence, seconds (default 5).
        tolerance: how close to ``C`` that goodput must be, as a fraction of ``C`` (default 0.1).
    """
    width = result.bin_width
    successes = result.successes
    scenario = result.scenario
    offered = 0.0
    steady_offered = 0.0
    steady_served = 0
    reconverge: list[float] = []
    span = round(trailing / width)
    for start, end, capacity in scenario.segments():
        first, last = round(start / width), round(end / width)
        offered += capacity * (end - start)
        if capacity <= 0:
            continue
        settled = round((start + settle) / width)
        if settled < last:
            steady_offered += capacity * (last - settled) * width
            steady_served += sum(successes[settled:last])
        stayed = first  # the first bin from whose end on the trailing goodput stays within the tolerance
        for k in range(first, last):
            if abs(_trailing(successes, k, span, width) - capacity) > tolerance * capacity:
                stayed = k + 1
        reconverge.append(math.inf if stayed >= last else (stayed + 1) * width - start)
    served = sum(successes)
    sends = sum(result.sends)
    limit_offered = sum(min(c, result.workers / result.latency) * (e - s) for s, e, c in scenario.segments())
    return SimulationMetrics(
        goodput=served / offered if offered else 1.0,
        steady_goodput=steady_served / steady_offered if steady_offered else 1.0,
        throttled=sum(result.throttles) / sends if sends else 0.0,
        reconverge=tuple(reconverge),
        fairness=_jain(result.worker_successes),
        longest_wait=result.longest_wait,
        failed_calls=result.failed_calls,
        limit=limit_offered / offered if offered else 1.0,
    )


def ideal_result(scenario: Scenario | str, *, workers: int = 50, latency: float = 0.02,
                 bin_width: float = 0.1) -> SimulationResult:
    """The physical limit as a trace: a client that knows ``C(t)`` and is never throttled."""
    if isinstance(scenario, str):
        scenario = SCENARIOS[scenario]
    bins = round(scenario.duration / bin_width)
    ceiling = workers / latency
    served: list[float] = []
    for k in range(bins):
        served.append(min(scenario.capacity_at(k * bin_width), ceiling) * bin_width)
    share = sum(served) / workers
    return SimulationResult(
        scenario=scenario,
        label="ideal",
        workers=workers,
        latency=latency,
        bin_width=bin_width,
        sends=tuple(round(x) for x in served),
        successes=tuple(served),  # type: ignore[arg-type]
        throttles=(0,) * bins,
        fill_rate=tuple(math.nan for _ in range(bins)),
        worker_successes=(round(share),) * workers,
        longest_wait=0.0,
        failed_calls=0,
    )


# --- output


def _seconds(values: Iterable[float]) -> str:
    return " / ".join("never" if math.isinf(v) else f"{v:.1f}" for v in values)


def format_table(results: Sequence[SimulationResult]) -> str:
    """One row per run: the issue's figures, and each run's distance from the physical limit."""
    header = (
        f"{'scenario':<10} {'N':>3} {'profile':<11} {'goodput':>8} {'steady':>7} {'throttled':>9} "
        f"{'reconverge s':>14} {'fairness':>8} {'max wait':>8} {'from limit':>10}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        m = r.metrics
        lines.append(
            f"{r.scenario.name:<10} {r.workers:>3} {r.label:<11} {m.goodput:>8.1%} {m.steady_goodput:>7.1%} "
            f"{m.throttled:>9.2%} {_seconds(m.reconverge):>14} {m.fairness:>8.3f} {m.longest_wait:>7.1f}s "
            f"{(m.goodput - m.limit) * 100:>+9.1f}%"
        )
    return "\n".join(lines)


def plot_results(results: Sequence[SimulationResult], path: str) -> None:
    """Draw send rate, goodput, capacity and fill rate over time, one panel per scenario and N.

    Needs matplotlib (the ``plot`` extra), imported here only.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, int], list[SimulationResult]] = {}
    for r in results:
        panels.setdefault((r.scenario.name, r.workers), []).append(r)
    rows = len(panels)
    columns = max(len(v) for v in panels.values())
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 2.6 * rows), squeeze=False, sharex=True)
    for row, ((name, workers), runs) in enumerate(panels.items()):
        for column, r in enumerate(runs):
            ax = axes[row][column]
            times = r.times()
            scale = 1.0 / r.bin_width
            ax.plot(times, [s * scale for s in _smooth(r.sends)], lw=0.8, color="tab:blue", label="send rate")
            ax.plot(times, [s * scale for s in _smooth(r.successes)], lw=0.8, color="tab:green", label="goodput")
            ax.plot(times, r.fill_rate, lw=0.8, color="tab:orange", label="fill rate")
            ax.plot(times, [r.scenario.capacity_at(t - r.bin_width) for t in times], lw=1.2, color="black",
                    ls="--", label="capacity C")
            top = max(c for _, c in r.scenario.schedule)
            ax.set_ylim(0, top * 1.6)
            ax.set_title(f"{name}, N={workers}: {r.label} (goodput {r.metrics.goodput:.0%}, "
                         f"throttled {r.metrics.throttled:.2%})", fontsize=9)
            ax.set_ylabel("requests/s")
            if row == rows - 1:
                ax.set_xlabel("virtual time (s)")
    axes[0][0].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _smooth(values: Sequence[float], span: int = 5) -> list[float]:
    # A centred moving average over half a second: the raw 0.1 s bins are too noisy to read.
    out: list[float] = []
    half = span // 2
    for k in range(len(values)):
        window = values[max(0, k - half) : k + half + 1]
        out.append(sum(window) / len(window))
    return out
