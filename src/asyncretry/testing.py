"""Tools for testing code that uses asyncretry: virtual time and fixed randomness.

* :class:`VirtualClock` -- a clock for single-task tests: ``sleep()`` returns at once, advances the
  clock and records the delay in :attr:`VirtualClock.sleeps`.
* :func:`virtual_time_loop` / :class:`VirtualTimeEventLoop` -- an asyncio event loop whose clock jumps
  straight to the next timer whenever nothing is ready to run: asyncio's counterpart of trio's
  ``MockClock(autojump_threshold=0)``. Whole programs (many tasks, timeouts, anyio cancel scopes) then
  run in virtual time. Use it with anyio's pytest plugin::

      @pytest.fixture
      def anyio_backend():
          return ("asyncio", {"loop_factory": asyncretry.testing.virtual_time_loop})

* :func:`fixed_random` and :class:`SequenceRandom` -- deterministic random sources for ``rng=``.
* :func:`test_mode` -- a context manager under which retries do not wait and make fewer attempts (in
  this task, the tasks it starts and every other thread); :func:`set_testing` switches the same on or
  off for the whole process (stamina's switch), :func:`is_testing` tells whether it applies.
"""

from __future__ import annotations

import asyncio
import itertools
import selectors
from collections.abc import Iterable, Mapping
from typing import Any

import anyio.lowlevel

from ._engine._testmode import TestMode as TestMode
from ._engine._testmode import is_testing as is_testing
from ._engine._testmode import set_testing as set_testing
from ._engine._testmode import test_mode as test_mode
from ._primitives._clock import RandomSource
from ._validate import check_items, check_number

__all__ = [
    "SequenceRandom",
    "TestMode",
    "VirtualClock",
    "VirtualTimeEventLoop",
    "fixed_random",
    "is_testing",
    "set_testing",
    "test_mode",
    "virtual_time_loop",
]


class VirtualClock:
    """A manually driven clock for single-task tests.

    Args:
        start: the initial time in seconds.

    ``sleep(seconds)`` does not wait: it advances the clock by ``seconds``, appends ``seconds`` to
    :attr:`sleeps` and yields once to the event loop (so cancellation is still honoured).
    With several tasks sleeping at once, use :func:`virtual_time_loop` or trio's ``MockClock`` instead.
    """

    __slots__ = ("_now", "sleeps")

    def __init__(self, start: float = 0.0) -> None:
        self._now = check_number("start", start)
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (must be >= 0)."""
        self._now += check_number("seconds", seconds, low=0.0)

    async def sleep(self, seconds: float) -> None:
        await anyio.lowlevel.checkpoint()
        seconds = max(0.0, seconds)
        self.sleeps.append(seconds)
        self._now += seconds

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now!r}, sleeps={len(self.sleeps)})"


def fixed_random(value: float = 0.5) -> RandomSource:
    """A random source that always returns ``value`` (in ``[0, 1)``)."""
    value = check_number("value", value, low=0.0, high=1.0, high_open=True)
    return lambda: value


class SequenceRandom:
    """A random source that returns the given values in order, cycling when it reaches the end.

    Args:
        values: floats in ``[0, 1)``; at least one.
    """

    __slots__ = ("_cycle", "calls")

    def __init__(self, values: Iterable[float]) -> None:
        checked = check_items(
            "values", values, lambda name, v: check_number(name, v, low=0.0, high=1.0, high_open=True), what="numbers"
        )
        if not checked:
            raise ValueError("values must contain at least one number in [0, 1), got none")
        self._cycle = itertools.cycle(checked)
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return next(self._cycle)


class _JumpingSelector(selectors.BaseSelector):
    """Wraps a real selector; when the loop would block until a timer, jump the clock instead."""

    def __init__(self, inner: selectors.BaseSelector, loop: VirtualTimeEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._inner.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled at all: really wait for I/O
            return self._inner.select(None)
        self._loop._virtual_now += timeout
        return []


class VirtualTimeEventLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on virtual time that jumps to the next timer when nothing else can run.

    Real I/O still works, but a task waiting on the network while a timer is pending will see the
    timer fire at once: use it for timing logic, not for network tests.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._virtual_now = float(start)
        super().__init__(_JumpingSelector(selectors.DefaultSelector(), self))

    def time(self) -> float:
        return self._virtual_now


def virtual_time_loop() -> asyncio.AbstractEventLoop:
    """A loop factory for ``anyio.run(..., backend_options={"loop_factory": virtual_time_loop})``."""
    return VirtualTimeEventLoop()
