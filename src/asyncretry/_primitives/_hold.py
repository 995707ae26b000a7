"""A limiter's hold: no attempt is admitted until a time the server named, then the waiters go out paced.

A server that announces its quota (``RateLimit: "default";r=0;t=30``, ``X-RateLimit-Remaining: 0`` with its
reset) says that every request before the reset will be refused, whoever sends it. The limiter of that
quota then holds: each :meth:`~asyncretry.AdaptiveRateLimiter.acquire` waits until the reset, and the
retries and new calls of every task that shares the limiter go out once the window is fresh instead of
each collecting its own 429.

Released all at once, the calls that waited would meet the fresh window together, and those beyond its
quota the spent window again. So they go out no faster than the limiter was served over the cycle before
the hold: the successes counted since the previous hold began (or since the first), over that time, and
at most over the hold's length (a limiter idle for an hour before a burst must not pace its burst over an
hour). A limiter served nothing over that cycle (its answers all throttled, or none came) counts as served
once: its waiters go out one per that span, the first when the hold ends. It has no pace of its own, and
in a fleet whose processes hold together, many such processes per window are common: released all at
once, every process's waiters would meet the fresh window together. A limiter that was never served (no
cycle yet) releases its waiters together. The waiters of the hold keep their places in the release; the
pacing of later calls lasts as long as the hold did, then ends.

The hold is the same for the in-process limiter and the one shared through Redis (a process holds on what
its own responses announce, and on what the fleet tells it), so it lives here, once, and both limiters keep
one. A fleet sharing a Redis limiter is released as one limiter would be: the fleet's script keeps the cycle
and the release for every process (the same rule, in Lua; a parity test feeds both the same cases), and each
process's own pace serves only while Redis cannot be reached.
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
    """Until when a limiter admits nothing, and the paced release after it.

    Attributes:
        until: the end of the hold, on the limiter's clock; ``-inf`` when there is none.
        count: the holds that began or were made longer (a shorter announcement changes nothing).
    """

    __slots__ = ("_next", "_paced_until", "_served", "_since", "_spacing", "count", "until")

    def __init__(self) -> None:
        self.until = _NONE
        self.count = 0
        self._served = 0  # successes since the cycle began ...
        self._since: float | None = None  # ... at the last hold's start, or at the first success
        self._spacing = 0.0  # seconds between two releases after the hold (0: no pacing)
        self._next = _NONE  # the next release's time
        self._paced_until = _NONE  # the release is paced until then

    @property
    def set(self) -> bool:
        """Whether a hold or its paced release may still run (a cheap test, without reading the clock)."""
        return self._paced_until != _NONE

    def served(self, now: float) -> None:
        """A success was answered at ``now``: the served rate the release after the next hold keeps to."""
        if self._since is None:
            self._since = now
        self._served += 1

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
        if self.until <= now:  # a new hold: the cycle before it sets the pace of the release after it
            span = min(now - self._since, seconds) if self._since is not None else 0.0
            self._spacing = span / max(self._served, 1) if self._since is not None else 0.0  # none: as one
            self._since, self._served = now, 0
            self._next = _NONE
        self._paced_until = until + (seconds if self._spacing > 0.0 else 0.0)  # paced as long as it held
        self.until = until
        self.count += 1
        if events.wants(LimiterHeld):
            events.emit(LimiterHeld(time=now, source=source, seconds=seconds, reason=reason))

    def left(self, now: float) -> float:
        """Seconds the hold itself still runs at ``now`` (0 once it is over)."""
        return max(0.0, self.until - now)

    def delay(self, now: float) -> float:
        """Seconds until an attempt may go at ``now``: the hold's end, then the next paced release."""
        if self.until > now:
            return self.until - now
        return self._release(now) - now

    def admit(self, now: float) -> bool:
        """Take the release due at ``now``, if one is (no hold runs and the pace allows it)."""
        if self.delay(now) > 0.0:
            return False
        if self.set:
            self._next = now + self._spacing
        return True

    def _release(self, now: float) -> float:
        """The time of the next paced release (``now`` when the release is not paced, or no longer)."""
        if now < self._paced_until:
            return max(self._next, now)
        self._paced_until = _NONE  # over: the limiters' cheap test says so from now on
        return now

    async def wait(self, clock: Clock, limit: float | None, name: str, *, paced: bool = True) -> float:
        """Wait until the hold is over (later if it is made longer meanwhile), then for a paced release
        (unless not ``paced``: a limiter whose release is paced elsewhere); the seconds waited.

        Cancellation is honoured at once: a cancelled wait takes nothing (a release it had taken is skipped).

        Args:
            clock: the limiter's clock.
            limit: the longest the caller allows, seconds from now (``None``: no limit).
            name: the limiter's name, for the error.

        Raises:
            RateLimitTimeout: the hold (or the release after it) runs past ``limit``; nothing was waited
                for (or, when a longer hold came meanwhile, only what was already waited).
        """
        started = now = clock.now()
        while True:
            while self.until > now:  # the hold (it may grow while this call waits)
                _check(limit, now - started, self.until - now, name)
                await clock.sleep(self.until - now)
                now = clock.now()
            if not paced:
                return now - started
            due = self._release(now)  # then its place in the paced release
            _check(limit, now - started, due - now, name)
            self._next = due + self._spacing
            if due <= now:
                return now - started
            await clock.sleep(due - now)
            now = clock.now()
            if self.until <= now:  # no new hold came while it waited for its release
                return now - started


def _check(limit: float | None, waited: float, due: float, name: str) -> None:
    """Refuse a wait of ``due`` more seconds after ``waited`` that would run past ``limit``."""
    if limit is not None and waited + due > limit:
        raise RateLimitTimeout(name=name, wait=waited + due, timeout=limit)
