"""The retry quota pays for retries from a shared budget: an outage gets a bounded number of retries."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import (
    Event,
    EventBus,
    OutcomeKind,
    QuotaExhausted,
    QuotaRestored,
    RetryCapacityExceeded,
    RetryQuota,
    RetryQuotaConfig,
)
from asyncretry.testing import VirtualClock
from conftest import EventLog


class Recorder(EventLog):
    """An event bus whose quota events are kept in order as (type name, available, cost) tuples."""

    def keep(self, event: Event) -> Any:
        if isinstance(event, QuotaExhausted):
            return ("exhausted", event.available, event.cost)
        if isinstance(event, QuotaRestored):
            return ("restored", event.available, None)
        return None


def make(**config: Any) -> tuple[RetryQuota, Recorder]:
    recorder = Recorder()
    quota = RetryQuota(RetryQuotaConfig(**config), name="api", events=recorder.bus, clock=VirtualClock())
    return quota, recorder


def waiting(**config: Any) -> tuple[RetryQuota, Recorder]:
    """A waiting-mode quota on the running loop's (virtual) clock."""
    recorder = Recorder()
    config = {"circuit_breaker_mode": False, **config}
    return RetryQuota(RetryQuotaConfig(**config), name="api", events=recorder.bus), recorder


# -- the SPEC arithmetic


def test_a_total_outage_lets_exactly_100_retries_through() -> None:
    """500 tokens at 5 a retry pay for exactly 100 retries; the 101st is refused and the quota is empty."""
    quota, _ = make()
    cost = quota.cost_of(OutcomeKind.TRANSIENT)
    granted = 0
    while quota.try_acquire(cost):
        granted += 1
    assert granted == 100
    assert quota.available == 0
    assert not quota.try_acquire(cost)
    stats = quota.statistics()
    assert (stats.acquired_total, stats.refused, stats.exhausted) == (500, 2, True)


@pytest.mark.anyio
async def test_acquire_refuses_at_once_in_circuit_breaker_mode() -> None:
    """In circuit-breaker mode, acquire() raises RetryCapacityExceeded at once when the quota is spent."""
    quota, _ = make()
    for _ in range(100):
        await quota.acquire(5)
    before = anyio.current_time()
    message = r"retry capacity exceeded in 'api': a retry costs 5 tokens but only 0 are left"
    with pytest.raises(RetryCapacityExceeded, match=message) as err:
        await quota.acquire(5)
    assert (err.value.available, err.value.cost, err.value.name) == (0, 5, "api")
    assert anyio.current_time() == before
    await quota.acquire(0)  # a free first attempt still goes ahead


def test_timeouts_cost_more_so_an_outage_of_timeouts_gets_50_retries() -> None:
    """At 10 tokens a timeout retry, the same 500 tokens pay for 50 retries."""
    quota, _ = make()
    cost = quota.cost_of(OutcomeKind.TIMEOUT)
    assert sum(1 for _ in range(1000) if quota.try_acquire(cost)) == 50


def test_successes_give_tokens_back() -> None:
    """A successful retry returns its cost, a first-try success adds its increment: retries resume."""
    quota, _ = make()
    while quota.try_acquire(5):
        pass
    quota.release(5)  # a retry that took 5 succeeded
    assert quota.available == 5
    assert quota.try_acquire(5)
    for _ in range(4):
        quota.release(quota.config.initial_try_success_increment)
    assert not quota.try_acquire(5)
    quota.release(1)
    assert quota.try_acquire(5)
    assert quota.statistics().released_total == 10


def test_the_quota_never_exceeds_its_capacity() -> None:
    """Releasing into a full quota leaves it at max_capacity."""
    quota, _ = make(max_capacity=20)
    quota.release(7)
    assert quota.available == 20
    assert quota.try_acquire(5)
    quota.release(50)
    assert quota.available == 20


def test_zero_costs_are_always_paid() -> None:
    """A cost of 0 (the default first-try cost) succeeds even on an empty quota and starts no episode."""
    quota, recorder = make(max_capacity=10)
    assert quota.try_acquire(10)
    assert quota.try_acquire(0)
    assert quota.try_acquire(quota.config.initial_try_cost)
    assert recorder.events == []


@pytest.mark.anyio
async def test_concurrent_retries_share_one_budget() -> None:
    """Of 150 tasks asking for a retry at once, exactly 100 are paid for from the shared quota."""
    quota, _ = make()
    paid = refused = 0

    async def retry() -> None:
        nonlocal paid, refused
        try:
            await quota.acquire(5)
        except RetryCapacityExceeded:
            refused += 1
        else:
            paid += 1

    async with anyio.create_task_group() as tg:
        for _ in range(150):
            tg.start_soon(retry)
    assert (paid, refused) == (100, 50)


