"""Hedging decisions: may this call send a hedge now, after what delay, within what budget.

A hedged call sends its first attempt; when no answer came after the hedging delay, it sends the same
request again without cancelling the first (the driver, :mod:`._hedged`, runs both in a task group), and
the first acceptable answer wins. Every rule about *whether* to hedge lives here:

- the delay: fixed (:attr:`HedgingConfig.delay`), or a quantile of the scope's recently observed attempt
  latencies (:attr:`HedgingConfig.quantile`, e.g. 0.95), the fixed delay standing in until
  ``min_samples`` latencies were seen;
- the budget: hedges are at most ``budget_ratio`` of the hedged calls of the last ``budget_window``
  seconds (a :class:`~asyncretry.RetryBudget` without a floor): at most 10% extra requests by default;
- admission: a hedge never waits and never probes: it is sent only while the scope's breaker is closed
  and its rate limits have a token at once (a hedge that would have to wait is not worth sending).

The per-scope state (:class:`HedgeState`: the latency ring and the budget) hangs on the
:class:`~._scopes.Scope`, one per hedging configuration used in the scope. Everything here is
synchronous and never awaits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from .._events import Event, EventBus
from .._primitives._breaker import CircuitBreaker
from .._primitives._bucket import TokenBucket
from .._primitives._budget import BudgetStatistics, RetryBudget, RetryBudgetConfig
from .._primitives._clock import Clock
from .._primitives._limiter import AdaptiveRateLimiter
from .._validate import check_int, check_number, check_seconds
from ._scopes import Scope

__all__ = ["HedgeState", "HedgeStatistics", "HedgingConfig", "LatencyTracker", "hedge_state"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgingConfig:
    """When a call sends a hedge (a second attempt while the first has not answered yet), and how many.

    Hedging trades a few extra requests for a shorter latency tail: a hedge sent after the p95 latency
    answers in about the median time, so the slowest 5% of calls no longer wait for a slow server. Only
    for operations that are safe to run twice at once (idempotent requests with a replayable body).

    Args:
        delay: seconds without an answer before a hedge is sent (> 0, at most an hour), or a
            ``timedelta``. With ``quantile``, the delay used until ``min_samples`` latencies are known.
        quantile: hedge after this quantile of the scope's recent attempt latencies instead (e.g. 0.95:
            about 5% of calls are hedged), strictly between 0 and 1; ``None`` (default) for the fixed delay.
        min_samples: latencies needed before the quantile is used (>= 1, at most ``samples``). Default 20.
        samples: how many recent latencies the quantile is computed from (10 to 10,000). Default 200.
        max_hedges: hedges a call may send while its first attempt runs (>= 1, at most 10): the k-th one
            after k delays. Default 1. Hedges count towards the policy's ``max_attempts``.
        budget_ratio: hedges allowed per hedged call over ``budget_window`` (> 0, at most ``max_hedges``):
            0.1 means at most 10% extra requests. Default 0.1.
        budget_window: seconds over which the budget counts calls and hedges (> 0, at most a day), or a
            ``timedelta``. Default 10.

    Raises:
        ValueError: a value is out of range (the message names it and the range).
        TypeError: a value has the wrong type.
    """

    delay: float | timedelta
    quantile: float | None = None
    min_samples: int = 20
    samples: int = 200
    max_hedges: int = 1
    budget_ratio: float = 0.1
    budget_window: float | timedelta = 10.0
    budget: RetryBudgetConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "delay", check_seconds("delay", self.delay, low_open=True, high=3600.0))
        if self.quantile is not None:
            s(self, "quantile", check_number("quantile", self.quantile, low=0.0, high=1.0, low_open=True,
                                             high_open=True))
        check_int("samples", self.samples, low=10, high=10_000)
        check_int("min_samples", self.min_samples, low=1, high=self.samples)
        check_int("max_hedges", self.max_hedges, low=1, high=10)
        s(self, "budget_ratio", check_number(
            "budget_ratio", self.budget_ratio, low=0.0, high=float(self.max_hedges), low_open=True,
        ))
        s(self, "budget_window", check_seconds("budget_window", self.budget_window, low_open=True, high=86_400.0))
        # No floor: a quiet client earns hedges like a busy one, so extra requests stay within the ratio.
        s(self, "budget", RetryBudgetConfig(
            ratio=self.budget_ratio, window=self.budget_window, min_retries_per_second=0.0,
        ))

    @classmethod
    def p95(cls, *, fallback: float | timedelta = 0.1, **changes: object) -> HedgingConfig:
        """Hedge after the p95 of recent latencies (``fallback`` seconds until 20 are known): ~5% hedged."""
        return cls(delay=fallback, quantile=0.95, **changes)  # type: ignore[arg-type]


class LatencyTracker:
    """The last ``size`` attempt latencies in a ring, and a quantile of them computed cheaply.

    :meth:`record` is O(1). :meth:`quantile` sorts the ring only when a tenth of it changed since the
    last sort (at most once per ``size // 10`` records), so its cost is amortised to O(log size) per
    record; memory is ``size`` floats.
    """

    __slots__ = ("_cached", "_count", "_fresh", "_next", "_ring", "_size", "_stale_after")

    def __init__(self, size: int) -> None:
        self._size = check_int("size", size, low=1)
        self._ring: list[float] = []
        self._next = 0  # where the next latency goes once the ring is full
        self._count = 0  # latencies recorded since the start
        self._fresh = 0  # latencies recorded since the last sort
        self._stale_after = max(1, size // 10)
        self._cached: list[float] = []

    def record(self, seconds: float) -> None:
        """Add one latency (seconds); the oldest one goes once ``size`` are kept."""
        ring = self._ring
        if len(ring) < self._size:
            ring.append(seconds)
        else:
            ring[self._next] = seconds
            self._next = (self._next + 1) % self._size
        self._count += 1
        self._fresh += 1

    def __len__(self) -> int:
        """How many latencies are kept (at most ``size``)."""
        return len(self._ring)

    @property
    def count(self) -> int:
        """Latencies recorded since the tracker was made."""
        return self._count

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the kept latencies (nearest rank); ``nan`` when none are kept."""
        if not self._ring:
            return math.nan
        if self._fresh >= self._stale_after or len(self._cached) != len(self._ring):
            self._cached = sorted(self._ring)
            self._fresh = 0
        ordered = self._cached
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def __repr__(self) -> str:
        return f"<LatencyTracker kept={len(self._ring)}/{self._size} recorded={self._count}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgeStatistics:
    """A snapshot of one scope's hedging state.

    Attributes:
        delay: the hedging delay a call starting now would use, seconds.
        latencies: latencies kept for the quantile.
        calls: hedged calls since the state was made (calls that could hedge; most do not need to).
        hedges: hedges sent since the state was made.
        refused: hedges the budget refused.
        budget: the hedge budget's own snapshot (its ``retries`` are hedges, its ``requests`` hedged calls).
    """

    delay: float
    latencies: int
    calls: int
    hedges: int
    refused: int
    budget: BudgetStatistics


class _Quiet(EventBus):
    """A bus nobody hears: a hedge budget running dry is its normal work, not news (the metric counts hedges)."""

    def wants(self, event_type: type[Event]) -> bool:
        return False


_QUIET = _Quiet(_root=True)


class HedgeState:
    """One scope's hedging state for one :class:`HedgingConfig`: recent latencies and the hedge budget."""

    __slots__ = ("_budget", "_calls", "_hedges", "_refused", "_tracker", "config")

    def __init__(self, config: HedgingConfig, clock: Clock, name: str) -> None:
        self.config = config
        self._tracker = LatencyTracker(config.samples)
        self._budget = RetryBudget(config.budget, clock=clock, name=name, events=_QUIET)
        self._calls = self._hedges = self._refused = 0

    def delay(self) -> float:
        """Seconds without an answer before the next hedge: the quantile once known, else the fixed delay."""
        config = self.config
        if config.quantile is not None and len(self._tracker) >= config.min_samples:
            return self._tracker.quantile(config.quantile)
        return config.delay  # type: ignore[return-value]  # normalised to float seconds

    def record_call(self, now: float) -> None:
        """A call that may hedge began: it earns ``budget_ratio`` hedges for the window."""
        self._calls += 1
        self._budget.record_request(now=now)

    def record_latency(self, seconds: float) -> None:
        """An attempt answered after ``seconds`` (or lost its race after that long: a lower bound, kept too,
        so that the quantile does not forget the slow attempts that hedges cut short)."""
        self._tracker.record(seconds)

    def admit(self, scope: Scope, now: float) -> bool:
        """Whether a hedge may be sent now: it takes a place in the budget and the rate limits' tokens.

        Never waits: the breaker must be closed and the rate limits must have a token at once (a hedge
        is never a half-open probe, and a hedge that would wait is not worth sending).
        """
        breaker, bucket, limiter = scope.breaker, scope.bucket, scope.limiter
        if breaker is not None and not (isinstance(breaker, CircuitBreaker) and breaker.is_closed):
            return False
        if bucket is not None and not (isinstance(bucket, TokenBucket) and bucket.time_until_available(1) == 0):
            return False
        if limiter is not None and not (
            isinstance(limiter, AdaptiveRateLimiter) and limiter.time_until_available() == 0
        ):
            return False
        if not self._budget.try_spend(now=now):
            self._refused += 1
            return False
        # Nothing awaited since the checks: the tokens seen are still there.
        if bucket is not None:
            bucket.try_acquire(1)
        if limiter is not None:
            limiter.try_acquire()
        self._hedges += 1
        return True

    def statistics(self) -> HedgeStatistics:
        """A snapshot: the delay now, latencies kept, calls, hedges, refusals and the budget."""
        return HedgeStatistics(
            delay=self.delay(), latencies=len(self._tracker), calls=self._calls, hedges=self._hedges,
            refused=self._refused, budget=self._budget.statistics(),
        )

    def __repr__(self) -> str:
        return (f"<HedgeState delay={self.delay():.4f}s latencies={len(self._tracker)} calls={self._calls} "
                f"hedges={self._hedges} refused={self._refused}>")


def hedge_state(scope: Scope, config: HedgingConfig, clock: Clock) -> HedgeState:
    """The scope's hedging state for ``config``, made on first use."""
    states = scope.hedging
    if states is None:
        states = scope.hedging = {}
    state = states.get(config)
    if state is None:
        state = states[config] = HedgeState(config, clock, scope.key)
    return state
