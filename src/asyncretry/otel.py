"""OpenTelemetry metrics and span events for asyncretry (the optional extra ``asyncretry[otel]``).

::

    from asyncretry import otel

    instrumentation = otel.instrument()    # the global MeterProvider; the events of every retrier
    instrumentation.observe(transport)     # gauges for its scopes; http.request.resend_count on spans

:func:`instrument` subscribes one listener to an event bus (the global one by default) and turns the
events into metrics, and each retry into a span event on the span that is current in the calling task
(events are emitted from inside the caller's task, so that is the caller's span). Gauges read live
state, so they need the objects: :meth:`Instrumentation.observe` registers a retrier, an httpx
transport, a quota, a limiter or a breaker.

Metrics (attribute ``asyncretry.scope`` everywhere; ``server.address`` and ``server.port`` too when the
scope is an origin such as ``https://api.example:443``, the httpx transports' default scope):

* ``asyncretry.attempts`` (counter, ``{attempt}``): ``asyncretry.outcome``; ``error.type`` if it failed.
* ``asyncretry.retries`` (counter, ``{retry}``): ``asyncretry.outcome``, ``error.type``.
* ``asyncretry.retry.delay`` (histogram, ``s``): ``asyncretry.outcome``, ``asyncretry.server_directed``.
* ``asyncretry.give_ups`` (counter, ``{call}``): ``asyncretry.why``, ``asyncretry.outcome``, ``error.type``.
* ``asyncretry.throttles`` (counter, ``{response}``): ``error.type``.
* ``asyncretry.hedges`` (counter, ``{attempt}``): hedges sent (attempts sent while an earlier attempt of the
  same call still ran, :class:`~asyncretry.HedgingConfig`); they are counted in ``asyncretry.attempts`` too
  once they end (a hedge cancelled because another attempt answered first ends in no outcome).
* ``asyncretry.quota.exhaustions`` (counter, ``{episode}``).
* ``asyncretry.budget.exhaustions`` (counter, ``{episode}``): times a retry budget refused a retry (once per
  episode, until it allows one again).
* ``asyncretry.breaker.transitions`` (counter, ``{transition}``): ``asyncretry.breaker.state``, the new state.
* ``asyncretry.limiter.cuts`` (counter, ``{cut}``): ``asyncretry.limiter.rule``, the rule that cut the adaptive
  limiter's fill rate (:attr:`~asyncretry.LimiterRateChanged.cut`, :data:`~asyncretry.LimiterRule`).
* ``asyncretry.quota.available`` (gauge, ``{token}``), observed objects.
* ``asyncretry.budget.available`` (gauge, ``{retry}``), observed objects: the retries the budget's window
  allows beyond those it holds (a retry is allowed while it is >= 1).
* ``asyncretry.limiter.fill_rate`` (gauge, ``{attempt}/s``), observed objects, once the limiter limits.
* ``asyncretry.turns.waiting`` (gauge, ``{call}``), observed retriers' and transports' scopes, once a call with
  a caller has waited there: the calls waiting for their caller's turn (for its earlier calls) at the rate limits.
* ``asyncretry.breaker.state`` (gauge, ``1``), observed objects: ``asyncretry.breaker.state``, 1 for the
  current state and 0 for the others.

The counters are asynchronous (pre-aggregated) counters: counting costs a dict update, not an SDK call.
``error.type`` is the classification reason: an exception's class name, an AWS error code or
``HTTP <status>[ <code>]`` (a few values per service, never a message). Gauges read from an observed
retrier or transport also carry ``asyncretry.retrier`` (its name).

Span events on the current span, when it is recording: ``asyncretry.retry`` for each retry
(``asyncretry.attempt``: the attempt that failed, ``asyncretry.delay``, ``asyncretry.outcome``,
``error.type``, ``asyncretry.server_directed``, ``asyncretry.scope``) and ``asyncretry.give_up`` when a
call gives up after retrying or is refused (``asyncretry.why``, ``asyncretry.attempts``,
``asyncretry.outcome``, ``error.type``, ``asyncretry.elapsed``, ``asyncretry.scope``), and
``asyncretry.hedge`` for each hedge (``asyncretry.attempt``: the hedge's number, ``asyncretry.hedging``: the
attempt still running, ``asyncretry.delay``, ``asyncretry.scope``). For an observed httpx transport, a
request that was resent (retried or hedged) sets ``http.request.resend_count`` on the current span (the
OpenTelemetry HTTP semantic conventions): the number of sends after the first, never lowered by an attempt
that ends later than a hedge sent after it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

try:
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import CallbackOptions, Observation
except ImportError as error:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "asyncretry.otel needs the OpenTelemetry API: install the extra with pip install 'asyncretry[otel]'"
    ) from error

from ._engine._retrier import RetrierStatistics
from ._events import (
    GLOBAL_EVENTS,
    AttemptFinished,
    BreakerStateChanged,
    BudgetExhausted,
    Event,
    EventBus,
    GaveUp,
    HedgeSent,
    LimiterRateChanged,
    QuotaExhausted,
    RetryScheduled,
    Throttled,
)
from ._otel_sources import (
    CACHE_LIMIT,
    PARTS,
    Attributes,
    Source,
    Statistics,
    current_runner,
    retrier_of,
    scope_attributes,
)
from ._otel_spans import resend_count, with_target
from ._primitives._breaker import BreakerState, BreakerStatistics
from ._primitives._budget import BudgetStatistics
from ._primitives._limiter import LimiterStatistics
from ._primitives._quota import QuotaStatistics
from ._primitives._turns import TurnStatistics
from ._validate import check_bool, check_instance, check_seconds

__all__ = ["Instrumentation", "instrument"]

_log = logging.getLogger("asyncretry.otel")
T = TypeVar("T")
K = TypeVar("K")

SCHEMA_URL = "https://opentelemetry.io/schemas/1.26.0"
"""The semantic conventions version whose attribute names (``error.type``, ``server.address`` ...) are used."""

DELAY_BUCKETS = (0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
"""Bucket boundaries advised for ``asyncretry.retry.delay`` (seconds): backoff runs from milliseconds
to AWS's 20 s cap, server-directed delays up to the policy's ``max_server_delay`` (60 s by default)."""



class _Meters:
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
        ]
        for name, unit, description, callback in counters:
            meter.create_observable_counter(name, [callback], unit=unit, description=description)
        meter.create_observable_gauge(
            "asyncretry.quota.available", [self._observe_quotas], unit="{token}",
            description="Tokens in the retry quota.",
        )
        meter.create_observable_gauge(
            "asyncretry.budget.available", [self._observe_budgets], unit="{retry}",
            description="Retries the retry budget's window allows beyond those it holds.",
        )
        meter.create_observable_gauge(
            "asyncretry.limiter.fill_rate", [self._observe_limiters], unit="{attempt}/s",
            description="The adaptive rate limiter's fill rate, once a throttle made it limit.",
        )
        meter.create_observable_gauge(
            "asyncretry.turns.waiting", [self._observe_turns], unit="{call}",
            description="Calls waiting for an earlier call of their caller at the scope's rate limits.",
        )
        meter.create_observable_gauge(
            "asyncretry.breaker.state", [self._observe_breakers], unit="1",
            description="1 for the circuit breaker's current state, 0 for the others.",
        )

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

    # -- gauges: each callback reads a fresh snapshot of every observed object
    def _observe_quotas(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.available, a) for a, s in self._parts(options, QuotaStatistics)]

    def _observe_budgets(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.available, a) for a, s in self._parts(options, BudgetStatistics)]

    def _observe_limiters(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(s.fill_rate, a) for a, s in self._parts(options, LimiterStatistics) if s.enabled]

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


_METERS: weakref.WeakKeyDictionary[metrics.MeterProvider, _Meters] = weakref.WeakKeyDictionary()
_METERS_LOCK = threading.Lock()


def _meters_for(provider: metrics.MeterProvider) -> _Meters:
    with _METERS_LOCK:
        meters = _METERS.get(provider)
        if meters is None:
            meters = _METERS[provider] = _Meters(provider)
        return meters


class Instrumentation:
    """The listener :func:`instrument` subscribed, and the objects observed for the gauges.

    Use :meth:`observe` to add objects, :meth:`uninstrument` (or a ``with`` block) to stop.
    """

    def __init__(self, meters: _Meters, bus: EventBus, *, spans: bool, collect_timeout: float) -> None:
        self._meters = meters
        self._bus = bus
        self._spans = spans
        self._collect_timeout = collect_timeout
        self._delay_attributes: dict[tuple[str, str, bool], Attributes] = {}
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            AttemptFinished: self._attempt_finished,
            RetryScheduled: self._retry_scheduled,
            GaveUp: self._gave_up,
            Throttled: self._throttled,
            HedgeSent: self._hedge_sent,
            QuotaExhausted: self._quota_exhausted,
            BudgetExhausted: self._budget_exhausted,
            BreakerStateChanged: self._breaker_changed,
            LimiterRateChanged: self._rate_changed,
        }
        self._undo: list[Callable[[], None]] = [bus.subscribe(self._on_event)]
        self._active = True

    # ----------------------------------------------------------------------------- public API
    def observe(
        self, target: object, *, attributes: dict[str, str | bool | int | float] | None = None
    ) -> Callable[[], None]:
        """Report an object's live state in the gauges (quota available, limiter fill rate, calls waiting in
        turn, breaker state).

        Call it from the event loop that uses the object (in an application's startup, say): metric
        readers collect from their own threads, and the object is then read on its loop's thread.
        The synchronous :class:`~asyncretry.httpx.RetryTransport` is read in the collecting thread under
        its own lock, and so is anything observed outside an event loop (without a lock).

        Args:
            target: a :class:`~asyncretry.Retrier` (all its scopes, as they come and go), an
                :class:`~asyncretry.httpx.AsyncRetryTransport` or :class:`~asyncretry.httpx.RetryTransport`
                (its retrier's scopes; requests it resends also set ``http.request.resend_count`` on the
                current span), a :class:`~asyncretry.RetryQuota`, an :class:`~asyncretry.AdaptiveRateLimiter`,
                a :class:`~asyncretry.CircuitBreaker` or a :class:`~asyncretry.RetryBudget` (or its Redis twin).
            attributes: extra attributes for its gauges, to tell apart two retriers whose scopes share keys.

        Returns:
            A function that stops observing it.

        Raises:
            TypeError: ``target`` is none of these.
            RuntimeError: the instrumentation was uninstrumented.
        """
        if not self._active:
            raise RuntimeError("this instrumentation was uninstrumented; call asyncretry.otel.instrument() again")
        retrier, http, lock = retrier_of(target)
        statistics = retrier.statistics if retrier is not None else getattr(target, "statistics", None)
        if isinstance(target, type) or not callable(statistics) or not isinstance(
            statistics(), (RetrierStatistics, *PARTS)
        ):
            raise TypeError(
                "target must be a Retrier, an asyncretry.httpx transport, a RetryQuota, an AdaptiveRateLimiter, "
                f"a CircuitBreaker or a RetryBudget, got {target!r}"
            )
        runner = current_runner() if lock is None else None
        source = Source(target, statistics, dict(attributes or {}), runner, self._collect_timeout, self, lock)
        meters = self._meters
        with meters.lock:
            meters.sources.append(source)
        undo_http: Callable[[], None] | None = None
        if http and self._spans and retrier is not None:
            undo_http = retrier.events.subscribe(resend_count)

        def unobserve() -> None:
            nonlocal undo_http
            with meters.lock:
                if source in meters.sources:
                    meters.sources.remove(source)
            if undo_http is not None:
                undo_http()
                undo_http = None

        self._undo.append(unobserve)
        return unobserve

    def uninstrument(self) -> None:
        """Unsubscribe from the bus and stop observing every object; safe to call twice."""
        self._active = False
        undo, self._undo = self._undo, []
        for step in undo:
            step()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.uninstrument()

    def __repr__(self) -> str:
        state = "active" if self._active else "uninstrumented"
        observed = sum(1 for s in self._meters.sources if s.owner is self)
        return f"<asyncretry.otel.Instrumentation {state} bus={self._bus!r} observed={observed} spans={self._spans}>"

    # --------------------------------------------------------------------------------- events
    def _on_event(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _attempt_finished(self, event: AttemptFinished) -> None:
        outcome = event.outcome
        key = (event.source, outcome, "" if outcome == "success" else event.reason)
        meters = self._meters
        counts = meters.attempts
        with meters.counting:
            counts[key] = counts.get(key, 0) + 1

    def _retry_scheduled(self, event: RetryScheduled) -> None:
        source, outcome, reason, directed = event.source, event.outcome, event.reason, event.server_directed
        meters = self._meters
        key = (source, outcome, reason)
        counts = meters.retries
        with meters.counting:
            counts[key] = counts.get(key, 0) + 1
        attributes = self._delay_attributes.get((source, outcome, directed))
        if attributes is None:
            if len(self._delay_attributes) >= CACHE_LIMIT:
                self._delay_attributes.clear()
            attributes = self._delay_attributes[(source, outcome, directed)] = {
                **scope_attributes(source), "asyncretry.outcome": outcome, "asyncretry.server_directed": directed,
            }
        meters.delay.record(event.delay, attributes)
        if self._spans:
            span = trace.get_current_span()
            if span.is_recording():
                span.add_event("asyncretry.retry", with_target(event.target, {
                    "asyncretry.scope": source,
                    "asyncretry.attempt": event.attempt,
                    "asyncretry.delay": event.delay,
                    "asyncretry.outcome": outcome,
                    "error.type": reason,
                    "asyncretry.server_directed": directed,
                }))

    def _gave_up(self, event: GaveUp) -> None:
        source, why, outcome, reason = event.source, event.why, event.outcome, event.reason
        meters = self._meters
        key = (source, why, outcome, reason)
        counts = meters.give_ups
        with meters.counting:
            counts[key] = counts.get(key, 0) + 1
        # A first attempt that was simply final (an HTTP 404) is the caller's error, not a retry story.
        if self._spans and event.log_level > logging.DEBUG:
            span = trace.get_current_span()
            if span.is_recording():
                span.add_event("asyncretry.give_up", with_target(event.target, {
                    "asyncretry.scope": source,
                    "asyncretry.why": why,
                    "asyncretry.attempts": event.attempts,
                    "asyncretry.outcome": outcome,
                    "error.type": reason,
                    "asyncretry.elapsed": event.elapsed,
                }))

    def _throttled(self, event: Throttled) -> None:
        meters = self._meters
        key = (event.source, event.reason)
        counts = meters.throttles
        with meters.counting:
            counts[key] = counts.get(key, 0) + 1

    def _hedge_sent(self, event: HedgeSent) -> None:
        meters = self._meters
        counts = meters.hedges
        with meters.counting:
            counts[event.source] = counts.get(event.source, 0) + 1
        if self._spans:
            span = trace.get_current_span()
            if span.is_recording():
                span.add_event("asyncretry.hedge", with_target(event.target, {
                    "asyncretry.scope": event.source,
                    "asyncretry.attempt": event.attempt,
                    "asyncretry.hedging": event.hedging,
                    "asyncretry.delay": event.delay,
                }))

    def _quota_exhausted(self, event: QuotaExhausted) -> None:
        meters = self._meters
        counts = meters.exhaustions
        with meters.counting:
            counts[event.source] = counts.get(event.source, 0) + 1

    def _budget_exhausted(self, event: BudgetExhausted) -> None:
        meters = self._meters
        counts = meters.budget_exhaustions
        with meters.counting:
            counts[event.source] = counts.get(event.source, 0) + 1

    def _breaker_changed(self, event: BreakerStateChanged) -> None:
        meters = self._meters
        key = (event.source, event.new_state)
        counts = meters.transitions
        with meters.counting:
            counts[key] = counts.get(key, 0) + 1

    def _rate_changed(self, event: LimiterRateChanged) -> None:
        if event.cut:
            meters = self._meters
            key = (event.source, event.rule)
            counts = meters.cuts
            with meters.counting:
                counts[key] = counts.get(key, 0) + 1


def instrument(
    *,
    meter_provider: metrics.MeterProvider | None = None,
    bus: EventBus | None = None,
    spans: bool = True,
    collect_timeout: float | timedelta = 1.0,
) -> Instrumentation:
    """Record asyncretry's events as OpenTelemetry metrics and span events.

    Spans are not created: retries become events on whatever span is current in the calling task
    (an HTTP client span, a request handler's span, your own), from whichever tracer provider made it.

    Args:
        meter_provider: where the metrics go; default: the global one
            (:func:`opentelemetry.metrics.get_meter_provider`, looked up now).
        bus: the events to record; default :data:`~asyncretry.GLOBAL_EVENTS`, which hears every
            retrier, quota, limiter and breaker that has no bus of its own outside the tree.
        spans: add span events (and ``http.request.resend_count``) to the current span; default True.
        collect_timeout: the longest a metric reader's collection waits for an observed object's event
            loop to hand over a snapshot, seconds (> 0) or a ``timedelta``; default 1 s. The
            collection's own timeout applies too.

    Returns:
        The :class:`Instrumentation`: :meth:`~Instrumentation.observe` objects for the gauges,
        :meth:`~Instrumentation.uninstrument` to stop.

    Raises:
        ValueError: ``collect_timeout`` is not a positive number of seconds.
    """
    timeout = check_seconds("collect_timeout", collect_timeout, low_open=True)
    check_bool("spans", spans)
    bus = GLOBAL_EVENTS if bus is None else check_instance("bus", bus, EventBus)
    if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
        raise TypeError(f"meter_provider must be an OpenTelemetry MeterProvider or None, got {meter_provider!r}")
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    return Instrumentation(_meters_for(provider), bus, spans=spans, collect_timeout=timeout)
