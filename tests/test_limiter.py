"""AdaptiveRateLimiter: the AWS SDKs' end-to-end table, pacing, fairness, cancellation, timeouts, events."""

from __future__ import annotations

import itertools
import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

import virtual_time
from asyncretry import (
    DEFAULT_CLOCK,
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    Event,
    EventBus,
    LimiterRateChanged,
    LimiterStatistics,
    RateLimitTimeout,
    Throttled,
)
from asyncretry.testing import VirtualClock

DATA = Path(__file__).parent / "data"
END_TO_END: dict[str, Any] = json.loads((DATA / "adaptive_end_to_end.json").read_text(encoding="utf-8"))
AWS = AdaptiveLimiterConfig(profile="aws")
"""This file pins the "aws" profile (the default profile is "asyncretry": tests/test_limiter_profiles.py)."""
TOLERANCE = 1e-9
"""Absolute tolerance against the SDK tables: Go checks 1e-15, smithy-kotlin 5e-7, aws-sdk-java-v2 1e-4.
Ours differs from Go's by float rounding only (4.800000000000001 against 4.8)."""


def _recorder() -> tuple[EventBus, list[Event]]:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    return bus, seen


# --- conformance with the SDKs' end-to-end table


def test_update_reproduces_the_sdk_end_to_end_table() -> None:
    """Measured send rate and fill rate match every row of the SDKs' shared end-to-end table to 1e-9.

    The rows come from aws-sdk-go-v2 (identical in smithy-rs, smithy-kotlin and aws-sdk-java-v2); they
    agree with SPEC section 5 on every row, so no row needs an exception.
    """
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock)
    for row in END_TO_END["rows"]:
        clock.advance(row["timestamp"] - clock.now())
        assert clock.now() == row["timestamp"]
        limiter.update(throttled=row["throttled"])
        assert limiter.measured_rate == pytest.approx(row["measured_tx_rate"], rel=0, abs=TOLERANCE), row
        assert limiter.fill_rate == pytest.approx(row["fill_rate"], rel=0, abs=TOLERANCE), row
        assert limiter.max_capacity == max(limiter.fill_rate, 1.0)
    assert limiter.enabled
    assert limiter.last_throttle_time == 3.2
    assert limiter.last_max_rate == pytest.approx(4.282036558348658, abs=TOLERANCE)


def test_end_to_end_table_is_independent_of_the_clock_origin() -> None:
    """Shifting every timestamp by a whole number of seconds gives the same rates: only differences count."""
    clock = VirtualClock(1_000_000.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock)
    for row in END_TO_END["rows"]:
        clock.advance(1_000_000.0 + row["timestamp"] - clock.now())
        limiter.update(throttled=row["throttled"])
        assert limiter.measured_rate == pytest.approx(row["measured_tx_rate"], rel=0, abs=1e-6), row
        assert limiter.fill_rate == pytest.approx(row["fill_rate"], rel=0, abs=1e-6), row


def test_before_any_throttle_the_limiter_is_disabled_at_the_minimum_rate() -> None:
    """A new "aws" limiter is disabled, its empty bucket filling at 1/s (botocore's max_rate=1), capacity 1."""
    clock = VirtualClock(5.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock, name="s3")
    stats = limiter.statistics()
    assert stats == LimiterStatistics(
        name="s3",
        enabled=False,
        fill_rate=1.0,
        max_capacity=1.0,
        available=0.0,
        measured_rate=0.0,
        last_max_rate=0.0,
        last_throttle_time=5.0,
        updates=0,
        throttles=0,
        acquires=0,
        waits=0,
        wait_time=0.0,
        timeouts=0,
        waiting=0,
        rule=None,
        held=0.0,
        holds=0,
    )
    assert limiter.config == AWS


def test_first_throttle_cuts_to_beta_times_the_measured_rate() -> None:
    """The first throttle enables the limiter at beta x measured rate and caps the bucket at that rate."""
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock)
    for _ in range(40):  # 20 requests per second for 2 s
        clock.advance(0.05)
        limiter.update(throttled=False)
    limiter.update(throttled=True)
    assert limiter.enabled
    assert limiter.measured_rate > 10
    assert limiter.fill_rate == pytest.approx(0.7 * limiter.measured_rate)
    assert limiter.max_capacity == limiter.fill_rate
    assert limiter.last_max_rate == limiter.measured_rate
    assert limiter.last_throttle_time == clock.now()
    assert limiter.statistics().available <= limiter.max_capacity


