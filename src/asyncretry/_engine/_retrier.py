"""The retry engine: a `Retrier` owns the shared state of its scopes; each call gets its own `Attempts`.

One invocation follows SPEC section 1.1::

    adaptive: await limiter.acquire()          before every attempt, the first included
    outcome = attempt()
    adaptive: limiter.update(throttled)        after every attempt
    success       -> quota.release(last cost, or the success increment); done
    not retryable -> give up (quota untouched)
    out of attempts -> give up (quota untouched)
    quota short   -> give up with RetryCapacityExceeded (or wait, in waiting mode)
    sleep(backoff), then the next attempt

The decisions are plain synchronous code (:meth:`Attempts._finish`); only the waits are async, so
the whole algorithm is in one place whatever the way in (``async for``, :meth:`Retrier.call`, the
decorator, the httpx transports).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, overload

import anyio
import anyio.lowlevel

from .._events import (
    AttemptFinished,
    EventBus,
    GaveUp,
    Listener,
    RetryScheduled,
    ScopeEvicted,
    Throttled,
    logger,
)
from .._exceptions import (
    AttemptTimeout,
    BackendUnavailable,
    CircuitOpenError,
    RateLimitTimeout,
    RetriesExhausted,
    RetryCapacityExceeded,
)
from .._primitives._breaker import _CLOSED, BreakerStatistics, CircuitBreaker
from .._primitives._bucket import AsyncTokenBucket, BucketStatistics
from .._primitives._clock import DEFAULT_CLOCK, Clock, RandomSource, default_rng
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveRateLimiter, LimiterStatistics
from .._primitives._quota import QuotaStatistics, RetryQuota
from .._validate import check_int, check_seconds
from ._classify import Outcome
from ._history import AttemptRecord, RetryHistory, attach_history
from ._policy import GiveUpInfo, RetryPolicy
from ._testmode import current_test_mode

__all__ = ["Attempt", "Attempts", "Retrier", "RetrierStatistics", "ScopeStatistics", "SyncAttempts"]

P = ParamSpec("P")
T = TypeVar("T")

_SUCCESS = Outcome(OutcomeKind.SUCCESS, "ok")
_SUCCESS_KIND = OutcomeKind.SUCCESS  # a module name: no enum lookup on the hot path


@overload
def _seconds(value: float | timedelta) -> float: ...
@overload
def _seconds(value: float | timedelta | None) -> float | None: ...
def _seconds(value: float | timedelta | None) -> float | None:
    # The policy normalises durations to float seconds; this only narrows the declared type.
    return value.total_seconds() if isinstance(value, timedelta) else value


S = TypeVar("S")


def _given(source: S | Callable[[str], S] | None, kind: type[S], key: str) -> S | None:
    """A shared object as given, or the one a factory makes for this scope."""
    if source is None or isinstance(source, kind):
        return source
    if callable(source):
        made = source(key)
        if not isinstance(made, kind):
            raise TypeError(f"the {kind.__name__} factory returned {made!r} for scope {key!r}")
        return made
    raise TypeError(f"expected a {kind.__name__} or a function making one per scope, got {source!r}")


_Decision = Generator[Awaitable[Any], Any, bool]


def _run_sync(decision: _Decision) -> bool:
    """Run a decision on local state only (it never yields)."""
    try:
        effect = next(decision)
    except StopIteration as done:
        return bool(done.value)
    close = getattr(effect, "close", None)
    if close is not None:
        close()
    raise TypeError("remote shared state needs the async driver")  # SyncAttempts refuses it up front


async def _run_async(decision: _Decision) -> bool:
    """Run a decision, awaiting each operation on remote shared state."""
    try:
        effect = next(decision)
        while True:
            effect = decision.send(await effect)
    except StopIteration as done:
        return bool(done.value)


def _log_hook_failure(info: GiveUpInfo) -> None:
    # The caller must see the call's real error, not the hook's: log the hook's and go on.
    logger.exception("asyncretry: the on_give_up hook failed for a call in scope %r", info.scope)
_NOT_SET: Any = object()
DEFAULT_SCOPE = "default"


@dataclass(frozen=True, slots=True)
class ScopeStatistics:
    """A snapshot of one scope's shared state (``None`` where the policy has no such part)."""

    key: str
    quota: QuotaStatistics | None
    limiter: LimiterStatistics | None
    breaker: BreakerStatistics | None
    rate_limit: BucketStatistics | None
    last_used: float


@dataclass(frozen=True, slots=True)
class RetrierStatistics:
    """Counters of a retrier since it was made, and its scopes."""

    name: str
    calls: int
    attempts: int
    retries: int
    successes: int
    failures: int
    evicted_scopes: int
    scopes: tuple[ScopeStatistics, ...]


