"""The decision core: everything one call decides, and nothing that waits (SPEC section 1.1).

A :class:`Call` takes the outcome of each attempt and the time, and answers what to do next; it never
sleeps, sends or awaits (in the spirit of h11's sans-I/O state machines). The drivers
(:mod:`asyncretry._engine._drivers`: ``async for``, ``for``, :meth:`Retrier.call`, the decorator, the
httpx transports) do the waiting and the I/O around it::

    driver                                   core (Call)
    ------                                   -----------
    wait for quota / rate / breaker
    begin an attempt                    ->   begin(delay, probe)          the attempt's number
    run it; judge its outcome (Attempt)
    tell limiter and breaker (Scope)
    settle                              ->   settle(...)                  DONE / GIVE_UP / PAY / RETRY
    pay a retry's cost (Scope)          ->   paid(ok)                     RETRY / GIVE_UP
    give back a success's tokens             (refund_due says how many)
    sleep the delay, then begin again

One invocation follows SPEC section 1.1: after a success the quota gets the last retry's cost back (or
the success increment); a non-retryable outcome, the last attempt, an empty quota, a deadline or a
breaker that would refuse the retry end the call; otherwise it sleeps the backoff (or the delay the
server asked for) and tries again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from .._events import AttemptFinished, Event, EventBus, GaveUp, RetryScheduled, Throttled
from .._exceptions import RetriesExhausted
from .._primitives._budget import BudgetTicket
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveRateLimiter
from ._classify import Outcome
from ._history import AttemptRecord, RetryHistory, attach_history, hedged_records
from ._policy import GiveUpInfo, RetryPolicy
from ._scopes import Scope

if TYPE_CHECKING:
    from ._testmode import TestMode

__all__ = ["DONE", "GIVE_UP", "PAY", "RETRY", "Call", "Judge", "Label", "Step", "succeeded"]


class Step(IntEnum):
    """What the decision core answers after an attempt (:meth:`Call.settle`, :meth:`Call.paid`)."""

    DONE = 0
    """The attempt succeeded: the call is over."""
    GIVE_UP = 1
    """The call is over without success (``gave_up`` says why); it ends with the attempt's own outcome."""
    PAY = 2
    """Retry, once the driver has taken the retry's cost (quota tokens, a budget place): then ``paid()``."""
    RETRY = 3
    """Retry after ``delay`` seconds."""


DONE, GIVE_UP, PAY, RETRY = Step.DONE, Step.GIVE_UP, Step.PAY, Step.RETRY

Judge = Callable[[Outcome], Outcome]
"""An integration's last word on a failed attempt's outcome (the httpx transports turn a retryable
outcome of a request that cannot be sent again into a final one)."""

Deadline = Callable[[], "float | None"]
"""Gives the seconds the caller's own deadline leaves (``None``: it has none): an input of the core's decisions."""

Label = Callable[[], str]
"""What a call is (``"GET https://host/path"``), worked out only when a log line or a span needs it."""

_SUCCESS = OutcomeKind.SUCCESS
_THROTTLING = OutcomeKind.THROTTLING
_HOLD_TIMES_SOONEST = 2.0  # a hold lasts at most twice the soonest a spent quota may be fresh (Call.hold_of)


