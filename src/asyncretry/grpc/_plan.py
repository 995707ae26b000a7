"""What every gRPC call settles before its first attempt: the configuration the interceptors share, the
method's scope and idempotency, the per-call options, and the call's judge (:class:`CallPlan`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import Clock, HedgingConfig, Outcome, RandomSource, Retrier, RetrierStatistics, RetryPolicy
from .._http._setup import build_retrier, checked_classifier
from ._classify import GrpcClassifier
from ._options import CallOptions, current_options

__all__ = ["ATTEMPTS_KEY", "CallPlan", "Planner", "ScopeKey", "attempt_metadata"]

ATTEMPTS_KEY = "grpc-previous-rpc-attempts"
"""The metadata key that tells the server how many attempts of the call came before this one."""

ScopeKey = Callable[[str], str]
_MAX_METHODS = 10_000


def attempt_metadata(metadata: Iterable[tuple[str, Any]] | None, number: int) -> list[tuple[str, Any]]:
    """The metadata of attempt ``number`` (> 1) of a call: the call's, with ``grpc-previous-rpc-attempts``
    set to the number of attempts sent before it (as gRPC's retries and hedges send it)."""
    kept = [(key, value) for key, value in (metadata or ()) if key != ATTEMPTS_KEY]
    kept.append((ATTEMPTS_KEY, str(number - 1)))
    return kept


class CallPlan:
    """What one call settled before its first attempt, and its judge (asked on every failed outcome)."""

    __slots__ = ("classifier", "idempotent", "method", "replayable", "target")

    def __init__(
        self, method: str, classifier: GrpcClassifier, idempotent: bool, replayable: bool, target: str
    ) -> None:
        self.method = method
        self.classifier = classifier
        self.idempotent = idempotent
        self.replayable = replayable
        self.target = target

    def judge(self, outcome: Outcome) -> Outcome:
        """Whether the call may be sent again after a failed attempt."""
        if not outcome.kind.retryable:
            return outcome
        return self.classifier.may_resend(outcome, idempotent=self.idempotent, replayable=self.replayable)

    def describe(self) -> str:
        """What the call is, for logs and traces (worked out only when one needs it)."""
        return f"gRPC {self.target}{self.method}"


class Planner:
    """The configuration the async and sync interceptors share, and the planning of each call."""

    def __init__(
        self,
        *,
        policy: RetryPolicy | None = None,
        retrier: Retrier | None = None,
        classifier: GrpcClassifier | None = None,
        target: str | None = None,
        scope_key: ScopeKey | None = None,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        name: str = "grpc",
    ) -> None:
        self.retrier = build_retrier(policy=policy, retrier=retrier, clock=clock, rng=rng, name=name)
        self.classifier = checked_classifier(classifier, GrpcClassifier, "a GrpcClassifier")
        if target is not None and not isinstance(target, str):
            raise TypeError(f"target must be a string or None, got {target!r}")
        if scope_key is not None and not callable(scope_key):
            raise TypeError(f"scope_key must be callable, got {scope_key!r}")
        self.target = target or ""
        self._scope_key = scope_key
        self._single: RetryPolicy | None = None
        self._methods: dict[bytes | str, tuple[str, str, bool]] = {}
        self._ready()

    def _ready(self) -> None:
        """What a kind of interceptors checks and builds once configured (its interceptors)."""

    @property
    def policy(self) -> RetryPolicy:
        return self.retrier.policy

    def statistics(self) -> RetrierStatistics:
        """The retrier's statistics: counters and a snapshot of every scope."""
        return self.retrier.statistics()

    def _plan(
        self, name: bytes | str, *, replayable: bool, hedgeable: bool
    ) -> tuple[CallPlan, str, RetryPolicy | None, HedgingConfig | None]:
        """What a call of method ``name`` settles before its first attempt: its plan (judge), scope, policy
        (``None``: the retrier's) and hedging (``None``: not hedged), per-call options included."""
        known = self._methods.get(name)
        if known is None:
            known = self._learn(name)
        method, scope, idempotent = known
        options: CallOptions | None = current_options()
        policy = None
        hedging = self.policy.hedging
        if options is not None:
            policy = options.policy
            if options.retry is False:
                if policy is not None:
                    policy = policy.replace(max_attempts=1)
                else:
                    if self._single is None:
                        self._single = self.policy.replace(max_attempts=1)
                    policy = self._single
            scope = options.scope or scope
            if options.idempotent is not None:
                idempotent = options.idempotent
            hedging = self._hedging(method, idempotent, policy or self.policy, options.hedge, hedgeable)
        elif hedging is not None:
            hedging = self._hedging(method, idempotent, self.policy, None, hedgeable)
        return CallPlan(method, self.classifier, idempotent, replayable, self.target), scope, policy, hedging

    def _learn(self, name: bytes | str) -> tuple[str, str, bool]:
        """What a method's calls share: its name, default scope and idempotency (kept for the next call)."""
        method = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        scope = self._scope_key(method) if self._scope_key is not None else self.target + method
        if not isinstance(scope, str):
            raise TypeError(f"scope_key must return a string, got {scope!r} for {method!r}")
        known = (method, scope, self.classifier.is_idempotent(method))
        if len(self._methods) >= _MAX_METHODS:
            self._methods.clear()  # a channel has a bounded set of methods: this only guards against misuse
        self._methods[name] = known
        return known

    def _hedging(
        self, method: str, idempotent: bool, policy: RetryPolicy, asked: HedgingConfig | bool | None, hedgeable: bool
    ) -> HedgingConfig | None:
        """The call's hedging: the per-call option, else the policy's; only for idempotent unary-unary calls.

        Raises:
            ValueError: a HedgingConfig was given for a call that cannot be hedged.
        """
        if asked is False:
            return None
        config = asked if isinstance(asked, HedgingConfig) else policy.hedging
        if config is None:
            return None
        why = None
        if not hedgeable:
            why = "only unary-unary calls are hedged"
        elif not idempotent:
            why = "it is not idempotent"
        if why is None:
            return config
        if asked is None:
            return None  # the policy hedges what it may
        raise ValueError(f"gRPC {self.target}{method} cannot be hedged: {why}")
