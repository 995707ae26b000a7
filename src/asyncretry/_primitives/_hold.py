"""A limiter's hold: no attempt is admitted until a time the server named.

A server that announces its quota (``RateLimit: "default";r=0;t=30``, ``X-RateLimit-Remaining: 0`` with
its reset) says that every request before the reset will be refused, whoever sends it. The limiter of
that quota then holds: each :meth:`~asyncretry.AdaptiveRateLimiter.acquire` waits until the reset,
and the retries and new calls of every task that shares the limiter go out once the window is fresh
instead of each collecting its own 429.

The hold is the same for the in-process limiter and the one shared through Redis (each process holds
on what its own responses announce), so it lives here, once, and both limiters keep one.
"""

from __future__ import annotations

import math
from datetime import timedelta

from .._events import EventBus, LimiterHeld
from .._exceptions import RateLimitTimeout
from .._validate import check_seconds
from ._clock import Clock

__all__ = ["Hold"]

_NONE = -math.inf


class Hold:
    """Until when a limiter admits nothing, and how many times a hold began or grew longer.

    Attributes:
        until: the end of the hold, on the limiter's clock; ``-inf`` when there is none.
        count: the holds that began or were made longer (a shorter announcement changes nothing).
    """

    __slots__ = ("count", "until")

    def __init__(self) -> None:
        self.until = _NONE
        self.count = 0

    def extend(self, now: float, seconds: float | timedelta, events: EventBus, source: str, reason: str) -> None:
        """Hold until ``now + seconds``, unless already held at least that long; a
        :class:`~asyncretry.LimiterHeld` event when the hold moved.

        Args:
            now: the time on the limiter's clock.
            seconds: how long to hold from ``now``, seconds (>= 0, finite) or a ``timedelta``.
            events, source, reason: where the event goes, the limiter's name, what announced the hold.

        Raises:
            ValueError: ``seconds`` is negative, infinite or NaN.
        """
        seconds = check_seconds("seconds", seconds)
        until = now + seconds
        if until <= self.until or seconds <= 0.0:
            return
        self.until = until
        self.count += 1
        if events.wants(LimiterHeld):
            events.emit(LimiterHeld(time=now, source=source, seconds=seconds, reason=reason))

    @property
    def set(self) -> bool:
        """Whether a hold may still run (a cheap test, without reading the clock)."""
        return self.until != _NONE

    def left(self, now: float) -> float:
        """Seconds the hold still runs at ``now`` (0 once it is over, and then it is cleared)."""
        left = self.until - now
        if left > 0.0:
            return left
        self.until = _NONE
        return 0.0

    async def wait(self, clock: Clock, limit: float | None, name: str) -> float:
        """Wait until the hold is over (later if it is made longer meanwhile); the seconds waited.

        Cancellation is honoured at once: a cancelled wait takes nothing.

        Args:
            clock: the limiter's clock.
            limit: the longest the caller allows, seconds from now (``None``: no limit).
            name: the limiter's name, for the error.

        Raises:
            RateLimitTimeout: the hold runs past ``limit``; nothing was waited for (or, when a longer
                hold came meanwhile, only what was already waited).
        """
        started = now = clock.now()
        while True:
            left = self.left(now)
            if left <= 0.0:
                return now - started
            waited = now - started
            if limit is not None and waited + left > limit:
                raise RateLimitTimeout(name=name, wait=waited + left, timeout=limit)
            await clock.sleep(left)
            now = clock.now()
