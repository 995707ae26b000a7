"""Typed telemetry events and the buses that deliver them.

Every stateful object emits frozen event dataclasses to an :class:`EventBus`. Emitters check
``bus.wants(EventType)`` first, so an event costs nothing (not even its construction) when nobody
listens and the ``asyncretry`` logger would drop it. Buses form a tree: a retrier's bus forwards to the
global bus (:data:`GLOBAL_EVENTS`), which also writes each event to the ``asyncretry`` logger at the
event's level with the event's fields as structured ``extra`` data (``asyncretry_<field>``, plus
``asyncretry_event``, the class name).

Levels follow one rule: what the operator should act on is a WARNING (a call that retries did not
save, the retry quota running dry, a circuit opening), what explains it is INFO (each retry, a
throttle cutting the adaptive rate, a recovery), and per-attempt detail is DEBUG. A call that failed at
its first attempt with an error that is not retried (every HTTP 404, say) is DEBUG: nothing was retried
and the caller sees the error. Some classes therefore decide the level per event (:attr:`Event.log_level`).

A listener is a plain callable; an exception it raises never reaches the emitting call: it is logged at
ERROR with its traceback on the ``asyncretry`` logger, and printed to stderr (Python's last-resort
handler) when logging is not configured, so that a broken listener is never silent.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Literal

from ._breaker_state import BreakerState

__all__ = [
    "GLOBAL_EVENTS",
    "AttemptFinished",
    "BackendLost",
    "BackendRecovered",
    "BreakerStateChanged",
    "BudgetExhausted",
    "BudgetRestored",
    "Event",
    "EventBus",
    "GaveUp",
    "HedgeSent",
    "Listener",
    "LimiterHeld",
    "LimiterPaced",
    "LimiterRateChanged",
    "LimiterRule",
    "QuotaExhausted",
    "QuotaRestored",
    "RetryScheduled",
    "ScopeEvicted",
    "Throttled",
]

logger = logging.getLogger("asyncretry")
logger.addHandler(logging.NullHandler())


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event.

    Attributes:
        time: when it happened, on the emitter's clock (seconds).
        source: the name of the object or scope that emitted it.
        level: the highest ``logging`` level an event of this class is logged at (a class attribute).
            :meth:`EventBus.wants` compares it with the logger's level, so that the check stays cheap.
    """

    level: ClassVar[int] = logging.DEBUG

    time: float
    source: str

    @property
    def log_level(self) -> int:
        """The ``logging`` level of this event (never above the class's :attr:`level`)."""
        return self.level

    def message(self) -> str:
        """A one-line human description, used for the log record."""
        fields = ", ".join(
            f"{f.name}={_shown(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if f.name not in ("time", "source") and not _unset(self, f)
        )
        return f"{type(self).__name__} [{self.source}] {fields}"


