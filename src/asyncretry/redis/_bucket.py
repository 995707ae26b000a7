"""RedisTokenBucket: one token bucket shared by every process of a fleet, kept on Redis.

Each :meth:`~RedisTokenBucket.acquire` is one atomic script on the server, on the server's clock. A call
that has to wait *reserves* its tokens in that same round trip (the balance goes negative: the debt is
the queue) and is told how long to sleep; it sleeps that long and returns, with no polling and no
second round trip. Hence the guarantee across processes: calls are served in the order in which their
scripts ran on the server, and no later call, from any process, overtakes a call that is sleeping on
its reservation.

With ``lease=k`` a round trip reserves a batch of ``k`` tokens in that queue; the process hands them
out to its own calls at the times the server gave them (one every ``1/rate`` seconds once the bucket
is empty), so Redis sees one script per ``k`` grants while the fleet's rate is unchanged.

The same hash lists the fleet's members (each bucket object says it is there at most once a second),
so that while Redis cannot be reached each process takes its share of the rate, from the fleet size it
last saw, rather than the whole rate.
"""

from __future__ import annotations

import bisect
import math
import uuid
from dataclasses import dataclass
from datetime import timedelta

from .._events import EventBus
from .._exceptions import BackendUnavailable, RateLimitTimeout
from .._primitives._bucket import BucketStatistics, TokenBucket
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._validate import check_int, check_number, check_seconds
from ._backend import Client, RedisBackend
from ._link import OnUnavailable, _Link, _Linked
from ._scripts import BUCKET
from ._values import fmt, num, number

__all__ = ["RedisBucketStatistics", "RedisTokenBucket"]

_PEEK, _TRY, _RESERVE = 0, 1, 2

_STALE = 0.25  # seconds after which an unused leased token goes back (at least; see _next_slot)
# A process says it is part of the fleet at most once a _HEARTBEAT (with a round trip it makes anyway), and
# counts as a member for _PRESENCE seconds after: the fleet size it takes its share from in an outage.
_HEARTBEAT = 1.0
_PRESENCE = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisBucketStatistics(BucketStatistics):
    """A snapshot of a :class:`RedisTokenBucket` (the counters are this process's, fallback included).

    Attributes:
        available: tokens in the shared bucket at the last round trip, refilled since by the local
            estimate (negative while calls hold reservations); the local fallback's while degraded.
        degraded: whether the last operation could not reach Redis (the bucket is on its fallback).
        round_trips: scripts this bucket ran on Redis.
        fallbacks: operations that could not reach Redis (served locally or refused).
        leased: tokens this process holds from leased batches and has not handed out yet.
        fleet_size: the processes that used the bucket lately, as last seen (1 before the first round
            trip); while Redis cannot be reached this process takes ``1 / fleet_size`` of the rate.
    """

    degraded: bool
    round_trips: int
    fallbacks: int
    leased: int
    fleet_size: int = 1


