"""The OpenTelemetry instruments of one meter provider, and the counts behind asyncretry's counters.

:mod:`asyncretry.otel` turns events into these counts and hands the observed objects' statistics to the
gauges; what the metrics mean is documented there.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from ._otel_sources import Attributes, Source, Statistics, scope_attributes
from ._primitives._breaker import BreakerState, BreakerStatistics
from ._primitives._budget import BudgetStatistics
from ._primitives._limiter import LimiterStatistics
from ._primitives._quota import QuotaStatistics
from ._primitives._turns import TurnStatistics

__all__ = ["DELAY_BUCKETS", "SCHEMA_URL", "Meters", "meters_for"]

_log = logging.getLogger("asyncretry.otel")
T = TypeVar("T")
K = TypeVar("K")

SCHEMA_URL = "https://opentelemetry.io/schemas/1.26.0"
"""The semantic conventions version whose attribute names (``error.type``, ``server.address`` ...) are used."""

DELAY_BUCKETS = (0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Bucket boundaries advised for ``asyncretry.retry.delay`` (seconds): backoff runs from milliseconds
to AWS's 20 s cap, server-directed delays up to the policy's ``max_server_delay`` (60 s by default)."""



class Meters:
    """The instruments of one meter provider, and the counts behind its counters.

    Made once per provider and shared by every :class:`Instrumentation` on it: a provider hands back
    the first asynchronous instrument registered under a name and ignores the callbacks of any later
    one, so the callbacks read state kept here.

    The counters are pre-aggregated (OpenTelemetry's asynchronous counters): a listener adds one to a
    dict entry under a lock, a few hundred nanoseconds, where a synchronous ``Counter.add`` costs the
    SDK several microseconds per call; the SDK reads the totals once per collection. The totals live
    here, not in an instrumentation, because a cumulative counter must never go down.
    """

    def __init__(self, provider: metrics.MeterProvider) -> None:
        from . import __version__

        meter = provider.get_meter("asyncretry", __version__, schema_url=SCHEMA_URL)
        self.counting = threading.Lock()
        self.attempts: dict[tuple[str, str, str], int] = {}  # (scope, outcome, reason or "" on success)
        self.retries: dict[tuple[str, str, str], int] = {}  # (scope, outcome, reason)
        self.give_ups: dict[tuple[str, str, str, str], int] = {}  # (scope, why, outcome, reason)
        self.throttles: dict[tuple[str, str], int] = {}  # (scope, reason)
        self.hedges: dict[str, int] = {}  # scope
        self.exhaustions: dict[str, int] = {}  # scope
        self.budget_exhaustions: dict[str, int] = {}  # scope
        self.transitions: dict[tuple[str, str], int] = {}  # (scope, new state)
        self.cuts: dict[tuple[str, str], int] = {}  # (scope, rule)
        self.holds: dict[tuple[str, str], int] = {}  # (scope, reason)
        self.sources: list[Source] = []
        self.lock = threading.Lock()
        self.delay = meter.create_histogram(
            "asyncretry.retry.delay", unit="s", description="The delay before each retry.",
            explicit_bucket_boundaries_advisory=DELAY_BUCKETS,
        )
        counters: list[tuple[str, str, str, Callable[[CallbackOptions], Iterable[Observation]]]] = [
            ("asyncretry.attempts", "{attempt}", "Attempts made, by how they ended.", self._count_attempts),
            ("asyncretry.retries", "{retry}", "Retries scheduled, by the failure that caused them.",
             self._count_retries),
            ("asyncretry.give_ups", "{call}", "Calls that ended in failure, by why retrying stopped.",
             self._count_give_ups),
            ("asyncretry.throttles", "{response}", "Responses classified as throttling.", self._count_throttles),
            ("asyncretry.hedges", "{attempt}", "Hedges sent: attempts sent while an earlier one still ran.",
             self._count_hedges),
            ("asyncretry.quota.exhaustions", "{episode}",
             "Times a retry quota ran dry (once per episode, until it can pay again).", self._count_exhaustions),
            ("asyncretry.budget.exhaustions", "{episode}",
             "Times a retry budget refused a retry (once per episode, until it allows one again).",
             self._count_budget_exhaustions),
            ("asyncretry.breaker.transitions", "{transition}", "Circuit breaker state changes, by the new state.",
             self._count_transitions),
            ("asyncretry.limiter.cuts", "{cut}", "Cuts of the adaptive limiter's fill rate, by the rule that decided.",
             self._count_cuts),
            ("asyncretry.limiter.holds", "{hold}",
             "Holds of the adaptive limiter that began or grew: a server announced its quota spent.",
             self._count_holds),
        ]
        gauges: list[tuple[str, str, str, Callable[[CallbackOptions], Iterable[Observation]]]] = [
            ("asyncretry.quota.available", "{token}", "Tokens in the retry quota.", self._observe_quotas),
            ("asyncretry.budget.available", "{retry}",
             "Retries the retry budget's window allows beyond those it holds.", self._observe_budgets),
            ("asyncretry.limiter.fill_rate", "{attempt}/s",
             "The adaptive rate limiter's fill rate, once a throttle made it limit.", self._observe_limiters),
            ("asyncretry.limiter.held", "s",
             "Seconds the adaptive rate limiter still holds every caller (0 when it does not).", self._observe_held),
            ("asyncretry.limiter.paced", "{attempt}/s",
             "The most attempts per second the pace a server announced allows, while one runs.", self._observe_paced),
            ("asyncretry.turns.waiting", "{call}",
             "Calls waiting for an earlier call of their caller at the scope's rate limits.", self._observe_turns),
            ("asyncretry.breaker.state", "1",
             "1 for the circuit breaker's current state, 0 for the others.", self._observe_breakers),
        ]
        for name, unit, description, callback in counters:
            meter.create_observable_counter(name, [callback], unit=unit, description=description)
        for name, unit, description, callback in gauges:
            meter.create_observable_gauge(name, [callback], unit=unit, description=description)

    def add(self, counts: dict[K, int], key: K) -> None:
        """Count one more under ``key`` in ``counts`` (one of the dicts above), under the lock."""
        with self.counting:
            counts[key] = counts.get(key, 0) + 1

    # -- counters: the totals so far, each with the attributes of its key
    def _totals(self, counts: dict[K, int]) -> list[tuple[K, int]]:
        with self.counting:
            return list(counts.items())

    def _count_attempts(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "asyncretry.outcome": outcome, "error.type": reason}
                        if reason else {**scope_attributes(scope), "asyncretry.outcome": outcome})
            for (scope, outcome, reason), n in self._totals(self.attempts)
        ]

    def _count_retries(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "asyncretry.outcome": outcome, "error.type": reason})
            for (scope, outcome, reason), n in self._totals(self.retries)
        ]

    def _count_give_ups(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {
                **scope_attributes(scope), "asyncretry.why": why, "asyncretry.outcome": outcome, "error.type": reason,
            })
            for (scope, why, outcome, reason), n in self._totals(self.give_ups)
        ]

    def _count_throttles(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "error.type": reason})
            for (scope, reason), n in self._totals(self.throttles)
        ]

    def _count_hedges(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, scope_attributes(scope)) for scope, n in self._totals(self.hedges)]

    def _count_exhaustions(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, scope_attributes(scope)) for scope, n in self._totals(self.exhaustions)]

    def _count_budget_exhaustions(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(n, scope_attributes(scope)) for scope, n in self._totals(self.budget_exhaustions)]

    def _count_transitions(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "asyncretry.breaker.state": state})
            for (scope, state), n in self._totals(self.transitions)
        ]

    def _count_cuts(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "asyncretry.limiter.rule": rule})
            for (scope, rule), n in self._totals(self.cuts)
        ]

    def _count_holds(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, {**scope_attributes(scope), "error.type": reason})
            for (scope, reason), n in self._totals(self.holds)
        ]

    # -- gauges: each callback reads a fresh snapshot of every observed object
    def _observe_quotas(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.available, a) for a, s in self._parts(options, QuotaStatistics)]

    def _observe_budgets(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.available, a) for a, s in self._parts(options, BudgetStatistics)]

    def _observe_limiters(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.fill_rate, a) for a, s in self._parts(options, LimiterStatistics) if s.enabled]

    def _observe_held(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.held, a) for a, s in self._parts(options, LimiterStatistics)]

    def _observe_paced(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.paced, a) for a, s in self._parts(options, LimiterStatistics) if s.paced is not None]

    def _observe_turns(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.waiting, a) for a, s in self._parts(options, TurnStatistics)]

    def _observe_breakers(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(1 if s.state is state else 0, {**a, "asyncretry.breaker.state": state.value})
            for a, s in self._parts(options, BreakerStatistics)
            for state in BreakerState
        ]

    def _parts(self, options: CallbackOptions, kind: type[T]) -> list[tuple[Attributes, T]]:
        """The snapshots of type ``kind`` among the observed objects, one per attribute set."""
        with self.lock:
            alive = [s for s in self.sources if not (s.runner is not None and s.runner.closed)]
            self.sources[:] = alive
        by_runner: dict[int | None, list[Source]] = {}  # one trip to each event loop per collection
        for source in alive:
            by_runner.setdefault(source.runner.key if source.runner is not None else None, []).append(source)
        found: list[tuple[Attributes, T]] = []
        seen: set[frozenset[tuple[str, Any]]] = set()
        for group in by_runner.values():
            for attributes, snapshot in _read(group, options):
                if isinstance(snapshot, kind):
                    key = frozenset(attributes.items())
                    if key not in seen:
                        seen.add(key)
                        found.append((attributes, snapshot))
        return found


