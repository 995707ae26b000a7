"""Shared state kept elsewhere: what the retry engine asks of a quota, breaker, limiter or bucket on a server.

The in-process primitives (:class:`~asyncretry.RetryQuota`, :class:`~asyncretry.CircuitBreaker`,
:class:`~asyncretry.AdaptiveRateLimiter`, :class:`~asyncretry.TokenBucket`) answer at once, so the
engine uses their synchronous methods. A part whose state lives on a server (the classes of
:mod:`asyncretry.redis`) cannot answer without a round trip: it implements the matching protocol below,
whose every question that needs the server is a coroutine. The engine tells the two apart by type, once
per scope; nothing else in the engine depends on where the state is kept.

A remote part is built by composition: it keeps a local primitive of the same kind as its fallback
while the server cannot be reached, and exposes only what it can really do.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ._breaker import BreakerStatistics
from ._bucket import BucketStatistics
from ._budget import BudgetStatistics, BudgetTicket, RetryBudgetConfig
from ._kinds import OutcomeKind
from ._limiter import LimiterStatistics
from ._quota import QuotaStatistics, RetryQuotaConfig

__all__ = ["RemoteBreaker", "RemoteBucket", "RemoteBudget", "RemoteLimiter", "RemoteQuota"]


@runtime_checkable
class RemoteQuota(Protocol):
    """A retry quota (SPEC section 1) whose tokens are kept on a server and shared by a fleet."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> RetryQuotaConfig: ...

    @property
    def available(self) -> float:
        """The tokens last known to be left (no round trip)."""
        ...

    def cost_of(self, kind: OutcomeKind) -> int:
        """What a retry after an outcome of this kind costs (no round trip)."""
        ...

    async def try_acquire(self, n: float) -> bool:
        """Take ``n`` tokens if the fleet has them, at once; False otherwise (one round trip)."""
        ...

    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        """Wait until ``n`` tokens can be taken (waiting mode); raises ``RetryCapacityExceeded`` on timeout."""
        ...

    async def release(self, n: float) -> None:
        """Give ``n`` tokens back (a refund, or the success increment)."""
        ...

    def statistics(self) -> QuotaStatistics: ...


@runtime_checkable
class RemoteBreaker(Protocol):
    """A circuit breaker whose state is kept on a server and shared by a fleet."""

    @property
    def name(self) -> str: ...

    async def acquire(self) -> int:
        """Admit one attempt: 0 for a normal call, a half-open probe's ticket (>= 1) for a probe.

        Raises:
            CircuitOpenError: the circuit refuses the attempt.
        """
        ...

    async def record(self, *, success: bool, probe: int) -> None:
        """Report an admitted attempt's outcome (``probe`` as :meth:`acquire` answered)."""
        ...

    def release(self, probe: int) -> None:
        """Hand back an admission whose attempt never ran (cancelled); no round trip."""
        ...

    def statistics(self) -> BreakerStatistics:
        """The breaker's state as last known (its ``retry_after`` says how long it will still refuse)."""
        ...


@runtime_checkable
class RemoteLimiter(Protocol):
    """An adaptive rate limiter whose fill rate and tokens are kept on a server and shared by a fleet."""

    @property
    def name(self) -> str: ...

    async def acquire(self, *, timeout: float | timedelta | None = None) -> None:
        """Wait for a token to send; raises ``RateLimitTimeout`` when none comes in time."""
        ...

    def update(
        self, throttled: bool, *, reason: str = "throttling", sent_at: float | None = None, failed: bool = False
    ) -> None:
        """Count one response (reported to the server with a later round trip); synchronous and cheap.

        Args:
            throttled: the response was a throttling error.
            reason: why it counts as a throttle, for events.
            sent_at: when the request was sent (the limiter's clock).
            failed: the attempt failed for another reason (a 503, a connection error): it is
                neither a throttle nor evidence that the server served the request.
        """
        ...

    def hold(self, seconds: float | timedelta, *, reason: str = "quota spent") -> Awaitable[None] | None:
        """Admit nothing for ``seconds`` (the server announced its quota spent until then); synchronous.

        Returns what is left to await for the rest of the fleet to hear of the hold now (the engine awaits
        it, as a remote breaker's ``record``), or ``None``; left alone, it is told with a later round trip.
        """
        ...

    def pace(self, rate: float, *, reason: str = "quota pace") -> None:
        """Send no faster than ``rate`` per second (the server announced its quota's pace); synchronous,
        told to the fleet with a later round trip."""
        ...

    def statistics(self) -> LimiterStatistics: ...


@runtime_checkable
class RemoteBucket(Protocol):
    """A token bucket whose tokens are kept on a server and shared by a fleet."""

    @property
    def name(self) -> str: ...

    async def acquire(self, n: float = 1, *, timeout: float | timedelta | None = None) -> None:
        """Wait for ``n`` tokens; raises ``RateLimitTimeout`` when they cannot come in time."""
        ...

    def statistics(self) -> BucketStatistics: ...


@runtime_checkable
class RemoteBudget(Protocol):
    """A retry budget (:class:`~asyncretry.RetryBudget`) whose window is kept on a server and shared by a fleet.

    The same rule as the local budget (retries in the window <= ``ratio * requests + floor * window``),
    counted over the requests and retries of every process.
    """

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> RetryBudgetConfig: ...

    async def record_request(self) -> None:
        """Count one request (a call, before its first attempt); may be sent with a later round trip."""
        ...

    async def spend(self) -> BudgetTicket | None:
        """Allow one retry if the fleet's window has room for it, and count it (one round trip).

        Returns:
            The retry's ticket, or ``None`` when the window has no room for it.
        """
        ...

    def refund(self, ticket: BudgetTicket) -> None:
        """Take back the retry of ``ticket`` (it will not be made); sent with the next round trip."""
        ...

    def statistics(self) -> BudgetStatistics:
        """The window as last seen (no round trip) and this process's counters."""
        ...
