"""TokenBucket: refill arithmetic, strictly FIFO waiters, timeouts, cancellation and live reconfiguration."""

from __future__ import annotations

import dataclasses
import math
import random
from datetime import timedelta
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import virtual_time
from asyncretry import BucketStatistics, RateLimitTimeout, TokenBucket
from asyncretry.testing import VirtualClock

pytestmark = pytest.mark.anyio


HANG_GUARD = 86_400.0
"""Virtual seconds after which a queued call fails the test: a lost wake-up must fail, not hang."""


def now() -> float:
    return anyio.current_time()


def timeline(log: list[tuple[str, float]], start: float) -> list[tuple[str, float]]:
    """The log with times relative to ``start``, rounded to the nanosecond (virtual time is exact)."""
    return [(label, round(t - start, 9)) for label, t in log]


async def start_acquirer(
    tg: anyio.abc.TaskGroup,
    bucket: TokenBucket,
    n: float,
    log: list[tuple[str, float]],
    label: str,
    *,
    timeout: float | None = None,
) -> anyio.CancelScope:
    """Start a task that calls ``acquire(n)``; returns once the call is queued (or served)."""

    async def run(*, task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope, anyio.fail_after(HANG_GUARD):
            task_status.started(scope)
            try:
                await bucket.acquire(n, timeout=timeout)
            except RateLimitTimeout:
                log.append((f"{label} timed out", now()))
                return
            log.append((label, now()))

    scope: anyio.CancelScope = await tg.start(run)
    return scope


# --- refill and bursts


async def test_sequential_acquires_are_spaced_by_the_rate() -> None:
    """At 10 tokens/s with capacity 1, five acquires in a row take 0.4 s: the first is free, then one per 0.1 s."""
    bucket = TokenBucket(10, 1)
    start = now()
    times = []
    for _ in range(5):
        await bucket.acquire()
        times.append(now() - start)
    assert times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4], abs=1e-9)


async def test_a_full_bucket_serves_a_burst_of_its_capacity_at_once() -> None:
    """A full bucket of capacity 5 grants five tokens without waiting; the sixth waits 1/rate."""
    bucket = TokenBucket(2, 5)
    start = now()
    for _ in range(5):
        await bucket.acquire()
    assert now() == start
    await bucket.acquire()
    assert now() - start == pytest.approx(0.5)


async def test_initial_tokens_set_the_starting_level() -> None:
    """tokens=0 starts empty: acquiring 2 tokens at 4 tokens/s waits 0.5 s."""
    bucket = TokenBucket(4, 8, tokens=0)
    assert bucket.available == 0
    start = now()
    await bucket.acquire(2)
    assert now() - start == pytest.approx(0.5)
    assert bucket.available == pytest.approx(0)


async def test_refill_stops_at_the_capacity() -> None:
    """An idle bucket fills up to its capacity and no further."""
    bucket = TokenBucket(100, 3, tokens=0)
    await anyio.sleep(0.01)
    assert bucket.available == pytest.approx(1)
    await anyio.sleep(60)
    assert bucket.available == 3


def test_tokens_accept_fractions() -> None:
    """Fractional requests take exactly what they ask for."""
    clock = VirtualClock()
    bucket = TokenBucket(1, 2, tokens=1, clock=clock)
    assert bucket.try_acquire(0.25)
    assert bucket.available == pytest.approx(0.75)
    clock.advance(0.5)
    assert bucket.available == pytest.approx(1.25)


# --- order


