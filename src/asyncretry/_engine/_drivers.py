"""The drivers: short loops that wait and send around the decision core (:class:`~._call.Call`).

:class:`Attempts` is the async driver (``async for attempt in retrier.attempts(): async with attempt:``,
and through it :meth:`Retrier.call`, the decorator, polling and the async httpx transport);
:class:`SyncAttempts` is the synchronous one (``for attempt in ...: with attempt:``, the sync
transport). Each has two steps, read top to bottom:

- ``start``: wait for what the next attempt needs (the backoff, quota tokens in waiting mode, the
  rate limits, the breaker's admission) and begin it;
- ``end``: judge how it ended (:meth:`Attempt.judged`), tell the scope's limiter and breaker, let the
  core decide (:meth:`Call.settle`), pay or refund the quota, and either retry or finish the call.

What the two share is the decision core and the executors (:mod:`._settle`); only the waiting differs
(``await`` or ``time.sleep``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel

from .._events import logger
from .._exceptions import BackendUnavailable, CircuitOpenError, RateLimitTimeout, RetryCapacityExceeded
from .._primitives._breaker import CircuitBreaker
from .._primitives._bucket import AsyncTokenBucket
from .._primitives._budget import RetryBudget
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveRateLimiter
from .._primitives._quota import RetryQuota
from ._async._executor import settle
from ._attempt import Attempt
from ._call import DONE, RETRY, Call, Judge, Label, Step
from ._classify import Outcome
from ._hedged import Discard, Send, run_hedged
from ._history import RetryHistory
from ._policy import GiveUpInfo, RetryPolicy
from ._scopes import Scope
from ._settle import deliver, remaining
from ._sync._executor import settle as settle_now
from ._testmode import current_test_mode

if TYPE_CHECKING:
    from ._hedging import HedgingConfig
    from ._retrier import Retrier

__all__ = ["Attempts", "SyncAttempts"]

T = TypeVar("T")


def _pay_first(call: Call, scope: Scope, now: float) -> None:
    """Take SPEC's ``initial_try_cost`` for a first attempt, or refuse the call (local quotas only)."""
    quota = scope.quota
    assert isinstance(quota, RetryQuota)
    if not quota.try_acquire(scope.first_cost):
        error = RetryCapacityExceeded(available=quota.available, cost=scope.first_cost, name=quota.name)
        call.refuse(error, "quota", now)
        raise error


def _begin_now(driver: Attempts | SyncAttempts) -> Attempt | None:
    """The first attempt of the call, begun at once when nothing may make it wait or refuse it (its rate-limit
    token taken, if any: :meth:`Scope.admit_first`); else ``None``."""
    call = driver._call
    if call.number or not call.scope.admit_first():
        return None
    attempt = Attempt()
    attempt._attempts = driver
    attempt._started = call.started  # nothing was waited for: the attempt starts with the call
    call.begin(0.0, 0)  # (a synchronous driver calls this under its lock)
    driver._retrier._attempts += 1
    return attempt


def _new_attempt(driver: Attempts | SyncAttempts, delay: float, probe: int) -> Attempt:
    """Begin the call's next attempt, slept ``delay`` seconds after the last (a half-open probe if ``probe``,
    the breaker's ticket, is not 0)."""
    attempt = Attempt()
    attempt._attempts = driver
    number = driver._call.begin(delay, probe)
    retrier = driver._retrier
    retrier._attempts += 1
    if number != 1:
        retrier._retries += 1  # counted when it happens, never when a refusal stops it first
        attempt.number = number
        attempt.delay_before = delay
    return attempt


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


class _Driver:
    """What both drivers show of their call: its record, read by users and integrations. The decisions and
    their state stay on the :class:`~._call.Call` the driver holds."""

    __slots__ = ("_call", "_retrier")

    _call: Call
    _retrier: Retrier

    @property
    def number(self) -> int:
        """The attempts begun so far."""
        return self._call.number

    @property
    def done(self) -> bool:
        """The call is over (it succeeded, gave up, or its attempt was cancelled)."""
        return self._call.done

    @property
    def gave_up(self) -> str | None:
        """Why the call gave up (``None`` while it runs, and after a success)."""
        return self._call.gave_up

    @property
    def outcome(self) -> Outcome | None:
        """The last attempt's outcome (``None`` before the first ends)."""
        return self._call.outcome

    @property
    def retrying(self) -> bool:
        """True after an attempt failed and another will follow (not begun yet)."""
        return self._call.retrying

    @property
    def scope_key(self) -> str:
        """The scope (resource) the call belongs to."""
        return self._call.scope.key

    @property
    def total_delay(self) -> float:
        """Seconds of backoff scheduled so far."""
        return self._call.total_delay

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

    def __repr__(self) -> str:
        call = self._call
        state = "running" if not call.done else (call.gave_up and f"gave up ({call.gave_up})") or "done"
        return f"<{type(self).__name__} scope={call.scope.key!r} attempts={call.number} {state}>"


