"""A call's first attempt, begun before the call needs an object of its own (for integrations).

Most calls make one attempt, and it succeeds. A driver that makes many calls (the httpx transport)
begins that attempt with :meth:`Retrier.begin_first` when nothing could make it wait or refuse it
(a local scope with no rate limit, no first-attempt cost and a closed breaker, and a policy with no
deadline or per-attempt timeout). Then either:

- the attempt succeeded with nothing to judge: :meth:`FirstAttempt.succeeded` records it by the rule
  every success follows (:func:`~._call.succeeded`, the one place) and the call is over; the
  :class:`FirstAttempt` is then the record of the finished call; or
- anything else (an error, a result to judge): :meth:`FirstAttempt.go_on` makes the call's
  :class:`~._drivers.Attempts` with this attempt begun, and the driver ends it as any attempt
  (``async with attempt``), then goes on with :meth:`Attempts.start`.

Either way each decision is taken by the same function as for every other call; only the call's
object is made later, or never.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .._primitives._kinds import OutcomeKind
from ._attempt import Attempt
from ._call import Judge, Label, succeeded
from ._driver import open_call
from ._drivers import Attempts
from ._history import AttemptRecord, RetryHistory

if TYPE_CHECKING:
    from ._policy import RetryPolicy
    from ._retrier import Retrier
    from ._scopes import Scope

__all__ = ["FirstAttempt"]

_SUCCESS = OutcomeKind.SUCCESS


class FirstAttempt:
    """The first attempt of a call, begun at once by :meth:`Retrier.begin_first`.

    After :meth:`succeeded` it is the record of the finished call (the attributes a
    :class:`~asyncretry.Attempts` has after its loop: ``number``, ``gave_up``, ``total_delay``,
    ``scope_key``, :meth:`history`).

    Attributes:
        started: when the attempt began, on the retrier's clock.
        number: 1.
    """

    __slots__ = ("_ended", "policy", "retrier", "scope", "started")

    number = 1
    gave_up: str | None = None
    total_delay = 0.0

    def __init__(self, retrier: Retrier, scope: Scope, policy: RetryPolicy, now: float) -> None:
        self.retrier = retrier
        self.scope = scope
        self.policy = policy
        self.started = now
        self._ended: float | None = None
        open_call(retrier, scope, now)
        retrier._attempts += 1

    def succeeded(self, label: Label | None = None) -> FirstAttempt:
        """The attempt succeeded and its result needs no judging: the call is over.

        The limiter and the breaker hear of it, the quota gets its success increment back, the success
        is counted and reported (``label``: what the call is, for the event). Returns ``self``, now the
        record of the finished call.
        """
        if self._ended is not None:
            raise RuntimeError("this first attempt has already ended")
        retrier, scope, started = self.retrier, self.scope, self.started
        self._ended = now = retrier.clock.now()
        if scope.reports:
            scope.report(_SUCCESS, "ok", started, 0, now)
        refund = succeeded(retrier.events, retrier.events.emit, scope, 1, started, now, None, label)
        if refund:
            scope.quota.release(refund)  # type: ignore[union-attr]  # a local scope's RetryQuota
        retrier._successes += 1
        return self

    def go_on(self, *, judge: Judge | None = None, label: Label | None = None) -> tuple[Attempts, Attempt]:
        """The call goes on as any other: its :class:`Attempts`, and the handle of this attempt, begun.

        End the attempt with ``async with attempt:`` around judging what it gave (mark it with
        :meth:`Attempt.classify_result` or :meth:`Attempt.classify_error`, or raise its error inside),
        then continue with :meth:`Attempts.start` while the call is not :attr:`~Attempts.done`.
        """
        if self._ended is not None:
            raise RuntimeError("this first attempt has already ended")
        self._ended = math.nan  # the call's Attempts records it from now on
        call = Attempts(self.retrier, self.scope, self.policy, self.started, judge, label, begun=True)
        return call, Attempt(call, started=self.started)

    # -------------------------------------------------------- the record of the finished call
    @property
    def scope_key(self) -> str:
        """The scope (resource) the call belonged to."""
        return self.scope.key

    def history(self) -> RetryHistory:
        """The record of the call: one attempt that succeeded.

        Raises:
            RuntimeError: the attempt has not succeeded (it is still running, or the call went on).
        """
        ended = self._ended
        if ended is None or math.isnan(ended):
            raise RuntimeError("only a first attempt that succeeded is the record of its call")
        record = AttemptRecord(
            number=1, started=self.started, duration=ended - self.started, kind=OutcomeKind.SUCCESS, reason="ok",
            delay_after=None, error=None,
        )
        return RetryHistory(scope=self.scope.key, attempts=(record,), elapsed=ended - self.started, gave_up=None)

    def __repr__(self) -> str:
        ended = self._ended
        state = "begun" if ended is None else "went on" if math.isnan(ended) else "succeeded"
        return f"<FirstAttempt scope={self.scope.key!r} {state}>"