async def test_waiters_are_served_in_arrival_order_even_if_smaller() -> None:
    """A later, smaller request never overtakes an earlier one: grants come at 3 s, 4 s and 6 s."""
    bucket = TokenBucket(1, 4, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 3, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b")
        await start_acquirer(tg, bucket, 2, log, "c")
        assert bucket.statistics().waiting == 3
    assert [label for label, _ in log] == ["a", "b", "c"]
    assert [t - start for _, t in log] == pytest.approx([3, 4, 6])
    assert bucket.statistics().waiting == 0


async def test_a_newcomer_does_not_overtake_calls_served_just_before(anyio_backend_name: str) -> None:
    """A call that finds its tokens there while earlier calls were served but have not resumed yet goes last.

    On asyncio the calls resume in arrival order; trio resumes tasks woken together in its own order.
    """
    bucket = TokenBucket(0, 3, tokens=0)
    log: list[tuple[str, float]] = []
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b")
        bucket.release(3)  # serves "a" and "b"; one token is left
        await bucket.acquire()
        log.append(("c", now()))
    labels = [label for label, _ in log]
    if anyio_backend_name == "asyncio":
        assert labels == ["a", "b", "c"]
    else:
        assert sorted(labels) == ["a", "b", "c"]
    assert bucket.statistics().acquired_total == 3


async def test_only_the_head_waiter_sleeps_on_a_timer() -> None:
    """With 100 queued waiters at most one sleeps on the clock at any time, about one sleep per grant."""

    class CountingClock:
        def __init__(self) -> None:
            self.sleeping = 0
            self.most_sleeping = 0
            self.sleeps = 0

        def now(self) -> float:
            return anyio.current_time()

        async def sleep(self, seconds: float) -> None:
            self.sleeping += 1
            self.sleeps += 1
            self.most_sleeping = max(self.most_sleeping, self.sleeping)
            try:
                await anyio.sleep(seconds)
            finally:
                self.sleeping -= 1

    clock = CountingClock()
    bucket = TokenBucket(100, 1, tokens=0, clock=clock)
    log: list[tuple[str, float]] = []
    async with anyio.create_task_group() as tg:
        for i in range(100):
            await start_acquirer(tg, bucket, 1, log, str(i))
    assert [label for label, _ in log] == [str(i) for i in range(100)]
    assert clock.most_sleeping == 1
    assert clock.sleeps <= 110


async def test_a_late_wake_up_hands_out_every_token_that_fell_due() -> None:
    """When the head's timer fires 50 ms late, every token that fell due meanwhile is granted in order.

    The capacity (1) does not cap what accrued for the queue, so 200 waiters at 1000 tokens/s finish in
    about 0.2 s plus one late wake-up, not 200 late wake-ups.
    """

    class LateClock:
        def now(self) -> float:
            return anyio.current_time()

        async def sleep(self, seconds: float) -> None:
            await anyio.sleep(seconds + 0.05)

    bucket = TokenBucket(1000, 1, tokens=0, clock=LateClock())
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        for i in range(200):
            await start_acquirer(tg, bucket, 1, log, str(i))
    # Waiters served at the same instant may resume in any order (trio shuffles them): compare times.
    served_at = dict(log)
    times = [served_at[str(i)] for i in range(200)]
    assert times == sorted(times)
    assert now() - start <= 0.2 + 0.05 + 1e-6
    assert len({t for _, t in log}) <= 5  # a handful of wake-ups, each serving many waiters
    stats = bucket.statistics()
    assert stats.acquired_total == 200
    assert 0 <= stats.available <= 1


# --- try_acquire and release


def test_try_acquire_takes_only_what_is_there() -> None:
    """try_acquire takes tokens that are there and returns False, taking nothing, when they are not."""
    clock = VirtualClock()
    bucket = TokenBucket(1, 3, tokens=2, clock=clock)
    assert bucket.try_acquire(2) is True
    assert bucket.try_acquire() is False
    assert bucket.available == 0
    clock.advance(1)
    assert bucket.try_acquire() is True
    assert bucket.statistics().grants == 2


async def test_try_acquire_never_overtakes_a_waiter() -> None:
    """With a waiter queued for 3 tokens, try_acquire(1) fails although 2 tokens are there."""
    bucket = TokenBucket(1, 3, tokens=2)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 3, log, "a")
        assert bucket.try_acquire(1) is False
        assert bucket.available == 2
    assert timeline(log, start) == [("a", 1)]