def test_throttle_with_nothing_measured_floors_at_the_minimums() -> None:
    """A throttle before any rate was measured gives the minimum fill rate and capacity, not zero."""
    config = AdaptiveLimiterConfig(profile="aws", min_fill_rate=2.0, min_capacity=3.0)
    limiter = AdaptiveRateLimiter(config, clock=VirtualClock())
    limiter.update(throttled=True)
    assert (limiter.fill_rate, limiter.max_capacity) == (2.0, 3.0)


# --- configuration


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("profile", "fast", r"profile must be one of 'asyncretry', 'aws', 'fair', 'independent', got 'fast'"),
        ("beta", 0.0, r"beta must be > 0 and < 1, got 0.0"),
        ("beta", 1.0, r"beta must be > 0 and < 1, got 1.0"),
        ("scale_constant", 0, r"scale_constant must be > 0, got 0"),
        ("smoothing", 0.0, r"smoothing must be > 0 and <= 1, got 0.0"),
        ("smoothing", 1.5, r"smoothing must be > 0 and <= 1, got 1.5"),
        ("measurement_bucket", 0, r"measurement_bucket must be > 0, got 0"),
        ("measurement_bucket", timedelta(seconds=-1), r"measurement_bucket must be > 0, got -1"),
        ("min_fill_rate", -0.5, r"min_fill_rate must be > 0, got -0.5"),
        ("min_capacity", 0.5, r"min_capacity must be >= 1, got 0.5"),
        ("max_rate_growth", 0, r"max_rate_growth must be > 0, got 0"),
        ("max_wait", -1, r"max_wait must be >= 0, got -1"),
        ("beta", math.nan, r"beta must be a finite number"),
        ("min_fill_rate", math.inf, r"min_fill_rate must be a finite number"),
    ],
)
def test_config_rejects_bad_values_naming_the_parameter(field: str, value: Any, message: str) -> None:
    """Every bad setting fails at construction with a message naming the parameter, value and range."""
    with pytest.raises(ValueError, match=message):
        AdaptiveLimiterConfig(**{field: value})


@pytest.mark.parametrize("field", ["beta", "min_capacity", "max_wait", "measurement_bucket"])
def test_config_rejects_non_numbers(field: str) -> None:
    """A string or bool where a number belongs is a TypeError naming the parameter."""
    for bad in ("1", True):
        kwargs: dict[str, Any] = {field: bad}
        with pytest.raises(TypeError, match=rf"{field} must be a number"):
            AdaptiveLimiterConfig(**kwargs)


def test_config_normalizes_durations_and_keeps_the_aws_defaults() -> None:
    """Durations accept timedelta and are stored as float seconds; the defaults are the AWS constants."""
    config = AdaptiveLimiterConfig(
        measurement_bucket=timedelta(milliseconds=250), max_wait=timedelta(seconds=3)
    )
    assert (config.measurement_bucket, config.max_wait) == (0.25, 3.0)
    assert type(config.measurement_bucket) is float
    default = AdaptiveLimiterConfig()
    assert (default.profile, default.beta, default.scale_constant) == ("asyncretry", 0.7, 0.4)
    assert default.smoothing == 0.8
    assert (default.measurement_bucket, default.min_fill_rate, default.min_capacity) == (0.5, 0.5, 1.0)
    assert (default.max_rate_growth, default.max_wait) == (2.0, None)
    with pytest.raises(AttributeError):
        default.beta = 0.5  # type: ignore[misc]


# --- events, statistics, repr


