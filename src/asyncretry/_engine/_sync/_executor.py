# Generated from src/asyncretry/_engine/_async/_executor.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""The executor: what a driver does when an attempt ends, for parts in process and parts on a server.

The decision core (:class:`~asyncretry._engine._call.Call`) decides from its arguments alone; :func:`settle`
gathers those arguments (the time the caller's own deadline leaves, the random draw, the breaker's answer),
then carries out what the core decided, in this order::

    tell the limiter and the breaker      Scope.report
    decide                                Call.settle      DONE / GIVE_UP / PAY / RETRY
    pay the retry's cost (PAY)            pay(), then Call.paid     RETRY / GIVE_UP
    give back what will not be used       Scope.cancel_retry, Scope.refund
    count the call's end, deliver events  (listeners run here, after the decision)

Every step on a scope's part answers at once for an in-process part and returns what is left to await for
a part kept on a server: this is the one place that awaits it. Every driver ends its attempts here (``async
for``, the transports, hedging); the synchronous driver's copy (``_sync/_executor.py``) is generated from
this file, for scopes whose parts all answer at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._exceptions import BackendUnavailable
from ..._primitives._budget import BudgetTicket
from ..._primitives._kinds import OutcomeKind
from .._call import DONE, GIVE_UP, PAY, Call, Step
from .._classify import Outcome
from .._settle import caller_deadline, deliver

if TYPE_CHECKING:
    from .._retrier import Retrier
    from .._scopes import Scope

__all__ = ["pay", "settle"]

_SUCCESS = OutcomeKind.SUCCESS


def settle(
    retrier: Retrier, call: Call, number: int, started: float, outcome: Outcome, error: Exception | None,
    now: float,
) -> Step:
    """End attempt ``number`` (begun at ``started``), judged ``outcome``, at ``now``: DONE, GIVE_UP or RETRY.

    A server that cannot be reached (``BackendUnavailable``) ends the call with the attempt's own
    outcome (``"backend"``); a success stays one, only its bookkeeping is lost.
    """
    scope = call.scope
    try:
        if scope.reports:
            pending = scope.report(outcome.kind, outcome.reason, started, call.probe, now, call.hold_of(outcome),
                                   call.pace_of(outcome))
            if pending is not None:
                pending
        if outcome.kind is _SUCCESS:
            step = call.settle(number, started, outcome, error, now)
        else:
            # What a failure's decision needs, asked once (asking changes nothing).
            wait = scope.breaker_wait() if scope.breaker is not None else 0.0
            step = call.settle(
                number, started, outcome, error, now, outer=caller_deadline, draw=retrier._rng(), breaker_wait=wait,
            )
            if step is PAY:
                refused, call.ticket = pay(scope, call.due)
                step = call.paid(refused, now, outer=caller_deadline, breaker_wait=wait)
                if call.dropped is not None:  # paid, then refused after all: its tokens and budget place go back
                    pending = scope.cancel_retry(call.take_dropped() or 0, call.ticket)
                    if pending is not None:
                        pending
        refund = call.refund_due
        if refund:  # (only a scope with a quota has tokens to give back)
            call.refund_due = 0
            pending = scope.quota.release(refund)  # type: ignore[union-attr]
            if pending is not None:
                pending
    except BackendUnavailable:
        if call.in_attempt:  # the outcome was not recorded yet
            if outcome.kind is _SUCCESS:
                call.settle(number, started, outcome, error, now)
                call.take_refund()
            else:
                call.record_failure(number, started, outcome, error, now)
        step = call.unreachable(outcome, error, now)
    if step is DONE:
        retrier._successes += 1
    elif step is GIVE_UP:
        retrier._failures += 1
    if call.outbox is not None:
        deliver(call)
    return step


def pay(scope: Scope, cost: int) -> tuple[str | None, BudgetTicket | None]:
    """Take what a retry costs, ``cost`` quota tokens then a place in the retry budget: ``(None, ticket)``
    when paid (``ticket``: the budget's, which :meth:`Scope.cancel_retry` hands back), else what refused it
    (``"quota"`` or ``"budget"``), nothing kept of a payment refused half-way."""
    quota, budget = scope.quota, scope.budget
    if cost:
        assert quota is not None
        taken = quota.try_acquire(cost)
        if not isinstance(taken, bool):
            taken = taken
        if not taken:
            return "quota", None
    ticket: BudgetTicket | None = None
    if budget is not None:
        spent: Any = budget.spend()  # a ticket or None; for a budget on a server, what to await for them
        if not (spent is None or isinstance(spent, BudgetTicket)):
            spent = spent
        ticket = spent
        if ticket is None:
            pending = scope.refund(cost)
            if pending is not None:
                pending
            return "budget", None
    return None, ticket
