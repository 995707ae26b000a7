"""Scopes: the shared state of one resource (quota, limiter, breaker, fixed rate limit), and the table of them.

A scope's parts are either in-process primitives, which answer at once, or parts kept on a server
(:mod:`asyncretry._primitives._shared`), whose answers are awaited. :class:`Scope` is the thin I/O layer
between the decision core and those parts: it tells them what an attempt's outcome was and refunds the
quota. Each of those is one method for both kinds of part: a local part answers at once, and the method
returns what is left to await for a part on a server (``None`` when nothing is), so that the executor
(:mod:`._async._executor`) chooses in one place whether to await. It decides nothing.

The table keeps scopes in least-recently-used order, so that finding a scope to evict costs the same
at 10 scopes or 100,000.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._primitives._breaker import BreakerStatistics, CircuitBreaker
from .._primitives._bucket import BucketStatistics, TokenBucket
from .._primitives._budget import BudgetStatistics, BudgetTicket, RetryBudget
from .._primitives._kinds import OutcomeKind
from .._primitives._limiter import AdaptiveRateLimiter, LimiterStatistics
from .._primitives._quota import QuotaStatistics, RetryQuota
from .._primitives._shared import RemoteBreaker, RemoteBucket, RemoteBudget, RemoteLimiter, RemoteQuota
from .._primitives._turns import CallerTurns, TurnStatistics

if TYPE_CHECKING:
    from ._hedging import HedgeState, HedgeStatistics, HedgingConfig

__all__ = [
    "AnyBreaker", "AnyBucket", "AnyBudget", "AnyLimiter", "AnyQuota", "Scope", "ScopeStatistics", "ScopeTable",
    "check_part", "given",
]

AnyQuota = RetryQuota | RemoteQuota
AnyBreaker = CircuitBreaker | RemoteBreaker
AnyLimiter = AdaptiveRateLimiter | RemoteLimiter
AnyBucket = TokenBucket | RemoteBucket
AnyBudget = RetryBudget | RemoteBudget

_THROTTLING = OutcomeKind.THROTTLING
_SUCCESS = OutcomeKind.SUCCESS

S = TypeVar("S")


def given(source: Any, local: type, remote: type, key: str, what: str) -> Any:
    """A shared part as given, or the one a factory makes for scope ``key``; ``None`` stays ``None``.

    Raises:
        TypeError: ``source`` (or what the factory made) is neither the local primitive nor its remote protocol.
    """
    if source is None or isinstance(source, (local, remote)):
        return source
    if callable(source):
        made = source(key)
        if not isinstance(made, (local, remote)):
            raise TypeError(f"the {what} factory returned {made!r} for scope {key!r}, not a {local.__name__}")
        return made
    raise TypeError(f"{what} must be a {local.__name__} or a function making one per scope, got {source!r}")


async def _in_turn(*steps: Awaitable[None]) -> None:
    """Await the round trips one report left, one after the other."""
    for step in steps:
        await step


def check_part(source: Any, local: type, remote: type, what: str) -> None:
    """Refuse at construction what :func:`given` would refuse at the first call of a scope."""
    if source is None or isinstance(source, (local, remote)):
        return
    if isinstance(source, type) or not callable(source):
        raise TypeError(f"{what} must be a {local.__name__} or a function making one per scope, got {source!r}")


@dataclass(frozen=True, slots=True)
class ScopeStatistics:
    """A snapshot of one scope's shared state (``None`` where the policy has no such part)."""

    key: str
    quota: QuotaStatistics | None
    limiter: LimiterStatistics | None
    breaker: BreakerStatistics | None
    rate_limit: BucketStatistics | None
    last_used: float
    budget: BudgetStatistics | None = None
    hedging: tuple[HedgeStatistics, ...] = ()  # one per hedging configuration used in the scope
    turns: TurnStatistics | None = None  # callers in turn at the rate limits, once a call with a caller waited