def test_events_report_throttles_and_rate_changes() -> None:
    """Each throttled update emits Throttled; each change of fill rate emits LimiterRateChanged."""
    bus, seen = _recorder()
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock, name="dynamo", events=bus)
    for row in END_TO_END["rows"][:10]:  # nine successes, then a throttle at 2.0
        clock.advance(row["timestamp"] - clock.now())
        limiter.update(throttled=row["throttled"], reason="HTTP 429" if row["throttled"] else "")

    throttled = [e for e in seen if isinstance(e, Throttled)]
    assert throttled == [Throttled(time=2.0, source="dynamo", reason="HTTP 429")]
    changes = [e for e in seen if isinstance(e, LimiterRateChanged)]
    # 1 until the first response, 0.5 for the first five rows, then 0.6912, 1.0976, 1.6384, 2.3328 and
    # the cut to 3.02848.
    assert [c.time for c in changes] == pytest.approx([0.2, 1.2, 1.4, 1.6, 1.8, 2.0])
    assert (changes[0].old_rate, changes[0].new_rate) == (1.0, 0.5)
    last = changes[-1]
    assert last.old_rate == pytest.approx(2.3328)
    assert last.new_rate == pytest.approx(3.02848)
    assert (last.throttled, last.enabled, last.source) == (True, True, "dynamo")
    assert last.measured_rate == pytest.approx(4.3264)
    assert not changes[0].enabled


class _DeafBus(EventBus):
    """A bus that wants nothing and records anything emitted anyway."""

    __slots__ = ("emitted",)

    def __init__(self) -> None:
        super().__init__()
        self.emitted: list[Event] = []

    def wants(self, event_type: type[Event]) -> bool:
        return False

    def emit(self, event: Event) -> None:
        self.emitted.append(event)


def test_no_event_is_emitted_when_nobody_wants_it() -> None:
    """update() asks wants() first, so nothing is built or emitted when nobody listens."""
    bus = _DeafBus()
    clock = VirtualClock()
    limiter = AdaptiveRateLimiter(AWS, clock=clock, events=bus)
    for _ in range(5):
        clock.advance(0.3)
        limiter.update(throttled=True)
    assert limiter.fill_rate == 0.5
    assert bus.emitted == []


def test_statistics_count_updates_and_throttles_and_repr_shows_the_state() -> None:
    """statistics() counts updates and throttles; repr names the limiter, its state and its rates."""
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(AWS, clock=clock, name="api")
    assert repr(limiter) == (
        "<AdaptiveRateLimiter 'api' disabled fill_rate=1/s max_capacity=1 measured_rate=0/s profile='aws'>"
    )
    for row in END_TO_END["rows"]:
        clock.advance(row["timestamp"] - clock.now())
        limiter.update(throttled=row["throttled"])
    stats = limiter.statistics()
    assert (stats.updates, stats.throttles, stats.enabled) == (17, 2, True)
    assert repr(limiter) == (
        "<AdaptiveRateLimiter 'api' enabled fill_rate=3.452/s max_capacity=3.452 measured_rate=4.333/s "
        "profile='aws'>"
    )


@given(
    steps=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=5.0), st.booleans()), min_size=1, max_size=60
    ),
    min_fill=st.floats(min_value=0.01, max_value=10),
    min_capacity=st.floats(min_value=1, max_value=10),
    beta=st.floats(min_value=0.05, max_value=0.95),
)
def test_rates_and_tokens_stay_within_bounds(
    steps: list[tuple[float, bool]], min_fill: float, min_capacity: float, beta: float
) -> None:
    """Responses keep fill_rate >= min_fill_rate, max_capacity >= min_capacity, 0 <= tokens <= capacity."""
    config = AdaptiveLimiterConfig(
        profile="aws", min_fill_rate=min_fill, min_capacity=min_capacity, beta=beta
    )
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(config, clock=clock)
    for gap, throttled in steps:
        clock.advance(gap)
        limiter.update(throttled=throttled)
        stats = limiter.statistics()
        assert stats.fill_rate >= min_fill
        assert stats.max_capacity >= min_capacity
        assert stats.measured_rate >= 0.0
        assert 0.0 <= stats.available <= stats.max_capacity
        assert math.isfinite(stats.fill_rate)


# --- acquire: asyncio and trio, virtual time

@pytest.mark.anyio
async def test_acquire_is_free_before_the_first_throttle() -> None:
    """Until a throttle is seen, acquire() returns at once however many attempts are made."""
    limiter = AdaptiveRateLimiter(AWS)
    start = DEFAULT_CLOCK.now()
    for _ in range(1000):
        await limiter.acquire()
        limiter.update(throttled=False)
    assert DEFAULT_CLOCK.now() == start
    stats = limiter.statistics()
    assert (stats.acquires, stats.waits, stats.enabled) == (1000, 0, False)


