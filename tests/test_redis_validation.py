"""Every Redis constructor parameter is checked at construction: ValueError or TypeError naming it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from asyncretry.redis import (
    RedisAdaptiveRateLimiter,
    RedisBackend,
    RedisCircuitBreaker,
    RedisRetryQuota,
    RedisTokenBucket,
)

URL = "redis://127.0.0.1:1/0"  # never contacted: construction does no I/O

HUGE = 10**400  # an int no float can hold


def backend(**options: Any) -> object:
    return RedisBackend(URL, **options)


def bucket(**options: Any) -> object:
    settings = {"rate": 10, "capacity": 10, **options}
    return RedisTokenBucket(URL, **settings)


def quota(**options: Any) -> object:
    return RedisRetryQuota(URL, **options)


def breaker(**options: Any) -> object:
    return RedisCircuitBreaker(URL, **options)


def limiter(**options: Any) -> object:
    return RedisAdaptiveRateLimiter(URL, **options)


def sentinel(**options: Any) -> object:
    settings = {"sentinels": [("127.0.0.1", 1)], "service_name": "primary", **options}
    return RedisBackend.sentinel(**settings)


DURATIONS = [("operation_timeout", backend), ("connect_timeout", backend), ("recovery_delay", backend),
             ("max_recovery_delay", backend), ("key_ttl", quota), ("key_ttl", breaker), ("probe_lease", breaker),
             ("operation_timeout", sentinel), ("key_ttl", limiter)]
NUMBERS = [("rate", bucket), ("capacity", bucket)]
BAD_VALUES = [0, -1, 1e308, HUGE, math.nan, math.inf, -math.inf]
WRONG_TYPES = ["1", None, b"1", [1], True]


@pytest.mark.parametrize(("parameter", "make"), DURATIONS + NUMBERS)
@pytest.mark.parametrize("value", BAD_VALUES)
def test_a_number_out_of_range_is_a_value_error_naming_the_parameter(
    parameter: str, make: Callable[..., object], value: float
) -> None:
    """Zero, negatives, 1e308, 10**400, NaN and infinities are refused with ValueError naming the parameter."""
    with pytest.raises(ValueError, match=parameter) as caught:
        make(**{parameter: value})
    assert "must be" in str(caught.value)


@pytest.mark.parametrize(("parameter", "make"), DURATIONS + NUMBERS)
@pytest.mark.parametrize("value", WRONG_TYPES)
def test_a_number_of_the_wrong_type_is_a_type_error_naming_the_parameter(
    parameter: str, make: Callable[..., object], value: object
) -> None:
    """Strings, None, bytes, lists and bools are refused with TypeError naming the parameter."""
    with pytest.raises(TypeError, match=parameter):
        make(**{parameter: value})


@pytest.mark.parametrize(
    ("make", "parameter", "value", "error"),
    [
        (backend, "prefix", 1, TypeError),
        (backend, "name", None, TypeError),
        (backend, "cluster", "yes", TypeError),
        (bucket, "lease", 0, ValueError),
        (bucket, "lease", 11, ValueError),  # more than the capacity
        (bucket, "lease", 2.5, TypeError),
        (bucket, "lease", HUGE, ValueError),
        (bucket, "name", "", ValueError),
        (bucket, "name", 3, TypeError),
        (bucket, "clock", "monotonic", TypeError),
        (bucket, "events", [], TypeError),
        (quota, "clock", 1.0, TypeError),
        (breaker, "events", print, TypeError),
        (backend, "rng", 0.5, TypeError),
        (backend, "clock", object(), TypeError),
        (bucket, "on_unavailable", "open", ValueError),
        (quota, "config", {"max_capacity": 5}, TypeError),
        (quota, "on_unavailable", None, ValueError),
        (breaker, "config", 5, TypeError),
        (sentinel, "service_name", "", ValueError),
        (sentinel, "sentinels", [], ValueError),
    ],
)
def test_other_settings_are_refused_with_the_parameter_named(
    make: Callable[..., object], parameter: str, value: object, error: type[Exception]
) -> None:
    """Names, choices, configs, lease sizes and sentinel lists are checked at construction too."""
    with pytest.raises(error, match=parameter):
        make(**{parameter: value})


def test_the_largest_durations_are_accepted_and_a_timedelta_too() -> None:
    """Ten years of key_ttl and a day of recovery delay are fine; durations may be timedeltas."""
    quota = RedisRetryQuota(URL, key_ttl=timedelta(days=3650))
    limiter = RedisAdaptiveRateLimiter(URL, key_ttl=timedelta(days=3650))
    breaker = RedisCircuitBreaker(URL, key_ttl=10 * 365 * 86400, probe_lease=timedelta(hours=24))
    backend = RedisBackend(URL, recovery_delay=86400, max_recovery_delay=86400)
    assert backend.statistics().up
    for made in (quota.backend, breaker.backend, limiter.backend, backend):
        asyncio.run(made.aclose())
