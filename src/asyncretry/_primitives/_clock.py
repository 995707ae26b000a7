"""Time and randomness, injected everywhere so that tests run in virtual time with fixed random numbers.

The default :class:`AnyioClock` reads the running event loop's own time source. Under trio's
``MockClock`` or asyncretry's virtual-time asyncio loop (:mod:`asyncretry.testing`), every primitive
therefore runs in virtual time with no change to the code under test.
"""

from __future__ import annotations

import random
import sys
import time
from asyncio import (
    BaseEventLoop,
    _get_running_loop,  # C-accelerated, returns None instead of raising
)
from collections.abc import Callable
from threading import get_ident
from typing import Any, Protocol, runtime_checkable

import anyio

__all__ = ["DEFAULT_CLOCK", "AnyioClock", "Clock", "RandomSource", "default_rng"]

RandomSource = Callable[[], float]
"""A callable returning a float uniformly distributed in ``[0, 1)``, like :func:`random.random`."""

default_rng: RandomSource = random.random


@runtime_checkable
class Clock(Protocol):
    """A source of monotonic time in seconds and a way to sleep on it."""

    def now(self) -> float:
        """Return the current time in seconds (monotonic, arbitrary origin)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds``; must be cancellable like :func:`anyio.sleep`."""
        ...


_trio_current_time: Callable[[], float] | None = None
_BASE_LOOP_TIME = BaseEventLoop.time


def _trio_time() -> float:
    """trio's clock when a trio task runs in this thread, else the system's monotonic clock (sync code)."""
    global _trio_current_time
    if _trio_current_time is None:
        trio = sys.modules.get("trio")
        if trio is None:  # trio never imported: it cannot be running
            return time.monotonic()
        _trio_current_time = trio.current_time
    # trio marks the threads it runs tasks in (sniffio's thread_local, which trio itself requires):
    # asking it first spares synchronous code the cost of trio's "no run here" exception.
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None and getattr(sniffio.thread_local, "name", None) != "trio":
        return time.monotonic()
    try:
        return _trio_current_time()
    except RuntimeError:  # no event loop at all (sync code): fall back to the system's monotonic clock
        return time.monotonic()


class AnyioClock:
    """The default clock: the running event loop's time, asyncio's or trio's.

    ``anyio.current_time()`` looks the backend up on every call, which the hot path feels; this
    reads ``loop.time()`` directly under asyncio (the running loop is cached per thread) and
    ``trio.current_time()`` under trio.
    Outside any event loop it falls back to :func:`time.monotonic`, which is what asyncio's loop uses.
    On asyncio's own loop it calls :func:`time.monotonic` directly; a loop whose ``time`` is its own
    (a subclass, or a method replaced before the clock first meets the loop) is asked itself.
    """

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        # (the last asyncio loop seen, its time source), replaced as one tuple so that threads running
        # loops of their own never see a loop paired with another loop's time source.
        self._cached: tuple[Any, Callable[[], float]] = (None, time.monotonic)

    def now(self) -> float:
        # On Python 3.11 asyncio._get_running_loop() costs more than the clock read itself (it checks
        # the process id), so remember the last loop seen: while a loop runs, its ``_thread_id`` is the
        # running thread, and only one loop can run in a thread at a time.
        loop, read = self._cached
        if loop is not None and loop._thread_id == get_ident():
            return read()
        loop = _get_running_loop()
        if loop is not None:
            if hasattr(loop, "_thread_id"):  # only loops that expose it are cached (asyncio's do)
                # asyncio's own loop.time() is time.monotonic(): call that directly (one frame less);
                # a loop with its own time (a virtual one) is asked itself.
                read = loop.time
                self._cached = (loop, time.monotonic if getattr(read, "__func__", None) is _BASE_LOOP_TIME else read)
            return loop.time()
        return _trio_time()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    def __repr__(self) -> str:
        return "AnyioClock()"


_DEFAULT = AnyioClock()
DEFAULT_CLOCK: Clock = _DEFAULT


def cached_loop(clock: Clock) -> tuple[Any, Callable[[], float]]:
    """The asyncio loop the default clock last read and its time source, for hot paths that read it directly.

    The loop is ``None`` for any other clock. A caller may call the time source in place of
    ``clock.now()`` while ``loop._thread_id == threading.get_ident()`` (the loop runs in this thread),
    and must ask again otherwise. This is the default clock's own rule, without the cost of a method call.
    """
    return _DEFAULT._cached if clock is _DEFAULT else (None, clock.now)