class Attempts(_Driver):
    """The attempts of one call: an async iterator of :class:`Attempt` (see :meth:`Retrier.attempts`).

    After the loop, :attr:`gave_up` says why the call gave up on a result (``None`` if it succeeded),
    :attr:`outcome` is the last outcome and :meth:`history` the full record.

    Integrations that drive a call themselves (the httpx transport) use :meth:`start` and the attempt's
    ``async with``, the same two steps the ``async for`` loop takes: ``start()`` begins the first attempt
    at once when nothing may make it wait, so there is no faster way in.
    """

    __slots__ = ()

    def __init__(
        self, retrier: Retrier, scope: Scope, policy: RetryPolicy, now: float,
        judge: Judge | None = None, label: Label | None = None, *, begun: bool = False,
    ) -> None:
        self._retrier = retrier
        self._call = Call(scope, policy, now, retrier.events, judge, label, test=current_test_mode(), begun=begun)
        if not begun:  # (begun: Retrier.begin_first opened it)
            open_call(retrier, scope, now)

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> Attempt:
        call = self._call
        if call.done:
            raise StopAsyncIteration
        attempt = None if call.number else _begin_now(self)
        if attempt is None:
            attempt = await self.start()
            if attempt is None:
                raise StopAsyncIteration
        return attempt

    # ------------------------------------------------------------------------------ start
    async def start(self) -> Attempt | None:
        """Wait for what the next attempt needs and begin it; ``None`` when the call is over.

        Raises:
            RetryCapacityExceeded, RateLimitTimeout, CircuitOpenError, BackendUnavailable: the first
                attempt was refused. A later attempt refused ends the call with the last attempt's own
                error (raised here, history attached), or ``None`` when that attempt gave a result.
        """
        call = self._call
        if call.done:
            return None
        if not call.number:
            attempt = _begin_now(self)
            if attempt is not None:
                return attempt
        scope = call.scope
        clock = self._retrier.clock
        delay = 0.0
        try:
            if call.number:
                delay = call.delay
                if call.wait_cost:
                    await self._wait_for_quota()
                if delay > 0.0 and not call.no_wait:
                    await clock.sleep(delay)
            else:
                if scope.first_cost:
                    _pay_first(call, scope, clock.now())
                budget = scope.budget
                if budget is not None and not isinstance(budget, RetryBudget):
                    await budget.record_request()  # a local budget was told when the call began
            probe = await self._admit(scope) if scope.gates else 0
        except BaseException as error:
            await self._refund_retry()
            ending = _ending_of(self._retrier, call, error)
        else:
            return _new_attempt(self, delay, probe)
        # Refused: the on_give_up hook, then the call ends with its last real outcome.
        await self._finish()
        _end_with(ending)
        return None

    def begin_now(self) -> Attempt | None:
        """Deprecated: ``await start()`` begins the first attempt at once when nothing may make it wait."""
        warnings.warn(
            "Attempts.begin_now() is deprecated: use `await attempts.start()`, which begins the first attempt "
            "at once when nothing may make it wait", DeprecationWarning, stacklevel=2,
        )
        return _begin_now(self)

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
        """Wait for the rate limits, then ask the breaker; a half-open probe's ticket, else 0."""
        bucket, limiter, breaker = scope.bucket, scope.limiter, scope.breaker
        try:
            # A local rate limit that has the token now grants it without a wait (try_acquire is exactly
            # acquire's admission at once); only a wait needs the time left, which costs a look at the
            # enclosing cancel scopes.
            if bucket is not None and not (isinstance(bucket, AsyncTokenBucket) and bucket.try_acquire(1)):
                await bucket.acquire(1, timeout=await self._time_to_wait())
            if limiter is not None and not (isinstance(limiter, AdaptiveRateLimiter) and limiter.try_acquire()):
                await limiter.acquire(timeout=await self._time_to_wait())
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

    async def _time_to_wait(self) -> float | None:
        """The longest a wait for a rate limit may take: the time left before the call's or an enclosing
        deadline (``None``: unbounded)."""
        left = remaining(self._call, self._retrier.clock.now())
        if left == 0.0:
            # No time left may mean an enclosing scope was cancelled: deliver that cancellation rather
            # than a RateLimitTimeout (which a caller catching Exception would retry).
            await anyio.lowlevel.checkpoint_if_cancelled()
        return left

    async def _refund_retry(self) -> None:
        """A retry that was paid for will not happen (cancelled or refused before it began)."""
        call = self._call
        cost = call.refund_on_cancel()
        if cost is not None:
            pending = call.scope.cancel_retry(cost, call.ticket)
            if pending is not None:
                # A remote refund is a round trip: never lose it to the cancellation under way.
                with anyio.CancelScope(shield=True):
                    await pending

    async def hedged(self, config: HedgingConfig, send: Send[T], discard: Discard[T] | None = None) -> T:
        """Run the whole call with hedges: ``send(attempt)`` for each attempt, concurrently once an attempt
        has not answered within the hedging delay; the first success wins, the others are cancelled.

        For integrations whose work is safe to run twice at once (the httpx transport's idempotent
        requests). ``send`` may mark its attempt (:meth:`Attempt.classify_result`); ``discard`` releases a
        result nobody will read (a losing or failed response). See :mod:`asyncretry._engine._hedged`.

        Returns:
            The winning result; or the last result when the call gave up on a result (:attr:`gave_up`).

        Raises:
            Exception: the last attempt's error when the call gave up on one (history attached), or what
                refused the next attempt (as :meth:`start`).
        """
        return await run_hedged(self, config, send, discard)

    async def give_up(self, error: Exception, why: str) -> None:
        """End the call with ``error``, an error the integration made for it because no attempt can end it
        (the call's deadline passed while hedges ran, or between attempts): the history, with ``why``
        (``"deadline"`` ...), is attached to it (:func:`asyncretry.history_of`), and the call counts and is
        reported (:class:`~asyncretry.GaveUp`, ``on_give_up``) as giving up.

        Raises:
            RuntimeError: the call already ended (it succeeded or gave up).
        """
        _give_up(self._retrier, self._call, error, why)
        await self._finish()

    # -------------------------------------------------------------------------------- end
    async def end(self, attempt: Attempt, error: Exception | None) -> bool:
        """Settle an attempt that ended by raising ``error`` (``None``: it returned).

        Returns:
            True to swallow ``error`` and retry; False when the call is over (``error``, if any, propagates
            with the history attached).
        """
        outcome = attempt.judged(error)
        retrier = self._retrier
        step = await settle(retrier, self._call, attempt.number, attempt._started, outcome, error, retrier.clock.now())
        return await self._after(step)

    def abandon(self) -> None:
        """The attempt was cancelled (or hit a BaseException): the call ends, recording nothing; a half-open
        probe's slot in the breaker is freed."""
        _abandon(self._call)

    async def _after(self, step: Step) -> bool:
        """What the driver does once an attempt is settled: True to retry; else finish the call."""
        if step == RETRY:
            return True
        if step != DONE:
            await self._finish()
        return False

    async def _finish(self) -> None:
        """The call is over without success: the long-polling back-off, then on_give_up."""
        call = self._call
        linger, call.linger = call.linger, 0.0
        if linger > 0.0 and not call.no_wait:
            await self._retrier.clock.sleep(linger)
        hook, call.hook = call.hook, None
        if hook is not None:
            assert call.policy.on_give_up is not None
            try:
                result = call.policy.on_give_up(hook)
                if result is not None:
                    await result
            except Exception:
                _log_hook_failure(hook)
        call.forget_errors()


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


