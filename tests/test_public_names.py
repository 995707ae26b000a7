"""Public objects are named by their public module (``asyncretry.RetryPolicy``), and still pickle and type-check."""

from __future__ import annotations

import inspect
import pickle
import traceback
import typing

import pytest

import asyncretry
from asyncretry import (
    BreakerState,
    CircuitBreakerConfig,
    ExponentialBackoff,
    OutcomeKind,
    RetriesExhausted,
    RetryPolicy,
    RetryQuotaConfig,
)

PUBLIC = [
    name for name in asyncretry.__all__
    if isinstance(getattr(asyncretry, name), type) or inspect.isfunction(getattr(asyncretry, name))
]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_objects_say_their_public_module(name: str) -> None:
    """Every public class and function is asyncretry.X, not asyncretry._private._module.X."""
    assert getattr(asyncretry, name).__module__ == "asyncretry"


def test_reprs_and_tracebacks_use_the_public_name() -> None:
    """The class's repr and a traceback's last line name asyncretry.X."""
    assert repr(RetryPolicy) == "<class 'asyncretry.RetryPolicy'>"
    error = RetriesExhausted("gave up", last_result=None, why="max_attempts")
    assert traceback.format_exception_only(error)[-1].startswith("asyncretry.RetriesExhausted: gave up")


def test_dataclass_reprs_are_unchanged() -> None:
    """A configuration's repr is still ClassName(field=value, ...)."""
    assert repr(RetryQuotaConfig()).startswith("RetryQuotaConfig(max_capacity=500, ")


@pytest.mark.parametrize(
    "value",
    [
        RetryPolicy(),
        RetryPolicy.aws_adaptive(breaker=CircuitBreakerConfig()),
        RetryQuotaConfig.profile("2026"),
        ExponentialBackoff.aws_standard(),
        OutcomeKind.THROTTLING,
        BreakerState.HALF_OPEN,
    ],
)
def test_configurations_and_enums_pickle_under_the_public_name(value: object) -> None:
    """pickle finds the classes as asyncretry.X, and a round trip gives an equal value."""
    data = pickle.dumps(value)
    assert b"asyncretry._" not in data
    assert pickle.loads(data) == value


@pytest.mark.parametrize("name", [name for name in PUBLIC if isinstance(getattr(asyncretry, name), type)])
def test_type_hints_still_resolve(name: str) -> None:
    """typing.get_type_hints works on every public class although its __module__ changed."""
    typing.get_type_hints(getattr(asyncretry, name))
