"""The driver of one call: a loop of a dozen lines around the decision core, written once.

``start`` waits for what the next attempt needs (the backoff, quota tokens in the quota's waiting mode, the
rate limits, the breaker's admission) and begins it; ``end`` settles the attempt through the executor
(:mod:`._executor`: the limiter and the breaker hear of it, the core decides, the quota is paid or given
back), then either goes on or finishes the call (the long-polling back-off, the ``on_give_up`` hook).
The decisions and their state are on the :class:`~asyncretry._engine._call.Call` the driver holds; how it
waits is its base class's (:mod:`asyncretry._engine._driver`).

This file is the async driver, :class:`~asyncretry.Attempts`; ``tools/generate.py`` writes the synchronous
one, :class:`~asyncretry.SyncAttempts`, from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from ..._primitives._budget import RetryBudget
from .._attempt import Attempt
from .._call import DONE, RETRY, Step
from .._classify import Outcome
from .._driver import AsyncWaits, _end_with, _ending_of, _give_up, _pay_first
from .._hedged import Discard, Send, run_hedged
from ._executor import settle

if TYPE_CHECKING:
    from .._hedging import HedgingConfig

__all__ = ["Attempts"]

T = TypeVar("T")


def _begin_now(driver: Attempts) -> Attempt | None:
    """The first attempt of the call, begun at once when nothing may make it wait or refuse it (its rate-limit
    token taken, if any: :meth:`Scope.admit_first`); else ``None``."""
    call = driver._call
    if call.number or not call.scope.admit_first():
        return None
    attempt = Attempt(driver, started=call.started)  # nothing was waited for: it starts with the call
    call.begin(0.0, 0)
    driver._retrier._attempts += 1
    return attempt


def _new_attempt(driver: Attempts, delay: float, probe: int) -> Attempt:
    """Begin the call's next attempt, slept ``delay`` seconds after the last (a half-open probe if ``probe``,
    the breaker's ticket, is not 0)."""
    number = driver._call.begin(delay, probe)
    retrier = driver._retrier
    retrier._attempts += 1
    if number != 1:
        retrier._retries += 1  # counted when it happens, never when a refusal stops it first
    return Attempt(driver, number, delay if number != 1 else 0.0)


class Attempts(AsyncWaits):
    """The attempts of one call, to iterate over (see :meth:`Retrier.attempts`): ``async for attempt in
    attempts: async with attempt: ...`` (``for`` and ``with`` for :class:`SyncAttempts`).

    After the loop, :attr:`gave_up` says why the call gave up on a result (``None`` if it succeeded),
    :attr:`outcome` is the last outcome and :meth:`history` the full record.

    Integrations that drive a call themselves (the httpx transports) use :meth:`start` and the attempt's
    ``with``, the same two steps the loop takes: ``start()`` begins the first attempt at once when
    nothing may make it wait, so there is no faster way in.
    """

    __slots__ = ()

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

    def __aiter__(self) -> Attempts:
        return self

    async def __anext__(self) -> Attempt:
        attempt = await self.start()  # the one way to the next attempt, the first included
        if attempt is None:
            raise StopAsyncIteration
        return attempt

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
                    await self._wait_for_quota()
                if delay > 0.0 and not call.no_wait:
                    await self._sleep(delay)
            else:
                if scope.first_cost:
                    with self._lock:
                        _pay_first(call, scope, self._retrier.clock.now())
                budget = scope.budget
                if budget is not None and not isinstance(budget, RetryBudget):
                    await self._record_request(budget)
            probe = await self._admit(scope) if scope.gates else 0
        except BaseException as error:
            await self._refund_retry()
            with self._lock:
                ending = _ending_of(self._retrier, call, error)
        else:
            with self._lock:
                return _new_attempt(self, delay, probe)
        # Refused: the on_give_up hook, then the call ends with its last real outcome.
        await self._finish()
        _end_with(ending)
        return None

    async def end(self, attempt: Attempt, error: Exception | None) -> bool:
        """Settle an attempt that ended by raising ``error`` (``None``: it returned).

        Returns:
            True to swallow ``error`` and retry; False when the call is over (``error``, if any, propagates
            with the history attached).
        """
        outcome = attempt.judged(error)  # (the classifier and the judge are user code: not under the lock)
        retrier = self._retrier
        now = retrier.clock.now()
        with self._lock:
            step = await settle(retrier, self._call, attempt.number, attempt._started, outcome, error, now)
        return await self._after(step)

    async def hedged(self, config: HedgingConfig, send: Send[T], discard: Discard[T] | None = None) -> T:
        """Run the whole call with hedges: ``send(attempt)`` for each attempt, concurrently once an attempt
        has not answered within the hedging delay; the first success wins, the others are cancelled.

        For integrations whose work is safe to run twice at once (the httpx transport's idempotent
        requests). ``send`` may mark its attempt (:meth:`Attempt.classify_result`); ``discard`` releases a
        result nobody will read (a losing or failed response). Async code only.

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
        with self._lock:
            _give_up(self._retrier, self._call, error, why)
        await self._finish()

    async def _refund_retry(self) -> None:
        """A retry that was paid for will not happen (cancelled or refused before it began)."""
        call = self._call
        cost = call.refund_on_cancel()
        if cost is not None:
            with self._lock:
                pending = call.scope.cancel_retry(cost, call.ticket)
            if pending is not None:
                await self._shielded(pending)

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
            await self._sleep(linger)
        hook, call.hook = call.hook, None
        if hook is not None:
            await self._run_hook(hook)
        call.forget_errors()
