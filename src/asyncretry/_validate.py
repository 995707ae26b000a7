"""Validation helpers shared by every configuration object.

Every check raises :class:`ValueError` (or :class:`TypeError` for a wrong type) with a message that names
the parameter, the value it got and the range it allows, so a bad setting fails at construction time
instead of turning into a hang or a silent default later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, SupportsFloat, TypeVar

__all__ = [
    "MAX_INT",
    "MIN_SECONDS",
    "as_seconds",
    "check_bool",
    "check_callable",
    "check_choice",
    "check_clock",
    "check_instance",
    "check_int",
    "check_items",
    "check_number",
    "check_seconds",
    "check_str",
]

T = TypeVar("T")

MAX_INT = 2**53
"""The largest integer setting: every integer setting meets floats in arithmetic, and floats hold integers
exactly only up to here (a quota of ``10**400`` tokens could not even be converted)."""

MIN_SECONDS = 1e-9
"""The shortest positive duration (a nanosecond, below any clock's resolution). Shorter ones, such as
``1e-320``, turn into infinities or divisions by zero when a rate or a window is derived from them."""


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _range_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {_bound(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {_bound(high)}")
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
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:  # an int beyond the largest float: the slow path below words the error
            number = math.nan
        if (
            number == number  # not NaN
            and (allow_inf or -math.inf < number < math.inf)
            and (low is None or number > low or (not low_open and number == low))
            and (high is None or number < high or (not high_open and number == high))
        ):
            return number
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {_short(value)} ({type(value).__name__})")
    allowed = _range_text(low, high, low_open, high_open)
    try:
        number = float(value)  # type: ignore[arg-type]  # a real number: checked just above
    except OverflowError:  # an int beyond the largest float, such as 10**400
        raise ValueError(f"{name} must be a finite number ({allowed}), got {_short(value)}") from None
    if math.isnan(number) or (math.isinf(number) and not allow_inf):
        raise ValueError(f"{name} must be a finite number ({allowed}), got {_short(value)}")
    if low is not None and (number < low or (low_open and number == low)):
        raise ValueError(f"{name} must be {allowed}, got {_short(value)}")
    if high is not None and (number > high or (high_open and number == high)):
        raise ValueError(f"{name} must be {allowed}, got {_short(value)}")
    return number


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` after checking that it is an integer within ``[low, high]``.

    Integers beyond :data:`MAX_INT` (in absolute value) are refused whatever the range.

    Raises:
        TypeError: ``value`` is not an ``int`` (``bool`` and floats are refused).
        ValueError: ``value`` is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {_short(value)} ({type(value).__name__})")
    if (
        -9007199254740992 <= value <= 9007199254740992  # +-MAX_INT, written out: the common path is hot
        and (low is None or value >= low)
        and (high is None or value <= high)
    ):
        return value
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer {_range_text(low, high, False, False)}, got {_short(value)}")
    raise ValueError(
        f"{name} must be an integer {_range_text(low, MAX_INT if high is None else high, False, False)} "
        f"(integers beyond 2**53 cannot be used exactly), got {_short(value)}"
    )


def check_seconds(
    name: str,
    value: float | timedelta | SupportsFloat,
    *,
    low: float = 0.0,
    high: float | None = None,
    low_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return a duration in seconds; accepts a number of seconds or a :class:`datetime.timedelta`.

    A duration that must be positive (``low=0, low_open=True``) must be at least :data:`MIN_SECONDS`.
    """
    if isinstance(value, timedelta):
        value = value.total_seconds()
    seconds = check_number(name, value, low=low, high=high, low_open=low_open, allow_inf=allow_inf)
    if low_open and low == 0.0 and seconds < MIN_SECONDS:
        raise ValueError(f"{name} must be >= {MIN_SECONDS:g} s (shorter durations cannot be measured), got {value!r}")
    return seconds


def as_seconds(value: float | timedelta) -> float:
    """A duration a configuration has already checked, as float seconds.

    Configurations store every duration as float seconds after :func:`check_seconds`; their fields are still
    declared ``float | timedelta`` (what users may pass), and this narrows the type where they are read.
    """
    return value.total_seconds() if isinstance(value, timedelta) else value


def _short(value: object) -> str:
    """``repr(value)``, shortened: a value such as ``10**400`` would fill the screen."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:25]}...{text[-10:]} ({len(text)} characters)"


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is ``True`` or ``False``; any other value (``1``, ``"no"``) is a ``TypeError``."""
    if value is True or value is False:
        return value
    raise TypeError(f"{name} must be True or False, got {_short(value)} ({type(value).__name__})")


def check_str(name: str, value: object) -> str:
    """Return ``value`` if it is a string."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {_short(value)} ({type(value).__name__})")
    return value


def check_callable(name: str, value: T) -> T:
    """Return ``value`` if it can be called (a random source, a hook, a predicate)."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {_short(value)} ({type(value).__name__})")
    return value


def check_clock(name: str, value: T) -> T:
    """Return ``value`` if it is a clock: it has a ``now()`` method and an ``async sleep(seconds)`` method."""
    if not (callable(getattr(value, "now", None)) and callable(getattr(value, "sleep", None))):
        raise TypeError(
            f"{name} must be a clock with now() and async sleep(seconds) methods (such as asyncretry.AnyioClock "
            f"or asyncretry.testing.VirtualClock), got {_short(value)} ({type(value).__name__})"
        )
    return value


def check_instance(name: str, value: object, kind: type[T]) -> T:
    """Return ``value`` if it is an instance of ``kind``."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {_short(value)} ({type(value).__name__})")
    return value


def check_items(
    name: str, value: object, check: Callable[[str, Any], T] | None = None, *, what: str = "items"
) -> tuple[T, ...]:
    """Return the items of a collection as a tuple, each passed through ``check(f"{name}[i]", item)``.

    A string, bytes or a non-iterable value (``None``, a number) is a ``TypeError`` naming ``name``:
    ``"ab"`` is not the collection ``("a", "b")`` that iterating it would give.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be a collection of {what} (a tuple, list or set), got {_short(value)} "
            f"({type(value).__name__})"
        )
    items = tuple(value)
    if check is None:
        return items
    return tuple(check(f"{name}[{index}]", item) for index, item in enumerate(items))


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; raise ``ValueError`` listing them otherwise."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {_short(value)}")
    return value

