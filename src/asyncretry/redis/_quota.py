"""RedisRetryQuota: the AWS retry quota ("retry token bucket") shared by a fleet through Redis.

The engine uses it through the remote-state protocol (``remote = True``): it awaits
:meth:`~RedisRetryQuota.try_acquire_async` to pay for a retry, :meth:`~RedisRetryQuota.release_async` to
refund on success, and :meth:`~RedisRetryQuota.acquire` in waiting mode. Each is one script on the
server. The two synchronous mutators the engine may call are deferred: :meth:`~RedisRetryQuota.release`
(the refund of a retry cancelled before it started) and :meth:`~RedisRetryQuota.try_acquire` (a first
attempt's ``initial_try_cost``, answered from the last known balance); both travel, as one net amount,
with the quota's next round trip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

import redis.asyncio

from .._events import EventBus
from .._exceptions import RetryCapacityExceeded
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._primitives._quota import QuotaStatistics, RetryQuota, RetryQuotaConfig
from .._validate import check_number, check_seconds
from ._backend import OnUnavailable, RedisBackend, _Link, _Linked, fmt, num
from ._scripts import QUOTA

__all__ = ["RedisQuotaStatistics", "RedisRetryQuota"]

_PEEK, _TAKE, _GIVE = 0, 1, 2

# In waiting mode, successes of other processes refill the quota without telling anyone: a waiter
# checks again at least this often (seconds) instead of sleeping the whole predicted refill time.
_RECHECK = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisQuotaStatistics(QuotaStatistics):
    """A snapshot of a :class:`RedisRetryQuota` (the counters are this process's).

    Attributes:
        available: the shared balance at the last round trip (plus deferred amounts); the local
            fallback's while degraded.
        degraded: whether the last operation could not reach Redis.
        round_trips: scripts this quota ran on Redis.
        fallbacks: operations that could not reach Redis (served locally, deferred or refused).
    """

    degraded: bool
    round_trips: int
    fallbacks: int


class RedisRetryQuota(_Linked, RetryQuota):
    """A retry quota shared through Redis: an outage gets a bounded number of retries across the fleet.

    With 500 tokens and retries at 5, a total outage lets 100 retries through *in the whole fleet*,
    not 100 per process. Share it by name: every process that builds a ``RedisRetryQuota`` with the same
    backend prefix and ``name`` (the Redis key ``{prefix}quota:{name}``) uses the same balance; all
    must use the same config. Events (:class:`~asyncretry.QuotaExhausted` / :class:`~asyncretry.QuotaRestored`)
    describe what this process saw.

    The key expires after ``key_ttl`` seconds without use, which resets the quota to full: the same as
    an in-process quota whose idle scope the retrier evicted.

    Args:
        redis: a :class:`RedisBackend`, a ``redis.asyncio.Redis`` client, or a URL.
        config: costs, capacity and refill; defaults to ``RetryQuotaConfig()`` (the 2020 profile).
        name: names the shared quota (its Redis key), its errors, statistics and events.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) pays for retries
            from a local in-process quota with the same config; ``"fail_closed"`` raises
            :class:`~asyncretry.BackendUnavailable` when a retry asks to be paid for. Refunds never
            fail: they go to the local quota (fail open) or wait for Redis (fail closed).
        key_ttl: seconds an unused quota is kept on Redis (> 0, default 600).
        clock: the time source; defaults to the running loop's clock.
        events: where the quota's and the backend's events go; defaults to the global bus.
    """

    __slots__ = ("_delta", "_key_ttl_ms", "_link", "_remote_at", "_remote_tokens", "_remote_waiting")

    remote: ClassVar[bool] = True

    def __init__(
        self,
        redis: RedisBackend | redis.asyncio.Redis | str,
        config: RetryQuotaConfig | None = None,
        *,
        name: str = "quota",
        on_unavailable: OnUnavailable = "fail_open",
        key_ttl: float | timedelta = 600.0,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        super().__init__(config, clock=clock, name=name, events=events)
        self._key_ttl_ms = math.ceil(check_seconds("key_ttl", key_ttl, low_open=True) * 1000)
        self._link = _Link(
            redis, kind="quota", name=name, on_unavailable=on_unavailable, events=events,
            clock=clock if clock is not None else DEFAULT_CLOCK, fallback="a local in-process retry quota",
        )
        self._delta = 0.0  # deferred synchronous refunds minus debits, sent with the next round trip
        self._remote_tokens = float(self._config.max_capacity)
        self._remote_at = math.nan
        self._remote_waiting = 0

    @property
    def available(self) -> float:
        """The shared balance as last seen (with the refill since and deferred amounts); local while degraded."""
        if self._link.degraded:
            return self._bucket.available
        return self._estimate()

    def try_acquire(self, n: float) -> bool:
        """Take ``n`` tokens, judged on the last known balance; the debit is sent with the next round trip.

        The engine calls this only for a first attempt's ``initial_try_cost`` (0 by default); use
        :meth:`try_acquire_async` for an exact answer.
        """
        n = self._check_cost(n)
        if self._link.degraded:
            return super().try_acquire(n)
        if n == 0:
            return True
        if self._estimate() + 1e-9 >= n:
            self._delta -= n
            self._acquired += n
            return True
        self._refused += 1
        self._exhaust(n)
        return False

    async def try_acquire_async(self, n: float) -> bool:
        """Take ``n`` tokens from the shared quota if it holds them; one round trip.

        Returns:
            True if paid; False if the quota cannot pay (an exhaustion episode starts).

        Raises:
            BackendUnavailable: Redis cannot be reached and the quota fails closed.
        """
        n = self._check_cost(n)
        if n == 0:
            return True
        reply = await self._run(_TAKE, n)
        if reply is None:
            return super().try_acquire(n)
        if reply[0]:
            self._acquired += n
            self._restore_if_able()
            return True
        self._refused += 1
        self._exhaust(n)
        return False

    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        """Take ``n`` tokens; in waiting mode, wait for the shared quota to refill if needed.

        Waiting mode re-checks the shared balance at least every 0.1 s (other processes' successes
        refill it without notice) and otherwise sleeps the refill time the server predicts. Waiters of
        different processes are not queued in order: whoever checks first after a refill is paid.

        Args:
            n: tokens to take (0 <= n <= max_capacity).
            timeout: waiting mode only: the longest wait, seconds or a ``timedelta``; ``None`` waits
                as long as it takes.

        Raises:
            RetryCapacityExceeded: circuit-breaker mode and the quota cannot pay now; or waiting mode
                and it could not pay within ``timeout``.
            BackendUnavailable: Redis cannot be reached and the quota fails closed.
        """
        n = self._check_cost(n)
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        if n == 0:
            return
        if self._config.circuit_breaker_mode:
            if not await self.try_acquire_async(n):
                raise RetryCapacityExceeded(available=self.available, cost=n, name=self.name)
            return
        clock = self._clock
        deadline = math.inf if timeout is None else clock.now() + timeout
        first = True
        self._remote_waiting += 1
        try:
            while True:
                reply = await self._run(_TAKE, n)
                if reply is None:
                    left = None if deadline == math.inf else max(0.0, deadline - clock.now())
                    await super().acquire(n, timeout=left)
                    return
                paid, wait = reply
                if paid:
                    self._acquired += n
                    return
                if first:
                    first = False
                    self._exhaust(n)
                now = clock.now()
                if wait < 0 or now + wait > deadline:
                    self._refused += 1
                    raise RetryCapacityExceeded(available=self.available, cost=n, name=self.name)
                await clock.sleep(min(wait, _RECHECK, deadline - now))
        finally:
            self._remote_waiting -= 1
            self._restore_if_able()

    def release(self, n: float) -> None:
        """Give ``n`` tokens back: sent with the quota's next round trip (to the local quota while failed open)."""
        n = check_number("n", n, low=0.0)
        if self._link.degraded and not self._link.fail_closed:
            super().release(n)
            return
        if n:
            self._delta += n
            self._released += n
        self._restore_if_able()

    async def release_async(self, n: float) -> None:
        """Give ``n`` tokens back to the shared quota now (a success); one round trip, never fails closed."""
        n = check_number("n", n, low=0.0)
        if n == 0 and not self._delta:
            return
        reply = await self._run(_GIVE, n, report=True)
        if reply is None:
            if not self._link.fail_closed:
                super().release(n)
            elif not self._link.maybe_sent:
                self._delta += n  # kept for Redis (there is no local quota in use), sent at most once
                self._released += n
            return
        self._released += n
        self._restore_if_able()

    def time_until_available(self, n: float) -> float:
        """Seconds until ``n`` tokens would be there by refill alone, from the last known balance."""
        n = self._check_cost(n)
        if self._link.degraded:
            return super().time_until_available(n)
        missing = n - self._estimate()
        if missing <= 1e-9:
            return 0.0
        refill = self._config.refill_units_per_second
        return missing / refill if refill > 0 else math.inf

    def statistics(self) -> RedisQuotaStatistics:
        """Return a snapshot: the shared balance as last seen and this process's counters."""
        self._restore_if_able()
        link = self._link
        return RedisQuotaStatistics(
            name=self.name,
            available=self.available,
            capacity=self._config.max_capacity,
            acquired_total=self._acquired,
            released_total=self._released,
            refused=self._refused,
            exhausted=self._exhausted,
            waiting=self._waiting + self._remote_waiting,
            degraded=link.degraded,
            round_trips=link.round_trips,
            fallbacks=link.fallbacks,
        )

    def __repr__(self) -> str:
        mode = "circuit-breaker" if self._config.circuit_breaker_mode else "waiting"
        state = "degraded" if self._link.degraded else "shared"
        return (
            f"<RedisRetryQuota {self.name!r} key={self._link.key!r} {self.available:g}/"
            f"{self._config.max_capacity} {mode} {state}{' exhausted' if self._exhausted else ''} "
            f"on_unavailable={self._link.on_unavailable!r}>"
        )

    # -- internals

    def _restore_if_able(self) -> None:
        if self._exhausted and self._waiting == 0 and self._remote_waiting == 0 and (
            self.available >= self._refused_cost
        ):
            self._restore()

    def _estimate(self) -> float:
        tokens = self._remote_tokens
        refill = self._config.refill_units_per_second
        if refill and not math.isnan(self._remote_at):
            tokens += max(0.0, self._clock.now() - self._remote_at) * refill
        return max(0.0, min(float(self._config.max_capacity), tokens + self._delta))

    async def _run(self, op: int, n: float, *, report: bool = False) -> tuple[bool, float] | None:
        config = self._config
        delta, self._delta = self._delta, 0.0
        args = (
            op, fmt(n), config.max_capacity, fmt(config.refill_units_per_second), fmt(delta), self._key_ttl_ms
        )
        # Deferred amounts go at most once (see _Link): a cancelled or failed round trip may have run anyway.
        reply = await self._link.run(QUOTA, args, report=report)
        if reply is None:
            if not self._link.maybe_sent:
                self._delta += delta
            return None
        self._remote_tokens = num(reply[1])
        self._remote_at = self._clock.now()
        return bool(int(reply[0])), num(reply[2])
