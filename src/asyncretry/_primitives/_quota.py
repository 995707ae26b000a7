"""The retry quota: AWS standard mode's "retry token bucket", which stops retry storms during outages.

Every retry costs tokens (more after a timeout), every success puts some back, and by default nothing
refills with time. During a total outage a full quota of 500 tokens pays for 100 retries at cost 5;
then retries stop (:class:`~asyncretry.RetryCapacityExceeded`) until calls succeed again. That is what
the AWS SDKs call standard mode's "circuit-breaker behaviour". With ``circuit_breaker_mode=False`` a
retry waits for capacity instead of failing (a time-based refill is then required).

The engine's use of it (SPEC 1.1)::

    cost = quota.cost_of(kind)              # after a retryable failure
    await quota.acquire(cost)               # or raise RetryCapacityExceeded (circuit-breaker mode)
    ...
    quota.release(last_cost if last_cost is not None else config.initial_try_success_increment)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import ClassVar, Protocol

import anyio.lowlevel

from .._events import GLOBAL_EVENTS, EventBus, QuotaExhausted, QuotaRestored
from .._exceptions import RateLimitTimeout, RetryCapacityExceeded
from .._validate import (
    check_choice,
    check_clock,
    check_instance,
    check_int,
    check_number,
    check_seconds,
    check_str,
)
from ._bucket import TokenBucket
from ._clock import DEFAULT_CLOCK, Clock
from ._kinds import OutcomeKind

__all__ = ["ExhaustionEpisodes", "QuotaStatistics", "RetryQuota", "RetryQuotaConfig"]

# The members as plain module names: on CPython 3.11 each ``OutcomeKind.X`` lookup costs about 50 ns.
_THROTTLING, _TIMEOUT, _TRANSIENT, _CONNECTION = (
    OutcomeKind.THROTTLING, OutcomeKind.TIMEOUT, OutcomeKind.TRANSIENT, OutcomeKind.CONNECTION
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryQuotaConfig:
    """What retries cost and how the retry quota refills (the AWS SDKs' retry token bucket).

    The defaults are the 2020 cost profile, today's botocore default; :meth:`profile` selects a
    published profile by name.

    Args:
        max_capacity: tokens when full; the quota starts full and never holds more (an integer >= 1).
            Default 500.
        initial_try_cost: tokens taken for a first attempt (0: first attempts never wait or fail).
            Default 0.
        initial_try_success_increment: tokens given back when a first attempt succeeds. Default 1.
        retry_cost: tokens taken for a retry after a transient or connection error. Default 5.
        timeout_retry_cost: tokens taken for a retry after a timeout. Default 10.
        throttling_retry_cost: tokens taken for a retry after a throttling error. Default 5.
        refill_units_per_second: tokens added back per second of time (>= 0); 0 means only successes
            refill the quota, which requires ``circuit_breaker_mode=True``. Default 0.
        circuit_breaker_mode: when the quota cannot pay for a retry, True fails the retry at once with
            :class:`~asyncretry.RetryCapacityExceeded`; False waits until the quota can pay. Default True.

    Every cost is an integer from 0 to ``max_capacity`` (a retry costing more could never be paid).

    Raises:
        ValueError: a value is out of range; the message names the parameter.
        TypeError: a value has the wrong type.
    """

    PROFILES: ClassVar[tuple[str, ...]] = ("2020", "2026")
    """The names :meth:`profile` accepts."""

    max_capacity: int = 500
    initial_try_cost: int = 0
    initial_try_success_increment: int = 1
    retry_cost: int = 5
    timeout_retry_cost: int = 10
    throttling_retry_cost: int = 5
    refill_units_per_second: float = 0.0
    circuit_breaker_mode: bool = True

    def __post_init__(self) -> None:
        capacity = check_int("max_capacity", self.max_capacity, low=1)
        for field in ("initial_try_cost", "retry_cost", "timeout_retry_cost", "throttling_retry_cost"):
            cost = getattr(self, field)
            if type(cost) is int and cost > capacity:
                raise ValueError(
                    f"{field} must be an integer >= 0 and <= {capacity}, got {cost} (a retry cannot cost more "
                    f"than max_capacity={capacity}: raise max_capacity or lower {field})"
                )
            check_int(field, cost, low=0, high=capacity)
        check_int("initial_try_success_increment", self.initial_try_success_increment, low=0)
        refill = check_number("refill_units_per_second", self.refill_units_per_second, low=0.0)
        object.__setattr__(self, "refill_units_per_second", refill)
        if not isinstance(self.circuit_breaker_mode, bool):
            raise TypeError(
                f"circuit_breaker_mode must be True or False, got {self.circuit_breaker_mode!r} "
                f"({type(self.circuit_breaker_mode).__name__})"
            )
        if refill == 0 and not self.circuit_breaker_mode:
            raise ValueError(
                "refill_units_per_second=0 requires circuit_breaker_mode=True: with no time-based refill "
                "only successes refill the quota, so during an outage a waiting retry would wait forever; "
                "set refill_units_per_second > 0 or keep circuit_breaker_mode=True"
            )

    @classmethod
    def profile(cls, name: str) -> RetryQuotaConfig:
        """Return the published cost profile called ``name``.

        * ``"2020"``: botocore's standard mode today: retry 5, timeout retry 10, throttling retry 5,
          success +1, 500 tokens.
        * ``"2026"``: AWS's updated retries: every non-throttling retry 14, throttling retry 5,
          success +1, 500 tokens. (The profile's backoff bases and ``x-amz-retry-after`` handling belong
          to the backoff and engine settings, not to the quota.)

        Use :func:`dataclasses.replace` on the result to change other knobs.

        Raises:
            ValueError: ``name`` is not one of :attr:`PROFILES`; the message lists them.
        """
        check_choice("profile", name, cls.PROFILES)
        if name == "2026":
            return replace(cls(), retry_cost=14, timeout_retry_cost=14, throttling_retry_cost=5)
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaStatistics:
    """A snapshot of a :class:`RetryQuota`.

    Attributes:
        name: the quota's name (its scope).
        available: tokens in the quota now.
        capacity: tokens when full.
        acquired_total: tokens taken so far.
        released_total: tokens handed back so far (as passed to ``release``, before capping at capacity).
        refused: acquisitions refused (circuit-breaker mode) or timed out (waiting mode).
        exhausted: whether the quota is exhausted (see :class:`RetryQuota` for the rule).
        waiting: acquisitions waiting for capacity now (waiting mode).
    """

    name: str
    available: float
    capacity: int
    acquired_total: float
    released_total: float
    refused: int
    exhausted: bool
    waiting: int


class _EpisodeOwner(Protocol):
    """What :class:`ExhaustionEpisodes` reads of the quota it is part of."""

    _exhausted: bool
    _refused_cost: float
    _clock: Clock
    _events: EventBus
    _waiting: int

    @property
    def available(self) -> float: ...

    @property
    def name(self) -> str: ...

    def _restore(self) -> None: ...


class ExhaustionEpisodes:
    """A quota's exhaustion episodes, reported once each way (:class:`~asyncretry.QuotaExhausted`, then
    :class:`~asyncretry.QuotaRestored`): an episode begins with the first retry the quota refuses and ends
    once the quota could pay the cheapest retry refused in it, with nobody waiting (or when the waiters
    were served). :class:`RetryQuota` and the Redis-backed quota share it.

    The quota provides ``available``, ``name``, ``_clock``, ``_events`` and ``_waiting``, and starts
    ``_exhausted`` at False and ``_refused_cost`` at 0.
    """

    __slots__ = ("_exhausted", "_refused_cost")  # _refused_cost: the cheapest retry refused in the episode

    def _exhaust(self: _EpisodeOwner, cost: float) -> None:
        if self._exhausted:
            self._refused_cost = min(self._refused_cost, cost)
            return
        self._exhausted = True
        self._refused_cost = cost
        if self._events.wants(QuotaExhausted):
            self._events.emit(QuotaExhausted(
                time=self._clock.now(), source=self.name, available=self.available, cost=cost,
            ))

    def _restore_if_able(self: _EpisodeOwner) -> None:
        if self._exhausted and self._waiting == 0 and self.available >= self._refused_cost:
            self._restore()

    def _restore(self: _EpisodeOwner) -> None:
        if not self._exhausted:
            return
        self._exhausted = False
        if self._events.wants(QuotaRestored):
            self._events.emit(QuotaRestored(
                time=self._clock.now(), source=self.name, available=self.available,
            ))


class RetryQuota(ExhaustionEpisodes):
    """Pays for retries out of a shared token budget, so that an outage cannot turn into a retry storm.

    Share one quota between all calls to the same scope (one backend, one origin). Successes refill it
    through :meth:`release`; the engine does that, so direct use is for custom loops.

    Exhaustion is reported once per episode: :class:`~asyncretry.QuotaExhausted` goes out when an
    acquisition is first refused (or, in waiting mode, first has to wait); the quota then counts as
    exhausted until it can pay for the cheapest retry refused meanwhile with nobody left waiting, checked
    on every ``release``, ``acquire``, ``try_acquire`` and ``statistics`` call, and at the end of a wait.
    :class:`~asyncretry.QuotaRestored` marks the end of the episode. With a time-based refill the check
    therefore happens at the next call, not at the instant the tokens came back.

    Args:
        config: costs, capacity and refill; defaults to ``RetryQuotaConfig()`` (the 2020 profile).
        clock: the time source for the time-based refill; defaults to the running event loop's clock.
        name: names the quota in errors, statistics and events (their ``source``).
        events: where quota events go; defaults to the global bus.
    """

    __slots__ = (
        "_acquired",
        "_bucket",
        "_clock",
        "_config",
        "_events",
        "_refused",
        "_released",
        "_waiting",
        "name",
    )

    remote: ClassVar[bool] = False
    """Whether the state lives on a remote server (Redis): the engine then awaits the ``*_async`` methods."""

    def __init__(
        self,
        config: RetryQuotaConfig | None = None,
        *,
        clock: Clock | None = None,
        name: str = "quota",
        events: EventBus | None = None,
    ) -> None:
        self._config = RetryQuotaConfig() if config is None else check_instance("config", config, RetryQuotaConfig)
        self._clock = DEFAULT_CLOCK if clock is None else check_clock("clock", clock)
        self.name = check_str("name", name)
        self._events = GLOBAL_EVENTS if events is None else check_instance("events", events, EventBus)
        capacity = self._config.max_capacity
        self._bucket = TokenBucket(
            self._config.refill_units_per_second, capacity, tokens=capacity, clock=self._clock, name=name,
        )
        self._acquired = 0.0
        self._released = 0.0
        self._refused = 0
        self._waiting = 0
        self._exhausted = False
        self._refused_cost = 0.0  # the cheapest retry refused in the current exhaustion episode

    @property
    def config(self) -> RetryQuotaConfig:
        """The quota's settings."""
        return self._config

    @property
    def available(self) -> float:
        """Tokens in the quota now (after any time-based refill)."""
        return self._bucket.available

    def cost_of(self, kind: OutcomeKind) -> int:
        """Return what a retry after an outcome of this kind costs.

        Args:
            kind: how the failed attempt ended: ``THROTTLING`` costs ``throttling_retry_cost``,
                ``TIMEOUT`` costs ``timeout_retry_cost``, ``TRANSIENT`` and ``CONNECTION`` cost
                ``retry_cost``.

        Raises:
            ValueError: ``kind`` is not retryable (``SUCCESS``, ``NOT_RETRYABLE``), so no retry follows it.
        """
        config = self._config
        if kind is _THROTTLING:
            return config.throttling_retry_cost
        if kind is _TIMEOUT:
            return config.timeout_retry_cost
        if kind is _TRANSIENT or kind is _CONNECTION:
            return config.retry_cost
        raise ValueError(
            f"kind must be a retryable outcome (transient, throttling, timeout, connection), got {kind!r}: "
            "no retry follows it, so it has no retry cost"
        )

    def try_acquire(self, n: float) -> bool:
        """Take ``n`` tokens if the quota holds them now, without waiting.

        Args:
            n: tokens to take (0 <= n <= max_capacity); 0 always succeeds.

        Returns:
            True if the tokens were taken; False if the quota could not pay (or others are waiting
            first), which starts an exhaustion episode.
        """
        return self._try_take(self._check_cost(n))

    def time_until_available(self, n: float) -> float:
        """Seconds until ``n`` tokens would be there by refill alone (``inf`` without refill).

        Successes elsewhere may give tokens back sooner. For synchronous callers, which sleep and
        call :meth:`try_acquire` again.
        """
        return self._bucket.time_until_available(self._check_cost(n))

    # ASYNC109: `timeout` bounds the wait for capacity and turns into RetryCapacityExceeded (the SPEC's
    # client-side error), not a cancellation deadline; callers' cancel scopes still apply on top of it.
    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        """Take ``n`` tokens; in waiting mode, wait for them if needed (first come, first served).

        Like :meth:`TokenBucket.acquire`, a call that is paid at once does not yield to the event
        loop; ``n=0`` (a free first attempt) returns without even checking for cancellation.

        Args:
            n: tokens to take (0 <= n <= max_capacity).
            timeout: waiting mode only: the longest to wait, in seconds (>= 0) or a ``timedelta``;
                ``None`` (the default) waits as long as it takes. A wait predicted to exceed it fails
                at once.

        Raises:
            RetryCapacityExceeded: circuit-breaker mode and the quota cannot pay now; or waiting mode
                and it could not pay within ``timeout``.
        """
        n = self._check_cost(n)
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        if n == 0:
            return
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._restore_if_able()
        if self._take(n):
            return
        self._exhaust(n)
        if self._config.circuit_breaker_mode:
            self._refused += 1
            raise RetryCapacityExceeded(available=self.available, cost=n, name=self.name)
        self._waiting += 1
        try:
            await self._bucket.acquire(n, timeout=timeout)
        except RateLimitTimeout:
            self._refused += 1
            raise RetryCapacityExceeded(available=self.available, cost=n, name=self.name) from None
        finally:
            self._waiting -= 1
        self._acquired += n
        if self._waiting == 0:
            # Capacity came back and served everyone who queued: the episode is over.
            self._restore()

    def release(self, n: float) -> None:
        """Give ``n`` tokens back (a success); the quota never exceeds ``max_capacity``.

        Args:
            n: tokens to give back (>= 0), typically the cost of the retry that succeeded or
                ``initial_try_success_increment``.
        """
        if type(n) is not int or n < 0:  # whole token counts (the engine's) need no further check
            n = check_number("n", n, low=0.0)
        if n:
            self._bucket._put_back(n)
            self._released += n
        if self._exhausted:
            self._restore_if_able()

    def statistics(self) -> QuotaStatistics:
        """Return a snapshot of the quota's tokens and counters."""
        self._restore_if_able()
        return QuotaStatistics(
            name=self.name,
            available=self.available,
            capacity=self._config.max_capacity,
            acquired_total=self._acquired,
            released_total=self._released,
            refused=self._refused,
            exhausted=self._exhausted,
            waiting=self._waiting,
        )

    def __repr__(self) -> str:
        mode = "circuit-breaker" if self._config.circuit_breaker_mode else "waiting"
        return (
            f"<RetryQuota {self.name!r} {self.available:g}/{self._config.max_capacity} {mode}"
            f"{' exhausted' if self._exhausted else ''} refused={self._refused}>"
        )

    # -- internals

    def _try_take(self, n: float) -> bool:
        """:meth:`try_acquire` for the engine, whose amounts come from a validated config (no check)."""
        if self._exhausted:
            self._restore_if_able()
        if self._take(n):
            return True
        self._refused += 1
        self._exhaust(n)
        return False

    def _check_cost(self, n: float) -> float:
        if type(n) is int and 0 <= n <= self._config.max_capacity:  # whole token counts (the engine's)
            return n
        return check_number("n", n, low=0.0, high=self._config.max_capacity)

    def _take(self, n: float) -> bool:
        # Nobody overtakes a queued waiter: FIFO across try_acquire and acquire.
        if n == 0 or (self._waiting == 0 and self._bucket._try_take(n)):
            self._acquired += n
            return True
        return False

    async def try_acquire_async(self, n: float) -> bool:
        """:meth:`try_acquire` for the engine's remote-state protocol (remote quotas do I/O here)."""
        return self.try_acquire(n)

    async def release_async(self, n: float) -> None:
        """:meth:`release` for the engine's remote-state protocol (remote quotas do I/O here)."""
        self.release(n)
