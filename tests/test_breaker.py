"""The circuit breaker trips on a failure ratio or a failure streak, rejects while open, and probes back."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import (
    BreakerState,
    BreakerStateChanged,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    Event,
    EventBus,
)
from asyncretry.testing import VirtualClock
from conftest import EventLog

CLOSED, OPEN, HALF_OPEN, ISOLATED = (
    BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.ISOLATED,
)


class Recorder(EventLog):
    """An event bus whose breaker events are kept in order."""

    def keep(self, event: Event) -> Any:
        return event if isinstance(event, BreakerStateChanged) else None

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(e.old_state, e.new_state) for e in self.events]


def make(clock: VirtualClock | None = None, **config: Any) -> tuple[CircuitBreaker, VirtualClock, Recorder]:
    clock = clock if clock is not None else VirtualClock()
    recorder = Recorder()
    breaker = CircuitBreaker(CircuitBreakerConfig(**config), clock=clock, name="api", events=recorder.bus)
    return breaker, clock, recorder


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        breaker.record_failure(breaker.acquire())


def succeed(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        breaker.record_success(breaker.acquire())


def trip(breaker: CircuitBreaker) -> None:
    while breaker.state is CLOSED:
        fail(breaker)


def voting(probes: int, to_close: int, to_reopen: int, **config: Any) -> tuple[CircuitBreaker, VirtualClock, Recorder]:
    """A breaker whose half-open probes vote, tripped and left at the start of its first half-open period."""
    config.setdefault("break_duration", 1)
    breaker, clock, recorder = make(
        minimum_throughput=2, half_open_max_probes=probes, half_open_successes_to_close=to_close,
        half_open_failures_to_reopen=to_reopen, **config,
    )
    trip(breaker)
    clock.advance(config["break_duration"])
    return breaker, clock, recorder


# -- closed state and the failure ratio


def test_a_closed_breaker_admits_normal_calls() -> None:
    """While closed, acquire() admits every call and says it is not a probe."""
    breaker, _, recorder = make()
    assert [breaker.acquire() for _ in range(100)] == [False] * 100
    assert breaker.state is CLOSED
    assert recorder.events == []


def test_the_ratio_is_not_judged_below_the_minimum_throughput() -> None:
    """Nine failures out of nine calls do not trip a breaker that needs ten calls; the tenth does."""
    breaker, _, recorder = make(minimum_throughput=10)
    fail(breaker, 9)
    assert breaker.state is CLOSED
    fail(breaker)
    assert breaker.state is OPEN
    assert recorder.events[0].reason == "failure ratio 1 >= 0.5 over 10 calls"


def test_the_breaker_trips_when_the_ratio_reaches_the_threshold() -> None:
    """The ratio trips at failures / calls >= failure_ratio, not above it only (7 of 10 at 0.7)."""
    breaker, _, recorder = make(failure_ratio=0.7, minimum_throughput=10)
    succeed(breaker, 3)
    fail(breaker, 6)
    assert breaker.state is CLOSED
    fail(breaker)
    assert breaker.state is OPEN
    assert recorder.events[0].reason == "failure ratio 0.7 >= 0.7 over 10 calls"


def test_successes_keep_the_ratio_below_the_threshold() -> None:
    """Failures interleaved with enough successes never trip the breaker."""
    breaker, _, _ = make(failure_ratio=0.5, minimum_throughput=4)
    for _ in range(50):
        succeed(breaker, 2)
        fail(breaker)
    assert breaker.state is CLOSED
    stats = breaker.statistics()
    assert (stats.successes, stats.failures) == (100, 50)
    assert stats.failure_ratio == pytest.approx(1 / 3)


def test_the_sliding_window_forgets_old_samples() -> None:
    """Samples leave the window after sampling_duration, so old failures no longer count towards a trip."""
    breaker, clock, _ = make(sampling_duration=30, minimum_throughput=10)
    fail(breaker, 9)
    clock.advance(29.9)
    assert breaker.statistics().failures == 9
    clock.advance(0.1)
    assert breaker.statistics().failures == 0
    fail(breaker)
    assert breaker.state is CLOSED


def test_the_window_expires_bucket_by_bucket() -> None:
    """The window is a ring of ten buckets: a sample counts for between 0.9 and 1.0 sampling durations."""
    breaker, clock, _ = make(sampling_duration=10, minimum_throughput=5)
    fail(breaker, 2)  # bucket [0, 1)
    clock.advance(0.9)
    succeed(breaker, 3)  # same bucket, 0.9 s later
    clock.advance(4.1)  # t = 5: bucket [5, 6)
    fail(breaker)
    clock.advance(4.5)  # t = 9.5: everything still inside the window
    assert (breaker.statistics().failures, breaker.statistics().successes) == (3, 3)
    clock.advance(0.5)  # t = 10: the first bucket expires (the successes after 9.1 s, the failures after 10)
    assert (breaker.statistics().failures, breaker.statistics().successes) == (1, 0)
    clock.advance(100)
    assert (breaker.statistics().failures, breaker.statistics().successes) == (0, 0)


def test_a_success_can_be_recorded_at_a_time_the_caller_just_read() -> None:
    """record_success(probe, now=t) samples at t, as if the breaker had read its clock (the engine passes
    the time it read already); the sample then ages like any other."""
    breaker, clock, _ = make(sampling_duration=10, minimum_throughput=5)
    clock.advance(3.0)
    breaker.record_success(breaker.acquire(), now=clock.now())
    breaker.record_success(breaker.acquire())
    assert breaker.statistics().successes == 2
    clock.advance(9.9)  # t = 12.9: both samples (bucket [3, 4)) still count
    assert breaker.statistics().successes == 2
    clock.advance(0.1)  # t = 13: their bucket leaves the window
    assert breaker.statistics().successes == 0


def test_a_clock_that_goes_back_clears_the_window() -> None:
    """A clock that jumps backwards (another event loop's time base) restarts the window empty."""
    clock = VirtualClock(start=1000.0)
    breaker, _, _ = make(clock, minimum_throughput=3)
    fail(breaker, 2)

    class Back:
        def now(self) -> float:
            return 5.0

        async def sleep(self, seconds: float) -> None:
            raise NotImplementedError

    breaker._clock = Back()
    fail(breaker)
    assert breaker.state is CLOSED
    assert breaker.statistics().failures == 1


# -- consecutive failures


def test_consecutive_mode_trips_on_a_streak_of_failures() -> None:
    """With only the consecutive trigger, a success resets the streak and N failures in a row trip."""
    breaker, _, recorder = make(failure_ratio=None, consecutive_failures=3)
    fail(breaker, 2)
    succeed(breaker)
    fail(breaker, 2)
    assert breaker.state is CLOSED
    assert breaker.statistics().consecutive_failures == 2
    fail(breaker)
    assert breaker.state is OPEN
    assert recorder.events[0].reason == "3 consecutive failures"


def test_consecutive_mode_ignores_the_window_and_time() -> None:
    """A streak counts however long it takes, even when its failures left the sampling window."""
    breaker, clock, _ = make(failure_ratio=None, consecutive_failures=3, sampling_duration=1)
    for _ in range(2):
        fail(breaker)
        clock.advance(60)
    fail(breaker)
    assert breaker.state is OPEN


def test_both_triggers_trip_on_whichever_fires_first() -> None:
    """With both triggers on, a short streak trips below the minimum throughput, and the ratio still trips."""
    streak, _, events = make(consecutive_failures=2, minimum_throughput=10)
    fail(streak, 2)
    assert streak.state is OPEN
    assert events.events[0].reason == "2 consecutive failures"

    ratio, _, events = make(consecutive_failures=5, minimum_throughput=4, failure_ratio=0.5)
    for _ in range(2):
        succeed(ratio)
        fail(ratio)
    assert ratio.state is OPEN
    assert events.events[0].reason == "failure ratio 0.5 >= 0.5 over 4 calls"


# -- open state


def test_an_open_circuit_rejects_at_once_saying_when_it_may_close() -> None:
    """While open, acquire() raises CircuitOpenError whose retry_after counts down the break."""
    breaker, clock, _ = make(minimum_throughput=2, break_duration=5)
    trip(breaker)
    message = r"circuit 'api' is open: calls are rejected for another 5 s"
    with pytest.raises(CircuitOpenError, match=message) as err:
        breaker.acquire()
    assert (err.value.name, err.value.state, err.value.retry_after) == ("api", "open", 5.0)
    clock.advance(2)
    with pytest.raises(CircuitOpenError) as err:
        breaker.acquire()
    assert err.value.retry_after == pytest.approx(3.0)
    clock.advance(2.9)
    assert breaker.statistics().retry_after == pytest.approx(0.1)
    assert breaker.statistics().rejected == 2


def test_the_break_ends_lazily_when_the_state_is_read() -> None:
    """An open circuit turns half-open on the first read after the break, and the event says so then."""
    breaker, clock, recorder = make(minimum_throughput=2, break_duration=5)
    trip(breaker)
    clock.advance(100)
    assert len(recorder.events) == 1
    assert "half_open" in repr(breaker)  # repr shows what a read would see but changes nothing
    assert len(recorder.events) == 1
    assert breaker.state is HALF_OPEN
    assert recorder.edges == [("closed", "open"), ("open", "half_open")]
    assert recorder.events[1].time == 100.0
    assert recorder.events[1].reason == "break of 5 s elapsed"


def test_outcomes_of_calls_admitted_before_the_trip_are_ignored() -> None:
    """Calls admitted while closed that finish after the circuit opened change nothing."""
    breaker, clock, _ = make(minimum_throughput=2, break_duration=5)
    late = [breaker.acquire() for _ in range(3)]
    trip(breaker)
    opened = breaker.statistics()
    breaker.record_failure(late[0])
    breaker.record_success(late[1])
    breaker.release(late[2])
    assert breaker.statistics() == opened
    clock.advance(5)
    assert breaker.acquire() == 1  # the first half-open period's ticket


# -- half-open state


def test_half_open_admits_exactly_the_configured_probes() -> None:
    """With three probe slots, the fourth call is rejected; two successes out of three close the circuit."""
    breaker, clock, recorder = make(
        minimum_throughput=2, break_duration=5, half_open_max_probes=3, half_open_successes_to_close=2,
    )
    trip(breaker)
    clock.advance(5)
    probes = [breaker.acquire() for _ in range(3)]
    assert probes == [1, 1, 1]  # tickets of the first half-open period
    with pytest.raises(CircuitOpenError) as err:
        breaker.acquire()
    assert (err.value.state, err.value.retry_after) == ("half_open", 5.0)
    assert breaker.statistics().probes_in_flight == 3
    breaker.record_success(probes[0])
    assert breaker.state is HALF_OPEN
    with pytest.raises(CircuitOpenError):
        breaker.acquire()  # a successful probe keeps its slot: three probes per half-open period at most
    breaker.record_success(probes[1])
    assert breaker.state is CLOSED
    assert recorder.events[-1].reason == "2 probes succeeded"
    breaker.record_success(probes[2])  # the third probe ends after the close: counted as a normal call
    assert breaker.statistics().successes == 1
    assert breaker.acquire() == 0


@pytest.mark.anyio
async def test_half_open_admits_n_probes_among_concurrent_callers() -> None:
    """Of 20 tasks calling at once into a half-open circuit, exactly the configured 2 run as probes."""
    breaker = CircuitBreaker(
        CircuitBreakerConfig(minimum_throughput=2, break_duration=5, half_open_max_probes=2,
                             half_open_successes_to_close=2),
        events=EventBus(),
    )
    trip(breaker)
    await anyio.sleep(5)
    running = 0
    most = 0
    rejected = 0

    async def call() -> None:
        nonlocal running, most, rejected
        try:
            probe = breaker.acquire()
        except CircuitOpenError:
            rejected += 1
            return
        running += 1
        most = max(most, running)
        await anyio.sleep(1)
        running -= 1
        breaker.record_success(probe)

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(call)
    assert (most, rejected) == (2, 18)
    assert breaker.state is CLOSED


def test_with_failures_to_reopen_one_unlucky_probe_does_not_cost_a_break() -> None:
    """Three probes, two to close, two to re-open: one failed probe among two successes still closes."""
    breaker, _, recorder = voting(3, 2, 2, break_duration=5)
    probes = [breaker.acquire() for _ in range(3)]
    assert probes == [1, 1, 1]
    breaker.record_failure(probes[0])  # a transient error of a recovered backend
    assert breaker.state is HALF_OPEN
    with pytest.raises(CircuitOpenError):
        breaker.acquire()  # a failed probe keeps its slot too: its outcome counts towards the decision
    breaker.record_success(probes[1])
    assert breaker.state is HALF_OPEN
    breaker.record_success(probes[2])
    assert breaker.state is CLOSED
    assert recorder.events[-1].reason == "2 probes succeeded"
    assert breaker.statistics().break_duration == 5


def test_with_failures_to_reopen_the_probes_majority_reopens_and_grows_the_break() -> None:
    """Two failed probes of three re-open the circuit for the grown break, whatever the third does later."""
    breaker, clock, recorder = voting(3, 2, 2, break_duration_multiplier=2)
    probes = [breaker.acquire() for _ in range(3)]
    breaker.record_failure(probes[0])
    breaker.record_failure(probes[1])
    assert breaker.state is OPEN
    assert (recorder.events[-1].reason, recorder.events[-1].break_duration) == ("2 probes failed", 2)
    breaker.record_success(probes[2])  # finishes after the re-open: ignored
    stats = breaker.statistics()
    assert (stats.state, stats.retry_after, stats.probes_in_flight) == (OPEN, 2, 0)
    clock.advance(2)
    assert breaker.acquire() == 2  # a new half-open period counts afresh: one failure does not re-open
    breaker.record_failure(2)
    assert breaker.state is HALF_OPEN


def test_a_released_probe_frees_its_slot_but_casts_no_vote() -> None:
    """A cancelled probe neither closes nor re-opens: its slot goes to the next caller."""
    breaker, _, _ = voting(2, 1, 2)
    first, second = breaker.acquire(), breaker.acquire()
    breaker.record_failure(first)
    breaker.release(second)
    assert breaker.state is HALF_OPEN
    third = breaker.acquire()
    assert third == 1
    breaker.record_failure(third)
    assert breaker.state is OPEN


def test_a_probe_that_outlives_its_half_open_period_casts_no_vote_in_the_next() -> None:
    """Each half-open period hands out its own tickets: the outcome or the release of a probe from an
    earlier period changes nothing in the current one."""
    breaker, clock, _ = voting(4, 2, 2)
    first_period = [breaker.acquire() for _ in range(4)]
    breaker.record_failure(first_period[0])
    breaker.record_failure(first_period[1])  # re-opened: first_period[2] and [3] are still running
    clock.advance(1)
    failed, running = breaker.acquire(), breaker.acquire()
    assert failed == running == 2 != first_period[2]
    breaker.record_failure(failed)
    breaker.release(first_period[2])  # cancelled late: frees none of this period's slots
    breaker.record_failure(first_period[3])  # late: without tickets this second failure would re-open it
    stats = breaker.statistics()
    assert (stats.state, stats.probes_in_flight) == (HALF_OPEN, 1)
    breaker.record_success(running)
    breaker.record_success(breaker.acquire())
    assert breaker.state is CLOSED


def test_a_failed_probe_reopens_with_a_grown_capped_break() -> None:
    """Each failed probe multiplies the break (1, 2, 4, then capped at 5); closing resets it to the base."""
    breaker, clock, recorder = make(
        minimum_throughput=2, break_duration=1, break_duration_multiplier=2, max_break_duration=5,
    )
    trip(breaker)
    breaks = [breaker.statistics().break_duration]
    for _ in range(4):
        clock.advance(breaks[-1])
        fail(breaker)
        assert breaker.state is OPEN
        breaks.append(breaker.statistics().retry_after)
    assert breaks == [1, 2, 4, 5, 5]
    assert [e.break_duration for e in recorder.events if e.new_state == "open"] == [1, 2, 4, 5, 5]
    assert recorder.events[-1].reason == "probe failed"
    clock.advance(5)
    succeed(breaker)
    assert breaker.state is CLOSED
    trip(breaker)
    assert breaker.statistics().retry_after == 1
    assert breaker.statistics().times_opened == 6


def test_release_frees_a_probe_slot() -> None:
    """An abandoned probe gives its slot back without counting as a success or a failure."""
    breaker, clock, _ = make(minimum_throughput=2, break_duration=5)
    trip(breaker)
    clock.advance(5)
    probe = breaker.acquire()
    with pytest.raises(CircuitOpenError):
        breaker.acquire()
    breaker.release(probe)
    assert breaker.state is HALF_OPEN
    assert breaker.acquire() == probe


@pytest.mark.anyio
async def test_a_cancelled_probe_frees_its_slot() -> None:
    """A probe cancelled mid-call (release() in a finally-style handler) lets the next caller probe."""
    breaker = CircuitBreaker(CircuitBreakerConfig(minimum_throughput=2, break_duration=5), events=EventBus())
    trip(breaker)
    await anyio.sleep(5)

    async def guarded_call() -> None:
        probe = breaker.acquire()
        try:
            await anyio.sleep(10)
        except BaseException:
            breaker.release(probe)
            raise
        breaker.record_success(probe)

    with anyio.move_on_after(1) as scope:
        await guarded_call()
    assert scope.cancelled_caught
    assert breaker.state is HALF_OPEN
    assert breaker.acquire() == 1


# -- manual control


def test_isolate_rejects_every_call_until_reset() -> None:
    """An isolated circuit rejects with retry_after=inf however long it waits; reset() closes it afresh."""
    breaker, clock, recorder = make(minimum_throughput=2)
    fail(breaker)
    breaker.isolate()
    breaker.isolate()  # idempotent: no second event
    clock.advance(10_000)
    with pytest.raises(CircuitOpenError, match="until it is reset by hand") as err:
        breaker.acquire()
    assert (err.value.state, err.value.retry_after) == ("isolated", math.inf)
    assert breaker.state is ISOLATED
    breaker.reset()
    assert breaker.state is CLOSED
    assert breaker.statistics().failures == 0
    assert breaker.acquire() == 0
    fail(breaker)
    assert breaker.state is CLOSED  # the failure before isolate() was forgotten
    assert recorder.edges == [("closed", "isolated"), ("isolated", "closed")]
    assert [e.reason for e in recorder.events] == ["isolated by hand", "reset by hand"]


def test_isolating_a_half_open_circuit_voids_its_probes() -> None:
    """isolate() while probes run wins: their late outcomes change nothing until reset()."""
    breaker, clock, recorder = make(minimum_throughput=2, break_duration=5, half_open_max_probes=2)
    trip(breaker)
    clock.advance(5)
    first, second = breaker.acquire(), breaker.acquire()
    breaker.isolate()
    breaker.record_success(first)
    breaker.record_failure(second)
    assert breaker.state is ISOLATED
    assert recorder.edges[-2:] == [("open", "half_open"), ("half_open", "isolated")]


def test_reset_closes_an_open_circuit_and_forgets_the_grown_break() -> None:
    """reset() on an open circuit closes it, clears the streak and restores the base break."""
    breaker, clock, recorder = make(minimum_throughput=2, break_duration=1, break_duration_multiplier=3)
    trip(breaker)
    clock.advance(1)
    fail(breaker)
    assert breaker.statistics().break_duration == 3
    breaker.reset()
    stats = breaker.statistics()
    assert (stats.state, stats.break_duration, stats.consecutive_failures, stats.opened_at) == (
        CLOSED, 1, 0, None,
    )
    assert recorder.edges[-1] == ("open", "closed")
    breaker.reset()  # already closed: no event
    assert recorder.edges[-1] == ("open", "closed")
    assert len(recorder.events) == 4


# -- events, statistics, repr


def test_events_follow_the_transitions_in_order() -> None:
    """A trip, the end of the break and a successful probe emit three events, each after its change."""
    clock = VirtualClock(start=50.0)
    recorder = Recorder()
    breaker = CircuitBreaker(CircuitBreakerConfig(minimum_throughput=2), clock=clock, name="db",
                             events=recorder.bus)
    seen_states: list[BreakerState] = []
    recorder.bus.subscribe(lambda e: seen_states.append(breaker._state))
    fail(breaker, 2)
    clock.advance(5)
    succeed(breaker)
    assert [(e.time, e.source, e.old_state, e.new_state, e.reason, e.break_duration)
            for e in recorder.events] == [
        (50.0, "db", "closed", "open", "failure ratio 1 >= 0.5 over 2 calls", 5.0),
        (55.0, "db", "open", "half_open", "break of 5 s elapsed", None),
        (55.0, "db", "half_open", "closed", "probe succeeded", None),
    ]
    assert seen_states == [OPEN, HALF_OPEN, CLOSED]


def test_statistics_and_repr_describe_the_breaker() -> None:
    """statistics() snapshots state and counters; repr names the breaker and its state."""
    breaker, clock, _ = make(minimum_throughput=4, break_duration=5)
    succeed(breaker)
    fail(breaker)
    stats = breaker.statistics()
    assert stats.name == "api"
    assert (stats.state, stats.failures, stats.successes, stats.failure_ratio) == (CLOSED, 1, 1, 0.5)
    assert (stats.consecutive_failures, stats.opened_at, stats.retry_after) == (1, None, 0.0)
    assert (stats.break_duration, stats.probes_in_flight, stats.times_opened, stats.rejected) == (5, 0, 0, 0)
    assert repr(breaker) == "<CircuitBreaker 'api' closed failures=1/2 consecutive=1 break=5s times_opened=0>"
    clock.advance(1)
    fail(breaker, 2)
    stats = breaker.statistics()
    assert (stats.state, stats.opened_at, stats.times_opened) == (OPEN, 1.0, 1)
    assert repr(breaker).startswith("<CircuitBreaker 'api' open ")
    with pytest.raises(AttributeError):
        stats.state = CLOSED  # type: ignore[misc]


def test_config_accepts_timedelta_durations() -> None:
    """Durations may be timedeltas; they are stored as float seconds."""
    config = CircuitBreakerConfig(
        sampling_duration=timedelta(minutes=1), break_duration=timedelta(seconds=2),
        max_break_duration=timedelta(seconds=90),
    )
    assert (config.sampling_duration, config.break_duration, config.max_break_duration) == (60.0, 2.0, 90.0)
    assert CircuitBreaker(config).statistics().break_duration == 2.0


def test_the_default_breaker_uses_the_documented_defaults() -> None:
    """Without arguments: ratio 0.5 over at least 10 calls in 30 s, a fixed 5 s break, one probe."""
    breaker = CircuitBreaker()
    assert breaker.name == "breaker"
    assert breaker.config == CircuitBreakerConfig(
        failure_ratio=0.5, minimum_throughput=10, sampling_duration=30, consecutive_failures=None,
        break_duration=5, break_duration_multiplier=1, max_break_duration=300, half_open_max_probes=1,
        half_open_successes_to_close=1, half_open_failures_to_reopen=1,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("failure_ratio", 0, r"failure_ratio must be > 0 and <= 1, got 0"),
        ("failure_ratio", 1.5, r"failure_ratio must be > 0 and <= 1, got 1.5"),
        ("minimum_throughput", 1, r"minimum_throughput must be an integer >= 2, got 1"),
        ("sampling_duration", 0, r"sampling_duration must be > 0, got 0"),
        ("consecutive_failures", 0, r"consecutive_failures must be an integer >= 1, got 0"),
        ("break_duration", -1, r"break_duration must be > 0, got -1"),
        ("break_duration_multiplier", 0.5, r"break_duration_multiplier must be >= 1, got 0.5"),
        ("max_break_duration", 4, r"max_break_duration must be >= 5, got 4"),
        ("half_open_max_probes", 0, r"half_open_max_probes must be an integer >= 1, got 0"),
        ("half_open_successes_to_close", 2, r"half_open_successes_to_close must be an integer >= 1 and <= 1"),
        ("half_open_failures_to_reopen", 0, r"half_open_failures_to_reopen must be an integer >= 1, got 0"),
        ("half_open_failures_to_reopen", 2,
         r"half_open_failures_to_reopen must be an integer from 1 to half_open_max_probes - "
         r"half_open_successes_to_close \+ 1 = 1 .*got 2"),
    ],
)
def test_bad_config_names_the_parameter(field: str, value: object, message: str) -> None:
    """Each out-of-range setting raises ValueError naming the parameter, the value and the range."""
    with pytest.raises(ValueError, match=message):
        CircuitBreakerConfig(**{field: value})  # type: ignore[arg-type]


