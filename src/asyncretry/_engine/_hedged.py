"""The hedging driver: one call's attempts raced in an anyio task group.

A round of a hedged call starts one attempt (the first, or a retry after its backoff); each time the
hedging delay passes without an answer, the round sends a hedge (another attempt of the same call,
:func:`~._hedging.HedgeState.admit` permitting) and lets every attempt run::

    t=0      attempt 1 sent
    t=d      no answer: attempt 2 sent (a hedge; HedgeSent)
    t=d+x    attempt 2 answers 200: it wins; attempt 1 is cancelled (its response, if any, closed)

- the first success wins: the others are cancelled, and recorded as ``CANCELLED`` in the history;
- a failure while another attempt still runs is recorded and decides nothing (the other may answer);
- the last failure of a round is settled as usual (:meth:`Call.settle`): a retry after the backoff
  (another round), or giving up;
- cancelling the caller cancels every attempt of the round; nothing a losing attempt returned is kept
  (``discard`` closes it).

The attempts only send and report (a memory stream to the task running the round); judging and every
decision happen in that one task, so the call's state never changes under two tasks at once. The
hedging delay bounds that task's wait for an answer, on the event loop's clock (as ``attempt_timeout``
bounds an attempt), so a round needs no timer task.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from .._events import HedgeSent
from .._primitives._kinds import OutcomeKind
from ._async._executor import settle
from ._attempt import NOT_SET, Attempt
from ._call import DONE, RETRY, Step
from ._classify import Outcome
from ._hedging import HedgeState, HedgingConfig, hedge_state
from ._settle import deliver, remaining

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ._drivers import Attempts

__all__ = ["Discard", "Send", "refuse_hedging", "run_hedged"]

T = TypeVar("T")

Send = Callable[[Attempt], Awaitable[T]]
"""Sends one attempt and returns its result (or raises); it may mark the attempt (``classify_result``)."""

Discard = Callable[[T], Awaitable[None]]
"""Releases a result nobody will read (a losing or failed response: closed, its connection freed)."""

_TICK = object()  # the hedging delay passed without an answer
_SUCCESS = OutcomeKind.SUCCESS


async def run_hedged(
    driver: Attempts, config: HedgingConfig, send: Send[T], discard: Discard[T] | None = None
) -> T:
    """Run the call of ``driver`` to its end with hedges: returns the winning result, or the last result when
    the call gave up on a result (``driver.gave_up`` says so); raises the last error when it gave up on one.

    Raises:
        Exception: the last attempt's error (history attached, with why the call stopped), or what
            refused the first attempt.
    """
    call = driver._call
    state = hedge_state(call.scope, config, driver._retrier.clock)
    state.record_call(call.started)
    last: Any = NOT_SET  # the result of the round before, kept until the next round begins
    while True:
        try:
            attempt = await driver.start()
        except BaseException:
            await _drop(discard, last)
            raise
        if attempt is None:  # the next round was refused: the call ends with the last result
            return last  # type: ignore[no-any-return]
        await _drop(discard, last)
        race = _Race(driver, state, send, discard)
        try:
            step = await race.run(attempt)
        except BaseException as error:
            if not isinstance(error, Exception):
                now = driver._retrier.clock.now()
                for running in race.running.values():  # in the history, should the call end with an error
                    call._overlap(running.number, running._started, now - running._started, OutcomeKind.CANCELLED,
                                  "cancelled", None)
                driver.abandon()  # cancelled: never retried, never delayed
                await _drop(discard, race.value)  # a result that came in before the cancellation: nobody reads it
            raise
        value, failure = race.value, race.error
        if step == DONE:
            return value
        if step == RETRY:
            last = value
            continue
        await driver._after(step)  # giving up: the long-polling back-off and the hook
        if failure is not None:
            raise failure
        return value


def refuse_hedging(driver: object, config: HedgingConfig, send: object, discard: object = None) -> NoReturn:
    """The synchronous driver's ``hedged``: hedging runs a call's attempts concurrently, in a task group.

    Raises:
        ValueError: always.
    """
    raise ValueError(
        "hedging runs a call's attempts concurrently in a task group: use the async driver "
        "(`async for attempt in retrier.attempts()`, `await retrier.call(...)`)"
    )


class _Race(Generic[T]):
    """One round: the attempts in flight, and the one that ends the round."""

    value: T = NOT_SET
    error: Exception | None = None
    _failure: Exception | None = None  # judging or reporting failed (a classifier that raised ...)
    _ended: tuple[Attempt, float, Outcome] | None = None  # the attempt that ends the round, when, and how

    def __init__(self, driver: Attempts, state: HedgeState, send: Send[T], discard: Discard[T] | None) -> None:
        self.call = driver._call
        self.retrier = driver._retrier
        self.state = state
        self.send = send
        self.discard = discard
        self.running: dict[int, Attempt] = {}
        self._sender: MemoryObjectSendStream[Any]
        self._receiver: MemoryObjectReceiveStream[Any]
        self._sender, self._receiver = anyio.create_memory_object_stream[Any](math.inf)

    async def run(self, first: Attempt) -> Step:
        """Race the round's attempts; then settle the one that ended it. Returns the core's step."""
        call = self.call
        try:
            async with anyio.create_task_group() as group:
                try:
                    await self._referee(group, first)
                except Exception as error:  # raised here, not wrapped in the task group's ExceptionGroup
                    self._failure = error
                group.cancel_scope.cancel()  # the losers (their sends close what they got)
        finally:
            await self._close()
        if self._failure is not None:
            raise self._failure
        assert self._ended is not None
        attempt, now, outcome = self._ended
        for loser in self.running.values():
            call.lost(loser.number, loser._started, attempt.number, now)
        return await settle(self.retrier, call, attempt.number, attempt._started, outcome, self.error, now)

    async def _referee(self, group: TaskGroup, first: Attempt) -> None:
        """Send hedges as the delays pass and take the answers until one ends the round."""
        call, state = self.call, self.state
        clock = self.retrier.clock
        if first._started < 0.0:
            first._started = clock.now()
        self._launch(group, first)
        delay = state.delay()
        hedges = 0
        while True:
            item = await self._next(self._wait(first._started + (hedges + 1) * delay, hedges))
            if item is _TICK:
                if self._hedge(group, first):
                    hedges += 1
                else:
                    hedges = state.config.max_hedges  # refused now: no more hedges this round
                continue
            attempt, value, error = item
            del self.running[attempt.number]
            outcome = attempt.judged(error)  # judged once: settled below or at the end of the round
            now = clock.now()
            if outcome.kind is _SUCCESS:
                state.record_latency(now - attempt._started)
                for loser in self.running.values():
                    state.record_latency(now - loser._started)  # at least this slow: keep the tail in view
                self.value, self._ended = value, (attempt, now, outcome)
                return
            if not self.running:
                self.value, self.error, self._ended = value, error, (attempt, now, outcome)
                return
            await self._report(attempt, outcome, now)
            call.overlapped(attempt.number, attempt._started, outcome, error, now)
            deliver(call)
            await _drop(self.discard, value)

    def _wait(self, at: float, hedges: int) -> float | None:
        """Seconds until the next hedge is due at ``at`` (the retrier's clock); ``None`` when none may follow
        (all sent, or the call's deadline comes first)."""
        if hedges >= self.state.config.max_hedges:
            return None
        now = self.retrier.clock.now()
        left = remaining(self.call, now)
        wait = max(0.0, at - now)
        return wait if left is None or wait < left else None

    async def _next(self, wait: float | None) -> Any:
        """The next answer, or ``_TICK`` when ``wait`` seconds pass first (timed like ``attempt_timeout``: on
        the event loop's clock, without a task of its own)."""
        receiver = self._receiver
        if wait is None:
            return await receiver.receive()
        if wait > 0.0:
            with anyio.move_on_after(wait):
                return await receiver.receive()
        # An answer due at the same instant goes first: a hedge is for an attempt that has not answered
        # *after* the delay (with a quantile delay, answers at exactly the delay are common in tests).
        await anyio.lowlevel.checkpoint()
        try:
            return receiver.receive_nowait()
        except anyio.WouldBlock:
            return _TICK

    def _hedge(self, group: TaskGroup, lead: Attempt) -> bool:
        """Send a hedge now if the call has attempts left, time before its deadline and the state admits it."""
        call = self.call
        if not self.running or call.number >= call.max_attempts:
            return False
        retrier = self.retrier
        now = retrier.clock.now()
        if remaining(call, now) == 0.0 or not self.state.admit(call.scope, now):
            return False
        attempt = Attempt(lead._attempts, call.begin_hedge(), started=now)
        retrier._attempts += 1
        retrier._hedges += 1
        events = retrier.events
        if events.wants(HedgeSent):
            events.emit(HedgeSent(
                time=now, source=call.scope.key, attempt=attempt.number, hedging=lead.number,
                delay=now - lead._started, target=call.target(),
            ))
        self._launch(group, attempt)
        return True

    def _launch(self, group: TaskGroup, attempt: Attempt) -> None:
        self.running[attempt.number] = attempt
        group.start_soon(self._attempt, attempt)

    async def _attempt(self, attempt: Attempt) -> None:
        """Send one attempt and hand its result or error to the referee; a cancelled attempt hands nothing."""
        value: Any = NOT_SET
        error: Exception | None = None
        try:
            value = await self._timed(attempt)
        except Exception as caught:
            error = caught
        self._sender.send_nowait((attempt, value, error))

    async def _timed(self, attempt: Attempt) -> T:
        """The send, within the attempt's time limit (per-attempt timeout, the call's deadline)."""
        call = self.call
        timeout = call.attempt_timeout(attempt._started) if call.timed else None
        if timeout is None:
            return await self.send(attempt)
        with anyio.CancelScope(deadline=anyio.current_time() + timeout):
            return await self.send(attempt)
        raise attempt.timed_out(timeout)  # only reached when the time limit cancelled the send

    async def _report(self, attempt: Attempt, outcome: Outcome, now: float) -> None:
        """Tell the limiter and the breaker how an attempt ended (a hedge is never a probe)."""
        scope = self.call.scope
        if scope.reports:
            call = self.call
            pending = scope.report(outcome.kind, outcome.reason, attempt._started, 0, now, call.hold_of(outcome),
                                   call.pace_of(outcome))
            if pending is not None:
                await pending

    async def _close(self) -> None:
        """Every attempt has stopped: release what the ones that answered too late returned."""
        self._sender.close()
        late: list[Any] = []
        while True:
            try:
                item = self._receiver.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
            late.append(item[1])
        self._receiver.close()
        for value in late:
            await _drop(self.discard, value)


async def _drop(discard: Discard[T] | None, value: Any) -> None:
    """Release a result nobody will read, even while being cancelled."""
    if discard is not None and value is not NOT_SET:
        with anyio.CancelScope(shield=True):
            await discard(value)