def _shown(value: object) -> str:
    """A field's value for a log line: floats to 4 significant digits (``delay=0.01218``), enums by value
    (the record's ``extra`` data keeps every value as it is)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Enum):
        return repr(value.value)
    return repr(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFinished(Event):
    """One attempt ended; ``outcome`` is the classification (``success``, ``transient``, ...). DEBUG.

    Attributes:
        attempt: the attempt's number (1 for the first).
        outcome: the :class:`~asyncretry.OutcomeKind` value.
        reason: why it was classified so (an exception's class name, an error code, ``"HTTP 503"``).
        duration: seconds the attempt took.
        target: what the call is, when an integration says (``"GET https://host:443/path"``: the httpx
            transport gives the method and the URL without query string or credentials).
    """

    attempt: int
    outcome: str
    reason: str
    duration: float
    target: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduled(Event):
    """A retry will start after ``delay`` seconds (``attempt`` is the number of the attempt that failed). INFO.

    Attributes:
        attempt: the number of the attempt that failed.
        delay: seconds until the retry.
        outcome: how that attempt failed (an :class:`~asyncretry.OutcomeKind` value).
        reason: why it was classified so.
        server_directed: whether ``delay`` came from the server (``Retry-After`` and the like).
        target: what the call is, as in :class:`AttemptFinished`.
    """

    level: ClassVar[int] = logging.INFO

    attempt: int
    delay: float
    outcome: str
    reason: str
    server_directed: bool = False
    target: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GaveUp(Event):
    """The call ended in failure after ``attempts`` attempts; ``why`` says what stopped it.

    Logged at WARNING when retries were made and the call still failed, or when a deadline cut the
    retries short; at INFO when the retry quota or the circuit breaker refused (their own
    :class:`QuotaExhausted` / :class:`BreakerStateChanged` warn once per episode, not once per call);
    at DEBUG when the first attempt was final (``not_retryable``, or ``max_attempts`` with retries
    disabled): nothing was retried and the caller sees the error.

    Attributes:
        attempts: attempts made (0 when refused before the first one).
        why: ``not_retryable``, ``max_attempts``, ``quota``, ``breaker``, ``rate_limit``, ``deadline``
            or ``server_delay`` (a server-directed delay longer than the time left).
        outcome: how the last attempt ended (an :class:`~asyncretry.OutcomeKind` value), ``"none"`` if
            no attempt was made.
        reason: why the last attempt was classified so; the refusing error's class name if no
            attempt was made.
        elapsed: seconds since the call started.
        target: what the call is, as in :class:`AttemptFinished`.
    """

    level: ClassVar[int] = logging.WARNING

    attempts: int
    why: str
    outcome: str
    reason: str
    elapsed: float
    target: str | None = None

    @property
    def log_level(self) -> int:
        """DEBUG for a first attempt that was final, INFO for quota, budget and breaker refusals, else WARNING."""
        why = self.why
        if why == "quota" or why == "breaker" or why == "budget":
            return logging.INFO
        if self.attempts <= 1 and (why == "not_retryable" or why == "max_attempts"):
            return logging.DEBUG
        return logging.WARNING


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgeSent(Event):
    """A hedged call sent attempt ``attempt`` while attempt ``hedging`` had not answered after ``delay`` s. DEBUG.

    Hedges are routine by design (a p95 delay hedges about 5% of calls, within the hedge budget): the
    ``asyncretry.hedges`` metric counts them; the log line is detail.

    Attributes:
        attempt: the hedge's attempt number.
        hedging: the number of the attempt it hedges (the first attempt of the round, still running).
        delay: seconds since that attempt began.
        target: what the call is, when an integration says (``"GET https://host:443/path"``).
    """

    attempt: int
    hedging: int
    delay: float
    target: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaExhausted(Event):
    """The retry quota could not pay for a retry: retries stop until it refills. WARNING, once per episode.

    Attributes:
        available: tokens left.
        cost: tokens the refused retry needed.
    """

    level: ClassVar[int] = logging.WARNING

    available: float
    cost: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaRestored(Event):
    """The retry quota can pay for retries again after having been exhausted. INFO.

    Attributes:
        available: tokens in the quota now.
    """

    level: ClassVar[int] = logging.INFO

    available: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetExhausted(Event):
    """The retry budget refused a retry: retries stop until requests or time make room. WARNING, once per episode.

    Attributes:
        requests: requests (calls) counted in the budget's window.
        retries: retries counted in the window.
        allowance: retries the window allows (``ratio * requests + min_retries_per_second * window``).
    """

    level: ClassVar[int] = logging.WARNING

    requests: int
    retries: int
    allowance: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetRestored(Event):
    """The retry budget allows retries again after having refused one. INFO.

    Attributes:
        available: retries the window allows beyond those it holds (at least 1).
    """

    level: ClassVar[int] = logging.INFO

    available: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Throttled(Event):
    """A response was classified as throttling (the adaptive limiter slows down on it). DEBUG.

    Each throttled call also reports a :class:`RetryScheduled` or :class:`GaveUp`, and the limiter's
    rate cut a :class:`LimiterRateChanged` at INFO: this per-response event is detail.

    Attributes:
        reason: what made it a throttle (``"HTTP 429"``, an error code ...).
    """

    reason: str


LimiterRule = Literal[
    "start_up",
    "repeat_cut",
    "measure",
    "fleet_event_rate",
    "few_successes",
    "restart_below_capacity",
    "outage",
    "recovery",
    "probe",
    "fleet_climb",
    "start_from_served",
    "decrease",
    "increase",
    "cubic_throttle",
    "cubic_success",
]
"""The rule of an adaptive profile that set the limiter's fill rate (:attr:`LimiterRateChanged.rule`).

* ``"asyncretry"`` and ``"independent"``: a throttle's step that decided (``start_up``, ``repeat_cut``,
  ``measure``, ``fleet_event_rate``, ``few_successes``, ``restart_below_capacity``), ``outage`` at the
  start and at the end of an outage, and the growth between events: ``recovery`` back to the estimate,
  ``probe`` above it, ``fleet_climb`` for a fleet client.
* ``"fair"``: ``start_from_served``, ``decrease`` and ``increase``.
* ``"aws"``: ``cubic_throttle`` and ``cubic_success``.

