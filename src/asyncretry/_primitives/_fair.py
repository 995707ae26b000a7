"""The ``"fair"`` profile's rate controller: a binomial AIMD whose every rule is a named step.

:class:`FairRateController` decides from what one client observes (its own send rate, its round trip,
the send times of its throttles), never from counts that hold at one fleet size: a multiplicative cut
once per congestion event, and an additive step that every client at the same rate takes alike and that
grows as ``rate ** fair_exponent`` (:func:`~asyncretry._primitives._adaptive_rules.fair_increase`), so
that the shares of a fleet of independent clients converge while slow clients are seldom throttled. A
throttle goes through :data:`FAIR_THROTTLE_STEPS` in order until one decides; a controller built with
``rules=`` lacking a name runs without that rule. The reasons behind each rule are in ``docs/adaptive-limiter.md``.
Pure and synchronous: the controller is told the time, it never reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .._events import LimiterRule
from ._adaptive_rules import chosen_steps, fair_decrease, fair_increase, start_rate
from ._limiter_config import AdaptiveLimiterConfig, as_seconds
from ._meters import RoundTrip, SlidingCounter

__all__ = ["FAIR_RULES", "FAIR_THROTTLE_STEPS", "FairRateController"]

FAIR_RULES = ("start_from_served", "one_decrease_per_event", "probe", "pace_without_backoff", "failures_hold")
"""The rules a ``"fair"`` controller can run without, one at a time (``rules=``); all of them by default.

* ``start_from_served``: the first throttle starts the rate at ``utilization`` of what was served so
  far (a share of what was sent if nothing was), not at the floor: the fast start from measured capacity.
* ``one_decrease_per_event``: a throttle of a request sent before the last decrease (or, without a send
  time, within a round trip of it) is an echo of the event already handled; without it every throttle cuts.
* ``probe``: the additive step doubles every ``fair_probe`` seconds since the last cut, the same for
  every client whatever its rate: a client seldom throttled (one below its share, one at the floor, or
  all of them after the capacity rose) catches up.
* ``pace_without_backoff``: once the limiter paces the client, its throttles need no throttling backoff
  from the retry engine: a backoff would silence the client's own measurement while the bucket paces it.
* ``failures_hold``: a failure that is not a throttle (a 503, a reset) neither grows nor cuts the rate;
  without it a failure counts as a success for the growth.

