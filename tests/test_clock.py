"""The default clock follows the running loop's time, so virtual time reaches every primitive."""

from __future__ import annotations

import time

import anyio
import pytest

from asyncretry import DEFAULT_CLOCK, AnyioClock, Clock
from asyncretry.testing import SequenceRandom, VirtualClock, fixed_random

pytestmark = pytest.mark.anyio


async def test_default_clock_reads_the_running_loops_time() -> None:
    """AnyioClock.now() equals anyio.current_time() on both backends (virtual time included)."""
    assert DEFAULT_CLOCK.now() == anyio.current_time()
    await DEFAULT_CLOCK.sleep(12.5)
    assert DEFAULT_CLOCK.now() == anyio.current_time()


async def test_default_clock_sleeps_in_virtual_time() -> None:
    """A long sleep on the default clock takes no real time under the test loops."""
    started = time.monotonic()
    before = DEFAULT_CLOCK.now()
    await DEFAULT_CLOCK.sleep(3600)
    assert DEFAULT_CLOCK.now() - before == pytest.approx(3600)
    assert time.monotonic() - started < 1.0


def test_default_clock_outside_a_loop_uses_the_monotonic_clock() -> None:
    """Outside any event loop, now() falls back to time.monotonic()."""
    before = time.monotonic()
    assert before <= AnyioClock().now() <= time.monotonic()


def test_default_clock_asks_a_loop_with_its_own_time() -> None:
    """On asyncio's own loop the clock reads time.monotonic() (what loop.time() returns); a loop that
    keeps its own time, by subclass or by a replaced method, is asked itself."""
    import asyncio

    class Shifted(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 1e6 + super().time()

    async def read() -> tuple[float, float]:
        clock = AnyioClock()
        first = clock.now()  # finds the loop
        return first, clock.now()  # the cached way

    with asyncio.Runner(loop_factory=Shifted) as runner:
        assert all(value >= 1e6 for value in runner.run(read()))
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        loop = runner.get_loop()
        before = time.monotonic()
        assert all(before <= value <= time.monotonic() for value in runner.run(read()))
        loop.time = lambda: 42.0  # type: ignore[method-assign]
        assert runner.run(read()) == (42.0, 42.0)


def test_clocks_satisfy_the_protocol() -> None:
    """Both clocks shipped by the library are Clocks."""
    assert isinstance(DEFAULT_CLOCK, Clock)
    assert isinstance(VirtualClock(), Clock)
    assert repr(DEFAULT_CLOCK) == "AnyioClock()"


async def test_virtual_clock_records_sleeps_and_advances() -> None:
    """VirtualClock.sleep returns at once, advances now() and records each delay."""
    clock = VirtualClock(start=100.0)
    await clock.sleep(1.5)
    await clock.sleep(0.25)
    clock.advance(2)
    assert clock.now() == 103.75
    assert clock.sleeps == [1.5, 0.25]


async def test_virtual_clock_sleep_honours_cancellation() -> None:
    """A cancelled scope stops VirtualClock.sleep before it records anything."""
    clock = VirtualClock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await clock.sleep(5)
    assert scope.cancelled_caught
    assert clock.sleeps == []


def test_virtual_clock_rejects_going_back() -> None:
    """advance() with a negative duration names the parameter and the value."""
    with pytest.raises(ValueError, match=r"seconds must be >= 0, got -1"):
        VirtualClock().advance(-1)


def test_random_sources_are_deterministic() -> None:
    """fixed_random repeats one value; SequenceRandom cycles through its values and counts calls."""
    rng = fixed_random(0.25)
    assert [rng(), rng()] == [0.25, 0.25]
    seq = SequenceRandom([0.1, 0.9])
    assert [seq(), seq(), seq()] == [0.1, 0.9, 0.1]
    assert seq.calls == 3


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan")])
def test_random_sources_reject_values_outside_the_unit_interval(bad: float) -> None:
    """A random value must lie in [0, 1)."""
    with pytest.raises(ValueError, match="value"):
        fixed_random(bad)
    with pytest.raises(ValueError, match="values"):
        SequenceRandom([bad])


def test_sequence_random_needs_a_value() -> None:
    """An empty sequence is refused at construction."""
    with pytest.raises(ValueError, match="at least one"):
        SequenceRandom([])
