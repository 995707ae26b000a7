"""A limiter's hold: while a server's announced quota is spent, no task sharing the limiter sends.

In virtual time, on asyncio and trio (tests/conftest.py), for both profiles: the hold is the same
whatever the rate control is.
"""

from __future__ import annotations

import math
from datetime import timedelta

import anyio
import pytest

from asyncretry import (
    DEFAULT_CLOCK,
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    EventBus,
    LimiterHeld,
    RateLimitTimeout,
)
from conftest import EventLog as Recorder

PROFILES = [AdaptiveLimiterConfig(), AdaptiveLimiterConfig(profile="aws")]


def limiter(config: AdaptiveLimiterConfig = PROFILES[0], bus: EventBus | None = None) -> AdaptiveRateLimiter:
    return AdaptiveRateLimiter(config, events=bus if bus is not None else EventBus(), rng=lambda: 0.0)


async def acquired(limiter: AdaptiveRateLimiter, start: float, times: list[float]) -> None:
    """Acquire, and note when (seconds after ``start``)."""
    await limiter.acquire()
    times.append(DEFAULT_CLOCK.now() - start)


async def release_times(limiter: AdaptiveRateLimiter, tasks: int) -> list[float]:
    """``tasks`` tasks acquire at once: when each got through, seconds from now, in order."""
    start = DEFAULT_CLOCK.now()
    times: list[float] = []
    async with anyio.create_task_group() as tg:
        for _ in range(tasks):
            tg.start_soon(acquired, limiter, start, times)
    return times


@pytest.mark.anyio
@pytest.mark.parametrize("config", PROFILES, ids=["asyncretry", "aws"])
async def test_every_task_waits_for_the_end_of_the_hold_before_any_throttle(config: AdaptiveLimiterConfig) -> None:
    """A limiter that has seen no throttle is free, except while a hold runs: then every acquire waits it out."""
    held = limiter(config)
    start = DEFAULT_CLOCK.now()
    held.hold(5.0)
    assert await release_times(held, 3) == pytest.approx([5.0, 5.0, 5.0])
    await held.acquire()  # over: free again, at once
    assert DEFAULT_CLOCK.now() - start == pytest.approx(5.0)
    stats = held.statistics()
    assert (stats.enabled, stats.acquires, stats.waits, stats.holds, stats.held) == (False, 4, 3, 1, 0.0)
    assert stats.wait_time == pytest.approx(15.0)


@pytest.mark.anyio
async def test_an_enabled_limiter_waits_for_the_hold_then_for_its_token() -> None:
    """Once throttled, an acquire waits for the hold, then takes its token at the limiter's rate."""
    held = limiter(PROFILES[1])
    held.update(throttled=True)  # the "aws" profile: enabled at its floor, 0.5 tokens/s, bucket empty
    start = DEFAULT_CLOCK.now()
    held.hold(3.0)
    assert held.try_acquire() is False
    assert held.time_until_available() == pytest.approx(3.0)
    await held.acquire()  # by the end of the hold the bucket has filled its one token
    await held.acquire()  # the next one comes at the fill rate
    assert DEFAULT_CLOCK.now() - start == pytest.approx(5.0)


@pytest.mark.anyio
async def test_a_shorter_announcement_changes_nothing_and_a_longer_one_extends_the_wait() -> None:
    """Holds only ever grow: a waiter wakes at the latest end announced, and one event is sent per growth."""
    bus = EventBus()
    recorder = Recorder(bus)
    held = limiter(bus=bus)
    start = DEFAULT_CLOCK.now()
    held.hold(4.0, reason="HTTP 429")
    held.hold(1.0, reason="HTTP 429")  # ends sooner: nothing changes
    woke: list[float] = []

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquired, held, start, woke)
        await anyio.sleep(2.0)
        held.hold(6.0, reason="HTTP 200")  # now ends at 8 s
    assert woke == pytest.approx([8.0])
    events = recorder.of(LimiterHeld)
    assert [(e.seconds, e.reason) for e in events] == [(4.0, "HTTP 429"), (6.0, "HTTP 200")]
    assert held.statistics().holds == 2
    recorder.undo()


@pytest.mark.anyio
async def test_a_hold_longer_than_the_timeout_is_refused_at_once_and_takes_nothing() -> None:
    """The caller's limit is checked against the hold up front: a typed error naming the wait, no token taken."""
    held = AdaptiveRateLimiter(AdaptiveLimiterConfig(max_wait=2.0), name="api", events=EventBus())
    start = DEFAULT_CLOCK.now()
    held.hold(10.0)
    with pytest.raises(RateLimitTimeout) as caught:
        await held.acquire()
    assert (caught.value.name, caught.value.wait, caught.value.timeout) == ("api", 10.0, 2.0)
    with pytest.raises(RateLimitTimeout):
        await held.acquire(timeout=timedelta(seconds=9.5))
    assert DEFAULT_CLOCK.now() == start  # refused without waiting
    await held.acquire(timeout=math.inf)
    assert DEFAULT_CLOCK.now() - start == pytest.approx(10.0)
    stats = held.statistics()
    assert (stats.timeouts, stats.acquires) == (2, 1)


@pytest.mark.anyio
async def test_a_waiter_whose_hold_grows_past_its_timeout_fails_when_it_learns_of_it() -> None:
    """A hold made longer while a call waits is checked again when the first end comes."""
    held = limiter()
    start = DEFAULT_CLOCK.now()
    held.hold(2.0)
    failed: list[float] = []

    async def attempt() -> None:
        with pytest.raises(RateLimitTimeout):
            await held.acquire(timeout=5.0)
        failed.append(DEFAULT_CLOCK.now() - start)

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt)
        await anyio.sleep(1.0)
        held.hold(9.0)  # ends at 10 s: beyond the waiter's 5 s
    assert failed == pytest.approx([2.0])