class SyncAttempts(_Driver):
    """The attempts of one call in synchronous code (``for attempt in ...: with attempt: ...``).

    The same decisions as :class:`Attempts`; waits block the thread with :func:`time.sleep`. Threads
    share a scope's quota, limiter and breaker: every step on them is taken under ``lock``.
    """

    __slots__ = ("_lock",)

    def __init__(
        self, retrier: Retrier, scope: Scope, policy: RetryPolicy, now: float, *,
        judge: Judge | None = None, label: Label | None = None, lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        if not scope.local:
            raise TypeError(
                f"scope {scope.key!r} keeps state on a remote server, which needs the async driver; "
                "use asyncretry.Attempts / AsyncRetryTransport"
            )
        self._retrier = retrier
        self._call = Call(scope, policy, now, retrier.events, judge, label, test=current_test_mode())
        self._lock = lock if lock is not None else nullcontext()
        open_call(retrier, scope, now)  # (Retrier.sync_attempts holds the lock)

    def __iter__(self) -> SyncAttempts:
        return self

    def __next__(self) -> Attempt:
        attempt = self.start()
        if attempt is None:
            raise StopIteration
        return attempt

    def start(self) -> Attempt | None:
        """Wait (blocking the thread) for what the next attempt needs and begin it; ``None`` when over."""
        call = self._call
        if call.done:
            return None
        with self._lock:
            attempt = _begin_now(self)
        if attempt is not None:
            return attempt
        scope = call.scope
        delay = 0.0
        try:
            if call.number:
                delay = call.delay
                if call.wait_cost:
                    self._block_for_quota()
                if delay > 0.0 and not call.no_wait:
                    time.sleep(delay)
            elif scope.first_cost:
                with self._lock:
                    _pay_first(call, scope, self._retrier.clock.now())
            probe = self._admit(scope) if scope.gates else 0
        except BaseException as error:
            cost = call.refund_on_cancel()
            if cost is not None:
                with self._lock:
                    scope.cancel_retry(cost, call.ticket)
            with self._lock:  # (the counters are shared by the threads)
                ending = _ending_of(self._retrier, call, error)
        else:
            with self._lock:
                return _new_attempt(self, delay, probe)
        self._finish()
        _end_with(ending)
        return None

    def _block_for_quota(self) -> None:
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
        if bucket is not None:
            assert isinstance(bucket, AsyncTokenBucket)
            if not self._block_until(bucket.try_acquire, bucket.time_until_available, 1):
                error = RateLimitTimeout(name=bucket.name, wait=bucket.time_until_available(1),
                                         timeout=self._remaining_or_zero())
                call.refuse(error, "rate_limit", clock.now())
                raise error
        if limiter is not None:
            assert isinstance(limiter, AdaptiveRateLimiter)
            if not self._block_until(lambda _n: limiter.try_acquire(), lambda _n: limiter.time_until_available(), 1):
                error = RateLimitTimeout(name=limiter.name, wait=limiter.time_until_available(),
                                         timeout=self._remaining_or_zero())
                call.refuse(error, "rate_limit", clock.now())
                raise error
        if breaker is None:
            return 0
        assert isinstance(breaker, CircuitBreaker)
        try:
            with self._lock:
                return breaker.acquire()
        except CircuitOpenError as error:
            call.refuse(error, "breaker", clock.now())
            raise

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

    def end_sync(self, attempt: Attempt, error: Exception | None) -> bool:
        """:meth:`Attempts.end` for synchronous code: True to swallow ``error`` and retry."""
        outcome = attempt.judged(error)  # (the classifier and the judge are user code: not under the lock)
        retrier = self._retrier
        now = retrier.clock.now()
        with self._lock:
            step = settle_now(retrier, self._call, attempt.number, attempt._started, outcome, error, now)
        if step == DONE:
            return False
        if step == RETRY:
            return True
        self._finish()
        return False

    def abandon(self) -> None:
        """The attempt was cancelled (or hit a BaseException): the call ends, recording nothing."""
        with self._lock:
            _abandon(self._call)

    def _finish(self) -> None:
        call = self._call
        linger, call.linger = call.linger, 0.0
        if linger > 0.0 and not call.no_wait:
            time.sleep(linger)
        hook, call.hook = call.hook, None
        if hook is not None:
            assert call.policy.on_give_up is not None
            try:
                result = call.policy.on_give_up(hook)
            except Exception:
                _log_hook_failure(hook)
            else:
                if result is not None:
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()  # an un-awaited coroutine would warn later
                    logger.error("asyncretry: on_give_up returned an awaitable in synchronous code; "
                                 "use a plain function in synchronous code")
        call.forget_errors()