async def test_release_wakes_waiters_in_order_and_caps_at_capacity() -> None:
    """With rate 0, released tokens serve queued calls in order and the bucket never holds more than capacity."""
    bucket = TokenBucket(0, 2, tokens=0)
    log: list[tuple[str, float]] = []
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 2, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b")
        await anyio.sleep(1000)  # no refill: nothing happens however long we wait
        assert log == []
        bucket.release(1)
        await anyio.wait_all_tasks_blocked()
        assert log == []  # "a" needs 2, and "b" does not overtake it
        bucket.release(1)
        await anyio.wait_all_tasks_blocked()
        assert [label for label, _ in log] == ["a"]
        bucket.release(5)
    assert [label for label, _ in log] == ["a", "b"]
    assert bucket.available == 1  # 5 released into an empty bucket of capacity 2, then 1 taken


async def test_rate_zero_waits_until_release() -> None:
    """A bucket that does not refill lets a call wait (without a timer) until tokens are released."""
    bucket = TokenBucket(0, 1, tokens=0)
    assert bucket.time_until_available() == math.inf
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        await anyio.sleep(3600)
        bucket.release(1)
    assert timeline(log, start) == [("a", 3600)]


# --- timeouts


async def test_timeout_refuses_at_once_when_the_predicted_wait_is_too_long() -> None:
    """A call whose predicted wait exceeds its timeout fails immediately, without queueing."""
    bucket = TokenBucket(1, 1, tokens=0)
    start = now()
    with pytest.raises(RateLimitTimeout, match="bucket") as caught:
        await bucket.acquire(timeout=0.5)
    assert now() == start
    assert caught.value.wait == pytest.approx(1)
    assert caught.value.timeout == 0.5
    stats = bucket.statistics()
    assert (stats.waiting, stats.timeouts, stats.waits) == (0, 1, 0)