Always on, since they are the controller itself: the multiplicative ``decrease`` at a congestion event
and the additive increase on success; throttles are never read as an outage (a throttle is an answer).
"""

FAIR_THROTTLE_STEPS = ("start_from_served", "one_decrease_per_event", "decrease")
"""The order in which a throttle's steps run; the first that decides ends the sequence
(``decrease`` always runs when reached)."""

# The round trip assumed before any was measured, as a share of the measurement window.
_FIRST_RTT = 0.1
# The weight of the newest round trip in its moving average.
_RTT_WEIGHT = 0.2


@dataclass(slots=True)
class _Throttle:
    """One throttle on its way through the steps."""

    now: float
    sent: float


class FairRateController:
    """The ``"fair"`` profile: cut once per congestion event, grow by a step every client takes alike.

    Args:
        config: the constants (the ``fair_*`` ones, ``min_repeat_decrease``, ``utilization``,
            ``measurement_window``, ``burst`` and the shared ones).
        start: the limiter's start time, seconds.
        rules: the names of :data:`FAIR_RULES` to apply (default: all); a name left out switches it off.

    Raises:
        ValueError: ``rules`` names a rule that does not exist.
    """

    __slots__ = (
        "_answers",
        "_config",
        "_decreased_at",
        "_doubling",
        "_first",
        "_good",
        "_last",
        "_now",
        "_rtt",
        "_rules",
        "_start",
        "_starting",
        "_steps",
        "_window",
        "enabled",
        "fill_rate",
        "last_max_rate",
        "max_capacity",
        "rule",
    )

    def __init__(self, config: AdaptiveLimiterConfig, start: float, *, rules: Iterable[str] = FAIR_RULES) -> None:
        self._rules, steps = chosen_steps(rules, FAIR_RULES, FAIR_THROTTLE_STEPS)
        self._steps: tuple[Callable[[_Throttle], bool], ...] = tuple(getattr(self, f"_step_{n}") for n in steps)
        self._config = config
        window = self._window = as_seconds(config.measurement_window)
        self._doubling = as_seconds(config.fair_probe)  # read on every success
        self._good = SlidingCounter(window / 20, window, start)
        self._answers = SlidingCounter(window / 20, window, start)
        self._rtt = RoundTrip(_RTT_WEIGHT, first=_FIRST_RTT * window)
        self._start = self._now = self._last = start
        self._first = math.nan
        self._decreased_at = -math.inf
        self._starting = False
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
        return self._answers.rate(self._now, self._window)

    @property
    def last_throttle_time(self) -> float:
        """When the rate was last decreased (the start time before any throttle)."""
        return self._decreased_at if self.enabled else self._start

    @property
    def round_trip(self) -> float:
        """The moving average of the round trips measured from send times, seconds."""
        return self._rtt.value

    @property
    def answers_backoff(self) -> bool:
        """Whether the throttle just fed needs no throttling backoff from the engine: the limiter paces
        the client (``pace_without_backoff``)."""
        return self.enabled and "pace_without_backoff" in self._rules

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None:
        """Feed one response received at ``now`` to a request sent at ``sent_at`` (``None``: unknown).

        ``failed``: the attempt failed for another reason (a 503, a connection error): not a success.
        """
        self._now = now
        if self._first != self._first:  # NaN: the first response
            self._first = now
        self._answers.add(now)
        self._rtt.add(now, sent_at)
        sent = sent_at if sent_at is not None else now - self._rtt.value
        if self._starting and sent <= self._decreased_at and "start_from_served" in self._rules:
            # The rest of the first round trip's answers: a better start, never a lower one.
            if not (throttled or failed):
                self._good.add(now)
            self._set(max(self.fill_rate, self._start_estimate(now)), "start_from_served")
            self._last = now
            return
        if throttled:
            event = _Throttle(now, sent)
            for step in self._steps:
                if step(event):
                    break
        elif not failed or "failures_hold" not in self._rules:
            self._success(now, counted=not failed)
        self._last = now

    def _success(self, now: float, *, counted: bool) -> None:
        if counted:
            self._good.add(now)
        if not self.enabled:
            return
        config = self._config
        probe = 0.0
        if "probe" in self._rules:
            # Doubling with the time since the cut, alike for every client: one that is seldom throttled
            # (below its share, or every client after the capacity rose) catches up.
            probe = (now - self._decreased_at) / self._doubling
        self._set(
            fair_increase(
                self.fill_rate,
                now - self._last,
                step=config.fair_step,
                reference=config.fair_reference,
                probe=probe,
                exponent=config.fair_exponent,
                ceiling=config.max_rate_growth * max(self._sending(now), 1.0 / self._window),
            ),
            "increase",
        )

    # --- the throttle's steps, in the order of FAIR_THROTTLE_STEPS: True when the step decided

    def _step_start_from_served(self, event: _Throttle) -> bool:
        """The first throttle starts the rate at ``utilization`` of the served rate so far."""
        if self.enabled:
            return False
        self.enabled = self._starting = True
        self._decreased_at = event.now
        self._set(self._start_estimate(event.now), "start_from_served")
        self.last_max_rate = self.fill_rate
        return True

    def _start_estimate(self, now: float) -> float:
        """``utilization`` of what was served since the first answer (or of a share of what was sent), counted
        as the default profile's start counts it: every answer so far over the time since the first plus a slot."""
        config = self._config
        first, window = self._first, self._window
        answered = self._answers.rate_so_far(now, first, window)
        served = start_rate(
            self._good.rate_so_far(now, first, window), answered, min_repeat_decrease=config.min_repeat_decrease
        )
        return config.utilization * max(served, config.min_repeat_decrease * answered)

    def _step_one_decrease_per_event(self, event: _Throttle) -> bool:
        """A throttle of a request sent before the last decrease is an echo of the event handled then."""
        return event.sent <= self._decreased_at

    def _step_decrease(self, event: _Throttle) -> bool:
        """A congestion event: cut to ``fair_decrease`` of the rate (or of what was sent, if less)."""
        config = self._config
        self.enabled = True
        self._starting = False
        self.last_max_rate = self.fill_rate
        self._decreased_at = event.now
        self._set(
            fair_decrease(
                self.fill_rate, self._sending(event.now), beta=config.fair_decrease, floor=config.fair_floor
            ),
            "decrease",
        )
        return True

    def _sending(self, now: float) -> float:
        """Answers per second lately: over the last window, or since the first answer if that is shorter."""
        return self._answers.rate(now, min(self._window, max(now - self._first, self._rtt.value, self._window / 20)))

    def _set(self, rate: float, rule: LimiterRule) -> None:
        config = self._config
        self.rule = rule
        rate = max(rate, config.fair_floor)
        self.fill_rate = rate
        self.max_capacity = max(rate * as_seconds(config.burst), config.min_capacity)

    def __repr__(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return (
            f"FairRateController({state}, fill_rate={self.fill_rate!r}, "
            f"measured_rate={self.measured_rate!r}, round_trip={self._rtt.value!r})"
        )