# -- costs and profiles


@pytest.mark.parametrize(
    ("kind", "cost"),
    [
        (OutcomeKind.TRANSIENT, 5),
        (OutcomeKind.CONNECTION, 5),
        (OutcomeKind.TIMEOUT, 10),
        (OutcomeKind.THROTTLING, 5),
    ],
)
def test_cost_of_each_retryable_kind(kind: OutcomeKind, cost: int) -> None:
    """Transient and connection retries cost retry_cost, timeouts timeout_retry_cost, throttles their own."""
    assert RetryQuota().cost_of(kind) == cost


def test_cost_of_uses_the_configured_costs() -> None:
    """cost_of() reads each configured cost, including a distinct throttling cost."""
    quota = RetryQuota(RetryQuotaConfig(retry_cost=3, timeout_retry_cost=7, throttling_retry_cost=2))
    assert [quota.cost_of(k) for k in (OutcomeKind.TRANSIENT, OutcomeKind.TIMEOUT, OutcomeKind.THROTTLING,
                                       OutcomeKind.CONNECTION)] == [3, 7, 2, 3]


@pytest.mark.parametrize("kind", [OutcomeKind.SUCCESS, OutcomeKind.NOT_RETRYABLE])
def test_outcomes_that_end_the_call_have_no_retry_cost(kind: OutcomeKind) -> None:
    """Asking for the retry cost of a success or a non-retryable failure is a ValueError naming the kind."""
    message = rf"kind must be a retryable outcome .* got <OutcomeKind.{kind.name}"
    with pytest.raises(ValueError, match=message):
        RetryQuota().cost_of(kind)


def test_the_2020_profile_is_the_default() -> None:
    """Profile 2020 (botocore today): 500 tokens, retry 5, timeout 10, throttling 5, success +1."""
    config = RetryQuotaConfig.profile("2020")
    assert config == RetryQuotaConfig()
    assert (config.max_capacity, config.retry_cost, config.timeout_retry_cost, config.throttling_retry_cost,
            config.initial_try_success_increment, config.initial_try_cost) == (500, 5, 10, 5, 1, 0)
    assert (config.refill_units_per_second, config.circuit_breaker_mode) == (0.0, True)


def test_the_2026_profile_costs_14_for_every_non_throttling_retry() -> None:
    """Profile 2026: transient, connection and timeout retries cost 14, throttling 5, success +1."""
    quota = RetryQuota(RetryQuotaConfig.profile("2026"))
    assert [quota.cost_of(k) for k in (OutcomeKind.TRANSIENT, OutcomeKind.CONNECTION, OutcomeKind.TIMEOUT,
                                       OutcomeKind.THROTTLING)] == [14, 14, 14, 5]
    assert quota.config.initial_try_success_increment == 1
    assert sum(1 for _ in range(100) if quota.try_acquire(14)) == 35  # 500 // 14


def test_an_unknown_profile_lists_the_known_ones() -> None:
    """profile() with an unknown name raises ValueError listing the names it knows."""
    with pytest.raises(ValueError, match=r"profile must be one of '2020', '2026', got '2030'"):
        RetryQuotaConfig.profile("2030")


# -- invariants


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    capacity=st.integers(1, 50),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=60),
)
def test_the_quota_stays_between_zero_and_capacity(capacity: int, ops: list[tuple[bool, int]]) -> None:
    """Under any mix of takes and gives, the quota matches a bounded counter and stays in [0, capacity]."""
    quota = RetryQuota(RetryQuotaConfig(max_capacity=capacity, retry_cost=0, timeout_retry_cost=0,
                                        throttling_retry_cost=0), clock=VirtualClock(), events=EventBus())
    model = capacity
    for take, n in ops:
        if take:
            n = min(n, capacity)
            paid = quota.try_acquire(n)
            assert paid == (n <= model)
            if paid:
                model -= n
        else:
            quota.release(n)
            model = min(capacity, model + n)
        assert 0 <= quota.available <= capacity
        assert quota.available == model


# -- waiting mode


@pytest.mark.anyio
async def test_waiting_mode_waits_for_the_refill() -> None:
    """With the quota spent, a retry waits exactly until the refill has paid its cost (5 tokens at 2/s)."""
    quota, _ = waiting(max_capacity=10, refill_units_per_second=2)
    await quota.acquire(10)
    started = anyio.current_time()
    await quota.acquire(5)
    assert anyio.current_time() - started == pytest.approx(2.5)
    assert quota.available == pytest.approx(0)


