"""RedisTokenBucket: one token bucket shared by every process of a fleet, kept on Redis.

Each :meth:`~RedisTokenBucket.acquire` is one atomic script on the server, on the server's clock. A call
that has to wait *reserves* its tokens in that same round trip (the balance goes negative: the debt is
the queue) and is told how long to sleep; it sleeps that long and returns, with no polling and no
second round trip. Hence the guarantee across processes: calls are served in the order in which their
scripts ran on the server, and no later call, from any process, overtakes a call that is sleeping on
its reservation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

import redis.asyncio

from .._events import EventBus
from .._exceptions import RateLimitTimeout
from .._primitives._bucket import AsyncTokenBucket, BucketStatistics
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._validate import check_number, check_seconds
from ._backend import OnUnavailable, RedisBackend, _Link, _Linked, fmt, num
from ._scripts import BUCKET

__all__ = ["RedisBucketStatistics", "RedisTokenBucket"]

_PEEK, _TRY, _RESERVE = 0, 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisBucketStatistics(BucketStatistics):
    """A snapshot of a :class:`RedisTokenBucket` (the counters are this process's).

    Attributes:
        available: tokens in the shared bucket at the last round trip, refilled since by the local
            estimate (negative while calls hold reservations); the local fallback's while degraded.
        degraded: whether the last operation could not reach Redis (the bucket is on its fallback).
        round_trips: scripts this bucket ran on Redis.
        fallbacks: operations that could not reach Redis (served locally or refused).
    """

    degraded: bool
    round_trips: int
    fallbacks: int


class RedisTokenBucket(_Linked, AsyncTokenBucket):
    """A token bucket shared through Redis: ``rate`` tokens per second for a whole fleet, up to ``capacity``.

    The interface of :class:`~asyncretry.AsyncTokenBucket`, with the operations that need the server
    being ``async``: :meth:`acquire`, :meth:`try_acquire_async`, :meth:`release_async` and
    :meth:`time_until_available_async`. The synchronous :meth:`release` is deferred (sent with the
    next round trip) and :meth:`time_until_available` / :attr:`available` are estimates from the last
    round trip; the synchronous :meth:`try_acquire` cannot answer without the server and raises.

    Fairness across processes: calls are served in the order their scripts reach the server (Redis
    runs scripts one at a time), and a reservation is never overtaken. Nothing orders calls *before*
    they reach the server, so two processes calling at the same instant are served in network order.

    Every process must use the same ``rate`` and ``capacity`` for a name: each script refills with the
    values of the process that runs it. Setting :attr:`rate` or :attr:`capacity` changes them for this
    process's next scripts (and for its local fallback); reservations already made keep their times.
    The key expires once the bucket would be full again, so an abandoned bucket leaves nothing behind.

    Args:
        redis: a :class:`RedisBackend` (shares its connection, prefix and health with other primitives),
            a ``redis.asyncio.Redis`` client, or a URL.
        rate: tokens per second for the whole fleet (> 0: a shared bucket must refill by itself).
        capacity: the most tokens the bucket holds (the fleet's burst), > 0.
        name: names the shared bucket (the Redis key ``{prefix}bucket:{name}``), its errors and statistics.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) serves calls from a
            local in-process bucket with the same rate and capacity (so each process allows the whole
            rate: a fleet of N sends up to N times it until Redis is back), ``"fail_closed"`` raises
            :class:`~asyncretry.BackendUnavailable`.
        clock: the time source for sleeping and for the local estimates; defaults to the loop's clock.
        events: where :class:`~asyncretry.BackendUnavailableEvent` / :class:`~asyncretry.BackendRecovered`
            go; defaults to the global bus.

    Raises:
        ValueError: a number is out of range or ``on_unavailable`` is not one of the two choices.
    """

    __slots__ = ("_link", "_pending", "_remote_at", "_remote_tokens", "_reserved")

    remote: ClassVar[bool] = True

    def __init__(
        self,
        redis: RedisBackend | redis.asyncio.Redis | str,
        rate: float,
        capacity: float,
        *,
        name: str = "bucket",
        on_unavailable: OnUnavailable = "fail_open",
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        check_number("rate", rate, low=0.0, low_open=True)
        super().__init__(rate, capacity, clock=clock, name=name)
        self._link = _Link(
            redis, kind="bucket", name=name, on_unavailable=on_unavailable, events=events,
            clock=clock if clock is not None else DEFAULT_CLOCK, fallback="a local in-process token bucket",
        )
        self._pending = 0.0  # tokens given back synchronously, sent with the next round trip
        self._reserved = 0  # calls of this process sleeping on a reservation
        self._remote_tokens = self._capacity
        self._remote_at = math.nan

    @property
    def rate(self) -> float:
        """Tokens per second for the whole fleet (> 0); a new value applies from this process's next script."""
        return self._rate

    @rate.setter
    def rate(self, value: float) -> None:
        value = check_number("rate", value, low=0.0, low_open=True)
        AsyncTokenBucket.rate.fset(self, value)  # type: ignore[attr-defined]

    @property
    def available(self) -> float:
        """Tokens in the shared bucket: the last round trip's count refilled since (an estimate)."""
        if self._link.degraded:
            return super().available
        return self._estimate()

    async def acquire(self, n: float = 1, *, timeout: float | timedelta | None = None) -> None:
        """Take ``n`` tokens from the shared bucket, sleeping the time the server computed if it must wait.

        One round trip. A call that must wait reserves its tokens on the server and sleeps; if it is
        cancelled while sleeping, the tokens are given back with this bucket's next round trip.

        Args:
            n: tokens to take, > 0 and <= ``capacity``. Default 1.
            timeout: the longest wait allowed, seconds (>= 0) or a ``timedelta``; ``None`` (the
                default) waits as long as it takes. A wait that would exceed it fails at once and
                reserves nothing.

        Raises:
            RateLimitTimeout: the tokens would not come within ``timeout``.
            BackendUnavailable: Redis cannot be reached and the bucket fails closed.
            ValueError: ``n`` or ``timeout`` is out of range.
        """
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        n = self._check_n(n)
        reply = await self._run(n, _RESERVE, timeout)
        if reply is None:
            await AsyncTokenBucket.acquire(self, n, timeout=timeout)
            return
        granted, wait = reply
        if not granted:
            self._timeouts += 1
            assert timeout is not None
            raise RateLimitTimeout(name=self.name, wait=wait, timeout=timeout)
        if wait > 0.0:
            self._waits += 1
            self._reserved += 1
            slept = False
            try:
                await self._clock.sleep(wait)
                slept = True
            finally:
                self._reserved -= 1
                if not slept:
                    # Cancelled: the work will not happen, so the reserved tokens go back (next round trip).
                    self._pending += n
                    self._cancelled += 1
        self._acquired += n
        self._grants += 1

    def try_acquire(self, n: float = 1) -> bool:
        """Not available on a shared bucket: it cannot answer without a round trip.

        Raises:
            TypeError: always; use ``await bucket.try_acquire_async(n)``.
        """
        raise TypeError(
            f"{type(self).__name__} keeps its tokens on Redis and cannot answer synchronously; "
            "use `await bucket.try_acquire_async(n)`"
        )

    async def try_acquire_async(self, n: float = 1) -> bool:
        """Take ``n`` tokens if the shared bucket holds them now (nobody reserved ahead); never waits.

        Raises:
            BackendUnavailable: Redis cannot be reached and the bucket fails closed.
        """
        n = self._check_n(n)
        reply = await self._run(n, _TRY, None)
        if reply is None:
            return AsyncTokenBucket.try_acquire(self, n)
        if reply[0]:
            self._acquired += n
            self._grants += 1
            return True
        return False

    def release(self, n: float) -> None:
        """Give ``n`` tokens back: sent with the next round trip (to the local bucket while failed open).

        Raises:
            ValueError: ``n`` is negative, NaN or infinite.
        """
        n = check_number("n", n, low=0.0)
        if self._link.degraded and not self._link.fail_closed:
            AsyncTokenBucket.release(self, n)
        else:
            self._pending += n

    async def release_async(self, n: float) -> None:
        """Give ``n`` tokens back to the shared bucket now, with any deferred ones (never fails closed)."""
        n = check_number("n", n, low=0.0)
        self._pending += n
        if await self._run(self._capacity, _PEEK, None, report=True) is None:
            if not self._link.maybe_sent:
                self._pending -= n  # Redis is out of reach: the local bucket gets them instead
            AsyncTokenBucket.release(self, n)

    def time_until_available(self, n: float = 1) -> float:
        """Estimate, from the last round trip, how long ``acquire(n)`` would wait (reservations included)."""
        n = self._check_n(n)
        if self._link.degraded:
            return super().time_until_available(n)
        return max(0.0, (n - self._estimate()) / self._rate)

    async def time_until_available_async(self, n: float = 1) -> float:
        """Ask the server how long ``acquire(n)`` would wait now (reservations included).

        Raises:
            BackendUnavailable: Redis cannot be reached and the bucket fails closed.
        """
        n = self._check_n(n)
        reply = await self._run(n, _PEEK, None)
        if reply is None:
            return super().time_until_available(n)
        return reply[1]

    def statistics(self) -> RedisBucketStatistics:
        """Return a snapshot: the shared bucket's last known state and this process's counters."""
        local = super().statistics()
        link = self._link
        return RedisBucketStatistics(
            name=self.name,
            rate=self._rate,
            capacity=self._capacity,
            available=local.available if link.degraded else self._estimate(),
            waiting=local.waiting + self._reserved,
            acquired_total=self._acquired,
            grants=self._grants,
            waits=self._waits,
            timeouts=self._timeouts,
            cancelled=self._cancelled,
            rejected=self._rejected,
            degraded=link.degraded,
            round_trips=link.round_trips,
            fallbacks=link.fallbacks,
        )

    def __repr__(self) -> str:
        state = "degraded" if self._link.degraded else "shared"
        return (
            f"<RedisTokenBucket {self.name!r} key={self._link.key!r} rate={self._rate:g}/s "
            f"capacity={self._capacity:g} available~{self._estimate():.3g} {state} "
            f"on_unavailable={self._link.on_unavailable!r}>"
        )

    # -- internals

    def _estimate(self) -> float:
        seen = self._remote_at
        tokens = self._remote_tokens
        if not math.isnan(seen):
            tokens += max(0.0, self._clock.now() - seen) * self._rate
        return min(self._capacity, tokens + self._pending)

    async def _run(
        self, n: float, mode: int, max_wait: float | None, *, report: bool = False
    ) -> tuple[bool, float] | None:
        give, self._pending = self._pending, 0.0
        args = (fmt(self._rate), fmt(self._capacity), fmt(n), fmt(max_wait), fmt(give), mode)
        # Deferred amounts go at most once (see _Link): a cancelled or failed round trip may have run anyway.
        reply = await self._link.run(BUCKET, args, report=report)
        if reply is None:
            if not self._link.maybe_sent:
                self._pending += give
            return None
        self._remote_tokens = num(reply[2])
        self._remote_at = self._clock.now()
        return bool(int(reply[0])), num(reply[1])

