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
* ``asyncretry.limiter.holds`` (counter, ``{hold}``): ``error.type``, what announced the quota spent; holds of
  the adaptive limiter that began or grew (:class:`~asyncretry.LimiterHeld`).
* ``asyncretry.quota.available`` (gauge, ``{token}``), observed objects.
* ``asyncretry.budget.available`` (gauge, ``{retry}``), observed objects: the retries the budget's window
  allows beyond those it holds (a retry is allowed while it is >= 1).
* ``asyncretry.limiter.fill_rate`` (gauge, ``{attempt}/s``), observed objects, once the limiter limits.
* ``asyncretry.limiter.held`` (gauge, ``s``), observed objects: the seconds the limiter still holds (0 when
  it does not).
* ``asyncretry.limiter.paced`` (gauge, ``{attempt}/s``), observed objects, while a pace a server announced
  runs: the most attempts per second it allows.
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
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Any

try:
    from opentelemetry import metrics, trace
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
    LimiterHeld,
    LimiterRateChanged,
    QuotaExhausted,
    RetryScheduled,
    Throttled,
)
from ._otel_meters import DELAY_BUCKETS as DELAY_BUCKETS  # the buckets asyncretry.retry.delay advises
from ._otel_meters import SCHEMA_URL as SCHEMA_URL
from ._otel_meters import Meters, meters_for
from ._otel_sources import (
    CACHE_LIMIT,
    PARTS,
    Attributes,
    Source,
    current_runner,
    retrier_of,
    scope_attributes,
)
from ._otel_spans import resend_count, with_target
from ._validate import check_bool, check_instance, check_seconds

__all__ = ["Instrumentation", "instrument"]


class Instrumentation:
    """The listener :func:`instrument` subscribed, and the objects observed for the gauges.

    Use :meth:`observe` to add objects, :meth:`uninstrument` (or a ``with`` block) to stop.
    """

    def __init__(self, meters: Meters, bus: EventBus, *, spans: bool, collect_timeout: float) -> None:
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
            LimiterHeld: self._held,
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
        meters.add(meters.attempts, key)

    def _retry_scheduled(self, event: RetryScheduled) -> None:
        source, outcome, reason, directed = event.source, event.outcome, event.reason, event.server_directed
        meters = self._meters
        meters.add(meters.retries, (source, outcome, reason))
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
        meters.add(meters.give_ups, (source, why, outcome, reason))
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
        meters.add(meters.throttles, (event.source, event.reason))

    def _hedge_sent(self, event: HedgeSent) -> None:
        meters = self._meters
        meters.add(meters.hedges, event.source)
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
        meters.add(meters.exhaustions, event.source)

    def _budget_exhausted(self, event: BudgetExhausted) -> None:
        meters = self._meters
        meters.add(meters.budget_exhaustions, event.source)

    def _breaker_changed(self, event: BreakerStateChanged) -> None:
        meters = self._meters
        meters.add(meters.transitions, (event.source, event.new_state))

    def _rate_changed(self, event: LimiterRateChanged) -> None:
        if event.cut:
            meters = self._meters
            meters.add(meters.cuts, (event.source, event.rule))

    def _held(self, event: LimiterHeld) -> None:
        meters = self._meters
        meters.add(meters.holds, (event.source, event.reason))


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
    return Instrumentation(meters_for(provider), bus, spans=spans, collect_timeout=timeout)
