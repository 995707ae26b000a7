"""RedisAdaptiveRateLimiter: the adaptive limiter for a whole fleet, with one shared rate.

Design, and why it converges: there is exactly one rate-control state and one token bucket per name, both
in one Redis hash. Every process reports its responses and takes its tokens from that bucket, in the same
script; the script feeds the reports to the profile's update and hands out tokens at the resulting fill
rate. The fleet does not converge on a rate by gossip: it has only one rate, the one a single client
sending the fleet's traffic would have.

Two profiles, two scripts. ``"asyncretry"`` (the default, :data:`~._limiter_scripts.LIMITER_ASYNCRETRY`): the
server's capacity is what it admitted to the *fleet* between two congestion events; each process reports
its successes, its failures and the send times of its throttled requests, on the server's clock (the
offset between the clocks is learned on every round trip), so the script tells a new congestion event from
an echo of a decrease the fleet already made whichever process made it; the served rate is counted in
slots of ``measurement_window / 20`` on the server. The rules are ``AsyncretryRateController``'s, reduced
to counts (no outage detection: a run of 503s only stops the growth), with two that only a fleet needs.
A process that has not yet heard that the fleet's limiter was enabled still sends free: the throttles of
what it sent so are reported as sent long ago, part of the start-up's overshoot (they refine the start, as
echoes of the first round trip do, instead of cutting the rate again as fresh throttles right after a
decrease would). And a new event's capacity is the lower of two served rates: counted from
``reaction_time`` after the decrease (the in-process controller's span starts at the throttle before, where
the server's bucket was empty) and since the decrease; the first also holds what the server's bucket took
in while the fleet sent below the capacity after the decrease, which the probe then drains, and measured
so, the estimate came out 6-9% above the capacity and the rate restarted above it. ``"aws"``
(:data:`~._limiter_scripts.LIMITER`): the SPEC section 5 update, where the measured send rate is the fleet's and a
throttle in any process cuts the one fill rate to ``beta`` times it.

What stays local and cheap: :meth:`~RedisAdaptiveRateLimiter.update` is synchronous and only counts (and
feeds a local shadow limiter, the fail-open fallback). Reports travel with the next
:meth:`~RedisAdaptiveRateLimiter.acquire`. While the fleet's limiter is not enabled (no throttle yet)
``acquire`` is free and makes a round trip only every ``sync_interval`` seconds, or at once when this
process has a throttle to report; once enabled, every ``acquire`` is one round trip (it takes a token).

A quota a server announces spent holds the fleet: :meth:`~RedisAdaptiveRateLimiter.hold` holds this process
at once, and what it returns reports the hold when awaited (the retry engine does; else the next
``acquire`` does); the state keeps the latest end reported, and every other process holds from its next
round trip on. The release after the hold is the fleet's: the script paces it for every process, as the
in-process limiter paces its tasks (``asyncretry._primitives._hold``), and hands each call its place.

Approximations, stated: reports are counted at the server time they arrive (up to one request, or
``sync_interval`` while disabled, after the response), so the measured rate lags by that much more than
the SDKs' own lag of one measurement bucket. The start-up does not: a report also says when its oldest
answer came (from the process's last pause on), and the start counts the fleet's answers over the time
they took to come. A call that must wait reserves its token (its place in the
fleet's queue) and sleeps until the time the fleet's rate brings its token in, as the default profile's
recovery predicts that rate (the climb back to the estimate, then the probe above it, doubling every
``probe_doubling_time``), not at the rate of the moment; every ``sync_interval``, and once more when it
wakes, it checks how many tokens the bucket has taken in since, so that a rate change in the fleet moves
its wake-up earlier or later, as the in-process bucket re-plans (a request sent on time at a rate the
fleet has since cut would be throttled, and read by the fleet as the cut not being enough). Planned at the
rate of the moment, the fleet's sleepers woke late all through a probe, and when the probe's throttle cut
the rate, the ones whose tokens had long come in still went out at the probe's rate: about four throttles
per probe instead of one or two.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from datetime import timedelta

import redis.asyncio

from .._events import GLOBAL_EVENTS, Event, EventBus, LimiterRateChanged, Throttled
from .._exceptions import RateLimitTimeout
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._primitives._hold import Hold
from .._primitives._limiter import AdaptiveRateLimiter
from .._primitives._limiter_config import AdaptiveLimiterConfig
from .._primitives._pace import Pace
from .._validate import as_seconds, check_seconds
from ._backend import RedisBackend
from ._limiter_scripts import LIMITER, LIMITER_ASYNCRETRY, SERVER_CLOCK
from ._limiter_view import RedisLimiterStatistics, _View
from ._limiter_waits import _Waits
from ._link import OnUnavailable, _Later, _Link, _Linked
from ._values import fmt, num, ttl_ms

__all__ = ["RedisAdaptiveRateLimiter"]


_DEFAULT = AdaptiveLimiterConfig()
# The most throttle send times one report carries (a report covers about one request per task).
_MAX_SENDS = 64
# A fleet's hold that ends at most this much later than this process's own (seconds) is the same hold.
_SAME_HOLD = 1e-3


class _Muted(EventBus):
    """A bus nobody hears: the local shadow limiter's own events would duplicate the fleet's."""

    __slots__ = ()

    def wants(self, event_type: type[Event]) -> bool:
        return False


_SHARED_PROFILES = ("asyncretry", "aws")
"""The profiles whose rules the Redis scripts apply to a fleet's reports."""


