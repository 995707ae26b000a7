"""What both drivers share, and the waits that set them apart.

A driver holds the :class:`~._call.Call` of its call (the decisions and their state) and shows users its
record (:class:`_Driver`: ``number``, ``gave_up``, :meth:`~_Driver.history` ...). Its loop (``start``,
``end``) is written once, in :mod:`._async._attempts` (:class:`~asyncretry.Attempts`), and generated for
synchronous code (:mod:`._sync._attempts`, :class:`~asyncretry.SyncAttempts`). What differs is only how a
driver waits, here: :class:`AsyncWaits` awaits (the event loop's clock, parts on a server, the hook's
awaitable); :class:`SyncWaits` blocks the thread and takes a lock around every step on shared state.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._events import logger
from .._exceptions import BackendUnavailable, CircuitOpenError, RateLimitTimeout, RetryCapacityExceeded
from .._primitives._breaker import CircuitBreaker
from .._primitives._bucket import TokenBucket
from .._primitives._budget import RetryBudget
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveRateLimiter
from .._primitives._quota import RetryQuota
from ._attempt import Attempt
from ._call import Call, Judge, Label
from ._classify import Outcome
from ._history import RetryHistory
from ._policy import GiveUpInfo, RetryPolicy
from ._settle import deliver, remaining
from ._testmode import current_test_mode

if TYPE_CHECKING:
    from .._primitives._shared import RemoteBudget
    from ._retrier import Retrier
    from ._scopes import Scope

__all__ = ["AsyncWaits", "SyncWaits", "open_call"]

_NO_LOCK = nullcontext()


def _pay_first(call: Call, scope: Scope, now: float) -> None:
    """Take SPEC's ``initial_try_cost`` for a first attempt, or refuse the call (local quotas only)."""
    quota = scope.quota
    assert isinstance(quota, RetryQuota)
    if not quota.try_acquire(scope.first_cost):
        error = RetryCapacityExceeded(available=quota.available, cost=scope.first_cost, name=quota.name)
        call.refuse(error, "quota", now)
        raise error


def open_call(retrier: Retrier, scope: Scope, now: float) -> None:
    """What opening a call does to shared state: it is counted, and a local retry budget hears of the
    request (a remote budget is told by the async driver, awaited, before the first attempt)."""
    budget = scope.budget
    if budget is not None and isinstance(budget, RetryBudget):
        budget.record_request(now=now)
    retrier._calls += 1


def _log_hook_failure(info: GiveUpInfo) -> None:
    # The caller must see the call's real error, not the hook's: log the hook's and go on.
    logger.exception("asyncretry: the on_give_up hook failed for a call in scope %r", info.scope)


def _give_up(retrier: Retrier, call: Call, error: Exception, why: str) -> None:
    """End ``call`` with ``error`` that the integration made for it (see :meth:`Attempts.give_up`)."""
    if call.gave_up is not None or call._final is not None:
        raise RuntimeError(f"the call already ended ({call.gave_up or 'succeeded'}): it cannot give up again")
    now = retrier.clock.now()
    call._give_up_common(error, why, now)
    if call.policy.on_give_up is not None:
        call.hook = GiveUpInfo(call.scope.key, Outcome(OutcomeKind.NOT_RETRYABLE, why, error), call.history(now))
    retrier._failures += 1
    deliver(call)


def _abandon(call: Call) -> None:
    """The attempt was cancelled: the call ends, and a half-open probe's slot in the breaker is freed."""
    probe = call.abandon()
    if probe:
        breaker = call.scope.breaker
        assert breaker is not None
        breaker.release(probe)


def _ending_of(retrier: Retrier, call: Call, error: BaseException) -> Exception | None:
    """What a call refused its next attempt ends with (counted, its refusal's event delivered); anything else
    that stopped the wait (a cancellation, a bug) is raised again."""
    if not (isinstance(error, Exception) and call.gave_up is not None):
        raise error
    ending, call.ending = call.ending, None
    retrier._failures += 1
    deliver(call)
    return ending


