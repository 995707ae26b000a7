"""asyncretry: resilient outbound calls for asyncio and trio.

Retries that never cause retry storms (the AWS retry quota), client-side rate limiting that finds a
throttled server's capacity by itself (CUBIC adaptive mode), circuit breaking and jittered backoff,
behind one retry engine with three ways in, and an httpx transport (:mod:`asyncretry.httpx`).
"""

from __future__ import annotations

# --- base: exceptions, events
from ._events import GLOBAL_EVENTS as GLOBAL_EVENTS
from ._events import AttemptFinished as AttemptFinished
from ._events import BackendRecovered as BackendRecovered
from ._events import BackendUnavailableEvent as BackendUnavailableEvent
from ._events import BreakerStateChanged as BreakerStateChanged
from ._events import Event as Event
from ._events import EventBus as EventBus
from ._events import GaveUp as GaveUp
from ._events import LimiterRateChanged as LimiterRateChanged
from ._events import Listener as Listener
from ._events import QuotaExhausted as QuotaExhausted
from ._events import QuotaRestored as QuotaRestored
from ._events import RetryScheduled as RetryScheduled
from ._events import ScopeEvicted as ScopeEvicted
from ._events import Throttled as Throttled
from ._exceptions import AsyncRetryError as AsyncRetryError
from ._exceptions import AttemptTimeout as AttemptTimeout
from ._exceptions import BackendUnavailable as BackendUnavailable
from ._exceptions import CircuitOpenError as CircuitOpenError
from ._exceptions import ConfigurationError as ConfigurationError
from ._exceptions import RateLimitTimeout as RateLimitTimeout
from ._exceptions import RetriesExhausted as RetriesExhausted
from ._exceptions import RetryCapacityExceeded as RetryCapacityExceeded

# --- primitives: clock
from ._primitives._clock import DEFAULT_CLOCK as DEFAULT_CLOCK
from ._primitives._clock import AnyioClock as AnyioClock
from ._primitives._clock import Clock as Clock
from ._primitives._clock import RandomSource as RandomSource
from ._primitives._kinds import OutcomeKind as OutcomeKind

# --- primitives: token bucket

# --- primitives: retry quota

# --- primitives: adaptive rate limiter

# --- primitives: backoff and delivery policy

# --- primitives: circuit breaker

# --- engine

__version__ = "0.1.0.dev0"

__all__ = [
    "AnyioClock",
    "AsyncRetryError",
    "AttemptFinished",
    "AttemptTimeout",
    "BackendRecovered",
    "BackendUnavailable",
    "BackendUnavailableEvent",
    "BreakerStateChanged",
    "CircuitOpenError",
    "Clock",
    "ConfigurationError",
    "DEFAULT_CLOCK",
    "Event",
    "EventBus",
    "GLOBAL_EVENTS",
    "GaveUp",
    "LimiterRateChanged",
    "Listener",
    "OutcomeKind",
    "QuotaExhausted",
    "QuotaRestored",
    "RandomSource",
    "RateLimitTimeout",
    "RetriesExhausted",
    "RetryCapacityExceeded",
    "RetryScheduled",
    "ScopeEvicted",
    "Throttled",
]