@pytest.mark.anyio
async def test_after_a_throttle_acquires_are_paced_at_the_fill_rate() -> None:
    """After an immediate throttle (nothing measured: 0.5/s, empty bucket), attempts go out every 2 s."""
    limiter = AdaptiveRateLimiter(AWS)
    start = DEFAULT_CLOCK.now()
    limiter.update(throttled=True)
    times = []
    for _ in range(4):
        await limiter.acquire()
        times.append(DEFAULT_CLOCK.now() - start)
    assert times == pytest.approx([2.0, 4.0, 6.0, 8.0])
    stats = limiter.statistics()
    assert (stats.acquires, stats.waits) == (4, 4)
    assert stats.wait_time == pytest.approx(8.0)


@pytest.mark.anyio
async def test_throttle_under_load_paces_at_beta_times_the_measured_rate() -> None:
    """Sending 20/s then throttled: attempts are paced at 0.7 x the measured rate, after any saved tokens."""
    limiter = AdaptiveRateLimiter(AWS)
    for _ in range(60):  # 20 requests per second for 3 s, all free
        await limiter.acquire()
        await anyio.sleep(0.05)
        limiter.update(throttled=False)
    limiter.update(throttled=True)
    rate = limiter.fill_rate
    assert rate == pytest.approx(0.7 * limiter.measured_rate)
    saved = limiter.statistics().available
    throttled_at = DEFAULT_CLOCK.now()
    times = []
    for _ in range(20):
        await limiter.acquire()
        times.append(DEFAULT_CLOCK.now() - throttled_at)
    assert saved < 10
    expected = [max(0.0, (k - saved) / rate) for k in range(1, 21)]
    assert times == pytest.approx(expected, abs=1e-6)


@pytest.mark.anyio
async def test_waiters_are_served_first_come_first_served() -> None:
    """Many tasks waiting at once get their tokens in the order they asked, one every 1 / fill_rate s."""
    limiter = AdaptiveRateLimiter(AWS)
    limiter.update(throttled=True)
    start = DEFAULT_CLOCK.now()
    served: list[tuple[int, float]] = []

    async def attempt(i: int) -> None:
        await limiter.acquire()
        served.append((i, DEFAULT_CLOCK.now() - start))

    async with anyio.create_task_group() as tg:
        for i in range(30):
            tg.start_soon(attempt, i)
            await anyio.sleep(0.001)  # queue in a known order: trio shuffles tasks started together
        assert limiter.statistics().waiting == 30
    assert [i for i, _ in served] == list(range(30))
    assert [t for _, t in served] == pytest.approx([2.0 * (i + 1) for i in range(30)])


@pytest.mark.anyio
async def test_cancelled_waiter_leaves_no_trace() -> None:
    """A waiter cancelled in line takes no token: those behind it are served as if it never queued."""
    limiter = AdaptiveRateLimiter(AWS)
    limiter.update(throttled=True)
    start = DEFAULT_CLOCK.now()
    served: dict[str, float] = {}

    async def attempt(label: str) -> None:
        await limiter.acquire()
        served[label] = DEFAULT_CLOCK.now() - start

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, "first")
        await anyio.sleep(0.001)
        with anyio.move_on_after(1.0) as scope:  # gives up while "first" still waits
            await limiter.acquire()
        assert scope.cancelled_caught
        tg.start_soon(attempt, "third")
    assert served == pytest.approx({"first": 2.0, "third": 4.0})
    stats = limiter.statistics()
    assert (stats.acquires, stats.timeouts) == (2, 0)
    assert stats.available == pytest.approx(0.0, abs=1e-9)


@pytest.mark.anyio
async def test_acquire_raises_when_the_wait_would_exceed_the_timeout() -> None:
    """A token 2 s away with a 1 s timeout raises RateLimitTimeout and takes nothing; 3 s is enough."""
    limiter = AdaptiveRateLimiter(AWS, name="sqs")
    limiter.update(throttled=True)
    start = DEFAULT_CLOCK.now()
    with pytest.raises(RateLimitTimeout) as caught:
        await limiter.acquire(timeout=1.0)
    assert caught.value.name == "sqs"
    assert caught.value.timeout == 1.0
    await limiter.acquire(timeout=3.0)
    assert DEFAULT_CLOCK.now() - start == pytest.approx(2.0)
    stats = limiter.statistics()
    assert (stats.acquires, stats.timeouts) == (1, 1)


