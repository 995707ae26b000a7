"""Typed telemetry events and the buses that deliver them.

Every stateful object emits frozen event dataclasses to an :class:`EventBus`. Emitters check
``bus.wants(EventType)`` first, so an event costs nothing (not even its construction) when nobody
listens and the ``asyncretry`` logger would drop it. Buses form a tree: a retrier's bus forwards to the
global bus (:data:`GLOBAL_EVENTS`), which also writes each event to the ``asyncretry`` logger at the
event's level with the event's fields as structured ``extra`` data.

A listener is a plain callable; an exception it raises is logged and swallowed so that telemetry can
never break a call.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "GLOBAL_EVENTS",
    "AttemptFinished",
    "BackendRecovered",
    "BackendUnavailableEvent",
    "BreakerStateChanged",
    "Event",
    "EventBus",
    "GaveUp",
    "Listener",
    "LimiterRateChanged",
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
    """

    level: ClassVar[int] = logging.DEBUG

    time: float
    source: str

    def message(self) -> str:
        """A one-line human description, used for the log record."""
        fields = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name not in ("time", "source")
        )
        return f"{type(self).__name__} [{self.source}] {fields}"


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFinished(Event):
    """One attempt ended; ``outcome`` is the classification (``success``, ``transient``, ...)."""

    attempt: int
    outcome: str
    reason: str
    duration: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduled(Event):
    """A retry will start after ``delay`` seconds (``attempt`` is the number of the attempt that failed)."""

    level: ClassVar[int] = logging.INFO

    attempt: int
    delay: float
    outcome: str
    reason: str
    server_directed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class GaveUp(Event):
    """The call ended in failure after ``attempts`` attempts; ``why`` says what stopped it."""

    level: ClassVar[int] = logging.WARNING

    attempts: int
    why: str
    outcome: str
    reason: str
    elapsed: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaExhausted(Event):
    """The retry quota could not pay for a retry: retries stop until it refills."""

    level: ClassVar[int] = logging.WARNING

    available: float
    cost: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaRestored(Event):
    """The retry quota can pay for retries again after having been exhausted."""

    level: ClassVar[int] = logging.INFO

    available: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Throttled(Event):
    """A response was classified as throttling (the adaptive limiter slows down on it)."""

    level: ClassVar[int] = logging.INFO

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterRateChanged(Event):
    """The adaptive limiter's fill rate changed (requests per second)."""

    old_rate: float
    new_rate: float
    measured_rate: float
    throttled: bool
    enabled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerStateChanged(Event):
    """The circuit breaker moved from ``old_state`` to ``new_state``."""

    level: ClassVar[int] = logging.WARNING

    old_state: str
    new_state: str
    reason: str
    break_duration: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeEvicted(Event):
    """An idle scope (its quota, limiter and breaker) was evicted to bound memory."""

    idle_for: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendUnavailableEvent(Event):
    """A shared-state backend could not be reached; ``fallback`` says what the object does meanwhile."""

    level: ClassVar[int] = logging.WARNING

    error: str
    fallback: str


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
        """Whether an event of this type would reach anyone (a listener or the logger)."""
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
                    logger.exception("asyncretry event listener %r failed on %r", listener, event)
            if bus._log and logger.isEnabledFor(event.level):
                logger.log(event.level, "%s", event.message(), extra=_extra(event))
            bus = bus._parent

    def __repr__(self) -> str:
        return f"<EventBus listeners={len(self._listeners)} root={self._parent is None}>"


def _extra(event: Event) -> dict[str, Any]:
    fields = {f"asyncretry_{f.name}": getattr(event, f.name) for f in dataclasses.fields(event)}
    fields["asyncretry_event"] = type(event).__name__
    return fields


GLOBAL_EVENTS = EventBus(_root=True)
"""The process-wide bus: every bus forwards here, and it writes to the ``asyncretry`` logger."""
