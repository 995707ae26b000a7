"""The executors: what the drivers do around the decision core when an attempt ends.

The core (:class:`~._call.Call`) decides from its arguments alone; these functions gather those
arguments (the time the caller's own deadline leaves, the random draw, the breaker's answer) and carry
out what it decided: on the scope's shared state (:func:`settle_locally` for in-process parts, which
answer at once, and :func:`settle_remotely` for parts kept on a server, whose answers are awaited), on
the retrier's counters (:func:`count_end`; the drivers count the calls and attempts they begin) and to
the listeners (:func:`deliver`: user code runs here, after the decision). Each is the one place its kind of
effect is carried out, for every driver (``async for``, ``for``, hedging).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio

from .._exceptions import BackendUnavailable
from .._primitives._kinds import OutcomeKind
from ._call import DONE, GIVE_UP, PAY, RETRY, Call, Step

if TYPE_CHECKING:
    from ._attempt import Attempt
    from ._retrier import Retrier

__all__ = [
    "caller_deadline", "count_end", "deliver", "remaining", "settle_locally", "settle_remotely",
]

_SUCCESS = OutcomeKind.SUCCESS


def caller_deadline() -> float | None:
    """Seconds left before the enclosing cancel scope's deadline; ``None`` without one (or outside a loop)."""
    try:
        outer = anyio.current_effective_deadline()
    except RuntimeError:  # no event loop: synchronous code has no cancel scopes
        return None
    if outer == math.inf:
        return None
    return outer - anyio.current_time()


def remaining(call: Call, now: float) -> float | None:
    """Seconds left at ``now`` before the call's deadline or the caller's own; ``None`` if unbounded."""
    return call.left(now, caller_deadline())


def deliver(call: Call) -> None:
    """Emit the events the core decided: the listeners (user code) run here, after the decision."""
    events = call.take_events()
    if events is not None:
        bus = call.events
        for event in events:
            bus.emit(event)


def count_end(retrier: Retrier, step: Step) -> None:
    """Count how a call ended: a success (DONE) or a failure (GIVE_UP); a RETRY ends nothing."""
    if step is DONE:
        retrier._successes += 1
    elif step is GIVE_UP:
        retrier._failures += 1


def settle_locally(
    retrier: Retrier, call: Call, attempt: Attempt, error: Exception | None, now: float
) -> Step:
    """End an attempt on in-process state: report, decide, pay or refund (no waiting). DONE, GIVE_UP or RETRY."""
    outcome = attempt.judged(error)
    scope = call.scope
    if scope.reports:
        scope.report(outcome.kind, outcome.reason, attempt._started, call.probe, now)
    if outcome.kind is _SUCCESS:
        step = call.settle(attempt.number, attempt._started, outcome, error, now)
    else:
        # What a failure's decision needs, asked once (asking changes nothing).
        wait = scope.breaker_wait() if scope.breaker is not None else 0.0
        step = call.settle(
            attempt.number, attempt._started, outcome, error, now,
            outer=caller_deadline, draw=retrier._rng(), breaker_wait=wait,
        )
        if step is PAY:
            refused, call.ticket = scope.pay(call.due)
            step = call.paid(refused, now, outer=caller_deadline, breaker_wait=wait)
            if call.dropped is not None:  # paid, then refused after all: its tokens and budget place go back
                scope.cancel_retry(call.take_dropped(), call.ticket)  # type: ignore[arg-type]
    refund = call.refund_due
    if refund:
        call.refund_due = 0
        scope.quota.release(refund)  # type: ignore[union-attr]  # a local scope: a RetryQuota; never None with a refund
    if step is not RETRY:
        count_end(retrier, step)
    if call.outbox is not None:
        deliver(call)
    return step


async def settle_remotely(
    retrier: Retrier, call: Call, attempt: Attempt, error: Exception | None, now: float
) -> Step:
    """:func:`settle_locally` where a part is kept on a server (its answers awaited).

    A server that cannot be reached (``BackendUnavailable``) ends the call with the attempt's own
    outcome (``"backend"``); a success stays one, only its bookkeeping is lost.
    """
    outcome = attempt.judged(error)
    scope = call.scope
    try:
        await scope.report_remote(outcome.kind, outcome.reason, attempt._started, call.probe)
        if outcome.kind is _SUCCESS:
            step = call.settle(attempt.number, attempt._started, outcome, error, now)
        else:
            wait = scope.breaker_wait()
            step = call.settle(
                attempt.number, attempt._started, outcome, error, now,
                outer=caller_deadline, draw=retrier._rng(), breaker_wait=wait,
            )
        if step is PAY:
            refused, call.ticket = await scope.pay_remote(call.due)
            step = call.paid(refused, now, outer=caller_deadline, breaker_wait=wait)
            dropped = call.take_dropped()
            if dropped is not None:
                await scope.cancel_retry_remote(dropped, call.ticket)
        if call.refund_due:
            await scope.refund_remote(call.take_refund())
    except BackendUnavailable:
        if call.in_attempt:  # the outcome was not recorded yet
            if outcome.kind is _SUCCESS:
                call.settle(attempt.number, attempt._started, outcome, error, now)
                call.take_refund()
            else:
                call.record_failure(attempt.number, attempt._started, outcome, error, now)
        step = call.unreachable(outcome, error, now)
    if step is not RETRY:
        count_end(retrier, step)
    deliver(call)
    return step