def test_a_config_without_any_trigger_is_refused() -> None:
    """Turning both trip triggers off is refused with a message naming both parameters."""
    with pytest.raises(ValueError, match=r"failure_ratio=None and consecutive_failures=None"):
        CircuitBreakerConfig(failure_ratio=None)


def test_wrong_types_are_refused() -> None:
    """A float where an integer is needed, or a string for a duration, is a TypeError naming the field."""
    with pytest.raises(TypeError, match="minimum_throughput"):
        CircuitBreakerConfig(minimum_throughput=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="break_duration"):
        CircuitBreakerConfig(break_duration="5")  # type: ignore[arg-type]


# -- property: every transition follows a legal edge

LEGAL_EDGES = {
    ("closed", "open"),
    ("open", "half_open"),
    ("half_open", "closed"),
    ("half_open", "open"),
    ("closed", "isolated"),
    ("open", "isolated"),
    ("half_open", "isolated"),
    ("isolated", "closed"),
    ("open", "closed"),
}

triggers = st.sampled_from([(None, 1), (None, 3), (0.25, None), (0.5, None), (1.0, None), (0.5, 2)])


@st.composite
def configs(draw: st.DrawFn) -> CircuitBreakerConfig:
    ratio, streak = draw(triggers)
    probes = draw(st.integers(1, 3))
    to_close = draw(st.integers(1, probes))
    return CircuitBreakerConfig(
        failure_ratio=ratio,
        consecutive_failures=streak,
        minimum_throughput=draw(st.integers(2, 5)),
        sampling_duration=draw(st.sampled_from([1.0, 5.0, 30.0])),
        break_duration=draw(st.sampled_from([0.5, 2.0, 5.0])),
        break_duration_multiplier=draw(st.sampled_from([1.0, 2.0])),
        max_break_duration=8.0,
        half_open_max_probes=probes,
        half_open_successes_to_close=to_close,
        half_open_failures_to_reopen=draw(st.integers(1, probes - to_close + 1)),
    )