@pytest.mark.anyio
async def test_fail_fast_config_refuses_at_once_instead_of_waiting() -> None:
    """With max_wait=0, acquire() raises at once when no token is ready; an explicit timeout overrides it."""
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile="aws", max_wait=0))
    assert limiter.config.max_wait == 0.0
    await limiter.acquire()  # not enabled yet: free
    limiter.update(throttled=True)
    start = DEFAULT_CLOCK.now()
    with pytest.raises(RateLimitTimeout):
        await limiter.acquire()
    assert DEFAULT_CLOCK.now() == start
    await limiter.acquire(timeout=10.0)
    assert DEFAULT_CLOCK.now() - start == pytest.approx(2.0)


@pytest.mark.anyio
async def test_outer_cancellation_propagates_from_a_waiting_acquire() -> None:
    """Cancelling the caller's scope while it waits for a token raises cancellation, not a timeout."""
    limiter = AdaptiveRateLimiter(AWS)
    limiter.update(throttled=True)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await limiter.acquire()
    assert scope.cancelled_caught
    assert limiter.statistics().timeouts == 0


@pytest.mark.anyio
async def test_a_rate_cut_slows_waiters_already_in_line() -> None:
    """Waiters queued at a high fill rate are re-planned when further throttles cut the rate."""
    limiter = AdaptiveRateLimiter(AWS)
    for _ in range(40):  # 20 requests per second for 2 s
        await anyio.sleep(0.05)
        limiter.update(throttled=False)
    limiter.update(throttled=True)
    fast = limiter.fill_rate
    assert fast > 10
    while limiter.statistics().available >= 1:  # spend the saved tokens: the next acquire must wait
        await limiter.acquire()
    served: list[float] = []

    async def attempt() -> None:
        await limiter.acquire()
        served.append(DEFAULT_CLOCK.now())

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(attempt)
        await anyio.lowlevel.checkpoint()
        # A burst of throttles in one measurement bucket cuts the rate by beta each time, to the floor.
        for _ in range(12):
            limiter.update(throttled=True)
        assert limiter.fill_rate == 0.5
        cut_at = DEFAULT_CLOCK.now()
    # At the old rate all three would be served within 3 / fast < 0.3 s; at 0.5/s it takes over 4 s.
    assert len(served) == 3
    assert served[-1] - cut_at > 4.0


@pytest.mark.anyio
async def test_timeout_is_validated_even_when_acquire_is_free() -> None:
    """A negative timeout is refused with a message naming it, before and after the first throttle."""
    limiter = AdaptiveRateLimiter(AWS)
    with pytest.raises(ValueError, match=r"timeout must be >= 0, got -1"):
        await limiter.acquire(timeout=-1)
    limiter.update(throttled=True)
    with pytest.raises(ValueError, match=r"timeout must be >= 0, got -1"):
        await limiter.acquire(timeout=timedelta(seconds=-1))
    await limiter.acquire(timeout=timedelta(seconds=2))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_limiter_built_outside_a_loop_starts_on_the_loops_clock(backend: str) -> None:
    """Built outside any event loop on the default clock, the limiter starts at its first update.

    The default clock reads time.monotonic() outside a loop, and the loop's own (here virtual) clock
    inside it: without re-anchoring, t0 would belong to another time scale.
    """
    limiter = AdaptiveRateLimiter(AWS)

    async def main() -> tuple[float, float]:
        await anyio.sleep(100.2)
        first = DEFAULT_CLOCK.now()
        for _ in range(40):  # 20 per second for 2 s
            limiter.update(throttled=False)
            await anyio.sleep(0.05)
        return first, DEFAULT_CLOCK.now()

    first, _ = virtual_time.run(main, backend)
    assert limiter.last_throttle_time == first
    assert 15 < limiter.measured_rate < 25


def _enabled_by_one_throttle(
    *draws: float, config: AdaptiveLimiterConfig | None = None, clock: VirtualClock | None = None
) -> AdaptiveRateLimiter:
    """A limiter whose rng returns ``draws`` in turn (the first one phases the bucket the throttle enables)."""
    clock = clock if clock is not None else VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(config, clock=clock, rng=iter(draws).__next__)
    for _ in range(100):  # 100 successes a second, then a throttle
        clock.advance(0.01)
        limiter.update(False, sent_at=clock.now() - 0.005)
    limiter.update(True, sent_at=clock.now() - 0.005)
    return limiter