def _end_with(ending: Exception | None) -> None:
    """End a call that was refused its next attempt: raise what it ends with (the refusal when no attempt
    was made, else the last attempt's own error), or return when its last attempt ended with a result.

    Raised here, outside the handler of the refusal, so that the error keeps its own context."""
    if ending is not None:
        raise ending


class _Driver:
    """What both drivers show of their call: its record, read by users and integrations. The decisions and
    their state stay on the :class:`~._call.Call` the driver holds."""

    __slots__ = ("_call", "_caller", "_retrier")

    _call: Call
    _caller: str | None  # who the call is for: its rate-limit waits take that caller's turn (None: its own)
    _retrier: Retrier
    _lock: AbstractContextManager[Any]  # held around every step on shared state (threads share it)

    def history(self) -> RetryHistory:
        """The record of this call so far."""
        return self._call.history(self._retrier.clock.now())

    def result_error(self) -> Exception:
        """What the ``call`` form raises when the call gave up on a result (no exception to re-raise):
        :class:`~asyncretry.RetriesExhausted`, history attached."""
        return self._call.result_error()

    def remaining(self, now: float) -> float | None:
        """Seconds left at ``now`` before the call's deadline or the caller's own; ``None`` if unbounded."""
        return remaining(self._call, now)

    def abandon(self) -> None:
        """The attempt was cancelled (or hit a BaseException): the call ends, recording nothing; a half-open
        probe's slot in the breaker is freed."""
        with self._lock:
            _abandon(self._call)

    def __repr__(self) -> str:
        call = self._call
        state = "running" if not call.done else (call.gave_up and f"gave up ({call.gave_up})") or "done"
        return f"<{type(self).__name__} scope={call.scope.key!r} attempts={call.number} {state}>"