async def test_timeout_prediction_counts_the_queue_ahead() -> None:
    """Behind a queued call, a 1.5 s timeout is refused (2 s predicted) and a 2 s timeout is served at 2 s."""
    bucket = TokenBucket(1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        assert bucket.time_until_available() == pytest.approx(2)
        with pytest.raises(RateLimitTimeout):
            await bucket.acquire(timeout=1.5)
        await start_acquirer(tg, bucket, 1, log, "b", timeout=timedelta(seconds=2))  # type: ignore[arg-type]
    assert timeline(log, start) == [("a", 1), ("b", 2)]


async def test_timeout_expires_while_queued_after_the_rate_drops() -> None:
    """A queued call whose timeout runs out (the rate was lowered) leaves at its deadline, taking nothing."""
    bucket = TokenBucket(1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a", timeout=2)
        await anyio.sleep(0.5)
        bucket.rate = 0.1
    assert timeline(log, start) == [("a timed out", 2)]
    stats = bucket.statistics()
    assert (stats.waiting, stats.timeouts, stats.grants) == (0, 1, 0)
    assert stats.available == pytest.approx(0.5 + 1.5 * 0.1)  # nothing was taken


async def test_a_waiter_behind_the_head_times_out_at_its_own_deadline() -> None:
    """A non-head waiter's timeout fires at its deadline while the head keeps waiting and is served later."""
    bucket = TokenBucket(1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b", timeout=3)
        await start_acquirer(tg, bucket, 1, log, "c")
        await anyio.sleep(0.5)
        bucket.rate = 0.25  # "a" now comes at 2.5 s, "b" would come at 6.5 s
    assert timeline(log, start) == [
        ("a", 2.5),
        ("b timed out", 3),
        ("c", 6.5),  # "c" moved up into the place of "b"
    ]
    assert bucket.statistics().waiting == 0


async def test_timeout_zero_succeeds_when_tokens_are_there() -> None:
    """timeout=0 takes tokens that are there and refuses at once when they are not."""
    bucket = TokenBucket(1, 1)
    await bucket.acquire(timeout=0)
    with pytest.raises(RateLimitTimeout):
        await bucket.acquire(timeout=0)


# --- live reconfiguration


async def test_raising_the_rate_makes_the_head_replan_at_once() -> None:
    """A call that would wait 10 s at 0.1 tokens/s is served at 0.01 s once the rate is raised to 100/s."""
    bucket = TokenBucket(0.1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        bucket.rate = 100
    assert timeline(log, start) == [("a", 0.01)]


async def test_a_rate_change_refills_at_the_old_rate_first() -> None:
    """Halving the rate at 0.5 s keeps the half token already accrued: the call is served at 1.5 s."""
    bucket = TokenBucket(1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        await anyio.sleep(0.5)
        bucket.rate = 0.5
        assert bucket.rate == 0.5
    assert timeline(log, start) == [("a", 1.5)]


async def test_rate_zero_then_positive_wakes_the_head() -> None:
    """A head waiting on a non-refilling bucket is woken when a rate is set."""
    bucket = TokenBucket(0, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        await anyio.sleep(10)
        bucket.rate = 2
    assert timeline(log, start) == [("a", 10.5)]


def test_lowering_the_capacity_clamps_the_tokens() -> None:
    """A full bucket whose capacity drops from 10 to 4 holds 4 tokens; raising it again adds none."""
    clock = VirtualClock()
    bucket = TokenBucket(1, 10, clock=clock)
    bucket.capacity = 4
    assert bucket.available == 4
    bucket.capacity = 8
    assert (bucket.capacity, bucket.available) == (8, 4)
    clock.advance(100)
    assert bucket.available == 8


async def test_a_queued_call_above_a_lowered_capacity_fails_and_the_next_moves_up() -> None:
    """Lowering the capacity below a queued request fails it with ValueError; the call behind is served."""
    bucket = TokenBucket(1, 10, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    failed: list[BaseException] = []

    async def big() -> None:
        try:
            await bucket.acquire(5)
        except ValueError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(big)
        await anyio.wait_all_tasks_blocked()
        await start_acquirer(tg, bucket, 1, log, "small")
        assert bucket.statistics().waiting == 2
        bucket.capacity = 3
    assert len(failed) == 1
    assert "capacity" in str(failed[0])
    assert timeline(log, start) == [("small", 1)]
    stats = bucket.statistics()
    assert (stats.waiting, stats.rejected, stats.grants) == (0, 1, 1)


# --- cancellation


async def test_cancelling_the_head_passes_its_turn_on() -> None:
    """When the head waiter is cancelled, the next one takes over and is served when its tokens are there."""
    bucket = TokenBucket(1, 2, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        head = await start_acquirer(tg, bucket, 2, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b")
        await anyio.sleep(0.5)
        head.cancel()
    assert timeline(log, start) == [("b", 1)]
    stats = bucket.statistics()
    assert (stats.waiting, stats.cancelled, stats.grants, stats.acquired_total) == (0, 1, 1, 1)


async def test_cancelling_a_waiter_in_the_middle_leaves_no_reservation() -> None:
    """A cancelled waiter behind the head takes no tokens: the one behind it is served one token earlier."""
    bucket = TokenBucket(1, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 1, log, "a")
        middle = await start_acquirer(tg, bucket, 1, log, "b")
        await start_acquirer(tg, bucket, 1, log, "c")
        assert bucket.time_until_available() == pytest.approx(4)
        middle.cancel()
        await anyio.wait_all_tasks_blocked()
        assert bucket.time_until_available() == pytest.approx(3)
    assert timeline(log, start) == [("a", 1), ("c", 2)]


@pytest.mark.parametrize("cancelled", ["a", "b"])
async def test_cancellation_right_after_the_grant_gives_the_tokens_back(cancelled: str) -> None:
    """A call cancelled after its tokens were granted but before acquire() returned puts them back.

    Both queued calls are granted by one release(); then one of them (the head, or the one behind it,
    which waits on an event rather than a timer) is cancelled before it could run.
    """
    bucket = TokenBucket(0, 2, tokens=0)
    log: list[tuple[str, float]] = []
    async with anyio.create_task_group() as tg:
        scopes = {
            "a": await start_acquirer(tg, bucket, 1, log, "a"),
            "b": await start_acquirer(tg, bucket, 1, log, "b"),
        }
        bucket.release(2)
        scopes[cancelled].cancel()
    assert [label for label, _ in log] == [{"a": "b", "b": "a"}[cancelled]]
    stats = bucket.statistics()
    assert stats.available == 1
    assert (stats.acquired_total, stats.grants, stats.cancelled, stats.waiting) == (1, 1, 1, 0)


async def test_tokens_given_back_after_a_cancelled_grant_serve_the_next_waiter() -> None:
    """The tokens a cancelled call gives back go to the call queued behind it, at once."""
    bucket = TokenBucket(0, 1, tokens=0)
    log: list[tuple[str, float]] = []
    start = now()
    async with anyio.create_task_group() as tg:
        first = await start_acquirer(tg, bucket, 1, log, "a")
        await start_acquirer(tg, bucket, 1, log, "b")
        bucket.release(1)  # grants "a" at once ...
        first.cancel()  # ... which is cancelled before it could run: "b" gets the token
    assert log == [("b", start)]
    stats = bucket.statistics()
    assert (stats.available, stats.acquired_total, stats.cancelled, stats.waiting) == (0, 1, 1, 0)


async def test_a_callers_deadline_cancels_a_queued_call_cleanly() -> None:
    """A caller's move_on_after cancels a queued acquire; the bucket forgets it and serves the next call."""
    bucket = TokenBucket(1, 1, tokens=0)
    start = now()
    with anyio.move_on_after(0.3):
        await bucket.acquire()
    assert bucket.statistics().waiting == 0
    await bucket.acquire()
    assert now() - start == pytest.approx(1)


async def test_a_thousand_waiters_with_half_of_them_cancelled() -> None:
    """1,000 waiters, a random half cancelled at random times: the rest are served in order, nothing leaks."""
    rng = random.Random(1234)
    count = 1000
    sizes = [rng.choice((1, 2, 3)) for _ in range(count)]
    doomed = rng.sample(range(count), count // 2)
    cancel_at = sorted((rng.uniform(0, 6), i) for i in doomed)
    bucket = TokenBucket(200, 3, tokens=0)
    scopes: list[anyio.CancelScope] = []
    served: dict[int, float] = {}
    start = now()

    async def worker(i: int, *, task_status: anyio.abc.TaskStatus[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope, anyio.fail_after(HANG_GUARD):
            task_status.started(scope)
            await bucket.acquire(sizes[i])
            served[i] = now()

    async def canceller() -> None:
        for at, i in cancel_at:
            await anyio.sleep_until(start + at)
            scopes[i].cancel()

    async with anyio.create_task_group() as tg:
        for i in range(count):
            scopes.append(await tg.start(worker, i))
        assert bucket.statistics().waiting == count
        tg.start_soon(canceller)

    stats = bucket.statistics()
    survivors = sorted(served)
    assert set(range(count)) - set(doomed) <= set(survivors)
    assert stats.waiting == 0
    assert 0 <= stats.available <= 3
    assert stats.grants == len(survivors)
    assert stats.acquired_total == sum(sizes[i] for i in survivors)
    assert stats.cancelled == count - len(survivors)
    times = [served[i] for i in survivors]  # in arrival order
    assert times == sorted(times)
    # Tokens are accounted for: nothing was granted beyond what the refill produced.
    assert stats.acquired_total <= 200 * (max(times) - start) + 1e-6


# --- bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rate": -1, "capacity": 1}, "rate"),
        ({"rate": math.nan, "capacity": 1}, "rate"),
        ({"rate": math.inf, "capacity": 1}, "rate"),
        ({"rate": 1, "capacity": 0}, "capacity"),
        ({"rate": 1, "capacity": -2}, "capacity"),
        ({"rate": 1, "capacity": math.inf}, "capacity"),
        ({"rate": 1, "capacity": 2, "tokens": 3}, "tokens"),
        ({"rate": 1, "capacity": 2, "tokens": -1}, "tokens"),
        ({"rate": 1, "capacity": 2, "tokens": math.nan}, "tokens"),
    ],
)
def test_constructor_rejects_bad_numbers_naming_the_parameter(kwargs: dict[str, Any], name: str) -> None:
    """Out-of-range, NaN or infinite settings raise ValueError naming the parameter."""
    with pytest.raises(ValueError, match=rf"^{name} must"):
        TokenBucket(**kwargs)


def test_constructor_rejects_non_numbers() -> None:
    """A rate that is not a number raises TypeError."""
    with pytest.raises(TypeError, match="rate"):
        TokenBucket("10", 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [0, -1, 4, math.nan, math.inf])
async def test_acquire_rejects_bad_amounts_at_once(n: float) -> None:
    """acquire(n) with n <= 0, NaN or n > capacity raises ValueError naming n, without waiting."""
    bucket = TokenBucket(1, 3, tokens=0)
    with pytest.raises(ValueError, match=r"^n must"):
        await bucket.acquire(n)
    with pytest.raises(ValueError, match=r"^n must"):
        bucket.try_acquire(n)
    with pytest.raises(ValueError, match=r"^n must"):
        bucket.time_until_available(n)
    assert bucket.statistics().waiting == 0


async def test_acquire_rejects_a_negative_timeout() -> None:
    """A negative or NaN timeout raises ValueError naming timeout, even when tokens are there."""
    bucket = TokenBucket(1, 3)
    for bad in (-1, math.nan):
        with pytest.raises(ValueError, match=r"^timeout must"):
            await bucket.acquire(timeout=bad)
    assert bucket.available == 3


def test_setters_and_release_validate() -> None:
    """The rate and capacity setters and release() refuse bad numbers and leave the bucket unchanged."""
    bucket = TokenBucket(1, 3, clock=VirtualClock())
    with pytest.raises(ValueError, match=r"^rate must"):
        bucket.rate = -1
    with pytest.raises(ValueError, match=r"^capacity must"):
        bucket.capacity = 0
    with pytest.raises(ValueError, match=r"^n must"):
        bucket.release(-1)
    assert (bucket.rate, bucket.capacity, bucket.available) == (1, 3, 3)


# --- clock origin


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_bucket_made_outside_a_loop_starts_refilling_at_its_first_use(backend: str) -> None:
    """Created in sync code, an empty bucket is still empty at first use in a virtual-time loop, then refills."""
    bucket = TokenBucket(1, 5, tokens=0)

    async def main() -> tuple[float, float]:
        first = bucket.available
        await anyio.sleep(2)
        return first, bucket.available

    first, later = virtual_time.run(main, backend)
    assert first == 0
    assert later == pytest.approx(2)


# --- invariants


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("try"), st.floats(0.001, 12)),
        st.tuples(st.just("release"), st.floats(0, 20)),
        st.tuples(st.just("advance"), st.floats(0, 5)),
        st.tuples(st.just("rate"), st.floats(0, 1000)),
        st.tuples(st.just("capacity"), st.floats(0.001, 10)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.floats(0, 1000),
    capacity=st.floats(0.001, 10),
    fill=st.floats(0, 1),
    operations=_operations,
)
def test_tokens_stay_within_bounds_and_are_accounted_for(
    rate: float, capacity: float, fill: float, operations: list[tuple[str, float]]
) -> None:
    """Whatever is done to it, a bucket holds between 0 and capacity tokens and grants no more than it got."""
    clock = VirtualClock()
    bucket = TokenBucket(rate, capacity, tokens=capacity * fill, clock=clock)
    supplied = capacity * fill  # an upper bound on what can have been granted
    for operation, value in operations:
        before = bucket.available
        if operation == "try":
            if value > bucket.capacity:
                with pytest.raises(ValueError, match=r"^n must"):
                    bucket.try_acquire(value)
            elif bucket.try_acquire(value):
                assert before >= value * (1 - 1e-9) - bucket.rate * 1e-9
                assert bucket.available == pytest.approx(max(0.0, before - value), abs=1e-9)
            else:
                assert bucket.available == before
        elif operation == "release":
            bucket.release(value)
            supplied += value
            assert bucket.available == pytest.approx(min(bucket.capacity, before + value))
        elif operation == "advance":
            supplied += value * bucket.rate
            clock.advance(value)
        elif operation == "rate":
            bucket.rate = value
        else:
            bucket.capacity = value
        stats = bucket.statistics()
        assert 0 <= stats.available <= stats.capacity
        assert stats.acquired_total <= supplied * (1 + 1e-9) + 1e-9


# --- introspection


def test_statistics_are_a_frozen_snapshot() -> None:
    """statistics() reports the configuration, the level and the counters, in a frozen dataclass."""
    clock = VirtualClock()
    bucket = TokenBucket(10, 5, clock=clock, name="api")
    bucket.try_acquire(2)
    bucket.try_acquire(1)
    assert not bucket.try_acquire(3)
    stats = bucket.statistics()
    assert stats == BucketStatistics(
        name="api",
        rate=10,
        capacity=5,
        available=2,
        waiting=0,
        acquired_total=3,
        grants=2,
        waits=0,
        timeouts=0,
        cancelled=0,
        rejected=0,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.grants = 0  # type: ignore[misc]


async def test_statistics_count_waits() -> None:
    """A call that had to queue counts as a wait, one served at once does not."""
    bucket = TokenBucket(10, 1)
    await bucket.acquire()
    await bucket.acquire()
    stats = bucket.statistics()
    assert (stats.grants, stats.waits, stats.acquired_total) == (2, 1, 2)


async def test_repr_shows_name_rate_capacity_level_and_queue() -> None:
    """repr() names the bucket and shows its rate, capacity, available tokens and queue length."""
    clock = VirtualClock()
    bucket = TokenBucket(10, 5, clock=clock, name="api")
    assert bucket.try_acquire(1.8)
    assert repr(bucket) == "<TokenBucket 'api' rate=10/s capacity=5 available=3.2 waiting=0>"
    clock.advance(60)
    assert repr(bucket) == "<TokenBucket 'api' rate=10/s capacity=5 available=5 waiting=0>"


async def test_time_until_available_counts_the_queue() -> None:
    """The predicted wait covers the tokens of queued calls ahead, then the new request's own shortfall."""
    bucket = TokenBucket(2, 4, tokens=1)
    assert bucket.time_until_available(1) == 0
    assert bucket.time_until_available(3) == pytest.approx(1)
    log: list[tuple[str, float]] = []
    async with anyio.create_task_group() as tg:
        await start_acquirer(tg, bucket, 4, log, "a")
        assert bucket.time_until_available(1) == pytest.approx(2)
    assert bucket.time_until_available(1) == pytest.approx(0.5)


def test_a_bucket_used_by_two_event_loops_in_turn_reads_the_running_loops_clock() -> None:
    """The uncontended fast path caches the default clock's loop; a bucket reused on a later loop (with
    another time origin) must read that loop's time, not the stopped one's."""
    from asyncretry.testing import VirtualTimeEventLoop

    bucket = TokenBucket(1.0, 1.0)
    waited: list[float] = []

    async def take_then_idle() -> None:
        await bucket.acquire()
        await anyio.sleep(100.0)

    async def take_again() -> None:
        started = anyio.current_time()
        await bucket.acquire()
        waited.append(anyio.current_time() - started)

    anyio.run(take_then_idle, backend_options={"loop_factory": lambda: VirtualTimeEventLoop(start=0.0)})
    anyio.run(take_again, backend_options={"loop_factory": lambda: VirtualTimeEventLoop(start=0.0)})
    # The second loop's clock starts again at 0: its reading goes "back", so no refill is credited and the
    # token takes one second of the second loop's time (not zero, as a stale reading of 100 would give).
    assert waited == [pytest.approx(1.0)]
