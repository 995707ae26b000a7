"""The retrier: the shared state of every scope, and the ways into the engine.

A :class:`Retrier` owns a table of scopes (:mod:`._scopes`) and counters; each call gets its own
driver (:class:`~._drivers.Attempts`, :class:`~._drivers.SyncAttempts`) over the decision core
(:mod:`._call`). The ways in: ``async for attempt in retrier.attempts()``, :meth:`Retrier.call`, the
decorator (:mod:`._decorator`), :func:`~._polling.poll`, and the integrations (the httpx transports
use :meth:`Retrier.attempts` and :meth:`Retrier.sync_attempts` with a ``judge`` and a ``label``): every
one starts its call with :meth:`Retrier.attempts` (or its synchronous twin), the one way in.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import CoroutineType
from typing import Any, ParamSpec, TypeVar

from .._events import EventBus, Listener, ScopeEvicted
from .._primitives._breaker import CircuitBreaker
from .._primitives._bucket import TokenBucket
from .._primitives._budget import RetryBudget
from .._primitives._clock import DEFAULT_CLOCK, Clock, RandomSource, default_rng
from .._primitives._limiter import AdaptiveRateLimiter
from .._primitives._quota import RetryQuota
from .._primitives._shared import RemoteBreaker, RemoteBucket, RemoteBudget, RemoteLimiter, RemoteQuota
from .._primitives._turns import check_caller
from .._validate import check_clock, check_int, check_seconds
from ._attempt import NOT_SET, Attempt
from ._call import Judge, Label
from ._classify import DEFAULT_CLASSIFIER, On
from ._drivers import Attempts, SyncAttempts
from ._first import FirstAttempt
from ._policy import RetryPolicy
from ._scopes import (
    AnyBreaker,
    AnyBucket,
    AnyBudget,
    AnyLimiter,
    AnyQuota,
    Scope,
    ScopeStatistics,
    ScopeTable,
    check_part,
    given,
)

__all__ = ["DEFAULT_SCOPE", "Attempt", "Attempts", "Retrier", "RetrierStatistics", "ScopeStatistics", "SyncAttempts"]

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_SCOPE = "default"

_SYNC_HEDGING = (
    "the policy has hedging, which runs attempts concurrently in a task group: use an async function with "
    "`await retrier.call(...)`, or a policy without hedging (hedging=None) for synchronous code"
)

_PARTS = {
    "quota": (RetryQuota, RemoteQuota),
    "limiter": (AdaptiveRateLimiter, RemoteLimiter),
    "breaker": (CircuitBreaker, RemoteBreaker),
    "rate_limit": (TokenBucket, RemoteBucket),
    "budget": (RetryBudget, RemoteBudget),
}


@dataclass(frozen=True, slots=True)
class RetrierStatistics:
    """Counters of a retrier since it was made, and its scopes.

    ``retries`` counts the attempts after the first that really began (a retry refused before it began,
    by the quota, a rate limit or the breaker, is not one). ``hedges`` counts the attempts sent as hedges
    (:class:`~asyncretry.HedgingConfig`); they are counted in ``attempts`` too, not in ``retries``.
    """

    name: str
    calls: int
    attempts: int
    retries: int
    successes: int
    failures: int
    evicted_scopes: int
    scopes: tuple[ScopeStatistics, ...]
    hedges: int = 0


class Retrier:
    """Runs calls under a :class:`RetryPolicy` and owns the shared state of each scope.

    A retrier is safe to share between any number of concurrent tasks: everything that belongs to one
    call lives in that call's :class:`Attempts`. Scopes keep retries of one resource (a host, a table)
    from draining the quota or slowing the limiter of another; idle scopes are evicted.

    Args:
        policy: the policy (default ``RetryPolicy()``: AWS standard mode).
        name: a name for events, logs and statistics.
        clock: time source (default: the running event loop's clock).
        rng: random source for jitter, returning floats in ``[0, 1)``.
        events: the bus events go to (default: a new bus that forwards to the global one).
        quota: a :class:`RetryQuota` to share between all scopes (and other retriers) instead of one per
            scope, or a function ``scope_key -> RetryQuota`` making each scope's (a Redis-backed one, say).
        limiter: an :class:`AdaptiveRateLimiter` (adaptive mode), shared or per scope likewise.
        breaker: a :class:`CircuitBreaker`, shared or per scope likewise.
        rate_limit: an :class:`TokenBucket` paced before every attempt, shared or per scope likewise;
            default: one per scope from the policy's ``rate_limit``.
        budget: a :class:`RetryBudget` (or a Redis-backed one), shared or per scope likewise; default:
            one per scope from the policy's ``budget``.
        max_scopes: the most scopes kept at once (>= 1, default 10,000); the least recently used scope
            that no task waits on is evicted first. A new key costs the same at any table size.
        scope_idle_timeout: seconds after which an unused scope may be evicted (default 600).
        on: retry exactly these errors (an exception class, a tuple of them, or a predicate), as
            ``RetryPolicy(on=...)`` does; not beside a policy with a classifier of its own.
    """

    __slots__ = (
        "_attempts", "_calls", "_failures", "_hedges", "_lock", "_parts", "_retries", "_rng", "_scopes", "_successes",
        "clock", "events", "name", "policy",
    )

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        name: str = "retrier",
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        events: EventBus | None = None,
        quota: AnyQuota | Callable[[str], AnyQuota] | None = None,
        limiter: AnyLimiter | Callable[[str], AnyLimiter] | None = None,
        breaker: AnyBreaker | Callable[[str], AnyBreaker] | None = None,
        rate_limit: AnyBucket | Callable[[str], AnyBucket] | None = None,
        budget: AnyBudget | Callable[[str], AnyBudget] | None = None,
        max_scopes: int = 10_000,
        scope_idle_timeout: float = 600.0,
        on: On | None = None,
    ) -> None:
        self.policy = policy if policy is not None else RetryPolicy()
        if not isinstance(self.policy, RetryPolicy):
            raise TypeError(f"policy must be a RetryPolicy, got {policy!r}")
        if on is not None:
            if self.policy.classifier is not DEFAULT_CLASSIFIER:
                raise TypeError("on= and the policy's classifier both say what to retry: give one of them")
            self.policy = self.policy.replace(on=on)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        self.name = name
        if clock is not None:
            check_clock("clock", clock)
        #: the time source of every decision (the default reads the running event loop's clock)
        self.clock: Clock = clock if clock is not None else DEFAULT_CLOCK
        if rng is not None and not callable(rng):
            raise TypeError(f"rng must be a callable returning floats in [0, 1), got {rng!r}")
        self._rng = rng if rng is not None else default_rng
        if events is not None and not isinstance(events, EventBus):
            raise TypeError(f"events must be an EventBus, got {events!r}")
        self.events = events if events is not None else EventBus()
        for listener in self.policy.listeners:
            self.events.subscribe(listener)
        parts = {"quota": quota, "limiter": limiter, "breaker": breaker, "rate_limit": rate_limit, "budget": budget}
        for what, source in parts.items():
            check_part(source, *_PARTS[what], what)
        self._parts = parts
        self._scopes = ScopeTable(
            self._new_scope,
            check_int("max_scopes", max_scopes, low=1),
            check_seconds("scope_idle_timeout", scope_idle_timeout, low_open=True),
            self._evicted,
        )
        self._calls = self._attempts = self._retries = self._successes = self._failures = self._hedges = 0
        # Synchronous calls from several threads take every step on shared state under this lock.
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ scopes
    def _new_scope(self, key: str, now: float) -> Scope:
        policy = self.policy
        clock, events = self.clock, self.events
        parts = self._parts
        quota = given(parts["quota"], *_PARTS["quota"], key, "quota")
        if quota is None and policy.quota_config is not None:
            quota = RetryQuota(policy.quota_config, clock=clock, name=key, events=events)
        limiter = given(parts["limiter"], *_PARTS["limiter"], key, "limiter")
        if limiter is None and policy.limiter_config is not None:
            limiter = AdaptiveRateLimiter(policy.limiter_config, clock=clock, name=key, events=events, rng=self._rng)
        breaker = given(parts["breaker"], *_PARTS["breaker"], key, "breaker")
        if breaker is None and policy.breaker is not None:
            breaker = CircuitBreaker(policy.breaker, clock=clock, name=key, events=events)
        bucket = given(parts["rate_limit"], *_PARTS["rate_limit"], key, "rate_limit")
        if bucket is None and policy.rate_limit is not None:
            bucket = TokenBucket(policy.rate_limit, policy.rate_limit_burst or 1.0, clock=clock, name=key)
        budget = given(parts["budget"], *_PARTS["budget"], key, "budget")
        if budget is None and policy.budget is not None:
            budget = RetryBudget(policy.budget, clock=clock, name=key, events=events)
        return Scope(key, quota, limiter, breaker, bucket, now, budget, clock)

    def _evicted(self, scope: Scope, now: float) -> None:
        if self.events.wants(ScopeEvicted):
            self.events.emit(ScopeEvicted(time=now, source=scope.key, idle_for=now - scope.last_used))

    def scope_keys(self) -> list[str]:
        """The keys of the scopes kept right now."""
        return self._scopes.keys()

    # ------------------------------------------------------------------------------- ways in
    def attempts(
        self, *, scope: str = DEFAULT_SCOPE, policy: RetryPolicy | None = None,
        judge: Judge | None = None, label: Label | None = None, caller: str | None = None,
    ) -> Attempts:
        """Iterate over the attempts of one call::

            async for attempt in retrier.attempts():
                async with attempt:
                    result = await do_something()

        Args:
            scope: the scope (resource) whose quota, limiter and breaker the call uses.
            policy: a policy for this call only (its backoff, attempts, classification, deadlines);
                the scope's shared state still comes from the retrier's policy.
            judge: for integrations: the last word on every failed attempt's outcome (timeouts
                included), e.g. the httpx transport's "this request cannot be sent again".
            label: for integrations: what the call is (``"GET https://host/path"``), for logs and traces.
            caller: who the call is for (a tenant, a user, a job), a non-empty string. A call that has to wait
                for the scope's rate limits first waits for its caller's earlier calls, so that each caller
                has one call in the rate limit's line and the line serves the callers in turn: a caller
                with many calls cannot keep the others waiting. ``None`` (the default): the call is its
                own caller (first come, first served).

        Raises:
            TypeError, ValueError: ``caller`` is not a non-empty string or ``None``.
        """
        if caller is not None:
            check_caller("caller", caller)
        now = self.clock.now()
        return Attempts(self, self._scopes.get(scope, now), policy if policy is not None else self.policy,
                        now, judge, label, caller=caller)

    def begin_first(self, *, scope: str = DEFAULT_SCOPE, policy: RetryPolicy | None = None) -> FirstAttempt | None:
        """Deprecated: use :meth:`attempts`, whose first attempt begins at once when nothing could make it
        wait or refuse it (``await attempts.start()``).

        Begins a call's first attempt before the call has an object, when nothing could make it wait or
        refuse it; else ``None``.
        """
        warnings.warn(
            "Retrier.begin_first() is deprecated: start every call with Retrier.attempts() "
            "(its first attempt begins at once when nothing could make it wait)",
            DeprecationWarning, stacklevel=2,
        )
        policy = policy if policy is not None else self.policy
        if policy.timed:
            return None
        now = self.clock.now()
        shared = self._scopes.get(scope, now)
        if not shared.local or not shared.admit_first():
            return None
        return FirstAttempt(self, shared, policy, now)

    def sync_attempts(
        self, *, scope: str = DEFAULT_SCOPE, policy: RetryPolicy | None = None,
        judge: Judge | None = None, label: Label | None = None, lock: AbstractContextManager[Any] | None = None,
        caller: str | None = None,
    ) -> SyncAttempts:
        """:meth:`attempts` for synchronous code: ``for attempt in ...: with attempt: ...``.

        Safe to use from several threads at once: every step on the scope's shared state is taken
        under the retrier's lock (or ``lock``, for integrations that hold one of their own). Threads
        waiting for a rate limit poll it rather than queue, so a ``caller``'s calls take turns (one of
        them polls at a time) and the callers share the tokens as their pollers meet them.
        """
        if caller is not None:
            check_caller("caller", caller)
        lock = lock if lock is not None else self._lock
        now = self.clock.now()
        with lock:  # the scope table and the retrier's counters are shared by the threads
            return SyncAttempts(self, self._scopes.get(scope, now), policy if policy is not None else self.policy,
                                now, judge=judge, label=label, lock=lock, caller=caller)

    async def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``await fn(*args, **kwargs)`` with retries in the default scope and return its result.

        With a policy that has ``hedging`` (:class:`~asyncretry.HedgingConfig`), a call that has not
        answered after the hedging delay is started again concurrently, and the first success wins
        (the others are cancelled): give such a policy only for functions that are safe to run twice.

        Raises:
            Exception: the last real error when the call gives up, whatever stopped the retries, with
                its history attached (:func:`asyncretry.history_of`; ``gave_up`` says why).
            CircuitOpenError: the circuit breaker is open (the call made no attempt).
            RetriesExhausted: the call gave up on a result judged retryable (``why`` says why).
        """
        return await self._call(DEFAULT_SCOPE, fn, args, kwargs)

    async def call_in(
        self, scope: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Like :meth:`call`, in the given scope."""
        return await self._call(scope, fn, args, kwargs)

    async def _call(
        self, scope: str, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], kwargs: dict[str, Any],
        label: Label | None = None,
    ) -> T:
        attempts = self.attempts(scope=scope, label=label)
        if self.policy.hedging is not None:

            async def send(attempt: Attempt) -> T:
                value = await fn(*args, **kwargs)
                attempt.result = value  # for the policy's retry_if_result
                return value

            result = await attempts.hedged(self.policy.hedging, send)
            if attempts.gave_up is not None:
                raise attempts.result_error()
            return result
        result = NOT_SET
        async for attempt in attempts:
            async with attempt:
                result = await fn(*args, **kwargs)
                attempt.result = result
        if attempts.gave_up is not None:
            raise attempts.result_error()
        return result

    def sync_call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`call` for a plain (synchronous) function: ``fn(*args, **kwargs)`` with retries, sleeping
        with :func:`time.sleep`. Safe to call from several threads at once.

        Raises: as :meth:`call`; ``TypeError`` if ``fn`` returns a coroutine (use :meth:`call`).
        """
        return self._call_sync(DEFAULT_SCOPE, fn, args, kwargs)

    def sync_call_in(self, scope: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Like :meth:`sync_call`, in the given scope."""
        return self._call_sync(scope, fn, args, kwargs)

    def call_sync(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Deprecated name of :meth:`sync_call`."""
        warnings.warn("Retrier.call_sync() is deprecated: use Retrier.sync_call(), its new name",
                      DeprecationWarning, stacklevel=2)
        return self._call_sync(DEFAULT_SCOPE, fn, args, kwargs)

    def call_sync_in(self, scope: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Deprecated name of :meth:`sync_call_in`."""
        warnings.warn("Retrier.call_sync_in() is deprecated: use Retrier.sync_call_in(), its new name",
                      DeprecationWarning, stacklevel=2)
        return self._call_sync(scope, fn, args, kwargs)

    def _call_sync(
        self, scope: str, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any],
        label: Label | None = None,
    ) -> T:
        if self.policy.hedging is not None:
            raise ValueError(_SYNC_HEDGING)
        attempts = self.sync_attempts(scope=scope, label=label)
        result: T = NOT_SET
        for attempt in attempts:
            with attempt:
                result = fn(*args, **kwargs)
                if isinstance(result, CoroutineType):
                    result.close()  # never awaited: close it rather than let it warn later
                    raise TypeError(f"{fn!r} returned a coroutine: retry it with `await retrier.call(...)`")
                attempt.result = result
        if attempts.gave_up is not None:
            raise attempts.result_error()
        return result

    # ------------------------------------------------------------------------------ inspection
    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The lock synchronous calls hold around every step on shared state; a reader in another thread
        (a metrics collector) takes it to see a consistent snapshot."""
        return self._lock

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add an event listener to this retrier's bus; returns a function that removes it."""
        return self.events.subscribe(listener)

    def statistics(self) -> RetrierStatistics:
        """Counters and a snapshot of every scope."""
        return RetrierStatistics(
            name=self.name,
            calls=self._calls,
            attempts=self._attempts,
            retries=self._retries,
            successes=self._successes,
            failures=self._failures,
            evicted_scopes=self._scopes.evicted,
            scopes=tuple(scope.statistics() for scope in self._scopes.values()),
            hedges=self._hedges,
        )

    def __repr__(self) -> str:
        return (f"<Retrier {self.name!r} mode={self.policy.mode} scopes={len(self._scopes)} "
                f"calls={self._calls}>")
