"""The rate of one client of a fleet: what its congestion events' rate sets, never below a floor that climbs.

The ``"asyncretry"`` profile's controller
(:class:`~asyncretry._primitives._adaptive.AsyncretryRateController`) takes a client whose measurements
rest on few successes for one client of a fleet. Such a client cannot measure the server's capacity; it
can count how often the fleet congests the server. :class:`FleetBound` turns that count into a rate
(``fleet_event_rate``) and keeps the floor under it: cut to ``repeat_decrease`` of the rate the client
ran at on each event, climbing between events by the ``"fair"`` profile's additive step
(``fleet_climb``). Pure: it is told the time, it never reads a clock.
"""

from __future__ import annotations

import math

from ._adaptive_rules import fair_increase
from ._limiter_config import AdaptiveLimiterConfig, as_seconds

__all__ = ["FleetBound"]

# The memory of the event rate, in measurement windows: a few events.
_EVENT_MEMORY = 5.0
# The rate is this times the geometric mean of the sawtooth's mean at the client's event rate and at one
# event per measurement window: how much the fleet leans on the server (docs/benchmarks.md).
_FLEET_GAIN = 1.1


class FleetBound:
    """The congestion events one client counts, and the rate they set while it is one client of a fleet.

    Args:
        config: the ``"asyncretry"`` profile's constants (``repeat_decrease``, ``fair_step``,
            ``fair_reference``, ``fair_exponent``, ``fair_probe``, ``min_fill_rate``).
        start: the controller's start time, seconds.
        window: the measurement window, seconds.
        width: the shortest span an event rate is taken over, seconds.
        climbs: whether the floor climbs between events (``fleet_climb``).
    """

    __slots__ = (
        "_climbs",
        "_config",
        "_doubling",
        "_events_at",
        "_events_from",
        "_floor",
        "_floor_at",
        "_memory",
        "_width",
        "_window",
        "active",
        "events",
    )

    def __init__(
        self, config: AdaptiveLimiterConfig, start: float, *, window: float, width: float, climbs: bool
    ) -> None:
        self._config = config
        self._window = window
        self._width = width
        self._memory = _EVENT_MEMORY * window
        self._doubling = as_seconds(config.fair_probe)
        self._climbs = climbs
        self.active = False
        """Whether the client is one of a fleet: its rate is :meth:`rate`."""
        self.events = 0.0
        """The events counted at the last one, each weighing less as it ages."""
        self._events_at = self._events_from = start
        self._floor = 0.0
        self._floor_at = start

    @property
    def floor(self) -> float:
        """The lowest rate the events may set: cut at each event, climbing between them."""
        return self._floor

    def first_event(self, now: float) -> None:
        """Start counting at ``now`` with one event (the start-up's throttles)."""
        self.events, self._events_at, self._events_from = 1.0, now, now

    def count_event(self, now: float) -> None:
        """Count one congestion event at ``now``."""
        self.events = self.recent(now) + 1.0
        self._events_at = now

    def recent(self, now: float) -> float:
        """The events counted so far, each weighing less as it ages (over a few measurement windows)."""
        return self.events * math.exp((self._events_at - now) / self._memory)

    def cut(self, now: float, ran_at: float) -> None:
        """A congestion event of a fleet client that ran at ``ran_at``: the floor is cut to ``repeat_decrease``
        of it, and climbs from ``now``."""
        self.active = True
        self._floor = self._config.repeat_decrease * ran_at
        self._floor_at = now

    def rate(self, now: float) -> float:
        """The rate the events set (``fleet_event_rate``), never below the floor; 0 when not in a fleet."""
        if not self.active:
            return 0.0
        config = self._config
        memory = self._memory
        # The span the decayed count covers: events per second over it are the fleet's event rate.
        span = memory * -math.expm1((self._events_from - now) / memory)
        events_per_window = self.recent(now) / max(span, self._width) * self._window
        beta = config.repeat_decrease
        # The sawtooth's mean rate at one event per window; at the client's own event rate it is this over
        # events_per_window. Their geometric mean answers a count of a few events with half its noise.
        per_window = config.fair_step * (1.0 + beta) * self._window / (2.0 * (1.0 - beta))
        return max(_FLEET_GAIN * per_window / math.sqrt(events_per_window), self._floor)

    def climb(self, now: float, *, since_cut: float, ceiling: float) -> None:
        """Between events the floor climbs by the ``"fair"`` profile's step (``fleet_climb``), doubling every
        ``fair_probe`` of the ``since_cut`` seconds since the last decrease, never past ``ceiling``."""
        if not self._climbs:
            return
        config = self._config
        self._floor = fair_increase(
            max(self._floor, config.min_fill_rate),
            now - self._floor_at,
            step=config.fair_step,
            reference=config.fair_reference,
            probe=since_cut / self._doubling,
            exponent=config.fair_exponent,
            ceiling=ceiling,
        )
        self._floor_at = now

    def __repr__(self) -> str:
        return f"FleetBound(active={self.active!r}, events={self.events!r}, floor={self._floor!r})"
