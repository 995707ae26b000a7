"""RedisRetryQuota: the AWS retry quota ("retry token bucket") shared by a fleet through Redis.

It implements :class:`~asyncretry.protocols.RemoteQuota`: every question that needs the
server is a coroutine (:meth:`~RedisRetryQuota.try_acquire`, :meth:`~RedisRetryQuota.acquire`,
:meth:`~RedisRetryQuota.release`), one script each. It holds a local :class:`~asyncretry.RetryQuota`
with the same config as its fail-open fallback, and does not pretend to be one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from .._events import GLOBAL_EVENTS, EventBus
from .._exceptions import BackendUnavailable, RetryCapacityExceeded
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._primitives._kinds import OutcomeKind
from .._primitives._quota import ExhaustionEpisodes, QuotaStatistics, RetryQuota, RetryQuotaConfig
from .._validate import check_number, check_seconds
from ._backend import Client, RedisBackend
from ._link import OnUnavailable, _Link, _Linked
from ._scripts import QUOTA
from ._values import fmt, num, ttl_ms

__all__ = ["RedisQuotaStatistics", "RedisRetryQuota"]

_PEEK, _TAKE, _GIVE = 0, 1, 2

# In waiting mode, successes of other processes refill the quota without telling anyone: a waiter
# checks again at least this often (seconds) instead of sleeping the whole predicted refill time.
_RECHECK = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisQuotaStatistics(QuotaStatistics):
    """A snapshot of a :class:`RedisRetryQuota` (the counters are this process's, fallback included).

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


class RedisRetryQuota(_Linked, ExhaustionEpisodes):
    """A retry quota shared through Redis: an outage gets a bounded number of retries across the fleet.

    With 500 tokens and retries at 5, a total outage lets 100 retries through *in the whole fleet*,
    not 100 per process. Share it by name: every process that builds a ``RedisRetryQuota`` with the same
    backend prefix and ``name`` (the Redis key ``{prefix}quota:{name}``) uses the same balance; all
    must use the same config. Events (:class:`~asyncretry.QuotaExhausted` / :class:`~asyncretry.QuotaRestored`)
    describe what this process saw.

    The key expires after ``key_ttl`` seconds without use, which resets the quota to full: the same as
    an in-process quota whose idle scope the retrier evicted.

    Args:
        redis: a :class:`RedisBackend`, a ``redis.asyncio.Redis`` / ``RedisCluster`` client, or a URL.
        config: costs, capacity and refill; defaults to ``RetryQuotaConfig()`` (the 2020 profile).
        name: names the shared quota (its Redis key), its errors, statistics and events.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) pays for retries
            from a local in-process quota with the same config; ``"fail_closed"`` raises
            :class:`~asyncretry.BackendUnavailable` when a retry asks to be paid for. Refunds never
            fail: they go to the local quota (fail open) or wait for Redis (fail closed).
        key_ttl: seconds an unused quota is kept on Redis (> 0 and <= ten years, default 600).
        clock: the time source; defaults to the running loop's clock.
        events: where the quota's and the backend's events go; defaults to the global bus.

    Raises:
        ValueError: a setting is out of range (the message names it).
        TypeError: a setting has the wrong type.
    """

    __slots__ = (
        "_acquired", "_clock", "_config", "_delta", "_events", "_key_ttl_ms", "_link", "_local",
        "_refused", "_released", "_remote_at", "_remote_tokens", "_waiting",
    )


    def __init__(
        self,
        redis: RedisBackend | Client | str,
        config: RetryQuotaConfig | None = None,
        *,
        name: str = "quota",
        on_unavailable: OnUnavailable = "fail_open",
        key_ttl: float | timedelta = 600.0,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        if config is not None and not isinstance(config, RetryQuotaConfig):
            raise TypeError(f"config must be a RetryQuotaConfig, got {config!r}")
        self._key_ttl_ms = ttl_ms(key_ttl)
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._link = _Link(
            redis, kind="quota", name=name, on_unavailable=on_unavailable, events=events,
            clock=self._clock, fallback="a local in-process retry quota",
        )
        self._local = RetryQuota(config, clock=clock, name=name, events=events)
        self._config = self._local.config
        self._events = events if events is not None else GLOBAL_EVENTS
        self._delta = 0.0  # deferred refunds minus debits, sent with the next round trip
        self._remote_tokens = float(self._config.max_capacity)
        self._remote_at = math.nan
        self._acquired = 0.0
        self._released = 0.0
        self._refused = 0
        self._waiting = 0
        self._exhausted = False
        self._refused_cost = 0.0

    @property
    def name(self) -> str:
        """The quota's name (its Redis key is ``{prefix}quota:{name}``)."""
        return self._link.name

    @property
    def config(self) -> RetryQuotaConfig:
        """The quota's settings."""
        return self._config

    @property
    def available(self) -> float:
        """The shared balance as last seen (with the refill since and deferred amounts); local while degraded."""
        if self._link.degraded:
            return self._local.available
        return self._estimate()

    def cost_of(self, kind: OutcomeKind) -> int:
        """What a retry after an outcome of this kind costs (see :meth:`RetryQuota.cost_of`); no round trip."""
        return self._local.cost_of(kind)

    async def try_acquire(self, n: float) -> bool:
        """Take ``n`` tokens from the shared quota if it holds them; one round trip.

        Returns:
            True if paid; False if the quota cannot pay (an exhaustion episode starts).

        Raises:
            BackendUnavailable: Redis cannot be reached and the quota fails closed.
            ValueError: ``n`` is out of range.
        """
        n = self._check_cost(n)
        if n == 0:
            return True
        reply = await self._run(_TAKE, n)
        if reply is None:
            return self._local.try_acquire(n)
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
            if not await self.try_acquire(n):
                raise RetryCapacityExceeded(available=self.available, cost=n, name=self.name)
            return
        clock = self._clock
        deadline = math.inf if timeout is None else clock.now() + timeout
        first = True
        self._waiting += 1
        try:
            while True:
                reply = await self._run(_TAKE, n)
                if reply is None:
                    left = None if deadline == math.inf else max(0.0, deadline - clock.now())
                    await self._local.acquire(n, timeout=left)
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
            self._waiting -= 1
            self._restore_if_able()

    async def release(self, n: float) -> None:
        """Give ``n`` tokens back to the shared quota now (a success); one round trip, never fails closed.

        While Redis is out of reach the tokens go to the local quota (fail open) or are kept for the
        next round trip (fail closed), so a refund is never counted twice.
        """
        n = check_number("n", n, low=0.0)
        if n == 0 and not self._delta:
            return
        reply = await self._run(_GIVE, n, report=True)
        if reply is None:
            if not self._link.fail_closed:
                self._local.release(n)
            elif not self._link.maybe_sent:
                self._delta += n  # kept for Redis (there is no local quota in use), sent at most once
                self._released += n
            return
        self._released += n
        self._restore_if_able()

    def release_later(self, n: float) -> None:
        """Give ``n`` tokens back without a round trip: they travel with the quota's next one.

        For code that cannot await (a retry cancelled after it was paid for). While failed open, the
        tokens go to the local quota at once.
        """
        n = check_number("n", n, low=0.0)
        if self._link.degraded and not self._link.fail_closed:
            self._local.release(n)
            return
        if n:
            self._delta += n
            self._released += n
        self._restore_if_able()

    async def reset(self) -> None:
        """Fill the fleet's quota to ``max_capacity`` now (after an incident, say).

        Raises:
            BackendUnavailable: Redis cannot be reached (an administrative call never falls back).
        """
        kept = self._delta
        self._delta = kept + self._config.max_capacity  # the script clamps the balance to the capacity
        try:
            await self._run(_PEEK, 0.0, strict=True)
        except BackendUnavailable:
            if not self._link.maybe_sent:
                self._delta = kept
            raise
        self._restore_if_able()

    async def refresh(self) -> RedisQuotaStatistics:
        """Read the shared balance now (one round trip) and return :meth:`statistics`."""
        await self._run(_PEEK, 0.0, report=True)
        return self.statistics()

    def statistics(self) -> RedisQuotaStatistics:
        """Return a snapshot: the shared balance as last seen and this process's counters."""
        self._restore_if_able()
        link = self._link
        local = self._local.statistics()
        return RedisQuotaStatistics(
            name=self.name,
            available=self.available,
            capacity=self._config.max_capacity,
            acquired_total=self._acquired + local.acquired_total,
            released_total=self._released + local.released_total,
            refused=self._refused + local.refused,
            exhausted=local.exhausted if link.degraded else self._exhausted,
            waiting=self._waiting + local.waiting,
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

    def _check_cost(self, n: float) -> float:
        return check_number("n", n, low=0.0, high=self._config.max_capacity)

    def _estimate(self) -> float:
        tokens = self._remote_tokens
        refill = self._config.refill_units_per_second
        if refill and not math.isnan(self._remote_at):
            tokens += max(0.0, self._clock.now() - self._remote_at) * refill
        return max(0.0, min(float(self._config.max_capacity), tokens + self._delta))

    async def _run(
        self, op: int, n: float, *, report: bool = False, strict: bool = False
    ) -> tuple[bool, float] | None:
        config = self._config
        delta, self._delta = self._delta, 0.0
        args = (
            op, fmt(n), config.max_capacity, fmt(config.refill_units_per_second), fmt(delta), self._key_ttl_ms
        )
        # Deferred amounts go at most once (see _Link): a cancelled or failed round trip may have run anyway.
        try:
            reply = await self._link.run(QUOTA, args, report=report, strict=strict)
        except BackendUnavailable:
            if not self._link.maybe_sent and not strict:
                self._delta += delta
            raise
        if reply is None:
            if not self._link.maybe_sent:
                self._delta += delta
            return None
        self._remote_tokens = num(reply[1])
        self._remote_at = self._clock.now()
        return bool(int(reply[0])), num(reply[2])
