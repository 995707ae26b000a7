"""`RetryPolicy`: the frozen, validated description of how calls are retried.

A policy holds no state. The state it describes (the retry quota, the adaptive limiter, the circuit
breaker, a fixed rate limit) lives in a :class:`~asyncretry.Retrier`, one set per scope.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import InitVar, dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal

from .._events import Listener
from .._primitives._backoff import Backoff, ExponentialBackoff
from .._primitives._breaker import CircuitBreakerConfig
from .._primitives._budget import RetryBudgetConfig
from .._primitives._limiter import AdaptiveLimiterConfig
from .._primitives._quota import RetryQuotaConfig
from .._validate import (
    MIN_SECONDS,
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_items,
    check_number,
    check_seconds,
)
from ._classify import DEFAULT_CLASSIFIER, Classifier, On, Outcome, classifier_on
from ._hedging import HedgingConfig
from ._history import RetryHistory

__all__ = ["MODES", "PROFILES", "GiveUpInfo", "RetryPolicy"]

Mode = Literal["standard", "adaptive", "legacy"]
Profile = Literal["2020", "2026"]
MODES: tuple[str, ...] = ("standard", "adaptive", "legacy")
PROFILES: tuple[str, ...] = ("2020", "2026")
_DEFAULTED = ("backoff", "throttling_backoff", "honour_amz_retry_after")


@dataclass(frozen=True, slots=True)
class GiveUpInfo:
    """What the ``on_give_up`` hook receives: the final outcome and the whole history.

    Attributes:
        scope: the scope of the call.
        outcome: the last attempt's outcome (its ``error`` or ``result`` is what failed).
        history: every attempt, the delays and why the call gave up.
    """

    scope: str
    outcome: Outcome
    history: RetryHistory


GiveUpHook = Callable[[GiveUpInfo], "Awaitable[None] | None"]


def _seconds_or_none(name: str, value: float | timedelta | None, *, low_open: bool = True) -> float | None:
    if value is None:
        return None
    return check_seconds(name, value, low=0.0, low_open=low_open)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How calls are retried: mode, attempts, backoff, quota, limiter, breaker, classification, deadlines.

    Args:
        mode: ``"standard"`` (retry quota, the default), ``"adaptive"`` (standard plus the CUBIC
            client-side rate limiter) or ``"legacy"`` (capped exponential backoff only).
        profile: AWS cost and backoff profile, ``"2020"`` (botocore's defaults) or ``"2026"`` (AWS's
            updated retries: retry cost 14, transient base 0.05 s, ``x-amz-retry-after`` honoured).
        max_attempts: total attempts including the first (>= 1; 1 disables retries). Default 3.
        backoff: delays between attempts after transient errors; default: the profile's AWS form.
        throttling_backoff: delays after throttling errors; default: ``backoff`` (2020) or a 1 s base (2026).
            In adaptive mode with the default limiter profile, the throttles of the limiter's start-up
            (the first round trip once throttled), and those of a fleet client whose rate its congestion
            events set, get no backoff: the limiter paces those retries itself.
        quota: the retry quota: ``True`` for the profile's default, ``False`` for none, or a
            :class:`RetryQuotaConfig`. Legacy mode has none.
        limiter: adaptive mode's limiter settings (default :class:`AdaptiveLimiterConfig`: the
            ``"asyncretry"`` profile; :meth:`aws_adaptive` defaults to the ``"aws"`` one).
        breaker: circuit breaker settings, or ``None`` (default) for no breaker.
        budget: a retry budget (:class:`RetryBudgetConfig`: retries as a share of recent requests, as
            Finagle, Envoy and gRPC bound them), instead of or beside the quota; ``None`` (default) for none.
            A retry goes ahead only when every part (quota, budget, breaker, deadline) allows it.
        rate_limit: a fixed request rate per scope (requests per second), or ``None``.
        rate_limit_burst: the burst of that rate limit (default: ``max(1, rate_limit)``).
        classifier: what is retried and how (see :class:`Classifier`).
        deadline: the most one call may take in total, sleeps included (seconds), or ``None``.
        attempt_timeout: the most one attempt may take (seconds), or ``None``; a timed-out attempt is
            retried as a timeout.
        max_server_delay: the cap on any server-directed delay (``Retry-After``), seconds. Default 60.
        honour_server_delay: whether ``Retry-After``-style delays are followed at all. Default ``True``.
        honour_amz_retry_after: whether ``x-amz-retry-after`` is honoured; default: profile ``"2026"``.
        long_polling: the call is a long-polling operation (SQS ``ReceiveMessage``, Step Functions
            ``GetActivityTask``, SWF ``PollForActivityTask`` / ``PollForDecisionTask``): when the retry
            quota refuses a retry, the call still sleeps the backoff before it gives up, so that a loop
            around it cannot hammer a failing service (AWS's 2026 retry rules). Never after a success, a
            non-retryable error or the last attempt. Needs a retry quota. Default ``False``.
        hedging: send a hedge (the same call again, concurrently) when an attempt has not answered after a
            delay, the first success winning (:class:`HedgingConfig`); ``None`` (default) for none. Only for
            operations safe to run twice at once: :meth:`Retrier.call`, the decorator and the httpx transport
            (idempotent requests with a body of bytes) use it; the ``async for`` form runs one attempt at a time.
        on_give_up: called (and awaited, if it returns an awaitable) with a :class:`GiveUpInfo` whenever a
            call gives up: SNS's dead-letter queue, so nothing is dropped silently.
        listeners: event listeners registered on every retrier using this policy.
        on: retry exactly these errors (stamina's ``on=``): an exception class, a tuple of them, or a
            predicate over exceptions; a shorthand for ``classifier=``, which it excludes. Not stored: the
            policy keeps the classifier it makes.

    Attributes:
        holds_spent_quota: derived, not set: whether an answer that announces the server's quota spent
            holds the scope's limiter until the reset: adaptive mode, a limiter config that holds
            (:attr:`AdaptiveLimiterConfig.holds_spent_quota`) and ``honour_server_delay``; the same answers
            that announce the pace of a quota whose window is too short to wait for pace the limiter. The HTTP
            integrations then read the quota that successes announce too.

    An unknown argument is a ``TypeError`` that names the field meant, when it can tell (``attempts``,
    stamina's and backoff's names: ``max_attempts``; ``timeout``: ``deadline`` ...).
    """

    mode: Mode = "standard"
    profile: Profile = "2020"
    max_attempts: int = 3
    backoff: Backoff | None = None
    throttling_backoff: Backoff | None = None
    quota: RetryQuotaConfig | bool = True
    limiter: AdaptiveLimiterConfig | None = None
    breaker: CircuitBreakerConfig | None = None
    budget: RetryBudgetConfig | None = None
    rate_limit: float | None = None
    rate_limit_burst: float | None = None
    classifier: Classifier = DEFAULT_CLASSIFIER
    deadline: float | timedelta | None = None
    attempt_timeout: float | timedelta | None = None
    max_server_delay: float | timedelta = 60.0
    honour_server_delay: bool = True
    honour_amz_retry_after: bool | None = None
    long_polling: bool = False
    hedging: HedgingConfig | None = None
    on_give_up: GiveUpHook | None = None
    listeners: tuple[Listener, ...] = ()
    on: InitVar[On | None] = None
    # Derived in __post_init__ so that the hot path reads plain attributes.
    quota_config: RetryQuotaConfig | None = field(init=False, default=None)
    limiter_config: AdaptiveLimiterConfig | None = field(init=False, default=None)
    holds_spent_quota: bool = field(init=False, default=False)
    on_give_up_is_async: bool = field(init=False, default=False, repr=False)
    #: a deadline or a per-attempt timeout: every call is timed from its start
    timed: bool = field(init=False, default=False, repr=False)
    # The fields left to default: replace() derives them again, so that a new profile or backoff
    # brings its own defaults instead of keeping those derived from the old one.
    _defaulted: frozenset[str] = field(init=False, default=frozenset(), repr=False, compare=False)

    def __post_init__(self, on: On | None) -> None:
        s = object.__setattr__
        if on is not None:
            if self.classifier is not DEFAULT_CLASSIFIER:
                raise TypeError("on= and classifier= both say what to retry: give one of them")
            s(self, "classifier", classifier_on(on))
        s(self, "_defaulted", frozenset(
            name for name in _DEFAULTED if getattr(self, name) is None
        ))
        check_choice("mode", self.mode, MODES)
        check_choice("profile", self.profile, PROFILES)
        check_int("max_attempts", self.max_attempts, low=1)
        for name in ("backoff", "throttling_backoff"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Backoff):
                raise TypeError(f"{name} must be a Backoff strategy (with a delay() method), got {value!r}")
        if self.backoff is None:
            s(self, "backoff", ExponentialBackoff.aws_transient() if self.profile == "2026"
              else ExponentialBackoff.aws_standard())
        if self.throttling_backoff is None:
            s(self, "throttling_backoff", ExponentialBackoff.aws_throttling() if self.profile == "2026"
              else self.backoff)

        for name in ("backoff", "throttling_backoff"):
            limit = getattr(self, name).max_retries
            if limit is not None and self.max_attempts > limit + 1:
                raise ValueError(
                    f"max_attempts={self.max_attempts} needs {self.max_attempts - 1} retries but {name} "
                    f"allows only {limit} (max_retries={limit}); lower max_attempts to {limit + 1} or less"
                )

        if self.mode == "legacy":
            if isinstance(self.quota, RetryQuotaConfig):
                raise ValueError("quota must be True or False in legacy mode, which has no retry quota; "
                                 "use mode='standard' for a quota")
            if self.limiter is not None:
                raise ValueError("limiter is only used in mode='adaptive', got mode='legacy'")
            s(self, "quota_config", None)
        else:
            if isinstance(self.quota, RetryQuotaConfig):
                s(self, "quota_config", self.quota)
            elif self.quota is True:
                s(self, "quota_config", RetryQuotaConfig.profile(self.profile))
            elif self.quota is False:
                s(self, "quota_config", None)
            else:
                raise TypeError(f"quota must be True, False or a RetryQuotaConfig, got {self.quota!r}")
        if self.mode == "adaptive":
            s(self, "limiter_config", self.limiter if self.limiter is not None else AdaptiveLimiterConfig())
        elif self.limiter is not None:
            raise ValueError(f"limiter is only used in mode='adaptive', got mode={self.mode!r}")

        if self.breaker is not None and not isinstance(self.breaker, CircuitBreakerConfig):
            raise TypeError(f"breaker must be a CircuitBreakerConfig or None, got {self.breaker!r}")
        if self.budget is not None and not isinstance(self.budget, RetryBudgetConfig):
            raise TypeError(f"budget must be a RetryBudgetConfig or None, got {self.budget!r}")
        if self.rate_limit is not None:
            # At least one request in about 30 years: a slower rate's waits overflow to infinity.
            s(self, "rate_limit", check_number("rate_limit", self.rate_limit, low=MIN_SECONDS))
            burst = self.rate_limit_burst if self.rate_limit_burst is not None else max(1.0, self.rate_limit)
            s(self, "rate_limit_burst", check_number("rate_limit_burst", burst, low=1.0))
        elif self.rate_limit_burst is not None:
            raise ValueError("rate_limit_burst needs rate_limit to be set")
        if not isinstance(self.classifier, Classifier):
            raise TypeError(f"classifier must be a Classifier, got {self.classifier!r}")
        s(self, "deadline", _seconds_or_none("deadline", self.deadline))
        s(self, "attempt_timeout", _seconds_or_none("attempt_timeout", self.attempt_timeout))
        s(self, "max_server_delay", check_seconds("max_server_delay", self.max_server_delay))
        check_bool("honour_server_delay", self.honour_server_delay)
        limiter = self.limiter_config
        s(self, "holds_spent_quota", self.honour_server_delay and limiter is not None and limiter.holds_spent_quota)
        if self.honour_amz_retry_after is None:
            s(self, "honour_amz_retry_after", self.profile == "2026")
        if not isinstance(self.long_polling, bool):
            raise TypeError(f"long_polling must be a bool, got {self.long_polling!r}")
        if self.long_polling and self.quota_config is None:
            raise ValueError(
                f"long_polling=True needs a retry quota (its rule is the sleep before a give-up the quota "
                f"forces), but mode={self.mode!r} with quota={self.quota!r} has none; use mode='standard' or "
                "'adaptive' with quota=True"
            )
        check_bool("honour_amz_retry_after", self.honour_amz_retry_after)
        if self.on_give_up is not None:
            check_callable("on_give_up", self.on_give_up)
        if self.hedging is not None and not isinstance(self.hedging, HedgingConfig):
            raise TypeError(f"hedging must be a HedgingConfig or None, got {self.hedging!r}")
        s(self, "on_give_up_is_async", inspect.iscoroutinefunction(self.on_give_up))
        s(self, "timed", self.deadline is not None or self.attempt_timeout is not None)
        s(self, "listeners", check_items("listeners", self.listeners, check_callable, what="listeners"))

    def replace(self, **changes: Any) -> RetryPolicy:
        """A copy with some fields changed (validated again)."""
        derived = {"quota_config", "limiter_config", "holds_spent_quota", "on_give_up_is_async", "timed", "_defaulted"}
        bad = derived & changes.keys()
        if bad:
            raise TypeError(f"{', '.join(sorted(bad))} cannot be set: derived from the other fields")
        for name in self._defaulted - changes.keys():
            changes[name] = None
        if changes.get("on") is not None and "classifier" not in changes:
            changes["classifier"] = DEFAULT_CLASSIFIER  # on= says anew what to retry
        return replace(self, **changes)

    # ----------------------------------------------------------------------------------- presets
    @classmethod
    def aws_standard(cls, profile: Profile = "2020", **changes: Any) -> RetryPolicy:
        """AWS SDK standard mode: 3 attempts, the retry quota, full-jitter exponential backoff."""
        return cls(mode="standard", profile=profile, **changes)

    @classmethod
    def adaptive(cls, profile: Profile = "2020", **changes: Any) -> RetryPolicy:
        """Adaptive mode as asyncretry recommends it: standard mode plus asyncretry's client-side rate limiter.

        The same policy as ``RetryPolicy(mode="adaptive")``: the limiter is ``AdaptiveLimiterConfig()``
        (the ``"asyncretry"`` profile), which keeps more of a throttling server's capacity than the AWS
        SDKs' own limiter. For the SDKs' exact behaviour, use :meth:`aws_adaptive`.
        """
        return cls(mode="adaptive", profile=profile, **changes)

    @classmethod
    def aws_adaptive(cls, profile: Profile = "2020", **changes: Any) -> RetryPolicy:
        """The AWS SDKs' adaptive mode, exactly: standard mode plus the SDKs' own CUBIC rate limiter.

        The limiter is ``AdaptiveLimiterConfig(profile="aws")``, which reproduces botocore and the other
        SDKs to their shared test tables; choose it to behave as they do. asyncretry's recommended
        limiter is :meth:`adaptive` (``RetryPolicy(mode="adaptive")``).
        """
        changes.setdefault("limiter", AdaptiveLimiterConfig(profile="aws"))
        return cls(mode="adaptive", profile=profile, **changes)

    @classmethod
    def aws_legacy(cls, **changes: Any) -> RetryPolicy:
        """Legacy mode: capped exponential backoff with full jitter, no quota and no limiter."""
        changes.setdefault("max_attempts", 5)
        return cls(mode="legacy", quota=False, **changes)

    @classmethod
    def kotlin(cls, **changes: Any) -> RetryPolicy:
        """The AWS SDK for Kotlin's defaults: 3 attempts, delays from 10 ms x1.5 up to 20 s, full jitter."""
        backoff = ExponentialBackoff.kotlin()
        changes.setdefault("backoff", backoff)
        changes.setdefault("throttling_backoff", backoff)
        changes.setdefault("quota", RetryQuotaConfig())
        return cls(mode="standard", **changes)

    @classmethod
    def qldb(cls, **changes: Any) -> RetryPolicy:
        """The QLDB driver's policy: 4 retries, 10 ms to 5 s with equal jitter, its retryable exceptions."""
        from ._classify import QLDB_RETRYABLE_CODES

        backoff = ExponentialBackoff.qldb()
        changes.setdefault("max_attempts", 5)
        changes.setdefault("backoff", backoff)
        changes.setdefault("throttling_backoff", backoff)
        changes.setdefault(
            "classifier",
            Classifier(transient_codes=QLDB_RETRYABLE_CODES, throttling_codes=frozenset()),
        )
        return cls(mode="legacy", quota=False, **changes)

    @classmethod
    def sns(cls, delivery: Any, **changes: Any) -> RetryPolicy:
        """An SNS delivery policy (:class:`DeliveryPolicy`): its four phases, retry count and throttle."""
        from .._primitives._delivery import DeliveryPolicy

        if not isinstance(delivery, DeliveryPolicy):
            raise TypeError(f"delivery must be a DeliveryPolicy, got {delivery!r}")
        changes.setdefault("max_attempts", delivery.num_retries + 1)
        changes.setdefault("backoff", delivery)
        changes.setdefault("throttling_backoff", delivery)
        if delivery.max_receives_per_second is not None:
            changes.setdefault("rate_limit", float(delivery.max_receives_per_second))
        return cls(mode="legacy", quota=False, **changes)

    @classmethod
    def polling(
        cls, *, max_interval: float | timedelta = 20.0, max_attempts: int = 10, **changes: Any
    ) -> RetryPolicy:
        """AWS's polling guidance: wait ``2**retries * 100 ms`` between polls, capped at ``max_interval``."""
        backoff = ExponentialBackoff.aws_polling(max_interval=max_interval)
        changes.setdefault("backoff", backoff)
        changes.setdefault("throttling_backoff", backoff)
        return cls(mode="legacy", quota=False, max_attempts=max_attempts, **changes)

    @classmethod
    def from_env(cls, **changes: Any) -> RetryPolicy:
        """A policy whose mode and max attempts come from code, else ``AWS_RETRY_MODE`` /
        ``AWS_MAX_ATTEMPTS``, else the shared config file, else the defaults.

        The mode picks the AWS preset, so the result agrees with the AWS SDKs: ``standard`` is
        :meth:`aws_standard`, ``adaptive`` :meth:`aws_adaptive` (the SDKs' exact ``"aws"`` limiter
        profile) and ``legacy`` :meth:`aws_legacy` (5 attempts unless a max is set anywhere). Other
        fields are passed on, ``limiter=AdaptiveLimiterConfig()`` for asyncretry's own limiter profile.
        See :func:`asyncretry.settings_from_env` for the sources and their errors.
        """
        from ._env import settings_from_env

        environ = changes.pop("environ", None)
        settings = settings_from_env(
            mode=changes.pop("mode", None), max_attempts=changes.pop("max_attempts", None), environ=environ
        )
        preset = {"standard": cls.aws_standard, "adaptive": cls.aws_adaptive, "legacy": cls.aws_legacy}
        return preset[settings.mode](max_attempts=settings.max_attempts, **changes)