def _read(group: list[Source], options: CallbackOptions) -> list[tuple[Attributes, Statistics]]:
    """Snapshot a group of sources that live on the same event loop, on that loop's thread."""
    runner = group[0].runner
    timeout = min(options.timeout_millis / 1000.0, max(s.timeout for s in group))

    def snapshot() -> list[tuple[Attributes, Statistics]]:
        parts: list[tuple[Attributes, Statistics]] = []
        for source in group:
            try:
                parts.extend(source.snapshot(timeout))
            except Exception:  # a broken object must not hide the others' metrics
                _log.exception("asyncretry.otel: reading the statistics of %r failed", source.target)
        return parts

    if runner is None:
        return snapshot()
    parts = runner.run(snapshot, timeout)
    if runner.closed:  # the loop is gone: so are the objects it ran
        for source in group:
            assert source.runner is not None
            source.runner.closed = True
    return parts or []


_METERS: weakref.WeakKeyDictionary[metrics.MeterProvider, Meters] = weakref.WeakKeyDictionary()
_METERS_LOCK = threading.Lock()


def meters_for(provider: metrics.MeterProvider) -> Meters:
    with _METERS_LOCK:
        meters = _METERS.get(provider)
        if meters is None:
            meters = _METERS[provider] = Meters(provider)
        return meters
