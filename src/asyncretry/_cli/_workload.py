"""The demo's workload: clients that each want a request every so often, through one retry configuration.

``asyncretry demo`` runs it against the real HTTP server in real time, ``asyncretry simulate`` against the
same server logic in memory and in virtual time; both measure the same figures (:class:`RunResult`).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import httpx

from .._engine._history import RetryHistory, history_of
from .._engine._policy import RetryPolicy
from .._events import BreakerStateChanged, Event, LimiterRateChanged
from .._exceptions import CircuitOpenError, RateLimitTimeout, RetryCapacityExceeded
from .._primitives._backoff import NoBackoff
from .._primitives._breaker import CircuitBreakerConfig
from .._primitives._budget import RetryBudgetConfig
from .._primitives._clock import DEFAULT_CLOCK
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveLimiterConfig
from .._simulation import Scenario
from ..httpx import AsyncRetryTransport, RetryInfo
from ._possible import possible_successes
from ._server import DemoServer, ServerTrace

__all__ = [
    "CONFIGURATIONS",
    "DEMO_BREAKER",
    "Configuration",
    "RunResult",
    "Tally",
    "Workload",
    "configurations",
    "run_configuration",
]

CONFIGURATIONS = ("none", "naive", "standard", "adaptive", "budget")
"""The configurations the demo compares, by their command-line names."""

# The demo wants its breaker to do the same thing at every seed: trip early in the outage, stay open through
# it, and let traffic back a little after it. A failure ratio over a window cannot promise that: the
# successes from before the outage must first age out of the window, so it trips as the outage ends, or
# not, by chance. Ten failures in a row come within 0.1-0.2 s of the outage's start at the demo's send
# rates (every request fails then), and practically never from the server's 3% of transient 503s or from a
# throttled stretch where half the sends get through. Open, the breaker probes every 0.5 s: its fourth probe
# comes 0.2-0.35 s after the demo's 2-s outage ends, clear of the outage's last instant (a probe that lands
# there fails, and one just after it meets the server's bucket still empty: a 429). Two probes, either
# closing it, both needed to re-open it: with one, a recovered server's transient 503 could keep it open for
# another break. Shorter breaks bring the outage's last instant back.
DEMO_BREAKER = CircuitBreakerConfig(
    failure_ratio=None, consecutive_failures=10, break_duration=0.5,
    half_open_max_probes=2, half_open_successes_to_close=1, half_open_failures_to_reopen=2,
)
"""The breaker of the standard, adaptive and budget configurations: trips after 10 failures in a row,
probes every 0.5 s with two probes, of which one success closes it."""


@dataclass(frozen=True, slots=True)
class Configuration:
    """One client configuration: a name for the table, the retry policy, one line of explanation."""

    name: str
    policy: RetryPolicy
    description: str


def _adaptive(profile: str, breaker: CircuitBreakerConfig | None) -> Configuration:
    """Adaptive mode with the limiter ``profile``, named after the preset that gives it."""
    and_breaker = "; and a breaker" if breaker is not None else ""
    if profile == "aws":
        return Configuration(
            "aws adaptive", RetryPolicy.aws_adaptive(breaker=breaker),
            "RetryPolicy.aws_adaptive(): the AWS SDKs' adaptive mode, their own CUBIC limiter exactly" + and_breaker,
        )
    # The default profile is plain "adaptive"; another one is named after its profile, so that rows differ.
    name = "adaptive" if profile == AdaptiveLimiterConfig().profile else f"{profile} adaptive"
    return Configuration(
        name, RetryPolicy.adaptive(breaker=breaker, limiter=AdaptiveLimiterConfig(profile=profile)),
        f"RetryPolicy.adaptive(): standard plus asyncretry's client-side rate limiter (profile {profile!r})"
        + and_breaker,
    )


def configurations(
    names: Sequence[str], *, profiles: Sequence[str] = ("asyncretry",), breaker: bool = True
) -> list[Configuration]:
    """The named configurations, in order; ``adaptive`` gives one per limiter profile (``aws``: the SDKs').

    ``breaker=False`` leaves :data:`DEMO_BREAKER` out of the standard, adaptive and budget configurations, so
    that what the quota, the limiter or the budget does in an outage shows instead of the breaker's refusals.
    """
    guard = DEMO_BREAKER if breaker else None
    and_breaker = "; and a breaker" if breaker else ""
    result: list[Configuration] = []
    for name in names:
        if name == "none":
            result.append(Configuration(
                "no retries", RetryPolicy(mode="legacy", quota=False, max_attempts=1), "one attempt per request"
            ))
        elif name == "naive":
            result.append(Configuration(
                "naive retries",
                RetryPolicy(mode="legacy", quota=False, max_attempts=5, backoff=NoBackoff(), honour_server_delay=False),
                "up to 5 attempts at once: no backoff, no jitter, no quota, Retry-After ignored",
            ))
        elif name == "standard":
            result.append(Configuration(
                "standard", RetryPolicy.aws_standard(breaker=guard),
                "AWS standard mode: 3 attempts, jittered backoff, Retry-After, retry quota" + and_breaker,
            ))
        elif name == "adaptive":
            result.extend(_adaptive(profile, guard) for profile in profiles)
        elif name == "budget":
            result.append(Configuration(
                "budget", RetryPolicy.aws_standard(quota=False, budget=RetryBudgetConfig(), breaker=guard),
                "standard mode with a retry budget instead of the quota: retries at most 20% of recent requests "
                "plus 10/s" + and_breaker,
            ))
        else:
            raise ValueError(f"configuration must be one of {', '.join(CONFIGURATIONS)}, got {name!r}")
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What the clients do.

    Attributes:
        clients: concurrent clients.
        rate: requests per second each client wants; a client whose request took longer than ``1 / rate``
            sends its next one at once.
        duration: seconds per configuration.
        seed: the seed of the retry jitter and of the server's transient failures.
        layout: ``"shared"``: the clients share one retrying transport (one limiter, quota and breaker);
            ``"independent"``: each has its own, like separate processes.
    """

    clients: int
    rate: float
    duration: float
    seed: int = 0
    layout: str = "shared"

    @property
    def demand(self) -> float:
        """Requests per second all clients want together."""
        return self.clients * self.rate


@dataclass(slots=True)
class Tally:
    """Running counters of one configuration, read by the progress display while it runs."""

    elapsed: float = 0.0
    requests: int = 0
    succeeded: int = 0
    attempts: int = 0
    retries: int = 0
    throttled_attempts: int = 0
    fill_rate: float | None = None
    failures: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.requests - self.succeeded


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """The figures of one configuration's run.

    Attributes:
        name: the configuration's name.
        scenario: the server's capacity script.
        workload: what the clients did.
        requests: requests that finished (the ones still in flight at the end are left out).
        succeeded: of those, requests answered ``200``.
        failures: the failed requests by cause (``429``, ``503``, ``breaker open``, ``quota empty`` ...).
        attempts: attempts the finished requests made (sends).
        retries: of those, attempts after the first of their request.
        throttled_attempts: of those, attempts answered ``429``.
        breaker_trips: how many times the circuit breaker tripped (closed to open); ``None`` without a breaker.
        latencies: each finished request's time from first send to final answer, seconds, sorted.
        trace: the server's view, per time bin.
        cuts: the adaptive limiters' cuts of their fill rate, by the rule that decided (most frequent first).
        fill_rate: the adaptive limiter's fill rate at the end of each bin (``nan`` while it does not limit).
        possible: the successful requests an ideal fleet of the same clients gets from the same server
            (:func:`~._possible.possible_successes`): an upper bound of ``succeeded``.
    """

    name: str
    scenario: Scenario
    workload: Workload
    requests: int
    succeeded: int
    failures: dict[str, int]
    attempts: int
    retries: int
    throttled_attempts: int
    breaker_trips: int | None
    latencies: tuple[float, ...]
    trace: ServerTrace
    cuts: dict[str, int]
    fill_rate: tuple[float, ...]
    possible: int

    @property
    def failed(self) -> int:
        return self.requests - self.succeeded

    @property
    def goodput(self) -> float:
        """Successful requests per second."""
        return self.succeeded / self.scenario.duration

    @property
    def possible_goodput(self) -> float:
        """The most any configuration of these clients could get, successful requests per second: the
        goodput of an ideal fleet that sends each request the moment the server can admit it."""
        return self.possible / self.scenario.duration

    @property
    def share(self) -> float:
        """The goodput as a fraction of :attr:`possible_goodput` (at most 1; ``nan`` if nothing was possible)."""
        return self.succeeded / self.possible if self.possible else math.nan

    @property
    def amplification(self) -> float:
        """Sends per request: 1.0 means no request was sent twice (a request refused by the breaker sends none)."""
        return self.attempts / self.requests if self.requests else math.nan

    @property
    def throttled_fraction(self) -> float:
        """The fraction of attempts answered ``429``."""
        return self.throttled_attempts / self.attempts if self.attempts else 0.0

    def latency(self, quantile: float) -> float:
        """The latency below which ``quantile`` of the requests finished (nearest rank), seconds."""
        values = self.latencies
        if not values:
            return math.nan
        return values[min(len(values) - 1, max(0, math.ceil(quantile * len(values)) - 1))]


def _cause(response: httpx.Response | None, error: Exception | None) -> str:
    if response is not None:
        return str(response.status_code)
    if isinstance(error, CircuitOpenError):
        return "breaker open"
    if isinstance(error, RetryCapacityExceeded):
        return "quota empty"
    if isinstance(error, RateLimitTimeout):
        return "rate limit"
    if isinstance(error, httpx.TransportError):
        return "connection"
    return type(error).__name__


async def run_configuration(
    configuration: Configuration,
    workload: Workload,
    server: DemoServer,
    transport: httpx.AsyncBaseTransport,
    base_url: str,
    *,
    on_tick: Callable[[Tally], None] | None = None,
) -> RunResult:
    """Run the workload for ``workload.duration`` seconds through ``configuration`` and measure it.

    Args:
        configuration: the client configuration.
        workload: clients, rate, duration, seed.
        server: the server's logic; started here (its scenario starts now).
        transport: how requests reach the server (HTTP, or in memory); closed here.
        base_url: the server's URL.
        on_tick: called with the running counters every ``server.bin_width`` seconds.
    """
    clock = DEFAULT_CLOCK
    # The limiters the engine builds draw their token phase from the global generator: seed it too, so that
    # a run's random draws all come from the seed (the demo's did not: a real-time run and its rerun
    # differed in the limiter's phase as well as in timing).
    random.seed(workload.seed)
    count = 1 if workload.layout == "shared" else workload.clients
    transports = [
        AsyncRetryTransport(
            transport, policy=configuration.policy, rng=random.Random(workload.seed + index).random,
            name=configuration.name,
        )
        for index in range(count)
    ]
    tally = Tally()
    trips = 0
    cuts: Counter[str] = Counter()

    def count_events(event: Event) -> None:
        nonlocal trips
        # A trip closes the door on a healthy-looking backend; re-opening after a failed probe is not a new one.
        if isinstance(event, BreakerStateChanged) and event.old_state == "closed" and event.new_state == "open":
            trips += 1
        elif isinstance(event, LimiterRateChanged) and event.cut:
            cuts[event.rule] += 1

    for retrying in transports:
        retrying.retrier.subscribe(count_events)
    bins = len(server.trace.arrivals)
    fill = [math.nan] * bins
    interval = 1.0 / workload.rate

    def fill_rate() -> float | None:
        """The limiters' fill rate (their sum, with independent clients); ``None`` while none limits."""
        rates = []
        for retrying in transports:
            scopes = retrying.statistics().scopes
            limiter = scopes[0].limiter if scopes else None
            if limiter is not None and limiter.enabled:
                rates.append(limiter.fill_rate)
        return sum(rates) if rates else None

    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(transport=retrying, base_url=base_url, timeout=30.0))
            for retrying in transports
        ]
        server.start()
        start = clock.now()

        def record(began: float, response: httpx.Response | None, error: Exception | None) -> None:
            history: RetryHistory | None
            if response is not None:
                info = response.extensions.get("asyncretry")
                history = info.history if isinstance(info, RetryInfo) else None
            else:
                history = history_of(error) if error is not None else None
            tally.requests += 1
            tally.latencies.append(clock.now() - began)
            if history is not None:
                tally.attempts += len(history.attempts)
                tally.retries += max(0, len(history.attempts) - 1)
                tally.throttled_attempts += sum(a.kind is OutcomeKind.THROTTLING for a in history.attempts)
            if response is not None and response.status_code == 200:
                tally.succeeded += 1
            else:
                tally.failures[_cause(response, error)] += 1

        async def one_client(index: int) -> None:
            next_at = start + index * interval / workload.clients  # spread the first requests out
            while True:
                wait = next_at - clock.now()
                if wait > 0:
                    await clock.sleep(wait)
                began = clock.now()
                try:
                    response = await clients[index % count].get("/work")
                except Exception as error:
                    record(began, None, error)
                else:
                    record(began, response, None)
                next_at = began + interval

        async def sample() -> None:
            for k in range(bins):
                await clock.sleep(max(0.0, start + (k + 1) * server.bin_width - clock.now()))
                tally.fill_rate = fill_rate()
                if tally.fill_rate is not None:
                    fill[k] = tally.fill_rate
                tally.elapsed = clock.now() - start
                if on_tick is not None:
                    on_tick(tally)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            for index in range(workload.clients):
                tg.start_soon(one_client, index)
            # Cancel at the end rather than set a deadline: the engine (rightly) gives up at once on a wait
            # that would outlast the caller's deadline, which would turn the run's end into failures.
            await clock.sleep(workload.duration)
            tg.cancel_scope.cancel()

    return RunResult(
        name=configuration.name,
        scenario=server.scenario,
        workload=workload,
        requests=tally.requests,
        succeeded=tally.succeeded,
        failures=dict(tally.failures.most_common()),
        attempts=tally.attempts,
        retries=tally.retries,
        throttled_attempts=tally.throttled_attempts,
        breaker_trips=None if configuration.policy.breaker is None else trips,
        latencies=tuple(sorted(tally.latencies)),
        trace=server.trace,
        cuts=dict(cuts.most_common()),
        fill_rate=tuple(fill),
        possible=possible_successes(
            server.scenario, clients=workload.clients, rate=workload.rate, burst=server.burst, latency=server.latency
        ),
    )
