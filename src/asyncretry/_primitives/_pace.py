"""A limiter's announced pace: the most requests per second a server said its quota admits.

A server that says its quota and window (``RateLimit-Policy: "second";q=20;w=1``) admits ``q`` requests per
``w`` seconds. Where the window is long enough to wait for its reset, the limiter holds when the quota is
spent (:mod:`._hold`). A window of one second announced in whole seconds cannot be held: its reset (``t=1``)
may come at any moment of the next second. There, the limiter's bucket fills no faster than ``q / w``
instead: sent no faster, a window never runs out early, and the limiter's probes above the quota, each of
which costs the rest of a window's requests, end. The adaptive rate still rules below the pace.

The pace lasts :data:`PACE_LASTS` seconds from the last answer that announced it, so that a server that
stops announcing its quota (or lifts it without saying) is probed again within a minute. A later
announcement replaces an earlier one, a higher pace included.

The in-process limiter and the one shared through Redis both keep one; the fleet's script keeps the
fleet's (the same rule, in Lua; a parity test feeds both the same cases).
"""

from __future__ import annotations

import math

from .._events import EventBus, LimiterPaced
from .._validate import check_number

__all__ = ["PACE_LASTS", "Pace"]

PACE_LASTS = 60.0
"""Seconds an announced pace lasts after the last answer that announced it."""


class Pace:
    """The pace a server announced, and until when it holds (clock seconds)."""

    __slots__ = ("rate", "until")

    def __init__(self) -> None:
        self.rate = math.inf
        self.until = -math.inf

    def announce(self, now: float, rate: float, events: EventBus, source: str, reason: str) -> None:
        """A server announced at ``now`` that its quota admits ``rate`` requests per second; a
        :class:`~asyncretry.LimiterPaced` event when a pace begins or its rate changes.

        Args:
            now: the time on the limiter's clock.
            rate: requests per second, above 0 and finite.
            events, source, reason: where the event goes, the limiter's name, what announced the pace.

        Raises:
            ValueError: ``rate`` is not above 0 or not finite.
        """
        rate = check_number("rate", rate, low=0.0, low_open=True)
        changed = rate != self.cap(now)
        self.rate, self.until = rate, now + PACE_LASTS
        if changed and events.wants(LimiterPaced):
            events.emit(LimiterPaced(time=now, source=source, rate=rate, reason=reason))

    @property
    def heard(self) -> bool:
        """Whether a pace was ever announced (one may run, or have lapsed since)."""
        return self.until > -math.inf

    def cap(self, now: float) -> float:
        """The most requests per second the announced pace allows at ``now`` (``inf``: none runs)."""
        return self.rate if now < self.until else math.inf

    def left(self, now: float) -> float:
        """Seconds the pace still lasts at ``now`` (0: none runs)."""
        return max(0.0, self.until - now)
