"""Bad settings fail at construction with an error naming the parameter, case by case."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    CircuitBreaker,
    CircuitBreakerConfig,
    Classifier,
    DeliveryPolicy,
    EventBus,
    ExponentialBackoff,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    TokenBucket,
    poll,
)
from asyncretry._validate import MAX_INT, check_int, check_items, check_number, check_seconds
from asyncretry.otel import instrument
from asyncretry.testing import TestMode, VirtualClock, test_mode

HUGE = 10**400


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: TokenBucket(HUGE, 1), "rate"),
        (lambda: TokenBucket(1, HUGE), "capacity"),
        (lambda: RetryPolicy(deadline=HUGE), "deadline"),
        (lambda: RetryPolicy(max_attempts=HUGE), "max_attempts"),
        (lambda: RetryQuotaConfig(max_capacity=HUGE), "max_capacity"),
        (lambda: RetryQuotaConfig(max_capacity=2**60), "max_capacity"),
        (lambda: CircuitBreakerConfig(minimum_throughput=HUGE), "minimum_throughput"),
        (lambda: AdaptiveLimiterConfig(beta=-HUGE), "beta"),
        (lambda: ExponentialBackoff(initial=HUGE), "initial"),
    ],
)
def test_huge_integers_are_value_errors_naming_the_parameter(build: Callable[[], object], name: str) -> None:
    """An integer too big for a float (or for exact arithmetic) is a ValueError naming the parameter."""
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        build()


def test_a_huge_integer_is_shown_shortened() -> None:
    """The message does not print all 401 digits of 10**400."""
    with pytest.raises(ValueError, match=r"\(401 characters\)") as error:
        check_number("rate", HUGE)
    assert len(str(error.value)) < 200


def test_integers_up_to_2_53_are_accepted() -> None:
    """The integer cap is exactly where floats stop holding integers exactly."""
    assert check_int("n", MAX_INT) == 2**53
    with pytest.raises(ValueError, match="n must be an integer"):
        check_int("n", MAX_INT + 1)


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: AdaptiveLimiterConfig(reaction_time=1e-62), "reaction_time"),
        (lambda: AdaptiveLimiterConfig(measurement_window=1e-320), "measurement_window"),
        (lambda: AdaptiveLimiterConfig(burst=1e308), "burst"),
        (lambda: CircuitBreakerConfig(sampling_duration=1e-320), "sampling_duration"),
        (lambda: CircuitBreakerConfig(break_duration=5e-324), "break_duration"),
        (lambda: RetryPolicy(rate_limit=5e-324), "rate_limit"),
        (lambda: RetryPolicy(deadline=1e-320), "deadline"),
    ],
)
def test_extreme_floats_fail_at_construction(build: Callable[[], object], name: str) -> None:
    """Durations too short to measure and bursts that overflow are refused up front, not at run time."""
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        build()


def test_the_shortest_positive_duration_is_a_nanosecond() -> None:
    """1e-9 s is accepted where a positive duration is required; anything shorter is refused."""
    assert check_seconds("d", 1e-9, low_open=True) == 1e-9
    with pytest.raises(ValueError, match=r"d must be >= 1e-09 s"):
        check_seconds("d", 9e-10, low_open=True)
    with pytest.raises(ValueError, match=r"d must be > 0, got 0"):
        check_seconds("d", 0, low_open=True)


def test_a_too_long_reaction_time_names_the_window_too() -> None:
    """reaction_time beyond measurement_window names both, since either may be the one to change."""
    with pytest.raises(ValueError, match=r"reaction_time must be <= measurement_window \(1e-09 s\)"):
        AdaptiveLimiterConfig(measurement_window=1e-9)


def test_a_cost_above_the_capacity_names_max_capacity() -> None:
    """A small max_capacity that the default costs exceed says max_capacity is involved."""
    with pytest.raises(ValueError, match=r"timeout_retry_cost .* max_capacity=7"):
        RetryQuotaConfig(max_capacity=7)


@pytest.mark.parametrize("owner", [CircuitBreaker, RetryQuota, AdaptiveRateLimiter])
def test_a_config_of_the_wrong_type_is_a_type_error(owner: Callable[..., object]) -> None:
    """config=5 says which type was expected instead of an AttributeError later."""
    with pytest.raises(TypeError, match=r"config must be a \w+Config, got 5 \(int\)"):
        owner(config=5)


@pytest.mark.parametrize(
    "build",
    [
        lambda clock: TokenBucket(1, 1, clock=clock),
        lambda clock: CircuitBreaker(clock=clock),
        lambda clock: RetryQuota(clock=clock),
        lambda clock: AdaptiveRateLimiter(clock=clock),
    ],
)
@pytest.mark.parametrize("clock", [5, object(), "clock"])
def test_a_clock_needs_now_and_sleep(build: Callable[[Any], object], clock: object) -> None:
    """A clock without now() and sleep() is refused at construction, naming the parameter."""
    with pytest.raises(TypeError, match=r"clock must be a clock with now\(\) and async sleep"):
        build(clock)


def test_any_object_with_now_and_sleep_is_a_clock() -> None:
    """The check is structural: the library's own virtual clock passes."""
    clock = VirtualClock(5.0)
    assert CircuitBreaker(clock=clock).statistics().state == "closed"


