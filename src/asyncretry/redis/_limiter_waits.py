"""How a call waits on the fleet's limiter: for its token in the fleet's bucket, and for its place in the
release after the fleet's hold.

A call waiting for its token hears from the fleet every ``sync_interval`` (a round trip), so that a cut in
the fleet's rate that another process made meanwhile moves its wake-up; a call waiting for its place hears
once, before it goes, whether a newer hold overtook its place. A mixin
of :class:`~._limiter.RedisAdaptiveRateLimiter`, whose state (the last round trip's view, the hold, the
counters) the waits share.
"""

from __future__ import annotations

import math

from .._exceptions import RateLimitTimeout
from .._primitives._clock import Clock
from .._primitives._hold import Hold
from ._limiter_view import _View
from ._link import _Link

__all__: list[str] = []


class _Waits:
    """The waits of :class:`~._limiter.RedisAdaptiveRateLimiter` (see the module documentation)."""

    # The counters the waits keep (the limiter shows them in its statistics).
    __slots__ = ("_give", "_reserved", "_timeouts", "_wait_time", "_waits")
    name: str
    _clock: Clock
    _hold: Hold
    _link: _Link
    _view: _View
    _sync_interval: float
    _offset: float
    _reserved: int  # calls waiting for their token
    _give: int  # tokens to hand back with the next round trip
    _timeouts: int
    _waits: int
    _wait_time: float

    async def _run(self, *, want: int, max_wait: float | None) -> tuple[bool, float, float, float] | None:
        raise NotImplementedError  # the limiter's round trip

    async def _held(self, limit: float | None, release_at: float = -math.inf) -> float:
        """Wait until ``release_at`` (the place the fleet gave this call in the release after its hold), then
        out the hold; the seconds waited. A hold that came after the place was given ends in a release of its
        own, where the call takes a new place. Only while Redis cannot be reached does this process pace its
        own release. A wait that would run past ``limit`` seconds raises ``RateLimitTimeout`` at once,
        counted among the timeouts."""
        started = self._clock.now()
        try:
            await self._to_place(started, limit, release_at)
        except RateLimitTimeout:
            self._timeouts += 1
            raise
        return self._clock.now() - started

    async def _to_place(self, started: float, limit: float | None, release_at: float) -> None:
        clock = self._clock

        def left() -> float | None:
            """What is left of the caller's ``limit`` now (``None``: no limit)."""
            return None if limit is None else max(0.0, limit - (clock.now() - started))

        while True:
            overtaken = False
            if release_at > clock.now():
                remaining = left()
                if remaining is not None and release_at - clock.now() > remaining:
                    raise RateLimitTimeout(name=self.name, wait=release_at - started, timeout=limit or 0.0)
                overtaken = await self._sleep_until(release_at)
            held = await self._hold.wait(clock, left(), self.name, paced=self._link.degraded)
            if not (held or overtaken):
                return
            reply = None if self._link.degraded else await self._run(want=2, max_wait=left())
            if reply is None:
                return  # paced by this process (Redis cannot be reached)
            granted, wait, _, release_at = reply
            if not granted:
                raise RateLimitTimeout(name=self.name, wait=clock.now() - started + wait, timeout=limit or 0.0)

    async def _sleep_until(self, release_at: float) -> bool:
        """Sleep until a place in the fleet's release, then hear from the fleet (one round trip) before the
        call goes; whether a newer hold overtook the place meanwhile (the fresh window spent again, whichever
        process announced it): its release is a new one, where the call takes a new place."""
        until = self._hold.until
        await self._clock.sleep(release_at - self._clock.now())
        return await self._run(want=0, max_wait=None) is not None and self._hold.until > until

    async def _wait_for(self, due: float, wait: float, max_wait: float | None) -> None:
        """Sleep until the fleet's bucket has taken in ``due`` tokens, re-planning every ``sync_interval``.

        The fleet's rate may change while this call sleeps (a throttle elsewhere cuts it, CUBIC grows
        it back): the call then wakes when its token is really due, not when it was first predicted.
        If the fleet's state is lost meanwhile (Redis restarted without persistence, the key evicted),
        the reservation went with it: the call goes, as the fresh state's other calls do.
        """
        clock = self._clock
        started = clock.now()
        # The fleet's bucket counts the tokens it took in since it was created: fewer later means a new bucket.
        accrued = self._view.accrued
        reserved_at = self._view.seen_at + self._offset  # the server's time of the reservation
        self._reserved += 1
        done = False
        try:
            remaining = wait
            while remaining > 1e-3:
                chunk = min(remaining, self._sync_interval)
                await clock.sleep(chunk)
                remaining -= chunk
                # Even at the predicted time: a cut in the fleet's rate meanwhile (another process's
                # throttle) makes the token later, and a request sent at the old rate would be throttled.
                if await self._run(want=0, max_wait=None) is not None:
                    view = self._view
                    if not view.enabled or view.accrued < accrued:
                        break  # the state that held the reservation is gone (nothing to hand back)
                    remaining = (due - view.accrued) / view.rate(clock.now())
                    # On the server's clock, from the reservation to this check: the time the answers took to
                    # come back is not waiting for the token (nor is this check's, if slower than the first).
                    waited = view.seen_at + self._offset - reserved_at
                else:
                    waited = clock.now() - started
                if max_wait is not None and waited + remaining > max_wait:
                    # A rate cut while this call slept pushed its token past the caller's limit.
                    self._timeouts += 1
                    raise RateLimitTimeout(name=self.name, wait=waited + remaining, timeout=max_wait)
            done = True
        finally:
            self._reserved -= 1
            if not done:
                self._give += 1  # cancelled or timed out: the attempt will not happen, the token goes back
        self._waits += 1
        self._wait_time += clock.now() - started