class RedisAdaptiveRateLimiter(_Waits, _Linked):
    """An adaptive (CUBIC) rate limiter whose fill rate and tokens are shared by every process of a fleet.

    Use it like :class:`~asyncretry.AdaptiveRateLimiter`: ``await limiter.acquire()`` before every
    attempt, ``limiter.update(throttled)`` after it; or give the retry engine a factory
    (``Retrier(policy, limiter=lambda key: RedisAdaptiveRateLimiter(backend, name=key))``).
    See the module documentation for the design.

    It implements :class:`~asyncretry.protocols.RemoteLimiter`, and only that: it is not an
    :class:`~asyncretry.AdaptiveRateLimiter` (it cannot answer ``try_acquire()`` without a round trip),
    but keeps one as its fail-open fallback, fed with this process's responses all along.

    Args:
        redis: a :class:`RedisBackend`, a ``redis.asyncio.Redis`` client, or a URL.
        config: the profile and its constants (every process must use the same); defaults to
            ``AdaptiveLimiterConfig()``, the ``"asyncretry"`` profile. It and ``"aws"`` run on Redis;
            ``"fair"`` and ``"independent"``, profiles for a limiter per client, are refused with a
            ``ValueError``.
        name: names the shared limiter (the Redis key ``{prefix}limiter:{name}``) and its events.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) limits with a local
            shadow limiter that has seen this process's responses all along; ``"fail_closed"`` raises
            :class:`~asyncretry.BackendUnavailable` from :meth:`acquire`.
        sync_interval: while the fleet's limiter is not enabled, the longest a process goes without a
            round trip (to learn that another process was throttled), seconds (> 0, default 0.25).
        key_ttl: seconds an unused limiter is kept on Redis (> 0 and <= ten years, default 600); an expired
            one starts again disabled, like a fresh limiter.
        clock: the time source; defaults to the running loop's clock.
        events: where :class:`~asyncretry.Throttled`, :class:`~asyncretry.LimiterRateChanged` and the
            backend's events go; defaults to the global bus.
    """

    __slots__ = (
        "_acquires",
        "_announce",
        "_args",
        "_aws",
        "_bus",
        "_clock",
        "_config",
        "_echo_guard",
        "_failed",
        "_fallback",
        "_first_served",
        "_free_until",
        "_heard",
        "_hold",
        "_key_ttl_ms",
        "_last_answer",
        "_link",
        "_next_sync",
        "_offset",
        "_oldest",
        "_pace",
        "_pause",
        "_reported",
        "_sends",
        "_sync_interval",
        "_throttled",
        "_throttles",
        "_updates",
        "_view",
        "name",
    )


    def __init__(
        self,
        redis: RedisBackend | redis.asyncio.Redis | str,
        config: AdaptiveLimiterConfig | None = None,
        *,
        name: str = "limiter",
        on_unavailable: OnUnavailable = "fail_open",
        sync_interval: float | timedelta = 0.25,
        key_ttl: float | timedelta = 600.0,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        if config is None:
            config = _DEFAULT
        self._config = config
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self.name = name
        # The fail-open fallback: a local limiter that sees every response, whose events nobody hears.
        self._fallback = AdaptiveRateLimiter(config, clock=clock, name=name, events=_Muted())
        if self._fallback.config.profile not in _SHARED_PROFILES:
            raise ValueError(
                f"config.profile must be one of {', '.join(map(repr, _SHARED_PROFILES))} for a limiter shared "
                f"through Redis, got {self._fallback.config.profile!r}: that profile is for a limiter per client"
            )
        self._updates = self._throttles = self._acquires = self._waits = self._timeouts = 0
        self._wait_time = 0.0
        self._bus = events if events is not None else GLOBAL_EVENTS
        self._sync_interval = check_seconds("sync_interval", sync_interval, low_open=True)
        self._key_ttl_ms = ttl_ms(key_ttl)
        self._link = _Link(
            redis, kind="limiter", name=name, on_unavailable=on_unavailable, events=self._bus,
            clock=clock if clock is not None else DEFAULT_CLOCK,
            fallback="a local adaptive limiter fed with this process's responses",
        )
        c = self._config
        self._aws = c.profile == "aws"
        if self._aws:
            self._args: tuple[str, ...] = (
                fmt(c.beta), fmt(c.scale_constant), fmt(c.smoothing), fmt(as_seconds(c.measurement_bucket)),
                fmt(c.min_fill_rate), fmt(c.min_capacity), fmt(c.max_rate_growth),
            )
        else:
            self._args = (
                fmt(c.utilization), fmt(c.repeat_decrease), fmt(c.min_repeat_decrease),
                fmt(as_seconds(c.reaction_time)), fmt(as_seconds(c.measurement_window)),
                fmt(as_seconds(c.recovery_time)),
                fmt(as_seconds(c.quick_recovery_time)), fmt(c.stable_change), fmt(as_seconds(c.settle_time)),
                fmt(as_seconds(c.probe_doubling_time)), fmt(as_seconds(c.burst)), fmt(c.growth_margin),
                fmt(c.max_rate_growth), fmt(c.min_fill_rate), fmt(c.min_capacity),
            )
        self._echo_guard = as_seconds(c.measurement_window) / 10
        # A pause between answers: longer than a slot of the fleet's served-rate counts.
        self._pause = as_seconds(c.measurement_window) / 20
        self._reported = 0  # responses not yet reported to the fleet
        self._throttled = 0  # of those, throttles
        self._sends: list[float] = []  # the send times of those throttles (local clock), for the default profile
        self._offset = 0.0  # the server's clock less this process's, as of the last round trip
        # When the oldest of those responses came since this process's last pause (local clock), and the last.
        self._oldest = self._last_answer = -math.inf
        self._failed = 0  # of the responses, failures (neither throttles nor successes)
        self._first_served = math.nan  # when the first of their successes came (local clock)
        self._give = 0  # tokens of cancelled reservations, handed back with the next round trip
        self._reserved = 0
        self._next_sync = -math.inf
        # Requests this process sent before this time (local clock) went out free: it had not yet heard
        # that the fleet's limiter was enabled (infinite while it has not).
        self._free_until = math.inf
        self._view = _View(fill_rate=c.min_fill_rate, max_capacity=c.min_capacity)
        self._hold = Hold()  # this process's, and the fleet's as the last round trip told it
        self._announce = False  # a hold this process announced that the fleet has not heard of yet
        self._heard = 0  # holds this process took from the fleet (announced by another process)
        self._pace = Pace()  # the last pace this process's answers announced, told with every round trip

    @property
    def config(self) -> AdaptiveLimiterConfig:
        """The limiter's settings (every process of the fleet must use the same)."""
        return self._config

    @property
    def enabled(self) -> bool:
        """Whether the fleet's limiter has seen a throttle (as of the last round trip)."""
        return self._local().enabled if self._link.degraded else self._view.enabled

    @property
    def fill_rate(self) -> float:
        """The fleet's fill rate, attempts per second, as of the last round trip."""
        return self._local().fill_rate if self._link.degraded else self._view.fill_rate

    @property
    def max_capacity(self) -> float:
        """The fleet bucket's capacity, tokens, as of the last round trip."""
        return self._local().max_capacity if self._link.degraded else self._view.max_capacity

    @property
    def measured_rate(self) -> float:
        """The fleet's smoothed send rate, requests per second, as of the last round trip."""
        return self._local().measured_rate if self._link.degraded else self._view.measured_rate

    @property
    def last_max_rate(self) -> float:
        """The fleet's rate at its last throttle (CUBIC's ``W_max``)."""
        return self._local().last_max_rate if self._link.degraded else self._view.last_max_rate

    @property
    def last_throttle_time(self) -> float:
        """When the fleet's last throttle hit, on this process's clock."""
        return self._local().last_throttle_time if self._link.degraded else self._view.last_throttle_time

    async def acquire(self, *, timeout: float | timedelta | None = None) -> None:
        """Wait for the fleet's permission to send one attempt, reporting this process's responses.

        Free (no round trip) while the fleet's limiter is not enabled, except every ``sync_interval``
        and when a throttle waits to be reported; once enabled, one round trip that takes a token from
        the fleet's bucket, then a sleep of the time the server computed if the call must wait (with a
        round trip every ``sync_interval`` of it, to follow changes of the fleet's rate). While a hold or
        the fleet's release after it runs, the round trip also gives the call its place in that release.

        Args:
            timeout: the longest wait allowed, seconds or a ``timedelta``; defaults to the config's
                ``max_wait`` (``None``: as long as needed; 0: fail fast).

        Raises:
            RateLimitTimeout: the token (or the call's place after a hold) would not come within ``timeout``;
                none was taken.
            BackendUnavailable: Redis cannot be reached and the limiter fails closed.
        """
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        limit = timeout if timeout is not None else self._config.max_wait
        max_wait = None if limit is None else as_seconds(limit)
        now = self._clock.now()
        view = self._view
        # A hold (this process's, reported with this round trip if not yet) or the fleet's release after one:
        # the call takes its place from the fleet.
        if not (view.enabled or self._throttled or now >= self._next_sync or self._link.degraded
                or now < view.paced_until or self._hold.left(now) > 0.0):
            self._acquires += 1
            return
        reply = await self._run(want=1, max_wait=max_wait)
        if reply is None:
            # Redis cannot be reached: this process waits out its hold and paces its own release.
            held = await self._held(max_wait) if self._hold.set else 0.0
            if held > 0.0:
                self._waits += 1
                self._wait_time += held
                if max_wait is not None:
                    timeout = max(0.0, max_wait - held)
            try:
                await self._fallback.acquire(timeout=timeout)
            except RateLimitTimeout:
                self._timeouts += 1
                raise
            self._acquires += 1
            return
        granted, wait, due, release_at = reply
        if not granted:
            self._timeouts += 1
            raise RateLimitTimeout(name=self.name, wait=wait, timeout=max_wait if max_wait is not None else 0.0)
        started = self._clock.now()
        if wait > 0.0:
            await self._wait_for(due, wait, max_wait)
        now = self._clock.now()
        if self._hold.left(now) > 0.0 or release_at > now:
            # The fleet's hold (another process announced the quota spent), or its paced release: this call
            # waits for its place, its token kept.
            limit_left = None if max_wait is None else max(0.0, max_wait - (now - started))
            done = False
            try:
                extra = await self._held(limit_left, release_at)
                done = True
            finally:
                if not done:
                    self._give += 1  # the attempt will not happen: its token goes back with the next round trip
            self._waits += wait <= 0.0  # one wait per call (counted with the token's, if it had to wait)
            self._wait_time += extra
        self._acquires += 1

    def time_until_available(self) -> float:
        """Estimate, from the last round trip, how long :meth:`acquire` would wait (0 while not enabled
        and not held)."""
        now = self._clock.now()
        degraded = self._link.degraded
        held = 0.0
        if self._hold.set:
            held = self._hold.delay(now) if degraded else self._hold.left(now)
        if degraded:
            return max(held, self._fallback.time_until_available())
        view = self._view
        if now < view.paced_until:
            held = max(held, view.release_next - now)
        if not view.enabled:
            return held
        return max(held, (1.0 - view.available(now)) / view.rate(now))

    def hold(self, seconds: float | timedelta, *, reason: str = "quota spent") -> Awaitable[None]:
        """Admit nothing in this process for ``seconds``: the server announced its quota spent until then.

        As :meth:`AdaptiveRateLimiter.hold <asyncretry.AdaptiveRateLimiter.hold>` (synchronous: this process
        holds at once), and for the fleet: awaiting what it returns reports the hold to Redis (one round trip;
        the retry engine awaits it); left alone, the hold goes with this process's next :meth:`acquire`. Every
        other process holds from its next round trip on (at its next ``acquire`` once the fleet's limiter is
        enabled, within ``sync_interval`` before), with the reason ``"held by the fleet"``.

        Raises:
            ValueError: ``seconds`` is negative, infinite or NaN.
        """
        until = self._hold.until
        self._hold.extend(self._clock.now(), seconds, self._bus, self.name, reason)
        self._announce = self._announce or self._hold.until > until
        return _Later(self._tell)

    def pace(self, rate: float, *, reason: str = "quota pace") -> None:
        """Fill the fleet's bucket no faster than ``rate`` tokens per second for the next minute: the server
        said its quota admits that many requests per second.

        As :meth:`AdaptiveRateLimiter.pace <asyncretry.AdaptiveRateLimiter.pace>`, for the whole fleet: told to
        Redis with this process's round trips while it lasts (the pace that lasts longest, the last announced,
        wins), and kept by this process's local fallback for while Redis cannot be reached. Synchronous.

        Raises:
            ValueError: ``rate`` is not above 0 or not finite.
        """
        self._pace.announce(self._clock.now(), rate, self._bus, self.name, reason)
        self._fallback.pace(rate)

    async def _tell(self) -> None:
        if self._announce:  # else a round trip meanwhile told the fleet already
            await self._run(want=0, max_wait=None)

    def update(
        self, throttled: bool, *, reason: str = "throttling", sent_at: float | None = None, failed: bool = False
    ) -> None:
        """Count one response for the fleet (reported with the next round trip); synchronous and cheap.

        Args:
            throttled: whether the response was a throttling error.
            reason: why it counts as a throttle, for the :class:`~asyncretry.Throttled` event.
            sent_at: when the request was sent (local clock): the default profile's script tells echoes of
                a decrease from new congestion events by it (``None``: a tenth of ``measurement_window``
                before now); the ``"aws"`` profile ignores it.
            failed: the attempt failed for another reason (a 503); the ``"aws"`` profile counts it as
                the SDKs do (not a throttle).
        """
        # The local shadow, the fail-open fallback, sees every response.
        self._fallback.update(throttled, reason=reason, sent_at=sent_at, failed=failed)
        self._updates += 1
        now = self._clock.now()
        if not self._reported or now - self._last_answer > self._pause:
            # A pause: the answers before it say nothing of how fast the ones after it came.
            self._oldest = now
        self._last_answer = now
        self._reported += 1
        if throttled:
            self._throttles += 1
            self._throttled += 1
            if not self._aws and len(self._sends) < _MAX_SENDS:
                # The fleet tells a new congestion event from an echo of one it already reacted to by the
                # send time (whichever process reacted); without one, assume a tenth of a window before.
                sent = sent_at if sent_at is not None else now - self._echo_guard
                # A request this process sent free (before it heard that the fleet's limiter was enabled) is
                # part of the start-up's overshoot, whenever it went out: reported as sent long ago, it counts
                # as an echo of the start-up event, which refines the start and never cuts the rate again.
                self._sends.append(sent if sent >= self._free_until else -math.inf)
            if self._bus.wants(Throttled):
                self._bus.emit(Throttled(time=now, source=self.name, reason=reason))
        elif failed:
            self._failed += 1
        else:
            self._hold.served(now)
            if math.isnan(self._first_served):
                self._first_served = now

    async def refresh(self) -> RedisLimiterStatistics:
        """Report this process's responses and read the fleet's state now (one round trip)."""
        await self._run(want=0, max_wait=None)
        return self.statistics()

    def statistics(self) -> RedisLimiterStatistics:
        """Return the fleet's limiter as of the last round trip, with this process's counters."""
        link = self._link
        local = self._fallback.statistics()
        view = self._view
        fleet = not link.degraded
        now = self._clock.now()
        return RedisLimiterStatistics(
            name=self.name,
            enabled=view.enabled if fleet else local.enabled,
            fill_rate=view.fill_rate if fleet else local.fill_rate,
            max_capacity=view.max_capacity if fleet else local.max_capacity,
            available=view.available(now) if fleet else local.available,
            measured_rate=view.measured_rate if fleet else local.measured_rate,
            last_max_rate=view.last_max_rate if fleet else local.last_max_rate,
            last_throttle_time=view.last_throttle_time if fleet else local.last_throttle_time,
            rule=view.rule if fleet else local.rule,
            held=self._hold.left(now),
            holds=self._hold.count,
            paced=(view.pace if now < view.pace_until else None) if fleet else local.paced,
            holds_heard=self._heard,
            updates=self._updates,
            throttles=self._throttles,
            acquires=self._acquires,
            waits=self._waits,
            wait_time=self._wait_time,
            timeouts=self._timeouts,
            waiting=local.waiting + self._reserved,
            degraded=link.degraded,
            round_trips=link.round_trips,
            fallbacks=link.fallbacks,
        )

    def __repr__(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        where = "degraded" if self._link.degraded else "shared"
        return (
            f"<RedisAdaptiveRateLimiter {self.name!r} key={self._link.key!r} {state} "
            f"fill_rate={self.fill_rate:.4g}/s measured_rate={self.measured_rate:.4g}/s {where} "
            f"on_unavailable={self._link.on_unavailable!r}>"
        )

    # -- internals

    def _local(self) -> AdaptiveRateLimiter:
        return self._fallback

    def _oldest_answer(self, responses: int) -> str | int:
        """When the oldest of the ``responses`` reported now came, on the server's clock (0: as of the report).

        A report gathers the answers since the last round trip: the fleet's start counts them over the time
        they took to come, not as if they had all come at once. From this process's last pause on (see
        :meth:`update`); answers that a pause separates from the report, and those of the first round trip
        (the clocks' offset is not known yet), are given as of the report.
        """
        paused = self._clock.now() - self._last_answer > self._pause
        if not responses or paused or math.isnan(self._view.seen_at):
            return 0
        return fmt(self._oldest + self._offset)

    async def _run(self, *, want: int, max_wait: float | None) -> tuple[bool, float, float, float] | None:
        responses, throttles, give, failed = self._reported, self._throttled, self._give, self._failed
        self._reported = self._throttled = self._give = self._failed = 0
        served, first_served, self._first_served = responses - throttles - failed, self._first_served, math.nan
        before = self._clock.now()
        served_age = 0 if math.isnan(first_served) else fmt(before - first_served)
        hold_for = self._hold.left(before) if self._announce else 0.0
        self._announce = False
        pace_for = self._pace.left(before)
        pace = (fmt(self._pace.rate), fmt(pace_for)) if pace_for > 0.0 else (0, 0)
        args: tuple[str | int, ...]
        if self._aws:
            args = (SERVER_CLOCK, *self._args, responses, throttles, want, fmt(max_wait), give, self._key_ttl_ms,
                    fmt(hold_for), served, served_age, *pace)
        else:
            # Throttles beyond the ones whose send times travel count as echoes (sent long ago).
            sends, offset, self._sends = self._sends, self._offset, []
            args = (
                SERVER_CLOCK, *self._args, responses - throttles - failed, failed + throttles - len(sends), want,
                fmt(max_wait), give, self._key_ttl_ms, fmt(hold_for), self._oldest_answer(responses), served_age,
                *pace, *(fmt(max(sent + offset, 0.0)) for sent in sends),
            )
        # Reports and handed-back tokens go at most once (see _Link): a failed round trip may have run anyway.
        try:
            reply = await self._link.run(LIMITER if self._aws else LIMITER_ASYNCRETRY, args, report=not want)
        except BaseException:  # cancelled, or refused: the hold goes with the next round trip
            self._announce = self._announce or hold_for > 0.0
            raise
        now = self._clock.now()
        if reply is None:
            # Stale counts would skew the fleet's measured rate after the outage: only the tokens are kept,
            # and the hold (telling it twice is harmless: the fleet keeps the latest end).
            if not self._link.maybe_sent:
                self._give += give
            self._announce = self._announce or hold_for > 0.0
            return None
        self._next_sync = now + self._sync_interval
        view = self._view
        self._offset = view.read(reply, before, now)
        if not view.enabled:
            self._free_until = math.inf
        elif self._free_until == math.inf:
            self._free_until = now
        old_rate, rule = num(reply[10]), view.rule
        if responses and view.fill_rate != old_rate and rule is not None and self._bus.wants(LimiterRateChanged):
            self._bus.emit(LimiterRateChanged(
                time=now, source=self.name, old_rate=old_rate, new_rate=view.fill_rate,
                measured_rate=view.measured_rate, throttled=throttles > 0, enabled=view.enabled, rule=rule,
            ))
        # The fleet's hold ends that long after the script ran, which was after `before`: the earliest it may
        # end on this clock. This process's own announcement comes back as the very hold it has.
        left = num(reply[14])
        if left > 0.0 and before + left > self._hold.until + _SAME_HOLD:
            self._heard += 1
            self._hold.extend(before, left, self._bus, self.name, "held by the fleet")
        return bool(int(reply[0])), num(reply[1]), num(reply[12]), before + num(reply[15])
