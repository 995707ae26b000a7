"""Validation helpers shared by every configuration object.

Every check raises :class:`ValueError` (or :class:`TypeError` for a wrong type) with a message that names
the parameter, the value it got and the range it allows, so a bad setting fails at construction time
instead of turning into a hang or a silent default later.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import SupportsFloat

__all__ = ["check_choice", "check_int", "check_number", "check_seconds"]


def _range_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    return " and ".join(parts) if parts else "any finite number"


def check_number(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float after checking that it is a number within the given range.

    Raises:
        TypeError: ``value`` is not a real number (``bool`` is refused too).
        ValueError: ``value`` is NaN, infinite (unless ``allow_inf``) or out of range.
    """
    kind = type(value)
    if kind is float or kind is int:  # the hot path: no isinstance chain, no message formatting
        number = float(value)  # type: ignore[arg-type]
        if (
            number == number  # not NaN
            and (allow_inf or -math.inf < number < math.inf)
            and (low is None or number > low or (not low_open and number == low))
            and (high is None or number < high or (not high_open and number == high))
        ):
            return number
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    number = float(value)  # type: ignore[arg-type]  # a real number: checked just above
    allowed = _range_text(low, high, low_open, high_open)
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise ValueError(f"{name} must be a finite number {allowed}, got {value!r}")
    if low is not None and (number < low or (low_open and number == low)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if high is not None and (number > high or (high_open and number == high)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return number


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` after checking that it is an integer within ``[low, high]``.

    Raises:
        TypeError: ``value`` is not an ``int`` (``bool`` and floats are refused).
        ValueError: ``value`` is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer {_range_text(low, high, False, False)}, got {value!r}")
    return value


def check_seconds(
    name: str,
    value: float | timedelta | SupportsFloat,
    *,
    low: float = 0.0,
    high: float | None = None,
    low_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return a duration in seconds; accepts a number of seconds or a :class:`datetime.timedelta`."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return check_number(
        name, value, low=low, high=high, low_open=low_open, allow_inf=allow_inf
    )


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; raise ``ValueError`` listing them otherwise."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    """A flag: ``True`` or ``False`` only (a truthy string such as ``"false"`` is refused)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value