@pytest.mark.anyio
async def test_waiting_mode_serves_waiters_in_order() -> None:
    """Waiting retries are served first come, first served, even a cheap one behind a dear one."""
    quota, _ = waiting(max_capacity=10, refill_units_per_second=1)
    await quota.acquire(10)
    served: list[tuple[str, float]] = []
    started = anyio.current_time()

    async def retry(label: str, cost: int) -> None:
        await quota.acquire(cost)
        served.append((label, anyio.current_time() - started))

    async with anyio.create_task_group() as tg:
        tg.start_soon(retry, "dear", 4)
        await anyio.sleep(0.1)
        tg.start_soon(retry, "cheap", 1)
        await anyio.sleep(0.1)
        assert not quota.try_acquire(1)  # not even a 1-token grab jumps the queue
    assert [label for label, _ in served] == ["dear", "cheap"]
    assert served[0][1] == pytest.approx(4)
    assert served[1][1] == pytest.approx(5)


@pytest.mark.anyio
async def test_a_success_wakes_a_waiting_retry_before_the_refill() -> None:
    """Tokens given back by a success go to a waiting retry at once."""
    quota, _ = waiting(max_capacity=10, refill_units_per_second=0.01)
    await quota.acquire(10)
    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(quota.acquire, 5)
        await anyio.sleep(1)
        quota.release(5)
    assert anyio.current_time() - started == pytest.approx(1)


@pytest.mark.anyio
async def test_waiting_mode_timeout_raises_retry_capacity_exceeded() -> None:
    """A retry that cannot be paid within its timeout raises RetryCapacityExceeded, never later."""
    quota, _ = waiting(max_capacity=10, refill_units_per_second=1)
    await quota.acquire(10)
    started = anyio.current_time()
    with pytest.raises(RetryCapacityExceeded) as err:
        await quota.acquire(5, timeout=2)
    assert anyio.current_time() - started <= 2
    assert (err.value.cost, err.value.name) == (5, "api")
    stats = quota.statistics()
    assert (stats.refused, stats.waiting, stats.acquired_total) == (1, 0, 10)
    await quota.acquire(5, timeout=5)  # a long enough timeout gets through


@pytest.mark.anyio
async def test_a_cancelled_wait_takes_nothing_and_passes_its_turn_on() -> None:
    """A waiting retry cancelled mid-wait leaves the tokens to the next waiter and no trace behind."""
    quota, _ = waiting(max_capacity=10, refill_units_per_second=1)
    await quota.acquire(10)
    started = anyio.current_time()
    done: list[float] = []

    cancelled: list[bool] = []

    async def first() -> None:
        with anyio.move_on_after(1) as scope:
            await quota.acquire(8)  # would be paid at t=8
        cancelled.append(scope.cancelled_caught)

    async def second() -> None:
        await quota.acquire(2)
        done.append(anyio.current_time() - started)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(0.1)
        tg.start_soon(second)  # queued behind the waiter that is cancelled at t=1
    assert cancelled == [True]
    assert done == [pytest.approx(2)]
    stats = quota.statistics()
    assert (stats.acquired_total, stats.waiting) == (12, 0)


@pytest.mark.anyio
async def test_acquire_honours_a_cancellation_already_pending() -> None:
    """acquire() in a cancelled scope raises the cancellation and takes nothing, even with tokens to spare."""
    quota, _ = make()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await quota.acquire(5)
    assert scope.cancelled_caught
    assert quota.available == 500


# -- events


def test_exhaustion_is_reported_once_and_restoration_once() -> None:
    """QuotaExhausted goes out on the first refusal only; QuotaRestored when the refused cost is back."""
    quota, recorder = make(max_capacity=10)
    assert quota.try_acquire(10)
    assert not quota.try_acquire(5)
    assert not quota.try_acquire(5)
    quota.release(4)
    assert recorder.events == [("exhausted", 0, 5)]
    quota.release(1)
    assert recorder.events == [("exhausted", 0, 5), ("restored", 5, None)]
    assert quota.try_acquire(5)
    assert not quota.try_acquire(10)
    assert recorder.events[-1] == ("exhausted", 0, 10)


def test_restoration_waits_for_the_cheapest_refused_cost() -> None:
    """After refusals of 10 and then 5, the quota counts as restored as soon as it holds 5."""
    quota, recorder = make(max_capacity=10)
    assert quota.try_acquire(10)
    assert not quota.try_acquire(10)
    assert not quota.try_acquire(5)
    quota.release(5)
    assert recorder.events == [("exhausted", 0, 10), ("restored", 5, None)]
    assert not quota.statistics().exhausted


