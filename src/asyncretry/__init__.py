"""asyncretry: resilient outbound calls for asyncio and trio.

Retries that never cause retry storms (the AWS retry quota), client-side rate limiting that finds a
throttled server's capacity by itself (CUBIC adaptive mode), circuit breaking and jittered backoff,
behind one retry engine with three ways in, and an httpx transport (:mod:`asyncretry.httpx`).
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._breaker_state import BreakerState as BreakerState
from ._deprecation import renamed_names as _renamed_names

# --- base: exceptions, events
from ._events import GLOBAL_EVENTS as GLOBAL_EVENTS
from ._events import AttemptFinished as AttemptFinished
from ._events import BackendLost as BackendLost
from ._events import BackendRecovered as BackendRecovered
from ._events import BreakerStateChanged as BreakerStateChanged
from ._events import BudgetExhausted as BudgetExhausted
from ._events import BudgetRestored as BudgetRestored
from ._events import Event as Event
from ._events import EventBus as EventBus
from ._events import GaveUp as GaveUp
from ._events import HedgeSent as HedgeSent
from ._events import LimiterHeld as LimiterHeld
from ._events import LimiterPaced as LimiterPaced
from ._events import LimiterRateChanged as LimiterRateChanged
from ._events import LimiterRule as LimiterRule
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
from ._exceptions import PollFailed as PollFailed
from ._exceptions import RateLimitTimeout as RateLimitTimeout
from ._exceptions import RetriesExhausted as RetriesExhausted
from ._exceptions import RetryBudgetExceeded as RetryBudgetExceeded
from ._exceptions import RetryCapacityExceeded as RetryCapacityExceeded
from ._primitives._bucket import BucketStatistics as BucketStatistics

# --- primitives: token bucket
from ._primitives._bucket import TokenBucket as TokenBucket

# --- primitives: clock
from ._primitives._clock import DEFAULT_CLOCK as DEFAULT_CLOCK
from ._primitives._clock import AnyioClock as AnyioClock
from ._primitives._clock import Clock as Clock
from ._primitives._clock import RandomSource as RandomSource
from ._primitives._kinds import OutcomeKind as OutcomeKind

# --- primitives: retry quota
# isort: split
from ._primitives._quota import QuotaStatistics as QuotaStatistics
from ._primitives._quota import RetryQuota as RetryQuota
from ._primitives._quota import RetryQuotaConfig as RetryQuotaConfig

# --- primitives: retry budget
# isort: split
from ._primitives._budget import BudgetStatistics as BudgetStatistics
from ._primitives._budget import BudgetTicket as BudgetTicket
from ._primitives._budget import RetryBudget as RetryBudget
from ._primitives._budget import RetryBudgetConfig as RetryBudgetConfig

# --- primitives: adaptive rate limiter
# isort: split
from ._primitives._limiter import AdaptiveLimiterConfig as AdaptiveLimiterConfig
from ._primitives._limiter import AdaptiveRateLimiter as AdaptiveRateLimiter
from ._primitives._limiter import LimiterStatistics as LimiterStatistics

# --- primitives: backoff and delivery policy
# isort: split
from ._primitives._backoff import Backoff as Backoff
from ._primitives._backoff import DecorrelatedJitterBackoff as DecorrelatedJitterBackoff
from ._primitives._backoff import ExponentialBackoff as ExponentialBackoff
from ._primitives._backoff import FixedBackoff as FixedBackoff
from ._primitives._backoff import LinearBackoff as LinearBackoff
from ._primitives._backoff import NoBackoff as NoBackoff
from ._primitives._delivery import DeliveryPolicy as DeliveryPolicy

# --- primitives: circuit breaker
# isort: split
from ._primitives._breaker import BreakerStatistics as BreakerStatistics
from ._primitives._breaker import CircuitBreaker as CircuitBreaker
from ._primitives._breaker import CircuitBreakerConfig as CircuitBreakerConfig
from ._primitives._turns import TurnStatistics as TurnStatistics

# --- engine
# isort: split
from ._engine._botocore import AWS_TRANSIENT_STATUSES as AWS_TRANSIENT_STATUSES
from ._engine._botocore import botocore_classifier as botocore_classifier
from ._engine._call import Judge as Judge
from ._engine._call import Label as Label
from ._engine._call import Step as Step
from ._engine._classify import AWS_THROTTLING_CODES as AWS_THROTTLING_CODES
from ._engine._classify import AWS_TRANSIENT_CODES as AWS_TRANSIENT_CODES
from ._engine._classify import QLDB_RETRYABLE_CODES as QLDB_RETRYABLE_CODES
from ._engine._classify import Classifier as Classifier
from ._engine._classify import Outcome as Outcome
from ._engine._classify import error_code_of as error_code_of
from ._engine._decorator import retry as retry
from ._engine._env import EnvSettings as EnvSettings
from ._engine._env import settings_from_env as settings_from_env
from ._engine._hedging import HedgeStatistics as HedgeStatistics
from ._engine._hedging import HedgingConfig as HedgingConfig
from ._engine._history import AttemptRecord as AttemptRecord
from ._engine._history import RetryHistory as RetryHistory
from ._engine._history import attach_history as attach_history
from ._engine._history import history_of as history_of
from ._engine._overrides import RequestOverrides as RequestOverrides
from ._engine._overrides import parse_overrides as parse_overrides
from ._engine._policy import GiveUpInfo as GiveUpInfo
from ._engine._policy import RetryPolicy as RetryPolicy
from ._engine._polling import PollStatus as PollStatus
from ._engine._polling import poll as poll
from ._engine._retrier import Attempt as Attempt
from ._engine._retrier import Attempts as Attempts
from ._engine._retrier import Retrier as Retrier
from ._engine._retrier import RetrierStatistics as RetrierStatistics
from ._engine._retrier import ScopeStatistics as ScopeStatistics
from ._engine._retrier import SyncAttempts as SyncAttempts

# --- observability (statistics for health endpoints; OpenTelemetry is asyncretry.otel)
# isort: split
from ._stats import statistics_to_dict as statistics_to_dict

try:
    __version__ = _metadata.version("asyncretry")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AWS_THROTTLING_CODES",
    "AWS_TRANSIENT_CODES",
    "AWS_TRANSIENT_STATUSES",
    "AdaptiveLimiterConfig",
    "AdaptiveRateLimiter",
    "AnyioClock",
    "AsyncRetryError",
    "Attempt",
    "AttemptFinished",
    "AttemptRecord",
    "AttemptTimeout",
    "Attempts",
    "BackendLost",
    "BackendRecovered",
    "BackendUnavailable",
    "Backoff",
    "BreakerState",
    "BreakerStateChanged",
    "BreakerStatistics",
    "BucketStatistics",
    "BudgetExhausted",
    "BudgetRestored",
    "BudgetStatistics",
    "BudgetTicket",
    "CircuitBreaker",
    "CircuitBreakerConfig",
    "CircuitOpenError",
    "Classifier",
    "Clock",
    "ConfigurationError",
    "DEFAULT_CLOCK",
    "DecorrelatedJitterBackoff",
    "DeliveryPolicy",
    "EnvSettings",
    "Event",
    "EventBus",
    "ExponentialBackoff",
    "FixedBackoff",
    "GLOBAL_EVENTS",
    "GaveUp",
    "GiveUpInfo",
    "HedgeSent",
    "HedgeStatistics",
    "HedgingConfig",
    "Judge",
    "Label",
    "LimiterHeld",
    "LimiterPaced",
    "LimiterRateChanged",
    "LimiterRule",
    "LimiterStatistics",
    "LinearBackoff",
    "Listener",
    "NoBackoff",
    "Outcome",
    "OutcomeKind",
    "PollFailed",
    "PollStatus",
    "QLDB_RETRYABLE_CODES",
    "QuotaExhausted",
    "QuotaRestored",
    "QuotaStatistics",
    "RandomSource",
    "RateLimitTimeout",
    "RequestOverrides",
    "Retrier",
    "RetrierStatistics",
    "RetriesExhausted",
    "RetryBudget",
    "RetryBudgetConfig",
    "RetryBudgetExceeded",
    "RetryCapacityExceeded",
    "RetryHistory",
    "RetryPolicy",
    "RetryQuota",
    "RetryQuotaConfig",
    "RetryScheduled",
    "ScopeEvicted",
    "ScopeStatistics",
    "Step",
    "SyncAttempts",
    "Throttled",
    "TokenBucket",
    "TurnStatistics",
    "attach_history",
    "botocore_classifier",
    "error_code_of",
    "history_of",
    "parse_overrides",
    "poll",
    "retry",
    "settings_from_env",
    "statistics_to_dict",
]


# Names kept working for a while, with a DeprecationWarning (they are no longer in __all__).
_renamed = _renamed_names(
    __name__, globals(), {"AsyncTokenBucket": "TokenBucket", "BackendUnavailableEvent": "BackendLost"}
)


def __getattr__(name: str) -> object:
    if name == "FirstAttempt":
        import warnings

        from ._engine._first import FirstAttempt

        warnings.warn(
            "asyncretry.FirstAttempt is deprecated: start every call with Retrier.attempts()",
            DeprecationWarning, stacklevel=2,
        )
        return FirstAttempt
    return _renamed(name)
