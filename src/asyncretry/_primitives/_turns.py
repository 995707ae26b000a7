"""Callers in turn: of each caller's calls, one at a time waits for a rate limit.

A rate limit's line is first come, first served, so a caller that sends many calls at once (a heavy
tenant, a batch job) fills it, and every call of a light caller waits behind all of them. With
:class:`CallerTurns` in front of the line, a call names its caller and first waits for that caller's
earlier calls to be admitted; each caller then has at most one call in the line, and the line serves
the callers in turn (round robin), whatever their numbers of calls. A caller whose calls come slower
than its turns waits for at most one call of each other caller.

Both kinds of driver use it: tasks (:meth:`CallerTurns.turn`, the rate limit's line is then round
robin) and threads (:meth:`CallerTurns.turn_blocking`, whose waits poll the rate limit, so that each
caller has one poller). Each caller's own calls keep their order on both.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from .._exceptions import RateLimitTimeout
from .._validate import check_str

__all__ = ["CallerTurns", "TurnStatistics", "check_caller"]


def check_caller(name: str, value: object) -> str | None:
    """``value`` if it is ``None`` or a non-empty string; else a ``TypeError`` or ``ValueError`` naming ``name``."""
    if value is None:
        return None
    caller = check_str(name, value)
    if not caller:
        raise ValueError(f"{name} must be a non-empty string (or None: the call is its own caller), got ''")
    return caller


@dataclass(frozen=True, slots=True)
class TurnStatistics:
    """A snapshot of :class:`CallerTurns`.

    Attributes:
        name: the name given at construction (the scope's key, in the engine).
        callers: callers with a call waiting for a rate limit right now.
        waiting: calls waiting for an earlier call of their caller (not yet in the rate limit's line).
        waits: calls that have waited for their turn, in total.
        timeouts: calls whose time ran out while they waited for their turn.
    """

    name: str
    callers: int
    waiting: int
    waits: int
    timeouts: int


def _fast_lock() -> anyio.Lock:
    return anyio.Lock(fast_acquire=True)


class _Line:
    """One caller's calls waiting for the rate limit: the turn (a lock) and how many hold or want it."""

    __slots__ = ("lock", "users")

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.users = 0


class CallerTurns:
    """Takes callers in turn in front of a rate limit: one waiting call per caller.

    Wrap the wait for the rate limit in :meth:`turn` (tasks) or :meth:`turn_blocking` (threads)::

        async with turns.turn("tenant-a", timeout=5.0):
            await limiter.acquire(timeout=...)

    A caller's line is dropped when its last call leaves, so the object holds only the callers that wait
    now. Tasks and threads keep separate lines, and the count of who waits is kept under a lock of its own,
    so that threads may share the object.

    Args:
        name: for :meth:`statistics` and :class:`~asyncretry.RateLimitTimeout`.
    """

    __slots__ = ("_guard", "_lines", "_thread_lines", "_timeouts", "_waits", "name")

    def __init__(self, name: str = "turns") -> None:
        self.name = check_str("name", name)
        self._lines: dict[str, _Line] = {}
        self._thread_lines: dict[str, _Line] = {}
        self._guard = threading.Lock()
        self._waits = 0
        self._timeouts = 0

    @asynccontextmanager
    async def turn(self, caller: str, timeout: float | None = None) -> AsyncIterator[None]:
        """Wait until the earlier calls of ``caller`` have left their turn, then hold it.

        Args:
            caller: who the call is for.
            timeout: the most the call may wait for its turn, in seconds; ``None`` waits as long as it takes.

        Raises:
            RateLimitTimeout: the turn did not come within ``timeout`` (the call took nothing).
        """
        # fast_acquire: a free turn is taken without a trip through the scheduler, so a call whose caller has
        # no earlier call waiting joins the rate limit's line at once, in the order the calls came.
        with self._in_line(self._lines, caller, _fast_lock) as line:
            with anyio.move_on_after(math.inf if timeout is None else timeout) as waited:
                await line.lock.acquire()
            if waited.cancelled_caught:
                raise self._timed_out(timeout)
            try:
                yield
            finally:
                line.lock.release()

    @contextmanager
    def turn_blocking(self, caller: str, timeout: float | None = None) -> Iterator[None]:
        """:meth:`turn` for threads: blocks the thread until the turn comes.

        Raises:
            RateLimitTimeout: the turn did not come within ``timeout`` (the call took nothing).
        """
        with self._in_line(self._thread_lines, caller, threading.Lock) as line:
            if not line.lock.acquire(timeout=-1 if timeout is None else timeout):
                raise self._timed_out(timeout)
            try:
                yield
            finally:
                line.lock.release()

    def statistics(self) -> TurnStatistics:
        """Return a snapshot of the callers waiting now and the counters."""
        with self._guard:
            lines = [*self._lines.values(), *self._thread_lines.values()]
            return TurnStatistics(
                name=self.name,
                callers=len(lines),
                waiting=sum(line.users - 1 for line in lines),
                waits=self._waits,
                timeouts=self._timeouts,
            )

    def __repr__(self) -> str:
        return f"<CallerTurns {self.name!r} callers={len(self._lines) + len(self._thread_lines)}>"

    @contextmanager
    def _in_line(self, lines: dict[str, _Line], caller: str, lock: Callable[[], Any]) -> Iterator[_Line]:
        """Stand in ``caller``'s line of ``lines`` (made with a new ``lock`` if it has none) until the end
        of the block; the line is dropped when its last call leaves."""
        with self._guard:
            line = lines.get(caller)
            if line is None:
                line = lines[caller] = _Line(lock())
            else:
                self._waits += 1  # an earlier call of the caller holds the turn or waits for it
            line.users += 1
        try:
            yield line
        finally:
            with self._guard:
                line.users -= 1
                if not line.users:
                    del lines[caller]

    def _timed_out(self, timeout: float | None) -> RateLimitTimeout:
        with self._guard:
            self._timeouts += 1
        return RateLimitTimeout(name=self.name, wait=math.inf, timeout=timeout or 0.0)