class RedisTokenBucket(_Linked):
    """A token bucket shared through Redis: ``rate`` tokens per second for a whole fleet, up to ``capacity``.

    It implements :class:`~asyncretry.protocols.RemoteBucket`: :meth:`acquire`,
    :meth:`try_acquire`, :meth:`release` and :meth:`time_until_available` ask the server (one round
    trip each); :attr:`available` and :meth:`statistics` answer from the last round trip. It holds a
    local :class:`~asyncretry.TokenBucket` with the same rate and capacity as its fail-open fallback.

    Fairness across processes: calls are served in the order their scripts reach the server (Redis
    runs scripts one at a time), and a reservation is never overtaken. Nothing orders calls *before*
    they reach the server, so two processes calling at the same instant are served in network order.

    Every process must use the same ``rate`` and ``capacity`` for a name: each script refills with the
    values of the process that runs it. Setting :attr:`rate` or :attr:`capacity` changes them for this
    process's next scripts (and for its local fallback); reservations already made keep their times.
    The key expires once the bucket would be full again and its members no longer count (ten seconds after
    the last visit), so an abandoned bucket leaves nothing behind.

    Args:
        redis: a :class:`RedisBackend` (shares its connection, prefix and health with other primitives),
            a ``redis.asyncio.Redis`` / ``RedisCluster`` client, or a URL.
        rate: tokens per second for the whole fleet (> 0 and <= 1e15: a shared bucket must refill by itself).
        capacity: the most tokens the bucket holds (the fleet's burst), > 0 and <= 1e15.
        name: names the shared bucket (the Redis key ``{prefix}bucket:{name}``), its errors and statistics.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) serves calls from a
            local in-process bucket with this process's share of the rate and capacity: ``1 / N`` of
            them for a fleet of N processes that used the bucket in the last ten seconds before the
            outage (every round trip tells the server this process is there, at most once a second,
            and learns the fleet size); ``"fail_closed"`` raises :class:`~asyncretry.BackendUnavailable`.
        lease: tokens reserved per round trip for single-token calls (an int, 1 to ``capacity``;
            default 1: no leasing). With ``k > 1`` Redis runs about ``1/k`` of the scripts; the unused
            tokens of a batch are given back by :meth:`aclose`, and those of a process that dies are
            the fleet's loss once (at most ``k`` tokens).
        clock: the time source for sleeping and for the local estimates; defaults to the loop's clock.
        events: where :class:`~asyncretry.BackendLost` / :class:`~asyncretry.BackendRecovered`
            go; defaults to the global bus.

    Raises:
        ValueError: a number is out of range or ``on_unavailable`` is not one of the two choices.
        TypeError: a setting has the wrong type.
    """

    __slots__ = (
        "_acquired", "_cancelled", "_capacity", "_clock", "_fleet", "_grants", "_lease", "_link", "_local",
        "_local_fleet", "_member", "_pending", "_rate", "_remote_at", "_remote_tokens", "_reserved", "_seen_at",
        "_slots", "_timeouts", "_waits",
    )


    def __init__(
        self,
        redis: RedisBackend | Client | str,
        rate: float,
        capacity: float,
        *,
        name: str = "bucket",
        on_unavailable: OnUnavailable = "fail_open",
        lease: int = 1,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        rate = number("rate", rate)
        capacity = number("capacity", capacity)
        self._lease = check_int("lease", lease, low=1, high=max(1, math.floor(capacity)))
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._link = _Link(
            redis, kind="bucket", name=name, on_unavailable=on_unavailable, events=events,
            clock=self._clock, fallback="a local in-process token bucket",
        )
        self._rate, self._capacity = rate, capacity
        self._local = TokenBucket(rate, capacity, clock=clock, name=name)  # this process's share of them
        self._member = uuid.uuid4().hex  # this bucket's name in the fleet's presence list
        self._seen_at = -math.inf  # when it last told the server it is there
        self._fleet = self._local_fleet = 1  # the fleet size last seen; the one the local bucket's share is for
        self._link.fleet_size = 1
        self._pending = 0.0  # tokens given back without a round trip, sent with the next one
        self._reserved = 0  # calls of this process sleeping on a reservation
        self._remote_tokens = capacity
        self._remote_at = math.nan
        self._slots: list[float] = []  # leased tokens not handed out yet: the local times they are due
        self._acquired = 0.0
        self._grants = 0
        self._waits = 0
        self._timeouts = 0
        self._cancelled = 0

    @property
    def name(self) -> str:
        """The bucket's name (its Redis key is ``{prefix}bucket:{name}``)."""
        return self._link.name

    @property
    def rate(self) -> float:
        """Tokens per second for the whole fleet (> 0); a new value applies from this process's next script."""
        return self._rate

    @rate.setter
    def rate(self, value: float) -> None:
        self._rate = number("rate", value)
        self._share()

    @property
    def capacity(self) -> float:
        """The most tokens the shared bucket holds; a new value applies from this process's next script."""
        return self._capacity

    @capacity.setter
    def capacity(self, value: float) -> None:
        self._capacity = number("capacity", value)
        self._share()

    @property
    def fleet_size(self) -> int:
        """The processes that used the bucket lately, as last seen (1 before the first round trip)."""
        return self._fleet

    @property
    def lease(self) -> int:
        """Tokens reserved per round trip for single-token calls (1: no leasing)."""
        return self._lease

    @property
    def available(self) -> float:
        """Tokens in the shared bucket: the last round trip's count refilled since (an estimate)."""
        if self._link.degraded:
            return self._local.available
        return self._estimate()

    async def acquire(self, n: float = 1, *, timeout: float | timedelta | None = None) -> None:
        """Take ``n`` tokens from the shared bucket, sleeping the time the server computed if it must wait.

        One round trip (none for a call served from a leased batch). A call that must wait reserves its
        tokens on the server and sleeps; if it is cancelled while sleeping, the tokens are given back
        with this bucket's next round trip (a leased token goes back to this process's batch).

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
        if n == 1 and self._slots and await self._acquire_leased(timeout):
            return
        extra = self._lease - 1 if n == 1 and len(self._slots) < self._lease else 0
        rate = self.rate
        max_wait = None if timeout is None else timeout + extra / rate
        reply = await self._run(n + extra, _RESERVE, max_wait)
        if reply is None:
            # (A call for more than this process's share of the capacity waits for the whole share.)
            await self._local.acquire(min(n, self._local.capacity), timeout=timeout)
            return
        granted, wait = reply
        if not granted:
            self._timeouts += 1
            assert timeout is not None
            raise RateLimitTimeout(name=self.name, wait=max(0.0, wait - extra / rate), timeout=timeout)
        now = self._clock.now()
        for i in range(1, extra + 1):
            bisect.insort(self._slots, now + max(0.0, wait - (extra - i) / rate))
        await self._sleep(max(0.0, wait - extra / rate), n)

    async def try_acquire(self, n: float = 1) -> bool:
        """Take ``n`` tokens if the shared bucket holds them now (nobody reserved ahead); never waits.

        Raises:
            BackendUnavailable: Redis cannot be reached and the bucket fails closed.
        """
        n = self._check_n(n)
        if n == 1 and self._slots:
            due = self._next_slot()
            if due is not None and due <= self._clock.now():
                self._slots.pop(0)
                self._count_grant(1)
                return True
        reply = await self._run(n, _TRY, None)
        if reply is None:
            return self._local.try_acquire(min(n, self._local.capacity))
        if reply[0]:
            self._count_grant(n)
            return True
        return False

    async def release(self, n: float) -> None:
        """Give ``n`` tokens back to the shared bucket now, with any deferred ones (never fails closed)."""
        n = check_number("n", n, low=0.0)
        self._pending += n
        if await self._run(self.capacity, _PEEK, None, report=True) is None:
            if not self._link.maybe_sent:
                self._pending -= n  # Redis is out of reach: the local bucket gets them instead
            self._local.release(n)

    def release_later(self, n: float) -> None:
        """Give ``n`` tokens back without a round trip: sent with the next one (to the local bucket while failed open).

        Raises:
            ValueError: ``n`` is negative, NaN or infinite.
        """
        n = check_number("n", n, low=0.0)
        if self._link.degraded and not self._link.fail_closed:
            self._local.release(n)
        else:
            self._pending += n

    async def time_until_available(self, n: float = 1) -> float:
        """Ask the server how long ``acquire(n)`` would wait now (reservations included).

        Raises:
            BackendUnavailable: Redis cannot be reached and the bucket fails closed.
        """
        n = self._check_n(n)
        reply = await self._run(n, _PEEK, None)
        if reply is None:
            return self._local.time_until_available(min(n, self._local.capacity))
        return reply[1]

    async def refresh(self) -> RedisBucketStatistics:
        """Read the shared bucket now (one round trip, which also delivers deferred tokens); :meth:`statistics`."""
        await self._run(self.capacity, _PEEK, None, report=True)
        return self.statistics()

    async def aclose(self) -> None:
        """Give the unused tokens of leased batches back to the fleet (one round trip if there are any)."""
        unused = len(self._slots)
        self._slots.clear()
        if unused:
            self._pending += unused
            await self._run(self.capacity, _PEEK, None, report=True)

    async def __aenter__(self) -> RedisTokenBucket:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def statistics(self) -> RedisBucketStatistics:
        """Return a snapshot: the shared bucket's last known state and this process's counters."""
        local = self._local.statistics()
        link = self._link
        return RedisBucketStatistics(
            name=self.name,
            rate=self._rate,
            capacity=self._capacity,
            available=local.available if link.degraded else self._estimate(),
            waiting=local.waiting + self._reserved,
            acquired_total=self._acquired + local.acquired_total,
            grants=self._grants + local.grants,
            waits=self._waits + local.waits,
            timeouts=self._timeouts + local.timeouts,
            cancelled=self._cancelled + local.cancelled,
            rejected=local.rejected,
            degraded=link.degraded,
            round_trips=link.round_trips,
            fallbacks=link.fallbacks,
            leased=len(self._slots),
            fleet_size=self._fleet,
        )

    def __repr__(self) -> str:
        state = "degraded" if self._link.degraded else "shared"
        lease = f" lease={self._lease}" if self._lease > 1 else ""
        return (
            f"<RedisTokenBucket {self.name!r} key={self._link.key!r} rate={self.rate:g}/s "
            f"capacity={self.capacity:g}{lease} available~{self._estimate():.3g} {state} "
            f"on_unavailable={self._link.on_unavailable!r}>"
        )

    # -- internals

    def _check_n(self, n: float) -> float:
        return check_number("n", n, low=0.0, low_open=True, high=self.capacity)

    def _next_slot(self) -> float | None:
        """When the earliest leased token is due (local clock); None if none.

        A token left unused well past its time (a quarter second, or the time a full bucket takes to
        refill if longer) goes back to the shared bucket with the next round trip instead of making a
        late burst.
        """
        slots = self._slots
        stale = self._clock.now() - max(_STALE, self.capacity / self.rate)
        while slots and slots[0] < stale:
            slots.pop(0)
            self._pending += 1
        return slots[0] if slots else None

    async def _acquire_leased(self, timeout: float | None) -> bool:
        """Take the earliest leased token and sleep until it is due; False if the batch is used up.

        Raises:
            RateLimitTimeout: it is due later than ``timeout`` (no round trip would be sooner: the
                fleet's queue is behind this process's batch).
        """
        due = self._next_slot()
        if due is None:
            return False
        wait = due - self._clock.now()
        if timeout is not None and wait > timeout:
            self._timeouts += 1
            raise RateLimitTimeout(name=self.name, wait=wait, timeout=timeout)
        self._slots.pop(0)
        await self._sleep(wait, 1, slot=due)
        return True

    def _count_grant(self, n: float) -> None:
        self._acquired += n
        self._grants += 1

    async def _sleep(self, wait: float, n: float, *, slot: float | None = None) -> None:
        """Sleep until reserved tokens (or the leased token due at ``slot``) are due; a cancelled sleep
        gives them back (to the shared bucket with the next round trip, or to this process's batch)."""
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
                    # Cancelled: the work will not happen, so the tokens go back.
                    self._cancelled += 1
                    if slot is not None:
                        bisect.insort(self._slots, slot)
                    else:
                        self._pending += n
        self._count_grant(n)

    def _estimate(self) -> float:
        seen = self._remote_at
        tokens = self._remote_tokens
        if not math.isnan(seen):
            tokens += max(0.0, self._clock.now() - seen) * self.rate
        return min(self.capacity, tokens + self._pending)

    async def _run(
        self, n: float, mode: int, max_wait: float | None, *, report: bool = False
    ) -> tuple[bool, float] | None:
        give, self._pending = self._pending, 0.0
        now = self._clock.now()
        member = ""
        if now - self._seen_at >= _HEARTBEAT:
            member, self._seen_at = self._member, now
        args = (fmt(self._rate), fmt(self._capacity), fmt(n), fmt(max_wait), fmt(give), mode, member, fmt(_PRESENCE))
        # Deferred amounts go at most once (see _Link): a cancelled or failed round trip may have run anyway.
        try:
            reply = await self._link.run(BUCKET, args, report=report)
        except BackendUnavailable:
            if not self._link.maybe_sent:
                self._pending += give
            raise
        if reply is None:
            if not self._link.maybe_sent:
                self._pending += give
            if self._local_fleet != self._fleet:
                self._share()  # now, not at every change: the local bucket has no waiters to upset yet
            return None
        self._remote_tokens = num(reply[2])
        self._remote_at = self._clock.now()
        fleet = int(reply[4])
        if fleet:
            self._fleet = self._link.fleet_size = fleet
        return bool(int(reply[0])), num(reply[1])

    def _share(self) -> None:
        """Give the local fallback this process's share of the fleet's rate and capacity (at least one
        token of capacity, or the whole capacity if it is smaller)."""
        fleet = self._local_fleet = self._fleet
        self._local.rate = self._rate / fleet
        self._local.capacity = max(self._capacity / fleet, min(self._capacity, 1.0))