class AsyncWaits(_Driver):
    """How the async driver waits: with ``await``, for local parts and parts kept on a server alike."""

    __slots__ = ()

    _lock = _NO_LOCK  # one task runs a call's steps: nothing to hold

    def __init__(
        self, retrier: Retrier, scope: Scope, policy: RetryPolicy, now: float,
        judge: Judge | None = None, label: Label | None = None, *, begun: bool = False, caller: str | None = None,
    ) -> None:
        self._retrier = retrier
        self._caller = caller
        self._call = Call(scope, policy, now, retrier.events, judge, label, test=current_test_mode(), begun=begun)
        if not begun:  # (begun: Retrier.begin_first opened it)
            open_call(retrier, scope, now)

    def begin_now(self) -> Attempt | None:
        """Deprecated: ``await start()`` begins the first attempt at once when nothing may make it wait."""
        warnings.warn(
            "Attempts.begin_now() is deprecated: use `await attempts.start()`, which begins the first attempt "
            "at once when nothing may make it wait", DeprecationWarning, stacklevel=2,
        )
        from ._async._attempts import _begin_now  # (it imports this module)

        return _begin_now(self)  # type: ignore[arg-type]  # an AsyncWaits is an Attempts

    async def _sleep(self, seconds: float) -> None:
        await self._retrier.clock.sleep(seconds)

    async def _record_request(self, budget: RemoteBudget) -> None:
        """A retry budget on a server hears of the call before its first attempt (a local one heard at once)."""
        await budget.record_request()

    async def _shielded(self, pending: Awaitable[None]) -> None:
        """Await a refund on a server, a round trip never lost to a cancellation under way."""
        with anyio.CancelScope(shield=True):
            await pending

    async def _wait_for_quota(self) -> None:
        call = self._call
        quota = call.scope.quota
        assert quota is not None
        clock = self._retrier.clock
        left = remaining(call, clock.now())
        if left == 0.0:
            await anyio.lowlevel.checkpoint_if_cancelled()  # cancellation first, as in _admit
        try:
            await quota.acquire(call.wait_cost, timeout=left)
        except (RetryCapacityExceeded, BackendUnavailable) as error:
            call.wait_cost = 0
            call.refuse(error, "quota" if isinstance(error, RetryCapacityExceeded) else "backend", clock.now())
            raise
        call.waited_for_quota()

    async def _admit(self, scope: Scope) -> int:
        """Wait for the rate limits (in the caller's turn, when the call has a caller), then ask the breaker;
        a half-open probe's ticket, else 0."""
        bucket, limiter, breaker = scope.bucket, scope.limiter, scope.breaker
        try:
            # A local rate limit that has the token now grants it without a wait (try_acquire is exactly
            # acquire's admission at once); only a wait needs the time left, which costs a look at the
            # enclosing cancel scopes.
            bucket_taken = bucket is None or (isinstance(bucket, TokenBucket) and bucket.try_acquire(1))
            if not bucket_taken or (limiter is not None and not (
                    isinstance(limiter, AdaptiveRateLimiter) and limiter.try_acquire())):
                caller = self._caller
                if caller is None:
                    await self._wait_for_rates(scope, bucket_taken)
                else:
                    async with scope.caller_turns().turn(caller, await self._time_to_wait()):
                        await self._wait_for_rates(scope, bucket_taken)
            if breaker is None:
                return 0
            if isinstance(breaker, CircuitBreaker):
                return breaker.acquire()
            return await breaker.acquire()
        except RateLimitTimeout as error:
            self._call.refuse(error, "rate_limit", self._retrier.clock.now())
            raise
        except CircuitOpenError as error:
            self._call.refuse(error, "breaker", self._retrier.clock.now())
            raise
        except BackendUnavailable as error:
            self._call.refuse(error, "backend", self._retrier.clock.now())
            raise

    async def _wait_for_rates(self, scope: Scope, bucket_taken: bool) -> None:
        """Wait for the rate limits' tokens that were not there at once: the fixed rate limit's, unless
        ``bucket_taken``, then the limiter's (tried at once first when the fixed one made the call wait)."""
        bucket, limiter = scope.bucket, scope.limiter
        if not bucket_taken:
            assert bucket is not None
            await bucket.acquire(1, timeout=await self._time_to_wait())
            if limiter is None or (isinstance(limiter, AdaptiveRateLimiter) and limiter.try_acquire()):
                return
        assert limiter is not None
        await limiter.acquire(timeout=await self._time_to_wait())

    async def _time_to_wait(self) -> float | None:
        """The longest a wait for a rate limit may take: the time left before the call's or an enclosing
        deadline (``None``: unbounded)."""
        left = remaining(self._call, self._retrier.clock.now())
        if left == 0.0:
            # No time left may mean an enclosing scope was cancelled: deliver that cancellation rather
            # than a RateLimitTimeout (which a caller catching Exception would retry).
            await anyio.lowlevel.checkpoint_if_cancelled()
        return left

    async def _run_hook(self, hook: GiveUpInfo) -> None:
        """Run the policy's on_give_up hook (awaiting what it returns); a failing hook is logged."""
        on_give_up = self._call.policy.on_give_up
        assert on_give_up is not None
        try:
            result = on_give_up(hook)
            if result is not None:
                await result
        except Exception:
            _log_hook_failure(hook)