class Call:
    """The state and the decisions of one call.

    One is made per call, with slots: its state never lives on an object that calls share.

    Attributes:
        number: the attempts begun so far.
        gave_up: why the call gave up (``None`` while it runs, and after a success).
        outcome: the last attempt's outcome.
    """

    __slots__ = (
        "_cost", "_delays", "_final", "_hedges", "_overlapped", "_previous_delay", "_records", "_server_directed",
        "deadline_at", "delay", "done", "dropped", "due", "ending", "events", "gave_up", "hook", "in_attempt",
        "judge", "label", "last_error", "last_timeout", "linger", "max_attempts", "no_wait", "number", "outbox",
        "outcome", "policy", "probe", "refund_due", "retry_paid", "scope", "started", "ticket", "timed",
        "wait_cost",
    )

    number: int
    gave_up: str | None
    outcome: Outcome | None
    done: bool
    in_attempt: bool
    delay: float  # the sleep before the next attempt
    due: int  # PAY: the quota tokens the retry costs now (the retry budget's place is asked for too)
    wait_cost: int  # the quota's waiting mode: the tokens the driver waits for before the next attempt
    retry_paid: bool  # the next attempt's costs were paid: a cancellation before it begins gives them back
    dropped: int | None  # a paid retry that will not happen: the driver gives back its tokens and place
    ticket: BudgetTicket | None  # the retry budget's ticket for the latest paid retry (its place)
    linger: float  # long-polling: the sleep before returning the error the quota ended the call with
    refund_due: int  # tokens a success gives back to the quota
    probe: int  # the breaker's ticket when it admitted the current attempt as a half-open probe, else 0
    last_error: Exception | None
    ending: Exception | None  # refused: what the call ends with (see refuse)
    outbox: list[Event] | None  # events decided, for the driver to deliver afterwards (take_events)
    last_timeout: float
    hook: GiveUpInfo | None  # on_give_up, for the driver to run
    _cost: int | None  # the last retry's cost, refunded by a success (SPEC 1.1)
    _previous_delay: float | None
    _delays: tuple[float, ...] | list[float]  # index i: the delay after attempt i + 1
    # The attempts that failed: (number, started, duration, kind, reason, repr of the error).
    _records: tuple[()] | list[tuple[int, float, float, OutcomeKind, str, str | None]]
    _final: tuple[int, float, float] | None  # the attempt that succeeded: number, started, ended
    # Hedged calls only (._hedged): the attempts sent as hedges, and those that ended while another attempt
    # of the call still ran (no delay follows them; the history gives them none).
    _hedges: tuple[()] | set[int]
    _overlapped: tuple[()] | set[int]
    deadline_at: float
    timed: bool  # a deadline or a per-attempt timeout: entering an attempt computes its time limit
    no_wait: bool
    judge: Judge | None
    label: Label | None
    events: EventBus  # asked only who listens: the driver delivers the events (take_events)
    scope: Scope
    policy: RetryPolicy
    started: float
    max_attempts: int

    def __init__(
        self, scope: Scope, policy: RetryPolicy, now: float, events: EventBus,
        judge: Judge | None = None, label: Label | None = None, *, test: TestMode | None = None, begun: bool = False,
    ) -> None:
        # Every field starts here (slots): the counts at 0, the flags off, the records empty.
        self.number = self.due = self.wait_cost = self.refund_due = self.probe = 0
        self.delay = self.linger = self.last_timeout = 0.0
        self.done = self.in_attempt = self.retry_paid = self._server_directed = False
        self.gave_up = self.outcome = self.dropped = self.ticket = self.last_error = self.ending = None
        self.outbox = self.hook = self._cost = self._previous_delay = self._final = None
        self._delays = self._records = self._hedges = self._overlapped = ()
        self.events = events
        self.scope = scope
        self.policy = policy
        self.started = now
        self.max_attempts = policy.max_attempts
        self.judge = judge
        self.label = label
        self.timed = timed = policy.timed
        self.deadline_at = now + _seconds(policy.deadline) if timed and policy.deadline is not None else math.inf
        self.no_wait = False
        if test is not None:  # the test mode the driver found in force (asyncretry.testing)
            self.no_wait = test.no_wait
            if test.max_attempts is not None:
                self.max_attempts = min(self.max_attempts, test.max_attempts)
        if begun:
            self.number = 1  # Retrier.begin_first opened the call and began its first attempt
            self.in_attempt = True

    # ---------------------------------------------------------------------------------- events
    def post(self, event: Event) -> None:
        """Keep an event the decision made, for the driver to deliver once the decision is taken (the core
        runs no listener: they are user code)."""
        if self.outbox is None:
            self.outbox = [event]
        else:
            self.outbox.append(event)

    def take_events(self) -> list[Event] | None:
        """The events decided since the last call, for the driver to deliver (``None``: none)."""
        events, self.outbox = self.outbox, None
        return events

    # ------------------------------------------------------------------------ before an attempt
    def begin(self, delay: float, probe: int) -> int:
        """Begin the next attempt (the driver waited and was admitted); returns its number."""
        if self.in_attempt:
            raise RuntimeError(
                "each attempt must be entered with `async with attempt:` (or `with attempt:`) "
                "before asking for the next one"
            )
        self.number = number = self.number + 1
        self.in_attempt = True
        if self.retry_paid:
            self.retry_paid = False
        if probe:
            self.probe = probe
        return number

    def begin_hedge(self) -> int:
        """Begin another attempt while the current one still runs (a hedge, :mod:`._hedged`); its number."""
        self.number = number = self.number + 1
        if self._hedges:
            self._hedges.add(number)
        else:
            self._hedges = {number}
        return number

    def overlapped(self, number: int, started: float, outcome: Outcome, error: Exception | None, now: float) -> None:
        """A hedged call's attempt failed while another of its attempts still runs: record it, decide nothing
        (the attempt still running may yet answer)."""
        # Recorded as any failure, but the round goes on: what the call is at stays as it was.
        last_error, in_attempt, last = self.last_error, self.in_attempt, self.outcome
        self.record_failure(number, started, outcome, error, now)
        self.in_attempt, self.outcome = in_attempt, last
        if error is None:
            self.last_error = last_error  # a result: the call still ends with the last error, if any
        if self._overlapped:
            self._overlapped.add(number)
        else:
            self._overlapped = {number}

    def lost(self, number: int, started: float, winner: int, now: float) -> None:
        """A hedged call's attempt was cancelled because attempt ``winner`` answered first."""
        self._overlap(number, started, now - started, OutcomeKind.CANCELLED, f"attempt #{winner} answered first", None)

    def _overlap(self, *row: Any) -> None:
        if self._records:
            self._records.append(row)
        else:
            self._records = [row]
        if self._overlapped:
            self._overlapped.add(row[0])
        else:
            self._overlapped = {row[0]}

    def refuse(self, error: Exception, why: str, now: float) -> None:
        """Something refused the next attempt before it began (quota, rate limit, breaker, backend).

        :attr:`ending` is then what the call ends with: the refusal itself when no attempt was made; else
        the last attempt's own error, or ``None`` when that attempt ended with a result (the caller gets
        the result). Either way the history, with why the call stopped, is attached to it.
        """
        self.ending = ending = error if self.number == 0 else self.last_error
        self._give_up_common(ending, why, now)
        if self.policy.on_give_up is not None:
            final = self.outcome
            if final is None:  # no attempt was made: the refusal itself is what failed
                final = Outcome(OutcomeKind.NOT_RETRYABLE, why, error)
            self.hook = GiveUpInfo(self.scope.key, final, self.history(now))

    def abandon(self) -> int:
        """The attempt was cancelled (or hit a BaseException): record nothing. Returns the breaker's ticket
        of a half-open probe, whose slot the driver frees (0: none)."""
        self.in_attempt = False
        self.done = True
        probe, self.probe = self.probe, 0
        return probe

    def refund_on_cancel(self) -> int | None:
        """The retry that was paid for will not happen (cancelled or refused while waiting): the tokens to
        give back with its budget place, or ``None`` when nothing was paid."""
        if not self.retry_paid:
            return None
        self.retry_paid = False
        cost, self._cost = self._cost, None
        return cost or 0

    # ------------------------------------------------------------------------- after an attempt
    def settle(
        self, number: int, started: float, outcome: Outcome, error: Exception | None, now: float, *,
        outer: Deadline | None = None, draw: float = 0.0, breaker_wait: float = 0.0,
    ) -> Step:
        """Record how attempt ``number`` (begun at ``started``) ended at ``now``, and decide (SPEC 1.1).

        Every input is an argument: besides the outcome and the time, for a failure, ``outer`` (gives the
        seconds the caller's own deadline leaves, ``None`` without one; asked only when a delay or a
        deadline makes it matter: finding it out costs the driver a look at its cancel scopes), ``draw``
        (the random draw in ``[0, 1)`` for the backoff's jitter) and ``breaker_wait`` (the breaker's
        answer: seconds until it would admit an attempt, 0 without a breaker). Asking changes nothing.

        Returns:
            DONE, GIVE_UP, PAY (take :attr:`due` from the quota, then :meth:`paid`) or RETRY (sleep
            :attr:`delay`; in the quota's waiting mode, first wait for :attr:`due` tokens).
        """
        self.in_attempt = False
        if self.probe:
            self.probe = 0
        self.outcome = outcome
        kind = outcome.kind
        if kind is _SUCCESS:
            self._final = (number, started, now)
            self.done = True
            if self.last_error is not None:
                self.last_error = None  # see forget_errors
            self.refund_due = succeeded(
                self.events, self.post, self.scope, number, started, now, self._cost, self.label, outcome.reason
            )
            return DONE
        self.record_failure(number, started, outcome, error, now)
        if not kind.retryable:
            return self._give_up(outcome, error, "not_retryable", now)
        if self.number >= self.max_attempts:  # (hedged: the last to end need not be the last begun)
            return self._give_up(outcome, error, "max_attempts", now)
        self.delay, self._server_directed = self._plan_delay(outcome, kind, self.number, draw)
        scope = self.scope
        quota = scope.quota
        cost = quota.cost_of(kind) if quota is not None else 0
        now_or_later = cost and quota is not None and quota.config.circuit_breaker_mode
        if cost and not now_or_later:
            self.wait_cost = cost  # the quota's waiting mode: the driver waits for the tokens before the retry
        if now_or_later or scope.budget is not None:
            self.due = cost if now_or_later else 0
            return PAY
        return self._checked(now, outer, breaker_wait)

    def record_failure(
        self, number: int, started: float, outcome: Outcome, error: Exception | None, now: float
    ) -> None:
        """Record a failed attempt (its events and its row in the history), deciding nothing."""
        self.in_attempt = False
        self.outcome = outcome
        # Its events: a throttle (when no limiter reports its own), and the attempt's end.
        kind, events, scope = outcome.kind, self.events, self.scope
        if kind is _THROTTLING and scope.limiter is None and events.wants(Throttled):
            self.post(Throttled(time=now, source=scope.key, reason=outcome.reason))
        if events.wants(AttemptFinished):
            self.post(_finished(scope, number, started, now, kind, outcome.reason, self.label))
        self.last_error = error  # what the call ends with if it stops now (None: the result)
        row = (number, started, now - started, outcome.kind, outcome.reason, None if error is None else repr(error))
        if self._records:
            self._records.append(row)
        else:
            self._records = [row]

    def unreachable(self, outcome: Outcome, error: Exception | None, now: float) -> Step:
        """State kept on a server could not be reached while the attempt was settled: a success stays one
        (only its bookkeeping is lost); any other outcome ends the call with it (``"backend"``)."""
        if self.done:
            return DONE if self.gave_up is None else GIVE_UP
        return self._give_up(outcome, error, "backend", now)

    def paid(
        self, refused: str | None, now: float, *, outer: Deadline | None = None, breaker_wait: float = 0.0
    ) -> Step:
        """The driver took what the retry costs (``refused`` is ``None``), or ``"quota"`` or ``"budget"``
        refused it (nothing taken): RETRY or GIVE_UP (the call ends with the attempt's own outcome)."""
        cost, self.due = self.due, 0
        outcome = self.outcome
        assert outcome is not None
        error = self.last_error if isinstance(self.last_error, Exception) else None
        if refused is not None:
            if refused == "quota" and self.policy.long_polling:
                # The SDKs' long-polling rule: back off before returning the error (never past a deadline).
                remaining = self.left(now, outer() if outer is not None else None)
                self.linger = self.delay if remaining is None else min(self.delay, remaining)
            return self._give_up(outcome, error, refused, now)
        self.retry_paid = True
        if cost:
            self._cost = cost
        step = self._checked(now, outer, breaker_wait)
        if step is GIVE_UP:
            self.retry_paid = False
            self._cost = None
            self.dropped = cost  # the retry it paid for will not happen: its tokens and budget place go back
        return step

    def _checked(self, now: float, outer: Deadline | None, breaker_wait: float) -> Step:
        """RETRY after :attr:`delay` (scheduled: recorded, announced), unless a deadline or the breaker would
        leave the retry no chance."""
        outcome = self.outcome
        assert outcome is not None
        error = self.last_error if isinstance(self.last_error, Exception) else None
        delay = self.delay
        remaining = None
        if delay > 0.0 or self.deadline_at != math.inf:
            remaining = self.left(now, outer() if outer is not None else None)
        if remaining is not None and delay >= remaining:
            # A sleep that ends at the deadline leaves no time for the attempt it was for.
            return self._give_up(outcome, error, "server_delay" if self._server_directed else "deadline", now)
        if breaker_wait > delay:
            return self._give_up(outcome, error, "breaker", now)  # never sleep and then be refused
        self._previous_delay = delay
        if self._delays:
            self._delays.append(delay)  # type: ignore[union-attr]
        else:
            self._delays = [delay]
        if self.events.wants(RetryScheduled):
            self.post(RetryScheduled(
                time=now, source=self.scope.key, attempt=self.number, delay=delay, outcome=outcome.kind.value,
                reason=outcome.reason, server_directed=self._server_directed, target=self.target(),
            ))
        return RETRY

    def take_refund(self) -> int:
        """The tokens a success gives back to the quota now (the last retry's cost, or the increment)."""
        amount, self.refund_due = self.refund_due, 0
        return amount

    def take_dropped(self) -> int | None:
        """A paid retry that will not happen: its tokens (its budget place goes back too), or ``None``."""
        dropped, self.dropped = self.dropped, None
        return dropped

    def waited_for_quota(self) -> None:
        """The driver took the cost a retry waited for (the quota's waiting mode)."""
        self._cost, self.wait_cost, self.retry_paid = self.wait_cost, 0, True

    def _plan_delay(self, outcome: Outcome, kind: OutcomeKind, number: int, draw: float) -> tuple[float, bool]:
        """The sleep before the next attempt: the backoff, or the delay the server asked for."""
        policy = self.policy
        backoff = policy.throttling_backoff if kind is _THROTTLING else policy.backoff
        assert backoff is not None
        delay = backoff.delay(number, draw, self._previous_delay)
        server = outcome.server_delay
        if server is None and outcome.spent_quota is not None:
            server = outcome.spent_quota.reset  # a spent quota: wait for its reset, when nothing else was asked
        if server is None or not policy.honour_server_delay:
            if kind is _THROTTLING:
                limiter = self.scope.limiter
                if isinstance(limiter, AdaptiveRateLimiter):
                    # The limiter heard of this throttle (Scope.report) and may already answer it: the
                    # default profile paces the retry itself after its start-up's throttles and a fleet
                    # client's (its rules 8 and 9).
                    delay = limiter.backoff_after_throttle(delay)
            return delay, False
        cap = _seconds(policy.max_server_delay)
        if outcome.server_delay_is_hint:
            if not policy.honour_amz_retry_after:
                return delay, False
            # AWS: the hint is clamped into [t, t + 5] around the computed backoff t (and capped).
            return min(max(server, delay), delay + 5.0, max(cap, delay)), True
        return min(server, cap), True

    def hold_of(self, outcome: Outcome) -> float | None:
        """How long the scope's limiter must hold every caller after ``outcome``, which announced the quota
        spent (a success that took its last request too); ``None`` unless ``RetryPolicy.holds_spent_quota``.

        The hold runs until the announced reset, cut to ``max_server_delay``. A reset in whole seconds may
        come up to a second sooner than announced: unless it is known to within half a window
        (``AnnouncedQuota.resets_within_window``), a hold lasts at most twice the soonest the quota may be
        fresh (the reset less its rounding): ``t=1`` holds nothing, ``t=2`` and more until the announcement.
        """
        spent, policy = outcome.spent_quota, self.policy
        if spent is None or not policy.holds_spent_quota:
            return None
        soonest = max(0.0, spent.reset - spent.rounding)
        hold = min(spent.reset if spent.resets_within_window else soonest * _HOLD_TIMES_SOONEST, spent.reset,
                   _seconds(policy.max_server_delay))
        return hold if hold > 0.0 else None

    def pace_of(self, outcome: Outcome) -> float | None:
        """The pace ``outcome`` announced for the scope's limiter (``Outcome.announced_pace``), where the
        policy follows announced quotas (``RetryPolicy.holds_spent_quota``); else ``None``."""
        return outcome.announced_pace if self.policy.holds_spent_quota else None

    # -------------------------------------------------------------------------------- deadlines
    def left(self, now: float, outer: float | None) -> float | None:
        """Seconds left at ``now`` before the call's deadline or the caller's own (``outer`` seconds from
        now, ``None`` without one); ``None`` if unbounded."""
        remaining = self.deadline_at - now
        if outer is not None:
            remaining = min(remaining, outer)
        return None if remaining == math.inf else max(0.0, remaining)

    def attempt_timeout(self, now: float) -> float | None:
        """The time limit of an attempt beginning at ``now`` (the per-attempt timeout, the deadline)."""
        timeout = _seconds(self.policy.attempt_timeout) if self.policy.attempt_timeout is not None else None
        if self.deadline_at != math.inf:
            left = max(0.0, self.deadline_at - now)
            timeout = left if timeout is None else min(timeout, left)
        if timeout is not None:
            self.last_timeout = timeout
        return timeout

    def target(self) -> str | None:
        """What the call is, for events, logs and spans (worked out only when one is emitted)."""
        label = self.label
        return label() if label is not None else None

    # ---------------------------------------------------------------------------------- giving up
    def _give_up_common(self, error: BaseException | None, why: str, now: float) -> None:
        self.done = True
        self.gave_up = why
        if error is not None:
            attach_history(error, self.history(now))
        if self.events.wants(GaveUp):
            last = self.outcome
            # `reason` is a classification (metrics group by it): the last attempt's, or the
            # refusal's class name; a refusal's message (token counts ...) would be unbounded.
            self.post(GaveUp(
                time=now, source=self.scope.key, attempts=self.number, why=why,
                outcome=last.kind.value if last else "none",
                reason=last.reason if last else type(error).__name__,
                elapsed=now - self.started, target=self.target(),
            ))

    def _give_up(self, outcome: Outcome, error: Exception | None, why: str, now: float) -> Step:
        """The call ends with its last attempt's outcome (``error``, or its result): why it stopped is in the
        history attached to it."""
        self._give_up_common(error, why, now)
        if self.policy.on_give_up is not None:
            self.hook = GiveUpInfo(self.scope.key, outcome, self.history(now))
        return GIVE_UP

    def result_error(self) -> Exception:
        """What the ``call`` form raises when the call gave up on a result (no exception to re-raise)."""
        outcome = self.outcome
        why = self.gave_up or "max_attempts"
        reason = outcome.reason if outcome is not None else "none"
        error = RetriesExhausted(
            f"gave up ({why}) after {self.number} attempt(s); the last result was retryable: {reason}",
            last_result=outcome.result if outcome is not None else None,
            why=why,
        )
        attach_history(error, self.history())
        return error

    def forget_errors(self) -> None:
        """The call is over and its error is on its way to the caller: keep no reference to it.

        An error's traceback holds the frames it passed through, and one of them holds this call: a
        reference back from the call to the error would make every failed call a reference cycle,
        left for the cycle collector. The history keeps what was learnt (each error's repr).
        """
        self.last_error = None
        outcome = self.outcome
        if outcome is not None and outcome.error is not None:
            self.outcome = replace(outcome, error=None)

    # -------------------------------------------------------------------------------- history
    def history(self, now: float | None = None) -> RetryHistory:
        """The record of this call so far (``now``: the time, read when no attempt has ended yet)."""
        if now is None:
            now = self.started
        delays = self._delays
        rows = list(self._records)
        final = self._final
        if final is not None:
            number, started, ended = final
            reason = self.outcome.reason if self.outcome is not None else "ok"
            rows.append((number, started, ended - started, OutcomeKind.SUCCESS, reason, None))
        if self._hedges or self._overlapped:
            records = hedged_records(rows, delays, self._hedges, self._overlapped)
            ended = max((r.started + r.duration for r in records), default=now)
        else:
            records = tuple(
                AttemptRecord(
                    number=n, started=s, duration=d, kind=k, reason=r,
                    delay_after=delays[i] if i < len(delays) else None, error=e,
                )
                for i, (n, s, d, k, r, e) in enumerate(rows)
            )
            ended = records[-1].started + records[-1].duration if records else now
        return RetryHistory(
            scope=self.scope.key, attempts=records, elapsed=ended - self.started, gave_up=self.gave_up
        )

    @property
    def scope_key(self) -> str:
        """The scope (resource) the call belongs to."""
        return self.scope.key

    @property
    def total_delay(self) -> float:
        """Seconds of backoff scheduled so far."""
        return sum(self._delays)

    @property
    def retrying(self) -> bool:
        """True after an attempt failed and another will follow (the driver has not begun it yet)."""
        return not self.done and self.number > 0 and not self.in_attempt


def succeeded(
    events: EventBus, post: Callable[[Event], None], scope: Scope, number: int, started: float, now: float,
    cost: int | None, label: Label | None, reason: str = "ok",
) -> int:
    """What an attempt's success decides, the one place (SPEC 1.1): the quota gets back the last retry's
    cost, or the success increment when no retry was paid (``events`` is only asked who listens).

    Returns:
        The tokens to give back to the quota (the executor releases them and counts the success; the
        limiter and the breaker hear of it through :meth:`Scope.report`).
    """
    if events.wants(AttemptFinished):
        post(_finished(scope, number, started, now, _SUCCESS, reason, label))
    return cost if cost is not None else scope.success_increment


def _finished(
    scope: Scope, number: int, started: float, now: float, kind: OutcomeKind, reason: str, label: Label | None,
) -> AttemptFinished:
    return AttemptFinished(
        time=now, source=scope.key, attempt=number, outcome=kind.value, reason=reason,
        duration=now - started, target=label() if label is not None else None,
    )


def _seconds(value: Any) -> float:
    # The policy normalises durations to float seconds; this only narrows the declared type.
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)