class Scope:
    """The shared state of one scope (one resource) and the I/O that tells it about attempts."""

    __slots__ = (
        "breaker", "bucket", "budget", "first_cost", "gates", "hedging", "key", "last_used", "limiter", "local",
        "local_breaker", "quota", "reports", "shares_clock", "success_increment", "turns", "unpaced",
    )

    def __init__(
        self,
        key: str,
        quota: AnyQuota | None,
        limiter: AnyLimiter | None,
        breaker: AnyBreaker | None,
        bucket: AnyBucket | None,
        now: float,
        budget: AnyBudget | None = None,
        clock: object = None,
    ) -> None:
        self.key = key
        self.budget = budget
        self.quota = quota
        self.limiter = limiter
        self.breaker = breaker
        self.bucket = bucket
        self.last_used = now
        #: hedging state by configuration (:func:`~._hedging.hedge_state`), made when a call first hedges here
        self.hedging: dict[HedgingConfig, HedgeState] | None = None
        #: callers in turn in front of the rate limits (:meth:`caller_turns`), made when a call with a caller waits
        self.turns: CallerTurns | None = None
        #: every part answers at once (in-process primitives); otherwise the async driver awaits them
        self.local = (
            (quota is None or isinstance(quota, RetryQuota))
            and (breaker is None or isinstance(breaker, CircuitBreaker))
            and (limiter is None or isinstance(limiter, AdaptiveRateLimiter))
            and (bucket is None or isinstance(bucket, TokenBucket))
            and (budget is None or isinstance(budget, RetryBudget))
        )
        self.local_breaker = isinstance(breaker, CircuitBreaker)
        #: the breaker reads the engine's clock: the engine hands it the time it just read
        self.shares_clock = self.local_breaker and breaker.clock is clock  # type: ignore[union-attr]
        #: a rate limit or a breaker may make an attempt wait or refuse it
        self.gates = bucket is not None or limiter is not None or breaker is not None
        #: a limiter or a breaker hears of every attempt's outcome (:meth:`report`)
        self.reports = limiter is not None or breaker is not None
        config = quota.config if quota is not None else None
        #: what a first attempt costs from the quota (SPEC's initial_try_cost, 0 by default)
        self.first_cost = config.initial_try_cost if config is not None else 0
        #: what a success that needed no retry gives back to the quota (SPEC 1.1)
        self.success_increment = config.initial_try_success_increment if config is not None else 0
        #: nothing but a rate limit's token can make a first attempt wait or pay: no first-attempt cost, no
        #: retry budget on a server (which hears of every call before its first attempt, awaited), and at
        #: most one rate limit, in-process (its token is taken at once, or the attempt waits)
        rates = [part for part in (bucket, limiter) if part is not None]
        self.unpaced = (
            not self.first_cost
            and (budget is None or isinstance(budget, RetryBudget))
            and len(rates) <= 1
            and all(isinstance(part, (TokenBucket, AdaptiveRateLimiter)) for part in rates)
        )

    def admit_first(self) -> bool:
        """Admit a call's first attempt now if nothing would make it wait or could refuse it, taking its
        rate-limit token if the scope has one: no first-attempt cost, no breaker or a local one that is
        closed, and an in-process rate limit (at most one) that has a token now. ``False`` takes nothing."""
        if not self.unpaced:
            return False
        breaker = self.breaker
        if breaker is not None and not (self.local_breaker and breaker.is_closed):  # type: ignore[union-attr]
            return False
        bucket, limiter = self.bucket, self.limiter
        if isinstance(bucket, TokenBucket):  # (unpaced: a rate limit is an in-process one)
            return bucket.try_acquire(1)
        if isinstance(limiter, AdaptiveRateLimiter):
            return limiter.try_acquire()
        return True

    def caller_turns(self) -> CallerTurns:
        """The turns of this scope's callers in front of its rate limits (made at the first use; threads call
        this under the retrier's lock)."""
        turns = self.turns
        if turns is None:
            turns = self.turns = CallerTurns(self.key)
        return turns

    # -- what an attempt's outcome does to the limiter and the breaker (the one place)
    def report(
        self, kind: OutcomeKind, reason: str, started: float, probe: int, now: float | None = None,
        hold: float | None = None, pace: float | None = None,
    ) -> Awaitable[None] | None:
        """Tell the limiter and the breaker how an attempt ended.

        Returns what is left to await: a breaker kept on a server records the outcome in a round trip, a
        limiter kept on a server tells its fleet of a hold (the executor awaits them); ``None`` when every
        part answered at once. ``now``: the time the engine
        just read on its clock, if the caller has it; a local breaker takes it instead of reading its own
        when the two clocks are the same (saves a read). ``hold``: seconds the limiter must admit nothing,
        the server having announced its quota spent (:meth:`Call.hold_of <._call.Call.hold_of>`). ``pace``: the
        most requests per second the limiter may send, as the server announced
        (:meth:`Call.pace_of <._call.Call.pace_of>`)."""
        limiter, told = self.limiter, None
        if limiter is not None:
            # sent_at: the limiter tells a new congestion event from echoes of one it already reacted to;
            # failed: a 503 or a reset is neither a throttle nor a sign that the server served the request.
            limiter.update(kind is _THROTTLING, reason=reason, sent_at=started,
                           failed=kind is not _SUCCESS and kind is not _THROTTLING and kind.retryable)
            if pace is not None:
                limiter.pace(pace, reason=reason)
            if hold is not None:
                told = limiter.hold(hold, reason=reason)  # a limiter on a server: the fleet hears of it now
        breaker = self.breaker
        if breaker is None:
            return told
        failed = kind is not _SUCCESS and kind.retryable
        if not isinstance(breaker, CircuitBreaker):
            recorded = breaker.record(success=not failed, probe=probe)
            return recorded if told is None else _in_turn(told, recorded)
        if failed:
            breaker.record_failure(probe)
        else:
            breaker.record_success(probe, now=now if self.shares_clock else None)
        return told

    # -- giving back what a retry cost (what it costs is taken by the executor: ._async._executor.pay)
    def refund(self, amount: int) -> Awaitable[None] | None:
        """Give ``amount`` tokens back to the quota; what is left to await when the quota is on a server."""
        quota = self.quota
        if quota is None or not amount:
            return None
        return quota.release(amount)

    def cancel_retry(self, cost: int, ticket: BudgetTicket | None) -> Awaitable[None] | None:
        """A retry that was paid for will not happen: its tokens and its budget place (``ticket``) go back.
        Returns what is left to await (a quota on a server), else ``None``."""
        if self.budget is not None and ticket is not None:
            self.budget.refund(ticket)
        return self.refund(cost)

    def breaker_wait(self) -> float:
        """The breaker's answer to "when would you admit an attempt?": seconds from now (0 without a breaker).

        A question only: it moves no state (an open circuit whose break is over stays open until
        ``acquire()``)."""
        breaker = self.breaker
        if breaker is None:
            return 0.0
        if isinstance(breaker, CircuitBreaker):
            return breaker.retry_after()
        return breaker.statistics().retry_after

    def busy(self) -> bool:
        """Whether a task is queued on this scope's rate limits (then it must not be evicted)."""
        bucket, limiter = self.bucket, self.limiter
        return (bucket is not None and bucket.statistics().waiting > 0) or (
            limiter is not None and limiter.statistics().waiting > 0
        )

    def statistics(self) -> ScopeStatistics:
        return ScopeStatistics(
            key=self.key,
            quota=self.quota.statistics() if self.quota is not None else None,
            limiter=self.limiter.statistics() if self.limiter is not None else None,
            breaker=self.breaker.statistics() if self.breaker is not None else None,
            rate_limit=self.bucket.statistics() if self.bucket is not None else None,
            last_used=self.last_used,
            budget=self.budget.statistics() if self.budget is not None else None,
            hedging=tuple(state.statistics() for state in self.hedging.values()) if self.hedging else (),
            turns=self.turns.statistics() if self.turns is not None else None,
        )


