"""The ``"asyncretry"`` profile's rate controller: each rule a named step, applied in a written order.

:class:`AsyncretryRateController` measures the capacity a server admits between two throttles, holds
just below it, reacts once per congestion event and probes now and then for more. Its rules are the
names in :data:`RULES`; a throttle goes through :data:`THROTTLE_STEPS` in that order until one step
decides the new rate, and a controller built with ``rules=`` lacking a name runs without that rule,
so each rule can be tested on its own. The reasons behind each rule are in ``docs/adaptive-limiter.md``.
Pure and synchronous: the controller is told the time, it never reads a clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta

from .._events import LimiterRule
from ._adaptive_rules import (
    INDEPENDENT_RULES,
    RULES,
    SHARE_RULES,
    THROTTLE_STEPS,
    chosen_steps,
    grown_rate,
    hold_after,
    repeat_cut,
    share_stretch,
    start_rate,
)
from ._fleet_bound import FleetBound
from ._limiter_config import AdaptiveLimiterConfig, as_seconds
from ._meters import RoundTrip, SlidingCounter

__all__ = ["INDEPENDENT_RULES", "RULES", "SHARE_RULES", "THROTTLE_STEPS", "AsyncretryRateController"]

# The fewest unserved responses in a row that can show an outage (``outage``).
_OUTAGE_EVIDENCE = 3
# Below this many times fair_count successes an estimate grows by fair_step and probes more slowly
# (``few_successes``); a larger factor also slows one limiter serving all the traffic after its capacity rose.
_FAIR_PROBE = 2.0
# The share of a window's successes at the estimate that counts as evidence in the first measurement after
# an outage (``few_successes``): one limiter whose callers an open breaker held back must not count as few.
_PREDICTED_EVIDENCE = 0.5
# So few successes before the first throttle are luck, not capacity (``few_successes``'s fair start).
_LUCKY_START = 3
# The fewest recent events (the start-up's counts as one) that set a fleet client's rate (``fleet_event_rate``).
_FLEET_EVENTS = 2.0
# How much of each round trip's departure from the smoothed one it takes in (``rtt_probe``), as TCP's
# smoothed round trip does: 1/8.
_RTT_GAIN = 0.125


@dataclass(slots=True)
class _Throttle:
    """One throttle on its way through the steps."""

    now: float
    sent: float
    fresh: bool
    new_episode: bool = False
    was_few: bool = False
    capacity: float = 0.0


class AsyncretryRateController:
    """The ``"asyncretry"`` profile: measure the server's capacity, hold just below it, probe now and then.

    AWS's CUBIC limiter estimates the capacity from its own *send* rate and cuts it by 0.7 on *every*
    throttle; this controller measures what the server admitted between two throttles instead (a
    throttle means the server's bucket was empty), restarts at ``utilization`` of it once per
    congestion event, climbs back along a concave curve and then probes above it, doubling every
    ``probe_doubling_time``. The rules it applies on top are :data:`RULES`; a throttle runs through
    :data:`THROTTLE_STEPS` in order. The bucket holds ``burst`` seconds of the fill rate, so a pause
    does not end in a burst the server would throttle.

    Args:
        config: the constants (the ``"asyncretry"`` ones and the shared ones).
        start: the limiter's start time, seconds.
        rules: the names of :data:`RULES` and :data:`SHARE_RULES` to apply (default: :data:`RULES`); a name
            left out switches that rule off.

    Raises:
        ValueError: ``rules`` names a rule that does not exist.
    """

    __slots__ = (
        "_after_start",
        "_before_outage",
        "_burst",
        "_config",
        "_counted",
        "_decreased_at",
        "_doubling",
        "_echo_guard",
        "_event_at",
        "_evidence",
        "_few",
        "_few_evidence",
        "_first_response",
        "_fleet",
        "_fresh_successes",
        "_fresh_throttles",
        "_good",
        "_horizon",
        "_last_good",
        "_marks",
        "_now",
        "_outage",
        "_reaction",
        "_recovery",
        "_responses",
        "_restart_fraction",
        "_resumed",
        "_rtt",
        "_rtt_doubling",
        "_rules",
        "_shared_at",
        "_stable",
        "_start",
        "_starting",
        "_steps",
        "_stretch",
        "_unserved",
        "_width",
        "_window",
        "enabled",
        "fill_rate",
        "last_max_rate",
        "max_capacity",
        "rule",
    )

    def __init__(self, config: AdaptiveLimiterConfig, start: float, *, rules: Iterable[str] = RULES) -> None:
        self._rules, steps = chosen_steps(rules, RULES + SHARE_RULES, THROTTLE_STEPS)
        self._steps: tuple[Callable[[_Throttle], bool], ...] = tuple(getattr(self, f"_step_{n}") for n in steps)
        self._config = config
        # Fewer successes than this behind an estimate mark one client of a fleet (the fleet rules); with
        # few_successes, such an estimate also grows by fair_step.
        self._few_evidence = _FAIR_PROBE * config.fair_count
        self._few = self._few_evidence if "few_successes" in self._rules else 0.0
        # The durations as plain floats, read on every update.
        window = self._window = as_seconds(config.measurement_window)
        self._reaction = as_seconds(config.reaction_time)
        self._doubling = as_seconds(config.probe_doubling_time)
        # The probe's doubling time in smoothed round trips (rtt_probe); 0: the round trip does not count.
        self._rtt_doubling = config.probe_rtts if "rtt_probe" in self._rules else 0.0
        self._rtt = RoundTrip(_RTT_GAIN)
        self._burst = as_seconds(config.burst)
        self._width = window / 20
        self._good = SlidingCounter(self._width, window, start)
        self._responses = SlidingCounter(self._width, window, start)
        self._echo_guard = window / 10
        # A reference throttle must reach back over a whole recovery and probe.
        self._horizon = 4 * max(as_seconds(config.recovery_time), window)
        # (send time, successes before it, answers before it) of recent throttles, one per slot at most.
        self._marks: deque[tuple[float, int, int]] = deque()
        self._start = start
        self._now = start
        self._first_response = math.nan
        self._decreased_at = -math.inf
        self._event_at = -math.inf
        self._fresh_successes = 0
        self._fresh_throttles = 0
        self._starting = False
        # Whether the last decrease was the start-up's (share_recovery does not count the throttle after it).
        self._after_start = False
        self._outage = False
        self._before_outage = 0.0
        self._recovery = as_seconds(config.quick_recovery_time)
        self._restart_fraction = config.utilization
        self._last_good = start
        self._unserved = 0
        self._counted = 0.0
        self._evidence = 0.0
        self._fleet = FleetBound(config, start, window=window, width=self._width, climbs="fleet_climb" in self._rules)
        self._resumed = False
        self._stable = start
        # When a throttle last came below the estimate (share_recovery), and the recovery's and probe's factor.
        self._shared_at = -math.inf
        self._stretch = 1.0
        self.enabled = False
        self.fill_rate = config.min_fill_rate
        self.max_capacity = config.min_capacity
        self.last_max_rate = 0.0
        # The rule that last set the fill rate; None before any did.
        self.rule: LimiterRule | None = None

    @property
    def rules(self) -> frozenset[str]:
        """The rules this controller applies."""
        return self._rules

    @property
    def measured_rate(self) -> float:
        """Responses per second over the last ``measurement_window``."""
        return self._responses.rate(self._now, self._window)

    @property
    def last_throttle_time(self) -> float:
        """When the rate was last decreased (the start time before any throttle)."""
        return self._decreased_at if self.enabled else self._start

    @property
    def answers_backoff(self) -> bool:
        """Whether the throttle just fed needs no throttling backoff from the retry engine: one of the
        start-up's throttles, which the start of the rate already answered (``start_answers_backoff``),
        or one of a fleet client whose rate its events set (``fleet_event_rate``), or any once the limiter is
        enabled (``pace_without_backoff``)."""
        rules = self._rules
        if self.enabled and "pace_without_backoff" in rules:
            return True
        return (self._starting and "start_answers_backoff" in rules) or self._fleet.active

    @property
    def in_outage(self) -> bool:
        """Whether nothing was served for a whole window: the rate is probing for the end of an outage."""
        return self._outage

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None:
        """Feed one response received at ``now`` to a request sent at ``sent_at`` (``None``: unknown).

        ``failed``: the attempt failed for another reason (a 503, a connection error): not a success.
        """
        self._now = now
        if self._first_response != self._first_response:  # NaN: the first response
            self._first_response = now
        self._responses.add(now)
        # Without send times, assume each request went out a little before its answer came back.
        sent = sent_at if sent_at is not None else now - self._echo_guard
        self._rtt.add(now, sent_at)
        fresh = sent > self._decreased_at or "one_decrease_per_event" not in self._rules
        if throttled:
            self._unserved += 1
            self._mark(sent)
            event = _Throttle(now, sent, fresh)
            for step in self._steps:
                if step(event):
                    break
        elif failed:
            # Neither a throttle nor a success: it says nothing of the capacity, only of an outage.
            self._unserved += 1
            if self.enabled and not self._outage and self._no_service(now):
                self._enter_outage(now)
        else:
            self._success(now, fresh)

    def _success(self, now: float, fresh: bool) -> None:
        self._good.add(now)
        self._last_good = now
        self._unserved = 0
        if not self.enabled:
            return
        if self._starting and not fresh and "start_up" in self._rules:
            self._start_up(now)  # more answers of the first round trip: a better start
            return
        if fresh:
            self._fresh_successes += 1
        if self._outage:
            self._outage = False
            config = self._config
            self._restart(now, self._before_outage, config.utilization, config.quick_recovery_time, "outage")
            self._resumed = True
        else:
            self._grow(now)

    # --- the throttle's steps, in the order of THROTTLE_STEPS: True when the step decided

    def _step_start_up(self, event: _Throttle) -> bool:
        """The first throttles (the first round trip's answers) start the rate from what was served."""
        if self.enabled and not (self._starting and not event.fresh):
            return False
        self._start_up(event.now)
        return True

    def _step_one_decrease_per_event(self, event: _Throttle) -> bool:
        """A throttle of a request sent before the last decrease is an echo of the event handled then."""
        return not event.fresh

    def _step_count_event(self, event: _Throttle) -> bool:
        """Count the congestion event (its rate sets a fleet client's rate) and its episode."""
        now = event.now
        self.enabled = True
        self._starting = False
        self._fleet.count_event(now)
        event.new_episode = now - self._event_at > self._window
        self._event_at = now
        return False

    def _step_outage(self, event: _Throttle) -> bool:
        """Nothing served for a whole window, with enough answers to tell: an outage, not a capacity. Not for
        a client never served: throttled from its first request on, it has not won a share yet."""
        if self._good.total == 0 or not self._no_service(event.now):
            return False
        self._enter_outage(event.now)
        return True

    def _step_repeat_cut(self, event: _Throttle) -> bool:
        """Right after a decrease, a second fresh throttle means the decrease was not enough."""
        if event.sent - self._decreased_at >= self._reaction:
            return False
        self._fresh_throttles += 1
        if self._fresh_throttles >= 2:
            config = self._config
            cut = repeat_cut(
                self._fresh_successes,
                self._fresh_throttles,
                repeat_decrease=config.repeat_decrease,
                min_repeat_decrease=config.min_repeat_decrease,
            )
            self._restart(event.now, self.fill_rate, cut, config.quick_recovery_time, "repeat_cut")
        # One alone: right after a decrease the server's bucket is still empty, bad luck maybe.
        return True

    def _step_measure(self, event: _Throttle) -> bool:
        """Measure the capacity; with nothing served since the reference, a plain decrease."""
        config = self._config
        event.was_few = self._evidence < self._few_evidence
        if self.fill_rate < self.last_max_rate and "share_recovery" in self._rules and not self._after_start:
            # Throttled below the estimate: others share the server. Not right after the start-up, whose
            # rate starts below what was served and whose first round trip emptied the server's bucket.
            self._shared_at = event.now
        event.capacity = self._measure(event.now, event.sent)
        if event.capacity <= 0.0:
            # Nothing served since the reference, but too little sent to call it an outage (a client
            # back from a long backoff): a plain decrease.
            self._restart(event.now, self.fill_rate, config.repeat_decrease, config.quick_recovery_time, "measure")
            return True
        if event.new_episode:
            self._before_outage = event.capacity
        return False

    def _step_fleet_event_rate(self, event: _Throttle) -> bool:
        """A fleet client (few successes behind this measurement and the one before, not one limiter back
        from a long sleep, and enough recent events to tell their rate) takes the rate its events set, but
        is never cut by more than ``repeat_decrease`` of the rate it ran at (its fill rate, or what it was
        served over the last window if that is less): few successes also come from one limiter in front of
        a slow server, or from a client whose engine backoff kept it from sending, which the events' rate
        alone would starve."""
        config = self._config
        fleet = self._fleet
        fleet.active = False
        few = event.was_few and self._evidence < self._few_evidence
        if config.fair_step > 0.0 and few and fleet.events >= _FLEET_EVENTS:
            fleet.cut(event.now, min(self.fill_rate, self._good.rate(event.now, self._window)))
        rate = fleet.rate(event.now)
        if rate <= 0.0:
            return False
        self._restart(event.now, rate, 1.0, config.recovery_time, "fleet_event_rate")
        return True

    def _step_few_successes(self, event: _Throttle) -> bool:
        """Too few successes to measure anything (one client of a fleet): a plain multiplicative decrease
        of the rate, held, so that the additive fair step evens the shares out."""
        config = self._config
        if self._evidence >= config.fair_count:
            return False
        self._restart(event.now, config.repeat_decrease * self.fill_rate, 1.0, config.recovery_time, "few_successes")
        return True

    def _step_restart_below_capacity(self, event: _Throttle) -> bool:
        """Restart at ``utilization`` of the measured capacity, held as long as the estimate has held."""
        capacity = event.capacity
        self._restart(
            event.now, capacity, self._config.utilization, self._recovery_after(capacity), "restart_below_capacity"
        )
        return True

    # --- what the steps share

    def _no_service(self, now: float) -> bool:
        """Whether this is an outage (``outage``): nothing served for a whole window, and enough sent
        meanwhile to tell (a client that slept through the window, in a backoff, has not)."""
        if now - self._last_good < self._window or "outage" not in self._rules:
            return False
        return self._unserved >= max(_OUTAGE_EVIDENCE, 0.5 * self.fill_rate * self._window)

    def _recovery_after(self, capacity: float) -> float:
        """The recovery time after a measurement: up to ``recovery_time`` when it confirms the previous
        one, shortening continuously to ``quick_recovery_time`` as it departs from it by half to all of
        ``stable_change`` (a hard threshold turned measurement noise into a coin toss between 2.5 s and
        0.5 s); and only as the estimate has held for ``settle_time`` (a capacity that changes every few
        seconds is probed every few seconds)."""
        config = self._config
        quick = as_seconds(config.quick_recovery_time)
        # A count of n successes is only known to about 1/sqrt(n): a client that serves few requests
        # (one of a fleet) must not read its counting noise as a changed capacity.
        hold, held = hold_after(
            self.last_max_rate,
            capacity,
            self._counted,
            held=self._now - self._stable,
            stable_change=config.stable_change,
            quick=quick,
            slow=as_seconds(config.recovery_time),
            settle=as_seconds(config.settle_time),
        )
        self._stable = self._now - held
        return hold

    def _start_up(self, now: float) -> None:
        """The first throttles: start from what was served so far (``start_up``)."""
        config = self._config
        # Every answer so far over the time since the first plus a slot: a first throttle says the server's
        # bucket is spent, and the slot takes its burst as a slot's worth of its rate.
        first, window = self._first_response, self._window
        served, answered = self._good.rate_so_far(now, first, window), self._responses.rate_so_far(now, first, window)
        counted = float(self._good.total)
        sent_share = config.min_repeat_decrease * answered
        if served <= 0.0:
            # Throttled before any success (one client of a fleet that started together): start from
            # a share of what was sent, not at the floor with nothing measured to grow from.
            served = start_rate(served, answered, min_repeat_decrease=config.min_repeat_decrease)
        elif self._good.total < _LUCKY_START and self._few > 0:
            # A success or two (one client of a fleet, served in the first round trip while most were
            # throttled) is luck, not capacity: no more than the share a throttled client starts from.
            served, counted = min(served, sent_share), 0.0
        self._evidence = max(self._evidence, counted)
        served = max(served, self._before_outage)
        if not self.enabled:
            self._fleet.first_event(now)  # the start-up: one event
        decreased_at = self._decreased_at if self.enabled else now
        self.enabled = True
        self._starting = True
        self._before_outage = served
        self._restart(now, served, config.repeat_decrease, config.quick_recovery_time, "start_up")
        self._decreased_at = decreased_at  # echoes of the same round trip do not move the event
        self._after_start = True

    def _measure(self, now: float, sent: float) -> float:
        """The server's capacity, measured at a new congestion event ."""
        config = self._config
        reaction = self._reaction
        capacity = -1.0
        counted = 0.0
        for mark_sent, mark_served, mark_answered in reversed(self._marks):
            if mark_sent <= sent - reaction:
                # The server's bucket was empty at both throttles: what it admitted in between is its rate.
                counted = self._good.total - mark_served
                capacity = counted / (sent - mark_sent)
                answered = self._responses.total - mark_answered
                if answered < 0.5 * self.last_max_rate * (sent - mark_sent):
                    # This client sent far less than its estimate allowed (it slept in a backoff, or had
                    # little to send): what it got is its demand, not the server's capacity.
                    capacity = max(capacity, self.last_max_rate)
                break
        span = min(self._window, now - self._decreased_at)
        served = self._good.rate(now, span)
        if capacity < 0.0 or served > (1.0 + config.growth_margin) * capacity:
            # No reference, or one from before the capacity grew (the server's bucket overflowed
            # while we sent less than it allowed): what it served lately measures it better.
            capacity = served
            counted = served * span
        probe_start = self._decreased_at + self._recovery
        if sent - probe_start >= self._width and now - probe_start <= self._window:
            # A small server burst cannot hide a capacity above the estimate from the probe.
            probed = self._good.rate(now, now - probe_start)
            capacity = max(capacity, min(probed, (1.0 + config.probe_lift) * capacity))
        self._counted = counted
        # What a fleet's rules (``few_successes``) go by: the successes behind this measurement, or those of the
        # last window if more (a measurement soon after a decrease spans little time, whatever the rate);
        # right after an outage, whose window held the outage, also half of what the estimate predicted.
        window = self._window
        predicted = _PREDICTED_EVIDENCE * self.last_max_rate * window if self._resumed else 0.0
        self._resumed = False
        self._evidence = max(counted, self._good.rate(now, window) * window, predicted)
        return min(capacity, self.fill_rate)

    def _restart(
        self, now: float, capacity: float, fraction: float, recovery: float | timedelta, rule: LimiterRule
    ) -> None:
        """Decrease to ``fraction`` of ``capacity`` and recover towards it (``rule`` decided)."""
        self.last_max_rate = capacity
        self._decreased_at = now
        self._fresh_successes = self._fresh_throttles = 0
        self._after_start = False
        self._restart_fraction = fraction
        self._stretch = 1.0
        if now - self._shared_at < self._horizon:
            config = self._config
            self._stretch = share_stretch(
                max(capacity, config.min_fill_rate), reference=config.share_reference, exponent=config.share_exponent
            )
        self._recovery = as_seconds(recovery) * self._stretch
        self._set(fraction * capacity, rule)

    def _enter_outage(self, now: float) -> None:
        """Nothing served: probe slowly, remembering the capacity from before (``outage``)."""
        self._outage = True
        self._fleet.active = False
        self._decreased_at = now
        self._after_start = False
        self._set(self._config.outage_probe * self._before_outage, "outage")

    def _grow(self, now: float) -> None:
        """Concave recovery to the capacity, then an exponential probe above it ."""
        config = self._config
        fleet = self._fleet
        if fleet.active:
            # A fleet client: its events set the rate (``fleet_event_rate``) over a climbing floor (``fleet_climb``).
            ceiling = config.max_rate_growth * self._responses.rate(now, self._window)
            fleet.climb(now, since_cut=now - self._decreased_at, ceiling=ceiling)
            self._set(fleet.rate(now), "fleet_climb")
            return
        capacity = max(self.last_max_rate, config.min_fill_rate)
        elapsed = now - self._decreased_at
        recovery = self._recovery
        # Never faster than the round trip lets the probe see its own overshoot (rtt_probe).
        doubling = max(self._doubling, self._rtt_doubling * self._rtt.value) * self._stretch
        step = 0.0
        few = self._few
        if self._evidence < few:
            # An estimate from few successes (one client of a fleet): an additive step the whole fleet
            # shares evens the shares out, and a slower probe keeps lucky clients from running away.
            step = config.fair_step * elapsed
            doubling *= few / max(self._evidence, 1.0)
        # Never beyond max_rate_growth times what was really sent (or the capacity, for a client that
        # sends so slowly that a short span of responses cannot measure it).
        sending = self._responses.rate(now, self._reaction) if elapsed >= recovery else 0.0
        self._set(
            grown_rate(
                capacity,
                fraction=self._restart_fraction,
                elapsed=elapsed,
                hold=recovery,
                doubling=doubling,
                step=step,
                sending=sending,
                max_rate_growth=config.max_rate_growth,
            ),
            "recovery" if elapsed < recovery else "probe",
        )

    def _set(self, rate: float, rule: LimiterRule) -> None:
        config = self._config
        self.rule = rule
        rate = max(rate, config.min_fill_rate)
        self.fill_rate = rate
        self.max_capacity = max(rate * self._burst, config.min_capacity)

    def _mark(self, sent: float) -> None:
        marks = self._marks
        if marks and sent - marks[-1][0] < self._width:
            marks[-1] = (sent, self._good.total, self._responses.total)  # one reference per slot is enough
        else:
            marks.append((sent, self._good.total, self._responses.total))
        while marks[0][0] < sent - self._horizon:
            marks.popleft()

    def __repr__(self) -> str:
        state = "outage" if self._outage else "enabled" if self.enabled else "disabled"
        return (
            f"AsyncretryRateController({state}, fill_rate={self.fill_rate!r}, "
            f"capacity={self.last_max_rate!r}, measured_rate={self.measured_rate!r})"
        )