@pytest.mark.anyio
async def test_cancelling_a_waiter_during_the_hold_takes_nothing() -> None:
    """Cancellation is honoured at once; the limiter counts no acquire for the cancelled call."""
    held = limiter()
    held.hold(5.0)
    with anyio.move_on_after(1.0) as scope:
        await held.acquire()
    assert scope.cancelled_caught
    stats = held.statistics()
    assert (stats.acquires, stats.timeouts) == (0, 0)
    assert stats.held == pytest.approx(4.0)


@pytest.mark.anyio
async def test_a_hold_that_begins_while_a_call_waits_in_line_holds_its_token_too() -> None:
    """A call already queued for a token does not slip out during a hold announced meanwhile."""
    held = limiter(PROFILES[1])
    held.update(throttled=True)  # 0.5 tokens/s: the first token comes at 2 s
    start = DEFAULT_CLOCK.now()
    sent: list[float] = []

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquired, held, start, sent)
        await anyio.sleep(1.0)
        held.hold(6.0)  # until 7 s
    assert sent == pytest.approx([7.0])


@pytest.mark.parametrize("seconds", [-1.0, math.nan, math.inf, "5"])
def test_a_hold_of_no_sensible_length_is_refused_naming_the_parameter(seconds: object) -> None:
    held = limiter()
    with pytest.raises((ValueError, TypeError), match="seconds"):
        held.hold(seconds)  # type: ignore[arg-type]
    assert held.statistics().holds == 0


def test_a_hold_of_zero_is_no_hold() -> None:
    held = limiter()
    held.hold(0.0)
    assert (held.statistics().holds, held.try_acquire(), held.time_until_available()) == (0, True, 0.0)


# ------------------------------------------------------------------------------ the paced release
async def served(held: AdaptiveRateLimiter, successes: int, every: float) -> None:
    """``successes`` answers, one every ``every`` seconds (virtual time)."""
    for _ in range(successes):
        held.update(throttled=False)
        await anyio.sleep(every)


@pytest.mark.anyio
async def test_the_calls_that_waited_go_out_at_the_rate_served_before_the_hold() -> None:
    """10 served in 10 s, then a hold of 10 s: the 5 waiters go out one a second from its end, not together."""
    held = limiter()
    await served(held, 10, 1.0)
    held.hold(10.0)
    assert await release_times(held, 5) == pytest.approx([10.0, 11.0, 12.0, 13.0, 14.0])


@pytest.mark.anyio
async def test_an_idle_limiter_paces_its_release_over_the_hold_not_over_its_idle_hour() -> None:
    """The pace is the served count over the cycle, but over at most the hold's length: 10 answers in an hour
    (most at its end) and a hold of 5 s release one call every 0.5 s, not one every 6 minutes."""
    held = limiter()
    await served(held, 1, 3600.0)
    await served(held, 9, 0.0)
    held.hold(5.0)
    assert await release_times(held, 3) == pytest.approx([5.0, 5.5, 6.0])


@pytest.mark.anyio
async def test_the_pace_lasts_as_long_as_the_hold_did_then_calls_go_freely() -> None:
    held = limiter()
    await served(held, 4, 1.0)
    start = DEFAULT_CLOCK.now()
    held.hold(4.0)  # paced from 4 s to 8 s after it, one a second
    await held.acquire()
    assert held.try_acquire() is False  # the next release is 1 s later
    assert held.time_until_available() == pytest.approx(1.0)
    await anyio.sleep(1.0)
    assert held.try_acquire() is True
    await anyio.sleep(3.0)  # the pace is over
    assert [held.try_acquire() for _ in range(3)] == [True, True, True]
    assert DEFAULT_CLOCK.now() - start == pytest.approx(8.0)


@pytest.mark.anyio
async def test_without_a_success_before_the_hold_the_waiters_go_together() -> None:
    """No served rate to keep to: the release is not paced."""
    held = limiter()
    held.hold(3.0)
    assert await release_times(held, 3) == pytest.approx([3.0, 3.0, 3.0])


@pytest.mark.anyio
async def test_served_nothing_since_the_last_hold_the_waiters_go_one_per_span_of_the_cycle() -> None:
    """Every answer of the cycle throttled (or none came): the limiter counts itself served once over the
    cycle's span (at most the hold's length), so the first waiter finds whether the fresh window serves
    before the others follow, instead of all of them at once."""
    held = limiter()
    await served(held, 2, 1.0)
    held.hold(2.0)  # the cycle that sets the next release begins here
    await anyio.sleep(10.0)  # the pace is long over, and nothing was served since
    held.hold(4.0)  # paced over min(10, 4) s per success counted: one
    assert await release_times(held, 3) == pytest.approx([4.0, 8.0, 12.0])


@pytest.mark.anyio
async def test_a_paced_release_past_the_timeout_is_refused_at_once() -> None:
    """A call whose release would come after its timeout gets RateLimitTimeout when it books it."""
    held = limiter()
    await served(held, 2, 2.0)  # one every 2 s
    held.hold(4.0)
    await held.acquire()
    with pytest.raises(RateLimitTimeout) as caught:
        await held.acquire(timeout=1.0)
    assert caught.value.wait == pytest.approx(2.0)