@pytest.mark.parametrize(
    "build",
    [
        lambda events: CircuitBreaker(events=events),
        lambda events: RetryQuota(events=events),
        lambda events: AdaptiveRateLimiter(events=events),
        lambda events: EventBus(parent=events),
    ],
)
def test_an_event_bus_of_the_wrong_type_is_refused(build: Callable[[Any], object]) -> None:
    """events= (or parent=) must be an EventBus."""
    with pytest.raises(TypeError, match=r"(events|parent) must be an? EventBus"):
        build("bus")


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: Classifier(transient=None), "transient"),  # type: ignore[arg-type]
        (lambda: Classifier(never=None), "never"),  # type: ignore[arg-type]
        (lambda: Classifier(throttling_codes=None), "throttling_codes"),  # type: ignore[arg-type]
        (lambda: Classifier(transient_codes=5), "transient_codes"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(listeners=None), "listeners"),  # type: ignore[arg-type]
    ],
)
def test_a_collection_given_none_names_itself(build: Callable[[], object], name: str) -> None:
    """None (or a number) for a collection is a TypeError naming the parameter, not 'NoneType is not iterable'."""
    with pytest.raises(TypeError, match=rf"^{name} must be a collection"):
        build()


def test_listeners_given_as_a_string_are_refused() -> None:
    """listeners="ab" is refused instead of becoming the listeners ('a', 'b')."""
    with pytest.raises(TypeError, match=r"listeners must be a collection of listeners"):
        RetryPolicy(listeners="ab")  # type: ignore[arg-type]


def test_each_listener_must_be_callable() -> None:
    """A listener that cannot be called is refused with its position."""
    with pytest.raises(TypeError, match=r"listeners\[1\] must be callable"):
        RetryPolicy(listeners=[print, 5])  # type: ignore[arg-type]


def test_error_codes_must_be_strings() -> None:
    """A code set holding a number is refused, naming the item."""
    with pytest.raises(TypeError, match=r"throttling_codes\[0\] must be a string"):
        Classifier(throttling_codes=frozenset({429}))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda v: RetryPolicy(honour_server_delay=v), "honour_server_delay"),
        (lambda v: RetryPolicy(honour_amz_retry_after=v), "honour_amz_retry_after"),
        (lambda v: Classifier(network_errors=v), "network_errors"),
        (lambda v: TestMode(None, v), "no_wait"),
        (lambda v: instrument(spans=v), "spans"),
    ],
)
@pytest.mark.parametrize("value", [1, "no", 0.0])
def test_flags_accept_only_true_or_false(build: Callable[[Any], object], name: str, value: object) -> None:
    """A boolean flag given 1, "no" or 0.0 is a TypeError, not a silent truthiness test."""
    with pytest.raises(TypeError, match=rf"^{name} must be True or False"):
        build(value)


def test_test_mode_checks_its_flag() -> None:
    """test_mode(no_wait="yes") fails when entered, before any test runs under it."""
    with pytest.raises(TypeError, match=r"no_wait must be True or False"), test_mode(no_wait="yes"):  # type: ignore[arg-type]
        pass


@pytest.mark.parametrize("name", [5, None, b"x"])
def test_names_must_be_strings(name: object) -> None:
    """name= is shown in messages and metrics: it must be a string."""
    with pytest.raises(TypeError, match=r"name must be a string"):
        CircuitBreaker(name=name)  # type: ignore[arg-type]


def test_check_items_tuple_of_checked_items() -> None:
    """check_items returns a tuple and checks each item with its index."""
    assert check_items("x", [1, 2], check_int) == (1, 2)
    assert check_items("x", {3}) == (3,)
    with pytest.raises(TypeError, match=r"x\[1\] must be an integer"):
        check_items("x", [1, "2"], check_int)


def test_a_nan_duration_is_still_refused() -> None:
    """The nanosecond floor does not let NaN through."""
    with pytest.raises(ValueError, match="deadline must be a finite number"):
        RetryPolicy(deadline=math.nan)


@pytest.mark.parametrize("strategy", [ExponentialBackoff(), DeliveryPolicy()])
def test_a_schedule_rng_must_be_callable(strategy: ExponentialBackoff | DeliveryPolicy) -> None:
    """schedule(rng=0.5) names rng instead of failing with "'float' object is not callable"."""
    with pytest.raises(TypeError, match=r"rng must be callable, got 0.5 \(float\)"):
        strategy.schedule(3, rng=0.5)  # type: ignore[arg-type]


async def _job() -> str:
    return "done"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"fn": 5}, "fn"),
        ({"status": None}, "status"),
        ({"retrier": "r"}, "retrier"),
        ({"policy": 3}, "policy"),
        ({"scope": 7}, "scope"),
    ],
)
async def test_poll_names_a_bad_argument(arguments: dict[str, Any], name: str) -> None:
    """poll() with an argument of the wrong type raises TypeError naming it, before any poll."""
    call: dict[str, Any] = {"fn": _job, "status": lambda result: "success", **arguments}
    with pytest.raises(TypeError, match=rf"^{name} must be"):
        await poll(**call)