The table in the observability guide says what each means.
"""

_GROWTH: frozenset[LimiterRule] = frozenset({"recovery", "probe", "fleet_climb", "increase", "cubic_success"})
"""The rules of the growth between events: a rate they lower was capped by what the client really sent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterRateChanged(Event):
    """The adaptive limiter's fill rate changed (requests per second).

    A cut (:attr:`cut`: after a throttle, or at an outage) is INFO; the growth after each success is DEBUG
    (it changes the rate on almost every response).

    Attributes:
        old_rate: the fill rate before, tokens (attempts) per second.
        new_rate: the fill rate now.
        measured_rate: the smoothed send rate, requests per second.
        throttled: whether a throttle caused the change.
        enabled: whether the limiter limits (it does from the first throttle on).
        rule: the rule that set the new rate (:data:`LimiterRule`); for a limiter shared through Redis,
            the last one that set it in the round trip that reported the change.
    """

    level: ClassVar[int] = logging.INFO

    old_rate: float
    new_rate: float
    measured_rate: float
    throttled: bool
    enabled: bool
    rule: LimiterRule

    @property
    def log_level(self) -> int:
        """INFO for a cut (after a throttle, or at an outage), DEBUG for the growth in between."""
        return logging.INFO if self.cut else logging.DEBUG

    @property
    def cut(self) -> bool:
        """Whether the rate was cut: lowered by a throttle's rule or an outage. Growth lowers it too when it
        is capped by ``max_rate_growth`` times what the client really sent (a client that sends less than its
        rate allows); that is not a cut."""
        return self.new_rate < self.old_rate and self.rule not in _GROWTH


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterHeld(Event):
    """A limiter admits nothing until the quota a server announced is fresh again.

    The server said that none of its quota is left until a reset (``RateLimit: "default";r=0;t=30``,
    ``X-RateLimit-Remaining: 0`` with its reset); every task that shares the limiter waits for it.
    Emitted when a hold begins or grows longer (an announcement that ends sooner changes nothing).

    Attributes:
        seconds: how long the limiter holds from now (the reset, cut to the policy's ``max_server_delay``,
            and at most twice the soonest the reset may come, given how the server rounded it, unless the
            server says a window at least twice that rounding).
        reason: the response that announced it (``"HTTP 429"``, ``"HTTP 200"`` ...).
    """

    level: ClassVar[int] = logging.INFO

    seconds: float
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterPaced(Event):
    """A limiter sends no faster than the pace a server announced for its quota (``q`` per ``w`` of a 1-s
    window announced in whole seconds, which cannot be waited for). Emitted when a pace begins or its rate
    changes; an answer that announces the same pace again only makes it last longer.

    Attributes:
        rate: the most attempts per second, from now on for a minute.
        reason: the response that announced it (``"HTTP 200"``, ``"HTTP 429"`` ...).
    """

    level: ClassVar[int] = logging.INFO

    rate: float
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerStateChanged(Event):
    """The circuit breaker moved from ``old_state`` to ``new_state``.

    WARNING when the circuit opens (or is isolated by hand), INFO when it half-opens or closes again.

    Attributes:
        old_state: the :class:`~asyncretry.BreakerState` before (a ``str`` enum: it also equals ``"open"`` ...).
        new_state: the state now.
        reason: what made it move (``"3 consecutive failures"``, ``"2 probes succeeded"`` ...).
        break_duration: how long it stays open, seconds; ``None`` unless it opened.

    Raises:
        ValueError: a state that is not a :class:`~asyncretry.BreakerState` value.
    """

    level: ClassVar[int] = logging.WARNING

    old_state: BreakerState
    new_state: BreakerState
    reason: str
    break_duration: float | None = None

    def __post_init__(self) -> None:
        # Breakers kept on a server report their states as strings: every event carries the enum.
        object.__setattr__(self, "old_state", BreakerState(self.old_state))
        object.__setattr__(self, "new_state", BreakerState(self.new_state))

    @property
    def log_level(self) -> int:
        """WARNING when opening or isolated, INFO otherwise."""
        return logging.WARNING if self.new_state in ("open", "isolated") else logging.INFO


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeEvicted(Event):
    """An idle scope (its quota, limiter and breaker) was evicted to bound memory. DEBUG.

    Attributes:
        idle_for: seconds since the scope was last used.
    """

    idle_for: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendLost(Event):
    """A shared-state backend could not be reached; ``fallback`` says what the object does meanwhile.

    Attributes:
        error: why the backend could not be reached.
        fallback: what the object does meanwhile.
        share: the fraction of the shared limit this process takes while it holds the limit alone (a
            fleet rate limit's fallback: ``1 / fleet_size``); ``None`` when the fallback does not share.
        fleet_size: the processes assumed to share the limit (the fleet last seen); ``None`` when unknown.
    """

    level: ClassVar[int] = logging.WARNING

    error: str
    fallback: str
    share: float | None = None
    fleet_size: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendRecovered(Event):
    """A shared-state backend answers again; shared state is used again."""

    level: ClassVar[int] = logging.INFO

    down_for: float