class SyncWaits(_Driver):
    """How the synchronous driver waits: blocking the thread, every step on shared state under ``lock``."""

    __slots__ = ("_lock",)

    def __init__(
        self, retrier: Retrier, scope: Scope, policy: RetryPolicy, now: float,
        judge: Judge | None = None, label: Label | None = None, *, lock: AbstractContextManager[Any] | None = None,
        caller: str | None = None,
    ) -> None:
        if not scope.local:
            raise TypeError(
                f"scope {scope.key!r} keeps state on a remote server, which needs the async driver; "
                "use asyncretry.Attempts / AsyncRetryTransport"
            )
        self._retrier = retrier
        self._caller = caller
        self._call = Call(scope, policy, now, retrier.events, judge, label, test=current_test_mode())
        self._lock = lock if lock is not None else nullcontext()
        open_call(retrier, scope, now)  # (Retrier.sync_attempts holds the lock)

    def end_sync(self, attempt: Attempt, error: Exception | None) -> bool:
        """Deprecated: ``end()``, the same step under the same name as the async driver's."""
        warnings.warn("SyncAttempts.end_sync() is deprecated: use SyncAttempts.end()", DeprecationWarning, stacklevel=2)
        end: Callable[[Attempt, Exception | None], bool] = self.end  # type: ignore[attr-defined]
        return end(attempt, error)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _record_request(self, budget: RemoteBudget) -> None:
        raise AssertionError("a synchronous call has no part on a server")  # refused in __init__

    def _shielded(self, pending: Awaitable[None]) -> None:
        raise AssertionError("a synchronous call has no part on a server")  # refused in __init__

    def _wait_for_quota(self) -> None:
        call = self._call
        quota = call.scope.quota
        assert isinstance(quota, RetryQuota)
        if not self._block_until(quota.try_acquire, quota.time_until_available, call.wait_cost):
            error = RetryCapacityExceeded(available=quota.available, cost=call.wait_cost, name=quota.name)
            call.wait_cost = 0
            call.refuse(error, "quota", self._retrier.clock.now())
            raise error
        call.waited_for_quota()

    def _admit(self, scope: Scope) -> int:
        bucket, limiter, breaker = scope.bucket, scope.limiter, scope.breaker
        call, clock = self._call, self._retrier.clock
        try:
            caller = self._caller
            if caller is None or (bucket is None and limiter is None):
                self._wait_for_rates(scope)
            else:
                with self._lock:
                    turns = scope.caller_turns()
                with turns.turn_blocking(caller, self.remaining(clock.now())):
                    self._wait_for_rates(scope)
        except RateLimitTimeout as error:
            call.refuse(error, "rate_limit", clock.now())
            raise
        if breaker is None:
            return 0
        assert isinstance(breaker, CircuitBreaker)
        try:
            with self._lock:
                return breaker.acquire()
        except CircuitOpenError as error:
            call.refuse(error, "breaker", clock.now())
            raise

    def _wait_for_rates(self, scope: Scope) -> None:
        """Block until the rate limits' tokens are taken, or raise :class:`RateLimitTimeout` at the deadline."""
        bucket, limiter = scope.bucket, scope.limiter
        if bucket is not None:
            assert isinstance(bucket, TokenBucket)
            if not self._block_until(bucket.try_acquire, bucket.time_until_available, 1):
                raise RateLimitTimeout(name=bucket.name, wait=bucket.time_until_available(1),
                                       timeout=self._remaining_or_zero())
        if limiter is not None:
            assert isinstance(limiter, AdaptiveRateLimiter)
            if not self._block_until(lambda _n: limiter.try_acquire(), lambda _n: limiter.time_until_available(), 1):
                raise RateLimitTimeout(name=limiter.name, wait=limiter.time_until_available(),
                                       timeout=self._remaining_or_zero())

    def _remaining_or_zero(self) -> float:
        return self.remaining(self._retrier.clock.now()) or 0.0

    def _block_until(self, take: Callable[[float], bool], wait_for: Callable[[float], float], n: float) -> bool:
        """Poll ``take(n)`` and sleep the predicted wait until it succeeds or the deadline passes."""
        while True:
            with self._lock:
                if take(n):
                    return True
            wait = wait_for(n)
            left = self.remaining(self._retrier.clock.now())
            if left is not None and wait > left:
                return False
            # Others may release tokens sooner than predicted (quota refunds): re-check at least every 50 ms.
            time.sleep(min(wait, 0.05) if wait > 0 else 0.001)

    def _run_hook(self, hook: GiveUpInfo) -> None:
        """Run the policy's on_give_up hook; a failing hook is logged, an awaitable it returns closed."""
        on_give_up = self._call.policy.on_give_up
        assert on_give_up is not None
        try:
            result = on_give_up(hook)
        except Exception:
            _log_hook_failure(hook)
        else:
            if result is not None:
                close = getattr(result, "close", None)
                if close is not None:
                    close()  # an un-awaited coroutine would warn later
                logger.error("asyncretry: on_give_up returned an awaitable in synchronous code; "
                             "use a plain function in synchronous code")
