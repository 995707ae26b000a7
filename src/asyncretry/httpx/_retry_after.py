"""Server-directed delays: ``Retry-After``, ``retry-after-ms`` and AWS's ``x-amz-retry-after``.

Garbage, negative, NaN or infinite values are ignored (the computed backoff is used instead); the
engine caps whatever is found at the policy's ``max_server_delay`` and checks it against the deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

__all__ = ["ServerDelay", "server_delay"]

ServerDelay = tuple[float, bool]
"""(seconds, is_hint): ``is_hint`` is True for ``x-amz-retry-after``, which the engine clamps to the backoff."""


def _non_negative(value: float) -> float | None:
    return value if math.isfinite(value) and value >= 0.0 else None


def _parse_retry_after(value: str, wall_now: float) -> float | None:
    text = value.strip()
    if text.isdigit():
        return _non_negative(float(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:  # RFC 9110 dates are always GMT; a naive date is garbage
        return None
    return max(0.0, when.timestamp() - wall_now)


def _parse_number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return _non_negative(number)


def server_delay(headers: Mapping[str, str], wall_clock: Callable[[], float]) -> ServerDelay | None:
    """The delay a response asks for, if any.

    ``retry-after-ms`` (milliseconds, a float) wins over ``Retry-After`` (delta-seconds or an
    HTTP-date), which wins over ``x-amz-retry-after`` (integer milliseconds, returned as a hint).

    Args:
        headers: the response headers.
        wall_clock: the wall-clock time in seconds since the epoch (for HTTP-dates).
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        ms = _parse_number(value)
        if ms is not None:
            return ms / 1000.0, False
    value = headers.get("retry-after")
    if value is not None:
        seconds = _parse_retry_after(value, wall_clock())
        if seconds is not None:
            return seconds, False
    value = headers.get("x-amz-retry-after")
    if value is not None and value.strip().isdigit():
        return int(value.strip()) / 1000.0, True
    return None