class ScopeTable:
    """The scopes of a retrier by key.

    Using a known key only marks it used. A new key first evicts what it can from the front of the
    table (oldest first in insertion order): an idle scope goes; one used since it was inserted gets a
    second chance (it moves to the back, as a "clock" cache does); at ``max_scopes`` the least recently
    used of those looked at goes. At most a few scopes are looked at for one new key, so a new key costs
    the same at 10 scopes or 100,000; scopes that a task waits on are never evicted.
    """

    __slots__ = ("_evicted", "_idle_timeout", "_make", "_max", "_on_evict", "_scopes")

    LOOK_AT = 4  # scopes examined from the front for one new key, at most

    def __init__(
        self,
        make: Callable[[str, float], Scope],
        max_scopes: int,
        idle_timeout: float,
        on_evict: Callable[[Scope, float], None],
    ) -> None:
        self._make = make
        self._max = max_scopes
        self._idle_timeout = idle_timeout
        self._on_evict = on_evict
        # An OrderedDict: its front is reached in O(1) however many scopes were deleted before it
        # (a plain dict scans the holes deletions leave at its start until it is rebuilt).
        self._scopes: OrderedDict[str, Scope] = OrderedDict()
        self._evicted = 0

    def get(self, key: str, now: float) -> Scope:
        """The scope of ``key``, made (and others evicted) if it is new; marks it used at ``now``."""
        scope = self._scopes.get(key)
        if scope is None:
            self._evict(now)
            scope = self._scopes[key] = self._make(key, now)
        else:
            scope.last_used = now
        return scope

    def _evict(self, now: float) -> None:
        scopes = self._scopes
        idle_before = now - self._idle_timeout
        candidate: Scope | None = None  # at max_scopes: the least recently used one looked at
        for _ in range(min(self.LOOK_AT, len(scopes))):
            oldest = next(iter(scopes.values()))
            if oldest.last_used <= idle_before and not oldest.busy():
                self._drop(oldest, now)
                continue
            if len(scopes) < self._max and oldest.last_used > idle_before:
                return  # room left, and the front is in use: nothing to do
            scopes.move_to_end(oldest.key)  # a second chance: to the back
            if not oldest.busy() and (candidate is None or oldest.last_used < candidate.last_used):
                candidate = oldest
        if len(scopes) >= self._max and candidate is not None:
            self._drop(candidate, now)

    def _drop(self, scope: Scope, now: float) -> None:
        del self._scopes[scope.key]
        self._evicted += 1
        self._on_evict(scope, now)

    @property
    def evicted(self) -> int:
        return self._evicted

    def keys(self) -> list[str]:
        return list(self._scopes)

    def values(self) -> list[Scope]:
        return list(self._scopes.values())

    def __len__(self) -> int:
        return len(self._scopes)