# The names other retry libraries give to what RetryPolicy calls otherwise (tenacity, stamina, backoff).
_OTHER_NAMES = {
    "attempts": "max_attempts=",
    "max_tries": "max_attempts=",
    "tries": "max_attempts=",
    "stop": "max_attempts= (stop_after_attempt) or deadline= (stop_after_delay)",
    "stop_after_attempt": "max_attempts=",
    "timeout": "deadline= (the whole call, with its retries) or attempt_timeout= (each attempt)",
    "max_time": "deadline=",
    "wait": "backoff=ExponentialBackoff(...), FixedBackoff(...) ...",
    "wait_gen": "backoff=ExponentialBackoff(...), FixedBackoff(...) ...",
    "wait_initial": "backoff=ExponentialBackoff(initial=...)",
    "wait_max": "backoff=ExponentialBackoff(max_delay=...)",
    "wait_exp_base": "backoff=ExponentialBackoff(multiplier=...)",
    "wait_jitter": "backoff=ExponentialBackoff(jitter=..., jitter_amount=...)",
    "retry": "on= (exception classes or a predicate) or classifier=",
    "exception": "on=",
    "exceptions": "on=",
    "retry_on": "on=",
    "giveup": "on= (a predicate saying what to retry)",
    "reraise": "nothing: the last error is always raised, with its history (asyncretry.history_of)",
    "on_giveup": "on_give_up=",
    "before_sleep": "listeners= (RetryScheduled events)",
    "on_backoff": "listeners= (RetryScheduled events)",
}


def _unknown_argument(names: set[str]) -> TypeError:
    """The error for arguments RetryPolicy does not take, naming the field meant where it can."""
    known = sorted(_ARGUMENTS)
    hints = []
    for name in sorted(names):
        meant = _OTHER_NAMES.get(name)
        if meant is None:
            close = difflib.get_close_matches(name, known, n=1)
            meant = f"{close[0]}=" if close else None
        hints.append(f"{name!r} (did you mean {meant}?)" if meant else repr(name))
    return TypeError(f"RetryPolicy has no argument {', '.join(hints)}; its arguments: {', '.join(known)}")


_GENERATED_INIT = RetryPolicy.__init__
_ARGUMENTS = frozenset(inspect.signature(_GENERATED_INIT).parameters) - {"self"}


@functools.wraps(_GENERATED_INIT)
def _init(self: RetryPolicy, *args: Any, **kwargs: Any) -> None:
    if not _ARGUMENTS.issuperset(kwargs):
        raise _unknown_argument(set(kwargs) - _ARGUMENTS)
    _GENERATED_INIT(self, *args, **kwargs)


setattr(RetryPolicy, "__init__", _init)  # noqa: B010  (the dataclass's own __init__, with a hint for other names)
