"""The values Redis primitives exchange: settings checked as every one of them checks them, and the
conversions of script arguments and replies (floats as exact strings; bytes or str, as the client decodes).
"""

from __future__ import annotations

import math
from typing import Any

from .._events import EventBus
from .._validate import check_clock, check_number, check_seconds

__all__ = ["check_parts", "fmt", "num", "number", "seconds", "text", "ttl_ms"]

_MAX_TIMEOUT = 3600.0
_MAX_DELAY = 86400.0
_MAX_TTL = 10 * 365 * 86400.0  # ten years: the longest key_ttl (Redis keeps milliseconds in a 64-bit int)


def seconds(name: str, value: object, *, high: float, low_open: bool = True) -> float:
    """A duration in seconds (a number or a ``timedelta``) within ``(0, high]``.

    Raises:
        TypeError: not a number or ``timedelta``.
        ValueError: NaN, infinite, out of range, or an int too large for a float (the message names it).
    """
    return check_seconds(name, value, low_open=low_open, high=high)  # type: ignore[arg-type]  # checked there


def number(name: str, value: object, *, low: float = 0.0, low_open: bool = True, high: float = 1e15) -> float:
    """A finite number within ``(low, high]`` (huge ints refused with ``ValueError``, not ``OverflowError``)."""
    return check_number(name, value, low=low, low_open=low_open, high=high)


def ttl_ms(value: object) -> int:
    """``key_ttl`` in whole milliseconds for ``PEXPIRE`` (> 0 and <= ten years)."""
    return math.ceil(seconds("key_ttl", value, high=_MAX_TTL) * 1000)


def check_parts(clock: object, events: object = None, rng: object = None) -> None:
    """Refuse a clock without ``now``/``sleep``, an event bus that is not one, or an ``rng`` that cannot be called.

    Raises:
        TypeError: naming the parameter and what it got.
    """
    if clock is not None:
        check_clock("clock", clock)
    if events is not None and not isinstance(events, EventBus):
        raise TypeError(f"events must be an asyncretry.EventBus, got {events!r}")
    if rng is not None and not callable(rng):
        raise TypeError(f"rng must be a callable returning floats in [0, 1), got {rng!r}")


def fmt(value: float | None) -> str:
    """A float for a script argument (``repr`` round-trips exactly); ``None`` and infinity become ``-1``."""
    return "-1" if value is None or math.isinf(value) else repr(float(value))


def num(value: Any) -> float:
    """A number from a script's reply (bytes or str, depending on the client's ``decode_responses``)."""
    return float(value)


def text(value: Any) -> str:
    """A string from a script's reply."""
    return value.decode() if isinstance(value, bytes) else str(value)