class _Scope:
    """The shared state of one scope (one resource): quota, limiter, breaker, fixed rate limit."""

    __slots__ = (
        "breaker", "bucket", "first_cost", "key", "last_used", "limiter", "plain", "quick", "quota", "remote",
        "success_increment",
    )

    def __init__(
        self,
        key: str,
        quota: RetryQuota | None,
        limiter: AdaptiveRateLimiter | None,
        breaker: CircuitBreaker | None,
        bucket: AsyncTokenBucket | None,
        now: float,
    ) -> None:
        self.key = key
        self.quota = quota
        self.limiter = limiter
        self.breaker = breaker
        self.bucket = bucket
        self.last_used = now
        self.remote = any(getattr(part, "remote", False) for part in (quota, limiter, breaker, bucket))
        # Nothing to wait for before a first attempt: the async driver starts it without awaiting.
        self.plain = bucket is None and limiter is None and not (breaker is not None and breaker.remote)
        # What the first attempt costs from the quota (SPEC's initial_try_cost, 0 by default).
        self.first_cost = quota.config.initial_try_cost if quota is not None else 0
        # What a success that needed no retry gives back to the quota (SPEC 1.1).
        self.success_increment = quota.config.initial_try_success_increment if quota is not None else 0
        # A first attempt may run before its call object exists (Retrier._quick_scope): no fixed rate
        # to keep, nothing to pay, all state local; the breaker and the limiter are asked for each call.
        self.quick = bucket is None and not self.remote and not self.first_cost

    def succeeded(self, retrier: Retrier, attempt: int, started: float, now: float, probe: bool,
                  cost: int | None) -> None:
        """An attempt succeeded at ``now``: the limiter and breaker hear of it, the quota gets the last
        retry's ``cost`` back (or the success increment when no retry was paid for, SPEC 1.1)."""
        limiter = self.limiter
        if limiter is not None:
            limiter.update(False, reason="ok", sent_at=started)
        breaker = self.breaker
        if breaker is not None:
            # The breaker's own clock is almost always the retrier's: then hand it the time just read.
            breaker.record_success(probe, now=now if breaker._clock is retrier._clock else None)
        events = retrier.events
        if events.wants(AttemptFinished):
            events.emit(AttemptFinished(
                time=now, source=self.key, attempt=attempt, outcome="success", reason="ok", duration=now - started,
            ))
        quota = self.quota
        if quota is not None:
            quota._refund(cost if cost is not None else self.success_increment)
        retrier._successes += 1

    def busy(self) -> bool:
        """Whether a task is queued on this scope's rate limits (then it must not be evicted)."""
        return any(part is not None and part.statistics().waiting for part in (self.bucket, self.limiter))


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
        rate_limit: an :class:`AsyncTokenBucket` paced before every attempt, shared or per scope likewise;
            default: one per scope from the policy's ``rate_limit``.
        max_scopes: the most scopes kept at once (>= 1, default 10,000); the least recently used idle
            scope is evicted first.
        scope_idle_timeout: seconds after which an unused scope may be evicted (default 600).
    """

    __slots__ = (
        "_attempts",
        "_breaker",
        "_bucket",
        "_calls",
        "_clock",
        "_evicted",
        "_failures",
        "_limiter",
        "_max_scopes",
        "_quota",
        "_retries",
        "_rng",
        "_scope_idle_timeout",
        "_scopes",
        "_successes",
        "_sweep_at",
        "_timed",
        "events",
        "name",
        "policy",
    )

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        name: str = "retrier",
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        events: EventBus | None = None,
        quota: RetryQuota | Callable[[str], RetryQuota] | None = None,
        limiter: AdaptiveRateLimiter | Callable[[str], AdaptiveRateLimiter] | None = None,
        breaker: CircuitBreaker | Callable[[str], CircuitBreaker] | None = None,
        rate_limit: AsyncTokenBucket | Callable[[str], AsyncTokenBucket] | None = None,
        max_scopes: int = 10_000,
        scope_idle_timeout: float = 600.0,
    ) -> None:
        self.policy = policy if policy is not None else RetryPolicy()
        if not isinstance(self.policy, RetryPolicy):
            raise TypeError(f"policy must be a RetryPolicy, got {policy!r}")
        self.name = name
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._rng = rng if rng is not None else default_rng
        self.events = events if events is not None else EventBus()
        for listener in self.policy.listeners:
            self.events.subscribe(listener)
        self._quota = quota
        self._limiter = limiter
        self._breaker = breaker
        self._bucket = rate_limit
        self._max_scopes = check_int("max_scopes", max_scopes, low=1)
        self._scope_idle_timeout = check_seconds("scope_idle_timeout", scope_idle_timeout, low_open=True)
        self._scopes: dict[str, _Scope] = {}
        self._sweep_at = -math.inf
        self._calls = self._attempts = self._retries = self._successes = self._failures = 0
        self._evicted = 0
        self._timed = self.policy.deadline is not None or self.policy.attempt_timeout is not None

    # ------------------------------------------------------------------------------------ scopes
    def _scope(self, key: str, now: float | None = None) -> _Scope:
        scopes = self._scopes
        scope = scopes.get(key)
        if now is None:
            now = self._clock.now()
        if scope is None:
            if len(scopes) >= self._max_scopes or now >= self._sweep_at:
                self._sweep(now)
            scope = self._new_scope(key, now)
            scopes[key] = scope
        else:
            scope.last_used = now
        return scope

    def _quick_scope(self, key: str, now: float) -> _Scope | None:
        """The scope of a call whose first attempt may start at ``now`` before its call object exists.

        For integrations that make many calls (the httpx transport): when this returns a scope, the
        caller runs the first attempt at once and then either reports a plain success with
        :meth:`_quick_success` (no call object made at all), or continues the call with
        :meth:`Attempts._resume`. ``None``: open the call as usual. Only for the
        retrier's own policy, and never with a deadline or per-attempt timeout (those time the call).
        """
        if self._timed:
            return None
        scope = self._scope(key, now)
        if not scope.quick:
            return None
        breaker = scope.breaker
        if breaker is not None and breaker._state is not _CLOSED:
            return None  # acquire() may refuse or hand out a probe; while closed it only says False
        limiter = scope.limiter
        if limiter is not None and not limiter._admit_at_once():
            return None  # it may make the attempt wait: the general way awaits it
        return scope

    def _quick_success(self, scope: _Scope, started: float, now: float) -> FirstSuccess:
        """The first attempt begun at ``started`` in a scope from :meth:`_quick_scope` succeeded at ``now``:
        count the call and record the success, as a call that took the general way would have."""
        self._calls += 1
        self._attempts += 1
        scope.succeeded(self, 1, started, now, False, None)
        return FirstSuccess(scope, started, now)

    def _new_scope(self, key: str, now: float) -> _Scope:
        policy = self.policy
        clock, events = self._clock, self.events
        quota = _given(self._quota, RetryQuota, key)
        if quota is None and policy.quota_config is not None:
            quota = RetryQuota(policy.quota_config, clock=clock, name=key, events=events)
        limiter = _given(self._limiter, AdaptiveRateLimiter, key)
        if limiter is None and policy.limiter_config is not None:
            limiter = AdaptiveRateLimiter(policy.limiter_config, clock=clock, name=key, events=events)
        breaker = _given(self._breaker, CircuitBreaker, key)
        if breaker is None and policy.breaker is not None:
            breaker = CircuitBreaker(policy.breaker, clock=clock, name=key, events=events)
        bucket = _given(self._bucket, AsyncTokenBucket, key)
        if bucket is None and policy.rate_limit is not None:
            burst = policy.rate_limit_burst or 1.0
            bucket = AsyncTokenBucket(policy.rate_limit, burst, clock=clock, name=key)
        return _Scope(key, quota, limiter, breaker, bucket, now)

    def _sweep(self, now: float) -> None:
        """Evict idle scopes (and, over ``max_scopes``, the least recently used idle ones)."""
        self._sweep_at = now + self._scope_idle_timeout / 4
        idle_before = now - self._scope_idle_timeout
        scopes = self._scopes
        doomed = [s for s in scopes.values() if s.last_used <= idle_before and not s.busy()]
        excess = len(scopes) - len(doomed) - self._max_scopes + 1
        if excess > 0:
            rest = sorted((s for s in scopes.values() if s.last_used > idle_before), key=lambda s: s.last_used)
            doomed.extend([s for s in rest if not s.busy()][:excess])
        wants = self.events.wants(ScopeEvicted)
        for scope in doomed:
            del scopes[scope.key]
            self._evicted += 1
            if wants:
                self.events.emit(ScopeEvicted(time=now, source=scope.key, idle_for=now - scope.last_used))

    def scope_keys(self) -> list[str]:
        """The keys of the scopes kept right now."""
        return list(self._scopes)

    # ------------------------------------------------------------------------------- ways in
    def attempts(self, *, scope: str = DEFAULT_SCOPE, policy: RetryPolicy | None = None) -> Attempts:
        """Iterate over the attempts of one call::

            async for attempt in retrier.attempts():
                async with attempt:
                    result = await do_something()

        Args:
            scope: the scope (resource) whose quota, limiter and breaker the call uses.
            policy: a policy for this call only (its backoff, attempts, classification, deadlines);
                the scope's shared state still comes from the retrier's policy.
        """
        now = self._clock.now()
        call = Attempts()
        known = self._scopes.get(scope)
        if known is not None:
            known.last_used = now  # what _scope() does for a known scope, without the call
        else:
            known = self._scope(scope, now)
        call._open(self, known, policy if policy is not None else self.policy, now)
        return call

    async def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``await fn(*args, **kwargs)`` with retries in the default scope and return its result.

        Raises:
            Exception: the last real error when the call gives up, with its history attached
                (:func:`asyncretry.history_of`).
            RetryCapacityExceeded: the retry quota ran dry (chained to the last error).
            CircuitOpenError: the circuit breaker is open.
            RetriesExhausted: the attempts ran out on results judged retryable.
        """
        return await self._call(DEFAULT_SCOPE, fn, args, kwargs)

    async def call_in(
        self, scope: str, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Like :meth:`call`, in the given scope."""
        return await self._call(scope, fn, args, kwargs)

    async def _call(
        self, scope: str, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        attempts = self.attempts(scope=scope)
        result: T = _NOT_SET
        async for attempt in attempts:
            async with attempt:
                result = await fn(*args, **kwargs)
                attempt.result = result
        if attempts.gave_up is not None:
            raise attempts._result_error()
        return result

    # ------------------------------------------------------------------------------ inspection
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add an event listener to this retrier's bus; returns a function that removes it."""
        return self.events.subscribe(listener)

    def statistics(self) -> RetrierStatistics:
        """Counters and a snapshot of every scope."""
        scopes = tuple(
            ScopeStatistics(
                key=s.key,
                quota=s.quota.statistics() if s.quota is not None else None,
                limiter=s.limiter.statistics() if s.limiter is not None else None,
                breaker=s.breaker.statistics() if s.breaker is not None else None,
                rate_limit=s.bucket.statistics() if s.bucket is not None else None,
                last_used=s.last_used,
            )
            for s in self._scopes.values()
        )
        return RetrierStatistics(
            name=self.name,
            calls=self._calls,
            attempts=self._attempts,
            retries=self._retries,
            successes=self._successes,
            failures=self._failures,
            evicted_scopes=self._evicted,
            scopes=scopes,
        )

    def __repr__(self) -> str:
        return f"<Retrier {self.name!r} mode={self.policy.mode} scopes={len(self._scopes)} calls={self._calls}>"


class Attempt:
    """One attempt of a call; use it as ``async with attempt:`` (``with attempt:`` in sync code).

    Attributes:
        number: 1 for the first attempt.
        delay_before: the seconds slept before this attempt (0 for the first).
        result: set it to the attempt's result so that the policy's ``retry_if_result`` can judge it.
    """

    # The engine makes one per attempt; the fields that start at a constant are class attributes
    # (written on the instance only when they change), which keeps making one cheap.
    _call: _Call
    number: int = 1
    delay_before: float = 0.0
    result: Any = _NOT_SET
    _marked: Outcome | None = None
    _scope: anyio.CancelScope | None = None
    _started: float = -1.0  # read from the clock on entry (set earlier when already known)

    def retry_result(
        self,
        result: Any = None,
        *,
        reason: str = "result",
        kind: OutcomeKind = OutcomeKind.TRANSIENT,
        server_delay: float | None = None,
        server_delay_is_hint: bool = False,
    ) -> None:
        """Mark this attempt's result as a retryable failure (for example a poll that says NOT_READY).

        If the call then gives up, the iteration simply ends (the last result is the caller's); the
        :meth:`Retrier.call` form raises :class:`RetriesExhausted`.

        Args:
            result: the result being judged.
            reason: why it is retryable, for the history and events.
            kind: how to retry it (a retryable :class:`OutcomeKind`).
            server_delay: a delay the server asked for (seconds), if any.
            server_delay_is_hint: ``True`` for AWS's ``x-amz-retry-after`` (clamped to the backoff).
        """
        if not kind.retryable:
            raise ValueError(f"kind must be a retryable OutcomeKind, got {kind!r}")
        self._marked = Outcome(kind, reason, None, result, server_delay, server_delay_is_hint)

    def fail_result(self, result: Any = None, *, reason: str = "result") -> None:
        """Mark this attempt's result as a final, non-retryable failure (the call gives up)."""
        self._marked = Outcome(OutcomeKind.NOT_RETRYABLE, reason, None, result)

    def classify_result(self, outcome: Outcome) -> None:
        """Decide the classification of this attempt's result with an outcome made elsewhere.

        What :meth:`retry_result` and :meth:`fail_result` do, for integrations that build the
        :class:`Outcome` themselves (the httpx transports judge a response, its error code and its
        ``Retry-After`` in one go); ``outcome.error`` must be ``None``.
        """
        if outcome.error is not None:
            raise ValueError("outcome.error must be None for a result; use classify_error for an exception")
        self._marked = outcome

    def classify_error(self, outcome: Outcome) -> None:
        """Decide the classification of the exception this attempt is about to raise.

        Integrations that know more than the policy's classifier (the httpx transports know whether a
        request was sent and may be replayed) call this, then re-raise; ``outcome.error`` must be the
        exception raised.
        """
        if outcome.error is None:
            raise ValueError("outcome.error must be the exception the attempt raises")
        self._marked = outcome

    def _outcome(self, exc: Exception | None) -> Outcome:
        marked = self._marked
        if exc is None:
            if marked is not None and marked.error is None:
                return marked
            classifier = self._call._policy.classifier
            if classifier.retry_if_result is None or self.result is _NOT_SET:
                return _SUCCESS
            return classifier.classify_result(self.result)
        if marked is not None and marked.error is exc:
            return marked
        return self._call._policy.classifier.classify_error(exc)

    async def __aenter__(self) -> Attempt:
        call = self._call
        if self._started < 0.0:
            self._started = call._clock.now()
        if not call._timed:
            return self
        timeout = call._attempt_timeout(self._started)
        if timeout is not None:
            self._scope = anyio.CancelScope(deadline=anyio.current_time() + timeout)
            self._scope.__enter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        call = self._call
        if (
            exc is None
            and self._marked is None
            and self._scope is None
            and not call._scope.remote
            and (self.result is _NOT_SET or call._policy.classifier.retry_if_result is None)
        ):
            call._succeed(self)  # the hot path: a plain success on local state
            return False
        scope = self._scope
        if scope is not None:
            self._scope = None
            if scope.__exit__(exc_type, exc, tb) and exc is not None:
                # Our own per-attempt deadline cancelled the work: a timeout, retried as one.
                error = AttemptTimeout(call._last_timeout)
                outcome = Outcome(OutcomeKind.TIMEOUT, "attempt timeout", error)
                retry = await call._decide_async(self, outcome, error)
                await call._after_finish_async()
                if not retry:
                    raise error
                return True
        if exc is not None and not isinstance(exc, Exception):
            call._abandon()  # cancellation, KeyboardInterrupt ...: never retried, never delayed
            return False
        retry = await call._decide_async(self, self._outcome(exc), exc)
        if call._hook is not None or call._raise is not None:
            await call._after_finish_async()
        return retry

    def __enter__(self) -> Attempt:
        if self._started < 0.0:
            self._started = self._call._clock.now()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        call = self._call
        if exc is not None and not isinstance(exc, Exception):
            call._abandon()
            return False
        if exc is None and self._marked is None and (
            self.result is _NOT_SET or call._policy.classifier.retry_if_result is None
        ):
            call._succeed(self)  # sync drivers only ever hold local state
            return False
        retry = call._decide_sync(self, self._outcome(exc), exc)
        call._after_finish_sync()
        return retry

    def __repr__(self) -> str:
        return f"<Attempt #{self.number} delay_before={self.delay_before:.3f}>"


class _Call:
    """The state and the decisions of one call; the async and sync drivers only do the waiting.

    Per-call objects are made for every call, so the fields that start at a constant are class
    attributes (written on the instance only once they change): the success path stays short.
    """

    # Defaults shared by all calls until a call changes its own copy.
    number = 0
    gave_up: str | None = None
    outcome: Outcome | None = None
    _delay = 0.0
    _previous_delay: float | None = None
    _last_cost: int | None = None
    _quota_wait = 0
    _probe: bool | None = None
    _current: Attempt | None = None
    _done = False
    _no_wait = False
    _last_error: BaseException | None = None
    _last_timeout = 0.0
    _hook: GiveUpInfo | None = None
    _raise: tuple[BaseException, BaseException | None] | None = None
    _refused: Exception | None = None
    _delays: tuple[float, ...] | list[float] = ()  # index i: the delay after attempt i + 1
    # The attempts that failed: (number, started, duration, kind, reason, repr of the error).
    _records: tuple[()] | list[tuple[int, float, float, OutcomeKind, str, str | None]] = ()
    _final: Attempt | None = None  # the attempt that succeeded; its record is made when history() asks
    _ended = 0.0  # when it ended
    _deadline_at = math.inf
    _timed = False  # a deadline or a per-attempt timeout: entering an attempt computes its time limit

    _retrier: Retrier
    _scope: _Scope
    _policy: RetryPolicy
    _clock: Clock
    _started: float
    _max_attempts: int

    def _open(self, retrier: Retrier, scope: _Scope, policy: RetryPolicy, now: float) -> None:
        """Start the call at ``now`` (the drivers' constructors; kept short, it runs for every call)."""
        self._retrier = retrier
        self._scope = scope
        self._policy = policy
        self._clock = retrier._clock
        self._started = now
        self._max_attempts = policy.max_attempts
        if policy.deadline is not None or policy.attempt_timeout is not None:
            self._timed = True
            deadline = _seconds(policy.deadline)
            if deadline is not None:
                self._deadline_at = now + deadline
        test = current_test_mode()
        if test is not None:
            self._no_wait = test.no_wait
            if test.max_attempts is not None:
                self._max_attempts = min(self._max_attempts, test.max_attempts)
        retrier._calls += 1
        first = scope.first_cost
        if first:
            quota = scope.quota
            assert quota is not None
            if not quota.try_acquire(first):
                refused = RetryCapacityExceeded(available=quota.available, cost=first, name=quota.name)
                self._give_up_before_attempt(refused, "quota")
                self._refused = refused  # raised by the driver's first step, after the on_give_up hook

    @property
    def retrying(self) -> bool:
        """True after an attempt failed and another will follow (the driver has not started it yet)."""
        return not self._done and self.number > 0 and self._current is None

    # ----------------------------------------------------------------- steps shared by both drivers
    def _check_next(self) -> bool:
        """False when the call is over; raises when the previous attempt was never entered."""
        if self._done:
            return False
        if self._current is not None:
            raise RuntimeError(
                "each attempt must be entered with `async with attempt:` (or `with attempt:`) "
                "before asking for the next one"
            )
        return True

    def _start_attempt(self, delay: float, probe: bool | None = None) -> Attempt:
        scope = self._scope
        if probe is not None:
            self._probe = probe  # a remote breaker was asked by the async driver
        elif scope.breaker is not None:
            try:
                self._probe = scope.breaker.acquire()
            except CircuitOpenError as error:
                self._give_up_before_attempt(error, "breaker")
                if self._last_error is not None:
                    raise error from self._last_error
                raise
        self.number = number = self.number + 1
        self._retrier._attempts += 1
        attempt = Attempt()
        attempt._call = self
        if number != 1:
            attempt.number = number
        if delay:
            attempt.delay_before = delay
        self._current = attempt
        return attempt

    def _refund_retry(self) -> None:
        """The retry that was paid for will not happen (cancelled, or refused before it started)."""
        quota = self._scope.quota
        if quota is not None and self._last_cost:
            quota.release(self._last_cost)
            self._last_cost = None

    def _failed_wait(self, error: Exception, why: str) -> Exception:
        """A wait before an attempt failed (quota, rate limit): record it, return what to raise."""
        if why == "quota":
            self._last_cost = None
        self._give_up_before_attempt(error, why)
        if self._last_error is not None:
            error.__cause__ = self._last_error
        return error

    def _remaining(self, now: float) -> float | None:
        """Seconds left before the call's deadline or the enclosing cancel scope's, ``None`` if unbounded."""
        remaining = self._deadline_at - now
        try:
            outer = anyio.current_effective_deadline()
        except RuntimeError:  # no event loop: sync code has no cancel scopes
            outer = math.inf
        else:
            if outer != math.inf:
                remaining = min(remaining, outer - anyio.current_time())
        return None if remaining == math.inf else max(0.0, remaining)

    def _attempt_timeout(self, now: float) -> float | None:
        timeout = _seconds(self._policy.attempt_timeout)
        if self._deadline_at != math.inf:
            left = max(0.0, self._deadline_at - now)
            timeout = left if timeout is None else min(timeout, left)
        if timeout is not None:
            self._last_timeout = timeout
        return timeout

    # --------------------------------------------------------------------------- the decision
    def _finish(self, attempt: Attempt, outcome: Outcome, error: Exception | None) -> _Decision:
        """Record an attempt's outcome and decide (SPEC 1.1); returns True to swallow the error and retry.

        A generator: it yields an awaitable for each operation on *remote* shared state (a quota or
        breaker on Redis, ``remote = True``) and receives its result, so that the one decision procedure
        serves local state (never yields), the async driver (awaits) and the sync driver (local only).
        """
        retrier = self._retrier
        scope = self._scope
        now = self._clock.now()
        self._current = None
        kind = outcome.kind
        self.outcome = outcome
        if error is not None:
            self._last_error = error
        if scope.limiter is not None:
            # sent_at: the limiter tells a new congestion event from echoes of one it already reacted to.
            scope.limiter.update(
                kind is OutcomeKind.THROTTLING, reason=outcome.reason, sent_at=attempt._started
            )
        elif kind is OutcomeKind.THROTTLING and retrier.events.wants(Throttled):
            retrier.events.emit(Throttled(time=now, source=scope.key, reason=outcome.reason))
        breaker = scope.breaker
        if breaker is not None:
            probe, self._probe = bool(self._probe), None
            if breaker.remote:
                yield breaker.record_async(success=not kind.retryable, probe=probe)
            elif kind.retryable:
                breaker.record_failure(probe)
            else:
                breaker.record_success(probe)
        number = attempt.number
        started = attempt._started
        events = retrier.events
        if events.wants(AttemptFinished):
            events.emit(AttemptFinished(
                time=now, source=scope.key, attempt=number, outcome=kind.value, reason=outcome.reason,
                duration=now - started,
            ))
        quota = scope.quota

        if kind is _SUCCESS_KIND:
            self._final = attempt
            self._ended = now
            if quota is not None:
                cost = self._last_cost
                refund = cost if cost is not None else quota.config.initial_try_success_increment
                if quota.remote:
                    yield quota.release_async(refund)
                else:
                    quota._refund(refund)
            self._done = True
            retrier._successes += 1
            return False
        row = (number, started, now - started, kind, outcome.reason, None if error is None else repr(error))
        if self._records:
            self._records.append(row)
        else:
            self._records = [row]
        if not kind.retryable:
            return self._give_up(outcome, error, "not_retryable", now)
        if number >= self._max_attempts:
            return self._give_up(outcome, error, "max_attempts", now)
        cost = 0
        if quota is not None:
            cost = quota.cost_of(kind)
            if quota.config.circuit_breaker_mode:
                paid = (yield quota.try_acquire_async(cost)) if quota.remote else quota._try_take(cost)
                if not paid:
                    self._last_cost = None
                    return self._give_up(outcome, error, "quota", now)
            else:
                self._quota_wait = cost
        delay, server_directed = self._plan_delay(outcome, kind, number)
        remaining = self._remaining(now) if delay > 0.0 or self._deadline_at != math.inf else None
        # A sleep that ends at the deadline leaves no time for the attempt it was for: give up now.
        why: str | None = None
        if remaining is not None and delay >= remaining:
            why = "server_delay" if server_directed else "deadline"
        elif breaker is not None and breaker.statistics().retry_after > delay:
            # The breaker would still refuse the retry after the sleep: never sleep and then give up.
            why = "breaker"
        if why is not None:
            if quota is not None and quota.config.circuit_breaker_mode:
                # The retry it paid for will not happen.
                if quota.remote:
                    yield quota.release_async(cost)
                else:
                    quota.release(cost)
            self._quota_wait = 0
            return self._give_up(outcome, error, why, now)
        if quota is not None:
            self._last_cost = cost
        self._delay = delay
        self._previous_delay = delay
        if self._delays:
            self._delays.append(delay)  # type: ignore[union-attr]
        else:
            self._delays = [delay]
        retrier._retries += 1
        if events.wants(RetryScheduled):
            events.emit(RetryScheduled(
                time=now, source=scope.key, attempt=number, delay=delay, outcome=kind.value,
                reason=outcome.reason, server_directed=server_directed,
            ))
        return True

    def _succeed(self, attempt: Attempt) -> None:
        """:meth:`_finish` for a plain success on local state (the hot path, so written out on its own)."""
        now = self._clock.now()
        # (_current stays set: with _done, nothing reads it again)
        self.outcome = _SUCCESS
        self._final = attempt
        self._ended = now
        self._done = True
        probe = self._probe
        if probe is not None:
            self._probe = None
        self._scope.succeeded(self._retrier, attempt.number, attempt._started, now, bool(probe), self._last_cost)

    async def _decide_async(self, attempt: Attempt, outcome: Outcome, error: Exception | None) -> bool:
        """:meth:`_finish` for the async driver: awaits remote state, and turns a remote backend that
        fails closed (:class:`BackendUnavailable`) into a give-up like any other refusal."""
        decision = self._finish(attempt, outcome, error)
        if not self._scope.remote:
            return _run_sync(decision)
        try:
            return await _run_async(decision)
        except BackendUnavailable as failure:
            decision.close()
            self._give_up_before_attempt(failure, "backend")
            await self._after_finish_async()
            raise failure from error if error is not None else self._last_error

    def _decide_sync(self, attempt: Attempt, outcome: Outcome, error: Exception | None) -> bool:
        """:meth:`_finish` for the synchronous driver (local state only)."""
        return _run_sync(self._finish(attempt, outcome, error))

    def _plan_delay(self, outcome: Outcome, kind: OutcomeKind, number: int) -> tuple[float, bool]:
        policy = self._policy
        backoff = policy.throttling_backoff if kind is OutcomeKind.THROTTLING else policy.backoff
        assert backoff is not None
        delay = backoff.delay(number, self._retrier._rng(), self._previous_delay)
        server = outcome.server_delay
        if server is None or not policy.honour_server_delay:
            return delay, False
        cap = _seconds(policy.max_server_delay)
        if outcome.server_delay_is_hint:
            if not policy.honour_amz_retry_after:
                return delay, False
            # AWS: the hint is clamped into [t, t + 5] around the computed backoff t (and capped).
            return min(max(server, delay), delay + 5.0, max(cap, delay)), True
        return min(server, cap), True

    def _give_up(self, outcome: Outcome, error: Exception | None, why: str, now: float) -> bool:
        retrier = self._retrier
        retrier._failures += 1
        self._done = True
        self.gave_up = why
        history = self.history()
        if error is not None:
            attach_history(error, history)
        events = retrier.events
        if events.wants(GaveUp):
            events.emit(GaveUp(
                time=now, source=self._scope.key, attempts=self.number, why=why, outcome=outcome.kind.value,
                reason=outcome.reason, elapsed=now - self._started,
            ))
        if self._policy.on_give_up is not None:
            self._hook = GiveUpInfo(self._scope.key, outcome, history)
        if why == "quota" and error is not None:
            quota = self._scope.quota
            assert quota is not None
            exceeded = RetryCapacityExceeded(
                available=quota.available, cost=quota.cost_of(outcome.kind), name=quota.name
            )
            attach_history(exceeded, history)
            self._raise = (exceeded, error)
        elif why == "breaker" and error is not None:
            breaker = self._scope.breaker
            assert breaker is not None
            stats = breaker.statistics()
            refused = CircuitOpenError(name=breaker.name, state=str(stats.state), retry_after=stats.retry_after)
            attach_history(refused, history)
            self._raise = (refused, error)
        return False

    def _after_finish_sync(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            assert self._policy.on_give_up is not None
            try:
                result = self._policy.on_give_up(hook)
            except Exception:
                _log_hook_failure(hook)
            else:
                if result is not None:
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()  # an un-awaited coroutine would warn later
                    logger.error("asyncretry: on_give_up returned an awaitable in synchronous code; "
                                 "use a plain function with the sync transport")
        self._raise_pending()

    async def _after_finish_async(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            assert self._policy.on_give_up is not None
            try:
                result = self._policy.on_give_up(hook)
                if result is not None:
                    await result
            except Exception:
                _log_hook_failure(hook)
        self._raise_pending()

    def _raise_pending(self) -> None:
        pending, self._raise = self._raise, None
        if pending is not None:
            error, cause = pending
            raise error from cause

    def _give_up_before_attempt(self, error: Exception, why: str) -> None:
        self._refund_retry()  # the retry paid for (if any) will not happen
        retrier = self._retrier
        retrier._failures += 1
        self._done = True
        self.gave_up = why
        now = self._clock.now()
        history = self.history()
        attach_history(error, history)
        if self._policy.on_give_up is not None:
            # The drivers run the hook (_after_finish_*) before raising: nothing is dropped silently.
            final = self.outcome
            if final is None:  # no attempt was made: the refusal itself is what failed
                final = Outcome(OutcomeKind.NOT_RETRYABLE, why, error)
            self._hook = GiveUpInfo(self._scope.key, final, history)
        if retrier.events.wants(GaveUp):
            last = self.outcome
            # `reason` is a classification, as everywhere else (metrics group by it): the last attempt's,
            # or the refusal's class name; the refusal's message (token counts ...) would be unbounded.
            retrier.events.emit(GaveUp(
                time=now, source=self._scope.key, attempts=self.number, why=why,
                outcome=last.kind.value if last else "none", reason=last.reason if last else type(error).__name__,
                elapsed=now - self._started,
            ))

    def _abandon(self) -> None:
        """The attempt was cancelled (or hit a BaseException): free what it held, record nothing."""
        self._current = None
        self._done = True
        breaker = self._scope.breaker
        if breaker is not None and self._probe is not None:
            breaker.release(self._probe)
            self._probe = None

    def _result_error(self) -> Exception:
        outcome = self.outcome
        why = self.gave_up or "max_attempts"
        if why == "quota":
            quota = self._scope.quota
            assert quota is not None
            assert outcome is not None
            error: Exception = RetryCapacityExceeded(
                available=quota.available, cost=quota.cost_of(outcome.kind), name=quota.name
            )
        else:
            reason = outcome.reason if outcome is not None else "none"
            error = RetriesExhausted(
                f"gave up ({why}) after {self.number} attempt(s); the last result was retryable: {reason}",
                last_result=outcome.result if outcome is not None else None,
                why=why,
            )
        attach_history(error, self.history())
        return error

    # -------------------------------------------------------------------------------- history
    def history(self) -> RetryHistory:
        """The record of this call so far."""
        delays = self._delays
        rows = list(self._records)
        final = self._final
        if final is not None:
            reason = self.outcome.reason if self.outcome is not None else "ok"
            rows.append((final.number, final._started, self._ended - final._started, OutcomeKind.SUCCESS, reason, None))
        records = tuple(
            AttemptRecord(
                number=n, started=s, duration=d, kind=k, reason=r,
                delay_after=delays[i] if i < len(delays) else None, error=e,
            )
            for i, (n, s, d, k, r, e) in enumerate(rows)
        )
        ended = records[-1].started + records[-1].duration if records else self._clock.now()
        return RetryHistory(
            scope=self._scope.key, attempts=records, elapsed=ended - self._started, gave_up=self.gave_up
        )

    @property
    def total_delay(self) -> float:
        """Seconds of backoff scheduled so far."""
        return sum(self._delays)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} scope={self._scope.key!r} number={self.number} gave_up={self.gave_up!r}>"


class FirstSuccess:
    """A finished call whose first attempt succeeded on the quick path (no call object was made).

    It answers what a finished :class:`Attempts` answers to the integrations' reports.
    """

    __slots__ = ("_ended", "_scope", "_started")
    number = 1
    total_delay = 0.0
    gave_up = None

    def __init__(self, scope: _Scope, started: float, ended: float) -> None:
        self._scope = scope
        self._started = started
        self._ended = ended

    def history(self) -> RetryHistory:
        duration = self._ended - self._started
        record = AttemptRecord(
            number=1, started=self._started, duration=duration, kind=OutcomeKind.SUCCESS, reason="ok",
            delay_after=None, error=None,
        )
        return RetryHistory(scope=self._scope.key, attempts=(record,), elapsed=duration, gave_up=None)


class Attempts(_Call):
    """The attempts of one call: an async iterator of :class:`Attempt` (see :meth:`Retrier.attempts`).

    After the loop, :attr:`gave_up` says why the call gave up on a result (``None`` if it succeeded),
    :attr:`outcome` is the last outcome and :meth:`history` the full record.
    """

    def __aiter__(self) -> Attempts:
        return self

    def _start_now(self, resumed: bool = False) -> Attempt | None:
        """The first attempt, started at once when nothing has to be awaited or refused before it.

        ``None`` otherwise (a rate limit or a remote breaker to wait for, a quota refusal to report,
        a breaker that is not closed): then :meth:`__anext__` takes the general way. ``resumed``: the
        attempt already began on the quick path (:meth:`_resume`), so there is nothing to check.
        """
        if not resumed:
            scope = self._scope
            if self.number or not scope.plain or self._refused is not None:
                return None
            breaker = scope.breaker
            if breaker is not None and breaker._state is not _CLOSED:
                return None  # acquire() may refuse or hand out a probe; while closed it only says False
        self.number = 1
        self._retrier._attempts += 1
        attempt = Attempt()
        attempt._call = self
        attempt._started = self._started  # nothing was waited for: the attempt starts with the call
        self._current = attempt
        return attempt

    @classmethod
    def _resume(cls, retrier: Retrier, scope: _Scope, started: float) -> tuple[Attempts, Attempt]:
        """The call whose first attempt began at ``started`` in a scope from :meth:`Retrier._quick_scope`,
        and that attempt: the caller goes on as inside ``async with attempt:`` (the breaker was closed
        when the attempt began, so it holds no probe; the quota took nothing for it)."""
        call = cls()
        call._open(retrier, scope, retrier.policy, started)
        attempt = call._start_now(resumed=True)
        assert attempt is not None
        return call, attempt

    async def __anext__(self) -> Attempt:
        attempt = self._start_now()
        if attempt is not None:
            return attempt
        if self._refused is not None:
            await self._after_finish_async()
            refused, self._refused = self._refused, None
            raise refused
        if not self._check_next():
            raise StopAsyncIteration
        try:
            return await self._next_attempt()
        except Exception:
            await self._after_finish_async()  # gave up before the attempt: run on_give_up, then raise
            raise

    async def _next_attempt(self) -> Attempt:
        delay = 0.0
        scope = self._scope
        if self.number:
            delay = self._delay
            if self._quota_wait:
                await self._wait_quota()
            if delay > 0.0 and not self._no_wait:
                try:
                    await self._clock.sleep(delay)
                except BaseException:
                    self._refund_retry()
                    raise
        if scope.bucket is not None or scope.limiter is not None:
            await self._wait_rate()
        breaker = scope.breaker
        if breaker is not None and breaker.remote:
            try:
                probe = await breaker.acquire_async()
            except BackendUnavailable as failure:
                raise self._failed_wait(failure, "backend") from self._last_error
            except CircuitOpenError as error:
                self._give_up_before_attempt(error, "breaker")
                if self._last_error is not None:
                    raise error from self._last_error
                raise
            return self._start_attempt(delay, probe)
        return self._start_attempt(delay)

    async def _wait_quota(self) -> None:
        quota = self._scope.quota
        assert quota is not None
        cost, self._quota_wait = self._quota_wait, 0
        remaining = self._remaining(self._clock.now())
        if remaining == 0.0:
            await anyio.lowlevel.checkpoint_if_cancelled()  # as in _wait_rate: cancellation first
        try:
            await quota.acquire(cost, timeout=remaining)
        except RetryCapacityExceeded as error:
            raise self._failed_wait(error, "quota") from self._last_error
        except BackendUnavailable as failure:
            raise self._failed_wait(failure, "backend") from self._last_error
        self._last_cost = cost

    async def _wait_rate(self) -> None:
        scope = self._scope
        remaining = self._remaining(self._clock.now())
        try:
            if remaining == 0.0:
                # No time left may mean an enclosing scope was cancelled: deliver that cancellation
                # rather than turn it into a RateLimitTimeout (which a caller catching Exception retries).
                await anyio.lowlevel.checkpoint_if_cancelled()
            if scope.bucket is not None:
                await scope.bucket.acquire(1, timeout=remaining)
            if scope.limiter is not None:
                await scope.limiter.acquire(timeout=remaining)
        except RateLimitTimeout as error:
            raise self._failed_wait(error, "rate_limit") from self._last_error
        except BackendUnavailable as failure:
            raise self._failed_wait(failure, "backend") from self._last_error
        except BaseException:
            self._refund_retry()
            raise


class SyncAttempts(_Call):
    """The attempts of one call in synchronous code (``for attempt in ...: with attempt: ...``).

    The same decisions as :class:`Attempts`; waits block the thread with :func:`time.sleep`.
    Used by :class:`asyncretry.httpx.RetryTransport`.
    """

    def __init__(
        self, retrier: Retrier, scope: _Scope, policy: RetryPolicy, *, lock: AbstractContextManager[Any] | None = None
    ) -> None:
        for part in (scope.quota, scope.breaker, scope.limiter, scope.bucket):
            if getattr(part, "remote", False):
                raise TypeError(
                    f"{type(part).__name__} keeps its state on a remote server, which needs the async driver; "
                    "use asyncretry.Attempts / AsyncRetryTransport"
                )
        self._open(retrier, scope, policy, retrier._clock.now())
        # Threads share the scope's quota, limiter and breaker: every decision on them takes the lock.
        self._lock = lock if lock is not None else nullcontext()

    def __iter__(self) -> SyncAttempts:
        return self

    def _start_attempt(self, delay: float, probe: bool | None = None) -> Attempt:
        with self._lock:
            return super()._start_attempt(delay, probe)

    def _decide_sync(self, attempt: Attempt, outcome: Outcome, error: Exception | None) -> bool:
        with self._lock:
            return super()._decide_sync(attempt, outcome, error)

    def _succeed(self, attempt: Attempt) -> None:
        with self._lock:
            super()._succeed(attempt)

    def __next__(self) -> Attempt:
        if self._refused is not None:
            self._after_finish_sync()
            refused, self._refused = self._refused, None
            raise refused
        if not self._check_next():
            raise StopIteration
        try:
            return self._next_attempt()
        except Exception:
            self._after_finish_sync()  # gave up before the attempt: run on_give_up, then raise
            raise

    def _next_attempt(self) -> Attempt:
        delay = 0.0
        scope = self._scope
        if self.number:
            delay = self._delay
            if self._quota_wait:
                quota = scope.quota
                assert quota is not None
                cost, self._quota_wait = self._quota_wait, 0
                if not self._block_until(quota.try_acquire, quota.time_until_available, cost):
                    error = RetryCapacityExceeded(available=quota.available, cost=cost, name=quota.name)
                    raise self._failed_wait(error, "quota")
                self._last_cost = cost
            if delay > 0.0 and not self._no_wait:
                time.sleep(delay)
        if scope.bucket is not None:
            bucket = scope.bucket
            if not self._block_until(bucket.try_acquire, bucket.time_until_available, 1):
                wait = bucket.time_until_available(1)
                error2 = RateLimitTimeout(name=bucket.name, wait=wait, timeout=self._remaining_or_zero())
                raise self._failed_wait(error2, "rate_limit")
        if scope.limiter is not None:
            limiter = scope.limiter
            if not self._block_until(lambda _n: limiter.try_acquire(), lambda _n: limiter.time_until_available(), 1):
                error3 = RateLimitTimeout(
                    name=limiter.name, wait=limiter.time_until_available(), timeout=self._remaining_or_zero()
                )
                raise self._failed_wait(error3, "rate_limit")
        return self._start_attempt(delay)

    def _remaining_or_zero(self) -> float:
        return self._remaining(self._clock.now()) or 0.0

    def _block_until(
        self, take: Callable[[float], bool], wait_for: Callable[[float], float], n: float
    ) -> bool:
        """Poll ``take(n)`` and sleep the predicted wait until it succeeds or the deadline passes."""
        while True:
            with self._lock:
                if take(n):
                    return True
            wait = wait_for(n)
            remaining = self._remaining(self._clock.now())
            if remaining is not None and wait > remaining:
                return False
            # Others may release tokens sooner than predicted (quota refunds): re-check at least every 50 ms.
            time.sleep(min(wait, 0.05) if wait > 0 else 0.001)