@pytest.mark.anyio
async def test_a_time_refill_restores_at_the_next_call() -> None:
    """With a time-based refill, the restoration is noticed (and reported) by the next call on the quota."""
    bus = EventBus()
    quota = RetryQuota(RetryQuotaConfig(max_capacity=10, refill_units_per_second=1), events=bus)
    seen: list[Event] = []
    bus.subscribe(seen.append)
    await quota.acquire(10)
    with pytest.raises(RetryCapacityExceeded):
        await quota.acquire(5)
    await anyio.sleep(6)
    assert [type(e) for e in seen] == [QuotaExhausted]
    assert quota.statistics().exhausted is False
    assert [type(e) for e in seen] == [QuotaExhausted, QuotaRestored]


@pytest.mark.anyio
async def test_waiting_mode_reports_one_episode_per_queue() -> None:
    """In waiting mode, the first wait reports exhaustion and the last waiter served reports restoration."""
    quota, recorder = waiting(max_capacity=10, refill_units_per_second=10)
    await quota.acquire(10)
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(quota.acquire, 5)
    assert [kind for kind, _, _ in recorder.events] == ["exhausted", "restored"]
    assert recorder.events[0][2] == 5


# -- validation, statistics, repr


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_capacity", 0, r"max_capacity must be an integer >= 1, got 0"),
        ("retry_cost", -1, r"retry_cost must be an integer >= 0 and <= 500, got -1"),
        ("timeout_retry_cost", 501, r"timeout_retry_cost must be an integer >= 0 and <= 500, got 501"),
        ("throttling_retry_cost", 600, r"throttling_retry_cost must be an integer >= 0 and <= 500, got 600"),
        ("initial_try_cost", 501, r"initial_try_cost must be an integer >= 0 and <= 500, got 501"),
        ("initial_try_success_increment", -1, r"initial_try_success_increment must be an integer >= 0"),
        ("refill_units_per_second", -0.5, r"refill_units_per_second must be >= 0, got -0.5"),
    ],
)
def test_bad_config_names_the_parameter(field: str, value: object, message: str) -> None:
    """Each out-of-range knob raises ValueError naming the parameter, the value and the range."""
    with pytest.raises(ValueError, match=message):
        RetryQuotaConfig(**{field: value})  # type: ignore[arg-type]


def test_costs_are_checked_against_the_configured_capacity() -> None:
    """A retry cost above a smaller max_capacity is refused: it could never be paid."""
    with pytest.raises(ValueError, match=r"timeout_retry_cost must be an integer >= 0 and <= 8, got 10"):
        RetryQuotaConfig(max_capacity=8)


def test_waiting_mode_needs_a_refill_and_says_why() -> None:
    """circuit_breaker_mode=False with no refill is refused, explaining that waits could last forever."""
    message = r"refill_units_per_second=0 requires circuit_breaker_mode=True: .*forever"
    with pytest.raises(ValueError, match=message):
        RetryQuotaConfig(circuit_breaker_mode=False)
    assert not RetryQuotaConfig(circuit_breaker_mode=False, refill_units_per_second=0.5).circuit_breaker_mode


def test_wrong_types_are_refused() -> None:
    """A float cost or a non-bool mode is a TypeError naming the field."""
    with pytest.raises(TypeError, match="retry_cost must be an integer"):
        RetryQuotaConfig(retry_cost=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="circuit_breaker_mode must be True or False"):
        RetryQuotaConfig(circuit_breaker_mode="yes")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_bad_token_counts_are_refused() -> None:
    """A negative count, or one above max_capacity (never payable), raises ValueError naming n."""
    quota, _ = make()
    with pytest.raises(ValueError, match=r"n must be >= 0 and <= 500, got -1"):
        quota.try_acquire(-1)
    with pytest.raises(ValueError, match=r"n must be >= 0 and <= 500, got 501"):
        await quota.acquire(501)
    with pytest.raises(ValueError, match=r"n must be >= 0, got -5"):
        quota.release(-5)
    with pytest.raises(ValueError, match=r"timeout must be >= 0, got -1"):
        await quota.acquire(1, timeout=-1)


def test_statistics_and_repr_describe_the_quota() -> None:
    """statistics() snapshots tokens and counters; repr shows name, tokens, mode and exhaustion."""
    quota, _ = make(max_capacity=10)
    assert quota.try_acquire(10)
    assert not quota.try_acquire(5)
    quota.release(2)
    stats = quota.statistics()
    assert dataclasses.asdict(stats) == {
        "name": "api", "available": 2, "capacity": 10, "acquired_total": 10, "released_total": 2,
        "refused": 1, "exhausted": True, "waiting": 0,
    }
    assert repr(quota) == "<RetryQuota 'api' 2/10 circuit-breaker exhausted refused=1>"
    assert repr(RetryQuota(name="s3")) == "<RetryQuota 's3' 500/500 circuit-breaker refused=0>"
    assert quota.name == "api"