Listener = Callable[[Event], None]

_LISTENING = [0]  # listeners subscribed on all buses together: zero makes wants() one logger check


class EventBus:
    """Delivers events to its listeners, then to its parent bus.

    Args:
        parent: the bus that also receives every event; defaults to :data:`GLOBAL_EVENTS`.
            The global bus itself has no parent and writes events to the ``asyncretry`` logger.
    """

    __slots__ = ("_listeners", "_log", "_parent")

    def __init__(self, *, parent: EventBus | None = None, _root: bool = False) -> None:
        if parent is not None and not isinstance(parent, EventBus):
            raise TypeError(f"parent must be an EventBus or None, got {parent!r} ({type(parent).__name__})")
        self._listeners: tuple[Listener, ...] = ()
        self._parent = None if _root else (parent if parent is not None else GLOBAL_EVENTS)
        self._log = _root

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns a function that removes it again."""
        self._listeners = (*self._listeners, listener)
        _LISTENING[0] += 1

        def unsubscribe() -> None:
            before = len(self._listeners)
            self._listeners = tuple(x for x in self._listeners if x is not listener)
            _LISTENING[0] -= before - len(self._listeners)

        return unsubscribe

    def wants(self, event_type: type[Event]) -> bool:
        """Whether an event of this type could reach anyone (a listener, or the logger at the class's level)."""
        if not _LISTENING[0]:  # no bus anywhere has a listener: only the logger can want it
            return logger.isEnabledFor(event_type.level)
        bus: EventBus | None = self
        while bus is not None:
            if bus._listeners:
                return True
            if bus._parent is None:
                return bus._log and logger.isEnabledFor(event_type.level)
            bus = bus._parent
        return False

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every listener of this bus and its ancestors; never raises."""
        bus: EventBus | None = self
        while bus is not None:
            for listener in bus._listeners:
                try:
                    listener(event)
                except Exception:
                    _listener_failed(listener, event)
            if bus._log:
                level = event.log_level
                if logger.isEnabledFor(level):
                    logger.log(level, "%s", event.message(), extra=_extra(event))
            bus = bus._parent

    def __repr__(self) -> str:
        return f"<EventBus listeners={len(self._listeners)} root={self._parent is None}>"


def _unset(event: Event, field: dataclasses.Field[Any]) -> bool:
    """An optional field left at ``None`` (a call without a target): not worth a word in a log line."""
    return field.default is None and getattr(event, field.name) is None


def _listener_failed(listener: Listener, event: Event) -> None:
    """Log a listener's exception at ERROR with its traceback, visibly even when logging is not configured.

    The ``asyncretry`` logger carries a :class:`logging.NullHandler` (so that its INFO and WARNING events
    stay quiet until an application configures logging), which also keeps Python's last-resort handler
    from printing anything. A broken listener is a bug to fix, not telemetry: when no real handler would
    receive the record, it goes to :data:`logging.lastResort` (stderr) as it would in a library without the
    NullHandler. The emitting call is never affected.
    """
    if not logger.isEnabledFor(logging.ERROR):
        return  # the application turned the asyncretry logger down on purpose
    record = logger.makeRecord(
        logger.name, logging.ERROR, __file__, 0, "asyncretry event listener %r failed on %r", (listener, event),
        sys.exc_info(),
    )
    logger.handle(record)
    last_resort = logging.lastResort
    if last_resort is not None and not _has_real_handler(logger) and record.levelno >= last_resort.level:
        last_resort.handle(record)


def _has_real_handler(start: logging.Logger) -> bool:
    """Whether a record logged on ``start`` reaches a handler other than a NullHandler (as callHandlers walks)."""
    current: logging.Logger | None = start
    while current is not None:
        if any(not isinstance(handler, logging.NullHandler) for handler in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def _extra(event: Event) -> dict[str, Any]:
    fields = {f"asyncretry_{f.name}": getattr(event, f.name) for f in dataclasses.fields(event) if not _unset(event, f)}
    fields["asyncretry_event"] = type(event).__name__
    return fields


GLOBAL_EVENTS = EventBus(_root=True)
"""The process-wide bus: every bus forwards here, and it writes to the ``asyncretry`` logger."""