# Weighted so that runs reach every state often: mostly calls and outcomes, some waiting, few manual actions.
OPERATIONS = ["fail"] * 6 + ["succeed"] * 3 + ["start"] * 3 + ["failure", "success", "release"] + [
    "advance"] * 4 + ["state", "isolate", "reset"]
operations = st.lists(
    st.tuples(st.sampled_from(OPERATIONS), st.sampled_from([0.1, 0.5, 1.0, 3.0, 10.0]), st.integers(0, 7)),
    min_size=10,
    max_size=150,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(config=configs(), ops=operations)
def test_every_transition_follows_a_legal_edge(
    config: CircuitBreakerConfig, ops: list[tuple[str, float, int]],
) -> None:
    """For any sequence of calls, outcomes, time steps and manual actions, every state change is legal."""
    breaker, clock, recorder = make()
    breaker = CircuitBreaker(config, clock=clock, name="api", events=recorder.bus)
    in_flight: list[int] = []
    rejections: list[CircuitOpenError] = []
    for op, seconds, pick in ops:
        if op in ("start", "fail", "succeed"):  # start a call and keep it running, or make a whole call
            try:
                probe = breaker.acquire()
            except CircuitOpenError as err:
                rejections.append(err)
            else:
                if op == "start":
                    in_flight.append(probe)
                else:
                    (breaker.record_failure if op == "fail" else breaker.record_success)(probe)
        elif op in ("success", "failure", "release") and in_flight:
            probe = in_flight.pop(pick % len(in_flight))
            getattr(breaker, f"record_{op}" if op != "release" else op)(probe)
        elif op == "advance":
            clock.advance(seconds)
        elif op in ("isolate", "reset"):
            getattr(breaker, op)()
        else:
            breaker.statistics()
        stats = breaker.statistics()
        assert 0 <= stats.probes_in_flight <= config.half_open_max_probes
        assert 0.0 <= stats.failure_ratio <= 1.0
        assert config.break_duration <= stats.break_duration <= config.max_break_duration  # type: ignore[operator]
    final = breaker.state
    assert all(e.state in ("open", "half_open", "isolated") and e.retry_after >= 0 for e in rejections)
    assert set(recorder.edges) <= LEGAL_EDGES
    states = ["closed"] + [new for _, new in recorder.edges]
    assert [old for old, _ in recorder.edges] == states[:-1], "each change starts where the last one ended"
    assert final.value == states[-1]
