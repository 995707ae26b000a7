"""AdaptiveRateLimiter: client-side rate limiting that finds a throttled server's capacity (SPEC section 5).

Nothing is limited until the first throttling response. From then on every attempt takes one token
from an :class:`~asyncretry.TokenBucket` whose fill rate a *profile* controls:

* ``"asyncretry"`` (the default) measures the capacity the server admits between throttles, holds
  the rate just below it, reacts once per congestion event and probes now and then for more
  (:class:`~asyncretry._primitives._adaptive.AsyncretryRateController`);
* ``"aws"`` is the AWS SDKs' CUBIC limiter exactly: cut to ``beta`` times the measured send rate on
  each throttle, grown back along a cubic curve, never above ``max_rate_growth`` times the measured
  send rate.

The rate math lives in :mod:`._cubic` (``"aws"``) and :mod:`._adaptive` (``"asyncretry"``) as
synchronous state machines; this module only applies their
decisions to the bucket and does the waiting.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from .._events import GLOBAL_EVENTS, EventBus, LimiterRateChanged, LimiterRule, Throttled
from .._exceptions import RateLimitTimeout
from .._validate import as_seconds, check_callable, check_clock, check_instance, check_seconds, check_str
from ._bucket import TokenBucket
from ._clock import DEFAULT_CLOCK, Clock
from ._hold import Hold
from ._limiter_config import AdaptiveLimiterConfig
from ._pace import Pace
from ._rate_controller import RateController, new_rate_controller
from ._waiter import in_event_loop

__all__ = ["AdaptiveLimiterConfig", "AdaptiveRateLimiter", "LimiterStatistics"]

_DEFAULT_CONFIG = AdaptiveLimiterConfig()


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterStatistics:
    """A snapshot of an :class:`AdaptiveRateLimiter`.

    Attributes:
        name: the limiter's name.
        enabled: whether a throttle has been seen, so that :meth:`~AdaptiveRateLimiter.acquire` limits.
        fill_rate: the token bucket's fill rate, tokens (attempts) per second.
        max_capacity: the token bucket's capacity, tokens.
        available: tokens in the bucket now.
        measured_rate: the measured rate of responses, requests per second (``"aws"``: smoothed).
        last_max_rate: ``"aws"``: the rate at the last throttle (CUBIC's ``W_max``); ``"asyncretry"``:
            the server's capacity as last measured. Requests per second.
        last_throttle_time: when the rate was last cut for a throttle (the start time before any),
            clock seconds.
        updates: responses fed to :meth:`~AdaptiveRateLimiter.update`.
        throttles: of those, throttling responses.
        acquires: tokens granted by :meth:`~AdaptiveRateLimiter.acquire` (free ones included).
        waits: of those, acquires that had to wait.
        wait_time: the total time those waits took, seconds.
        timeouts: acquires refused with :class:`~asyncretry.RateLimitTimeout`.
        waiting: acquires waiting in line right now.
        rule: the rule of the profile that last set the fill rate (:data:`~asyncretry.LimiterRule`);
            ``None`` before any did.
        held: seconds the limiter still holds every acquire for a quota the server announced spent
            (:meth:`~AdaptiveRateLimiter.hold`); 0 when it does not hold.
        holds: holds that began or were made longer.
        paced: the most attempts per second the pace a server announced allows now
            (:meth:`~AdaptiveRateLimiter.pace`: the token bucket fills no faster); ``None`` when none runs.
    """

    name: str
    enabled: bool
    fill_rate: float
    max_capacity: float
    available: float
    measured_rate: float
    last_max_rate: float
    last_throttle_time: float
    updates: int
    throttles: int
    acquires: int
    waits: int
    wait_time: float
    timeouts: int
    waiting: int
    rule: LimiterRule | None
    held: float
    holds: int
    paced: float | None = None


class AdaptiveRateLimiter:
    """The "adaptive" retry-mode limiter: a token bucket whose rate follows the server's capacity.

    Call ``await limiter.acquire()`` before every attempt (the first included) and
    ``limiter.update(throttled=..., sent_at=...)`` after every response. Keep one limiter per
    throttled resource: a throttle on one resource must not slow another.

    Args:
        config: the profile and its constants; defaults to ``AdaptiveLimiterConfig()`` (the
            ``"asyncretry"`` profile). ``AdaptiveLimiterConfig(profile="aws")`` is the AWS SDKs' limiter.
        clock: the time source; defaults to :data:`~asyncretry.DEFAULT_CLOCK` (the running loop's clock).
            The limiter's start time (SPEC's ``t0``) is read from it at construction; a limiter built
            outside any event loop on the default clock starts at its first :meth:`update` instead,
            because asyncio's and trio's clocks (real or virtual) have different origins.
        name: the limiter's name, used as the ``source`` of its events; default ``"limiter"``.
        events: the bus its events go to; defaults to :data:`~asyncretry.GLOBAL_EVENTS`.
        rng: a callable returning floats in ``[0, 1)``, used when the first throttle enables the
            limiter and again at each throttle that cuts its rate while no call waits for a token, to
            fill its bucket to a random fraction of a token: limiters enabled or cut by the same event
            (a fleet of clients, one limiter each) then release their tokens at different instants
            instead of hitting the server's burst together. Without the new phase at each cut, the
            clients throttled in one episode left it in step and were throttled together again while
            others went spared for seconds (in virtual time, the fastest clients of the HTTP benchmark's
            fleet: 0 throttles in 32 sends where the fleet's share was 13%). Defaults to
            ``random.random``. The ``"aws"`` profile does not use it: its bucket keeps what it filled,
            as the SDKs' does.
    """

    __slots__ = (
        "_acquires",
        "_anchored",
        "_bucket",
        "_clock",
        "_config",
        "_control",
        "_events",
        "_hold",
        "_pace",
        "_rng",
        "_throttles",
        "_timeouts",
        "_updates",
        "_wait_time",
        "_waits",
        "name",
    )

    remote: ClassVar[bool] = False
    """Whether the state lives on a remote server (Redis): the engine then awaits the ``*_async`` methods."""

    def __init__(
        self,
        config: AdaptiveLimiterConfig | None = None,
        *,
        clock: Clock | None = None,
        name: str = "limiter",
        events: EventBus | None = None,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self._config = (
            _DEFAULT_CONFIG if config is None else check_instance("config", config, AdaptiveLimiterConfig)
        )
        self._rng = random.random if rng is None else check_callable("rng", rng)
        self._clock = DEFAULT_CLOCK if clock is None else check_clock("clock", clock)
        self.name = check_str("name", name)
        self._events = GLOBAL_EVENTS if events is None else check_instance("events", events, EventBus)
        self._control: RateController = new_rate_controller(self._config, self._clock.now())
        self._anchored = self._clock is not DEFAULT_CLOCK or in_event_loop()
        # SPEC: the bucket starts empty; it fills from the start, but only matters once enabled.
        self._bucket = TokenBucket(
            self._control.fill_rate, self._control.max_capacity, tokens=0.0, clock=self._clock, name=name
        )
        self._updates = 0
        self._throttles = 0
        self._acquires = 0
        self._waits = 0
        self._wait_time = 0.0
        self._timeouts = 0
        self._hold = Hold()
        self._pace = Pace()

    @property
    def config(self) -> AdaptiveLimiterConfig:
        """The limiter's settings."""
        return self._config

    @property
    def enabled(self) -> bool:
        """Whether a throttle has been seen: until then :meth:`acquire` returns at once."""
        return self._control.enabled

    @property
    def fill_rate(self) -> float:
        """The token bucket's fill rate: the attempts per second allowed once enabled."""
        return self._control.fill_rate

    @property
    def max_capacity(self) -> float:
        """The token bucket's capacity (the largest burst once enabled), tokens."""
        return self._control.max_capacity

    @property
    def measured_rate(self) -> float:
        """The measured rate at which responses arrive, requests per second."""
        return self._control.measured_rate

    @property
    def last_max_rate(self) -> float:
        """``"aws"``: the send rate when the last throttle hit (CUBIC's ``W_max``); ``"asyncretry"``:
        the server's capacity as last measured. Requests per second."""
        return self._control.last_max_rate

    @property
    def last_throttle_time(self) -> float:
        """When the rate was last cut for a throttle, clock seconds (the start time before the first one)."""
        return self._control.last_throttle_time

    # ASYNC109: `timeout` is a budget for the rate-limit wait that raises RateLimitTimeout, not a
    # cancellation deadline; callers' cancel scopes still apply on top of it.
    async def acquire(self, *, timeout: float | timedelta | None = None) -> None:
        """Wait for permission to send one attempt.

        Returns at once, without yielding, while no throttle has been seen and no :meth:`hold` runs.
        Once enabled, takes one token from the bucket, waiting in line (first come, first served) if
        there is none. While a hold runs, waits for its end first, then for its place in the paced
        release after it.
        A cancelled wait leaves no trace: the place in line passes to the next waiter.

        Args:
            timeout: the longest wait allowed, seconds (>= 0) or a ``timedelta``; defaults to the
                config's ``max_wait`` (``None``: as long as needed; 0: fail fast).

        Raises:
            RateLimitTimeout: the token would not come within ``timeout`` (predicted up front, or
                while waiting after a rate cut), or a hold runs past it; no token was taken.
            ValueError: ``timeout`` is negative or NaN.
        """
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        if not (self._control.enabled or self._hold.set):
            self._acquires += 1
            return
        limit = timeout if timeout is not None else self._config.max_wait
        seconds = None if limit is None else as_seconds(limit)
        clock = self._clock
        started = clock.now()

        def left() -> float | None:
            return None if seconds is None else max(0.0, seconds - (clock.now() - started))

        try:
            if self._hold.set:
                await self._hold.wait(clock, seconds, self.name)
            if self._control.enabled:
                await self._bucket.acquire(1, timeout=left())
                if self._hold.until > clock.now():  # a hold began while this call waited in line: its token waits
                    await self._hold.wait(clock, left(), self.name)
        except RateLimitTimeout:
            self._timeouts += 1
            raise
        self._acquires += 1
        waited = clock.now() - started
        if waited > 0.0:
            self._waits += 1
            self._wait_time += waited

    def try_acquire(self) -> bool:
        """Take permission to send one attempt without waiting; ``False`` if a wait would be needed.

        Exactly the admission :meth:`acquire` would grant at once: ``True`` while no throttle has been
        seen, or when a token is in the bucket and nobody waits in line (no overtaking). Synchronous and
        cheap, for a caller that tries it before every attempt and awaits :meth:`acquire` only when it
        returns ``False`` (the retry engine), or sleeps :meth:`time_until_available` (a sync caller).
        ``False`` while a :meth:`hold` runs, and until the next release of the paced release after it.
        """
        if self._hold.set and not self._hold.admit(self._clock.now()):
            return False
        if not self._control.enabled or self._bucket.try_acquire(1):
            self._acquires += 1
            return True
        return False

    def time_until_available(self) -> float:
        """Seconds until :meth:`try_acquire` would succeed (0 while not enabled and not held)."""
        held = self._hold.delay(self._clock.now()) if self._hold.set else 0.0
        if not self._control.enabled:
            return held
        return max(held, self._bucket.time_until_available(1))

    def hold(self, seconds: float | timedelta, *, reason: str = "quota spent") -> None:
        """Admit nothing for ``seconds``: the server announced that its quota is spent until then.

        Every :meth:`acquire` waits until the hold is over, whichever task calls it, and
        :meth:`try_acquire` refuses. Then the calls that waited go out no faster than the limiter was
        served before the hold (the successes since the previous hold began, over that time but at most
        over the hold's length), for as long as the hold lasted; the rate control is not changed (the
        announcement says when the quota comes back, not how fast the server serves). A hold that ends
        sooner than the one running changes nothing. The retry engine calls this when a response
        announces its quota spent (``RateLimit``, ``X-RateLimit-*`` and the like: see
        :func:`asyncretry.httpx.announced_quota`) and the policy's limiter config holds on it
        (``hold_spent_quota``, on with every profile but ``"aws"``), cut to the policy's ``max_server_delay``.
        Synchronous, never waits.

        Args:
            seconds: how long to hold from now, seconds (>= 0, finite) or a ``timedelta``.
            reason: what announced it (``"HTTP 429"`` ...), for the :class:`~asyncretry.LimiterHeld` event.

        Raises:
            ValueError: ``seconds`` is negative, infinite or NaN.
        """
        self._hold.extend(self._clock.now(), seconds, self._events, self.name, reason)

    def pace(self, rate: float, *, reason: str = "quota pace") -> None:
        """Fill the bucket no faster than ``rate`` tokens per second for the next minute: the server said
        its quota admits that many requests per second (``q`` per ``w`` of a 1-s window, which cannot be
        held: see :attr:`AnnouncedQuota.pace <asyncretry.httpx.AnnouncedQuota.pace>`). The rate control is
        not changed; below the pace it rules as before. A later call replaces the pace (a higher one
        included), and a pace not announced again lapses after 60 seconds. The retry engine calls this for
        every answer that announces such a quota, where the policy's limiter config follows announced quotas
        (``hold_spent_quota``). Synchronous, never waits.

        Args:
            rate: the most attempts per second, above 0 and finite.
            reason: what announced it (``"HTTP 200"`` ...), for the :class:`~asyncretry.LimiterPaced` event,
                emitted when a pace begins or its rate changes.

        Raises:
            ValueError: ``rate`` is not above 0 or not finite.
        """
        now = self._clock.now()
        self._pace.announce(now, rate, self._events, self.name, reason)
        self._follow_pace(now)

    def _follow_pace(self, now: float) -> None:
        """Set the bucket's rate and capacity to the controller's, capped by the pace that runs at ``now``."""
        rate, capacity = self._paced(now)
        bucket = self._bucket
        if rate != bucket.rate:  # the rate setter first refills at the old rate, so the order matters (SPEC 3)
            bucket.rate = rate
        if capacity != bucket.capacity:
            bucket.capacity = capacity

    def _paced(self, now: float) -> tuple[float, float]:
        """The bucket's rate and capacity at ``now``: the controller's, or while a pace runs, no faster than
        it and a burst of one call (not knowing where the server's window begins, no burst is safe)."""
        control, cap = self._control, self._pace.cap(now)
        if cap == math.inf:
            return control.fill_rate, control.max_capacity
        return min(control.fill_rate, cap), min(control.max_capacity, 1.0)

    def backoff_after_throttle(self, delay: float) -> float:
        """How much of the engine's throttling backoff to sleep after the throttle just fed to :meth:`update`.

        The retry engine asks this after every throttle it reports (no server-directed delay); the retry
        then waits for its token as every attempt does. The ``"asyncretry"`` profile answers 0 for the
        throttles of its start-up (the first round trip's: ``start_answers_backoff`` of
        :class:`~asyncretry._primitives._adaptive.AsyncretryRateController`): its start already set the
        rate from what was served and the bucket paces the retry, so a backoff on top would only leave
        the server idle. It also answers 0 for the throttles of one client of a fleet whose rate its
        congestion events set (``fleet_event_rate``): the rate answers them, and the random sleeps were
        much of the unfairness left between such clients. Synchronous, never waits.

        Args:
            delay: the backoff the policy drew for this retry, seconds.

        Returns:
            0 for a start-up throttle of the ``"asyncretry"`` profile, or a throttle of a fleet client
            under its ``fleet_event_rate`` rule; otherwise ``delay`` (always for the ``"aws"`` profile:
            the SDKs sleep the backoff after every throttle).
        """
        return 0.0 if self._control.answers_backoff else delay

    def update(
        self, throttled: bool, *, reason: str = "throttling", sent_at: float | None = None, failed: bool = False
    ) -> None:
        """Feed the outcome of one attempt; adjusts the fill rate. Synchronous, never waits.

        Args:
            throttled: whether the response was a throttling error.
            reason: why it counts as a throttle (``"HTTP 429"``, an error code ...), for the
                :class:`~asyncretry.Throttled` event; default ``"throttling"``.
            sent_at: when the request was sent, on the limiter's clock (seconds); ``None`` if unknown.
                The ``"asyncretry"`` profile uses it to tell a new congestion event from the echo of
                one it already reacted to; the ``"aws"`` profile ignores it.
            failed: the attempt failed for another retryable reason (a 503, a connection error, a
                timeout): neither a throttle nor evidence that the server served it. The
                ``"asyncretry"`` profile does not grow the rate on it, and a stretch of nothing but
                failures counts as an outage; the ``"aws"`` profile counts it as the SDKs do (not a
                throttle). Ignored when ``throttled`` is true.
        """
        now = self._clock.now()
        if not self._anchored:
            # Built outside an event loop: t0 was read from another clock, so start the rate control
            # here. It was disabled and had seen nothing yet, so nothing is lost.
            self._anchored = True
            self._control = new_rate_controller(self._config, now)
        control = self._control
        was_enabled = control.enabled
        old_rate = control.fill_rate
        old_capacity = control.max_capacity
        control.update(now, throttled, sent_at, failed and not throttled)
        if not (throttled or failed):
            self._hold.served(now)
        self._updates += 1
        if throttled:
            self._throttles += 1
            if self._events.wants(Throttled):
                self._events.emit(Throttled(time=now, source=self.name, reason=reason))
        new_rate = control.fill_rate
        enabled_now = not was_enabled and control.enabled
        if self._config.profile != "aws" and (enabled_now or (throttled and new_rate < old_rate)) and self._idle():
            # A random phase: limiters enabled, or cut, by the same episode must not release tokens in step.
            rate, capacity = self._paced(now)
            self._bucket = TokenBucket(
                rate, capacity, tokens=self._rng() * min(1.0, capacity), clock=self._clock, name=self.name
            )
        elif new_rate != old_rate or control.max_capacity != old_capacity or self._pace.heard:
            self._follow_pace(now)
        rule = control.rule  # set whenever the fill rate is
        if new_rate != old_rate and rule is not None and self._events.wants(LimiterRateChanged):
            self._events.emit(
                LimiterRateChanged(
                    time=now,
                    source=self.name,
                    old_rate=old_rate,
                    new_rate=new_rate,
                    measured_rate=control.measured_rate,
                    throttled=throttled,
                    enabled=control.enabled,
                    rule=rule,
                )
            )

    def _idle(self) -> bool:
        """Whether no call waits in the bucket's line (a new bucket would leave it behind)."""
        return self._bucket.statistics().waiting == 0

    def statistics(self) -> LimiterStatistics:
        """A snapshot of the limiter's state and counters."""
        control = self._control
        bucket = self._bucket.statistics()
        now = self._clock.now()
        return LimiterStatistics(
            name=self.name,
            enabled=control.enabled,
            fill_rate=control.fill_rate,
            max_capacity=control.max_capacity,
            available=bucket.available,
            measured_rate=control.measured_rate,
            last_max_rate=control.last_max_rate,
            last_throttle_time=control.last_throttle_time,
            updates=self._updates,
            throttles=self._throttles,
            acquires=self._acquires,
            waits=self._waits,
            wait_time=self._wait_time,
            timeouts=self._timeouts,
            waiting=bucket.waiting,
            rule=control.rule,
            held=self._hold.left(now),
            holds=self._hold.count,
            paced=paced if (paced := self._pace.cap(now)) < math.inf else None,
        )

    def __repr__(self) -> str:
        control = self._control
        state = "enabled" if control.enabled else "disabled"
        return (
            f"<AdaptiveRateLimiter {self.name!r} {state} fill_rate={control.fill_rate:.4g}/s "
            f"max_capacity={control.max_capacity:.4g} measured_rate={control.measured_rate:.4g}/s "
            f"profile={self._config.profile!r}>"
        )