def test_limiters_enabled_together_release_their_tokens_at_different_instants() -> None:
    """The first throttle gives the bucket a random fraction of a token (rng), so that clients enabled by the
    same event are not in step; the "aws" profile keeps what its bucket filled, as the SDKs do."""
    early, late = _enabled_by_one_throttle(0.9), _enabled_by_one_throttle(0.1)
    assert early.fill_rate == late.fill_rate
    assert early.time_until_available() < late.time_until_available()
    assert early.time_until_available() == pytest.approx(0.1 / early.fill_rate)
    aws = [_enabled_by_one_throttle(u, config=AWS).time_until_available() for u in (0.9, 0.1)]
    assert aws[0] == aws[1]


def test_limiters_cut_by_the_same_episode_draw_a_new_phase() -> None:
    """A later throttle that cuts the rate draws a new random fraction of a token as well: clients throttled in
    the same episode do not leave it in step. The "aws" profile keeps its bucket's tokens, as the SDKs do."""

    def cut_after_a_second(draws: list[float], config: AdaptiveLimiterConfig | None = None) -> AdaptiveRateLimiter:
        clock = VirtualClock(0.0)
        limiter = _enabled_by_one_throttle(*draws, config=config, clock=clock)
        clock.advance(1.0)  # the bucket fills (one token at most): both limiters alike again
        before = limiter.fill_rate
        limiter.update(True, sent_at=clock.now() - 0.005)  # a new congestion event, nothing served since
        assert limiter.fill_rate < before
        return limiter

    early, late = cut_after_a_second([0.5, 0.9]), cut_after_a_second([0.5, 0.1])
    assert early.fill_rate == late.fill_rate
    assert early.time_until_available() == pytest.approx(0.1 / early.fill_rate)
    assert late.time_until_available() == pytest.approx(0.9 / late.fill_rate)
    aws = [cut_after_a_second([0.5, u], AWS) for u in (0.9, 0.1)]
    assert aws[0].time_until_available() == aws[1].time_until_available() == 0.0


@pytest.mark.anyio
async def test_a_cut_with_calls_in_line_keeps_the_line() -> None:
    """The new phase is drawn only when no call waits for a token: a cut with calls in line re-plans them
    at the new rate, and every one of them is served."""
    limiter = AdaptiveRateLimiter(rng=lambda: 0.0)  # each phase drawn at 0: an empty bucket
    for _ in range(40):  # 20 requests per second for 2 s, then a throttle
        await anyio.sleep(0.05)
        limiter.update(False, sent_at=DEFAULT_CLOCK.now() - 0.01)
    limiter.update(True, sent_at=DEFAULT_CLOCK.now() - 0.01)
    served: list[float] = []

    async def attempt() -> None:
        await limiter.acquire()
        served.append(DEFAULT_CLOCK.now())

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(attempt)
        await anyio.sleep(0.3)
        assert limiter.statistics().waiting > 0
        before = limiter.fill_rate
        limiter.update(True, sent_at=DEFAULT_CLOCK.now() - 0.01)  # a new event cuts the rate
        assert limiter.fill_rate < before
        cut_at = DEFAULT_CLOCK.now()
        waiting = limiter.statistics().waiting
    assert len(served) == 10
    assert limiter.statistics().waiting == 0
    # Those still in line when the rate was cut left at the new rate, one token at a time (the first of
    # them had part of its token already).
    after = [t for t in served if t > cut_at]
    assert len(after) == waiting
    assert (waiting - 1) / limiter.fill_rate <= after[-1] - cut_at <= waiting / limiter.fill_rate
    assert all(b - a == pytest.approx(1 / limiter.fill_rate) for a, b in itertools.pairwise(after))


def test_try_acquire_admits_exactly_when_acquire_would_not_wait() -> None:
    """try_acquire() takes a token when one is there (counted as an acquire) and refuses otherwise, without
    taking anything: the engine awaits acquire() only then."""
    clock = VirtualClock(0.0)
    limiter = _enabled_by_one_throttle(0.5, clock=clock)
    assert not limiter.try_acquire()  # half a token
    assert limiter.statistics().acquires == 0
    clock.advance(limiter.time_until_available())
    assert limiter.try_acquire()
    assert not limiter.try_acquire()
    assert limiter.statistics().acquires == 1
