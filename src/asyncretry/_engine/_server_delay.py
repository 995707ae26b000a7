"""The delay a server asked for, read from any exception the engine classifies.

An exception asks for a delay by any of these, in this order (the first that gives one wins):

1. a ``retry_after`` attribute: seconds (an ``int`` or ``float``), a :class:`datetime.timedelta`, or a
   string read as a ``Retry-After`` header value (delta-seconds or an HTTP-date);
2. the ``Retry-After`` (``retry-after-ms``, ``Retry-After``, ``x-amz-retry-after``) of the response it
   carries: ``error.response.headers`` (httpx's ``HTTPStatusError``, and any error shaped like it);
3. its own ``headers`` (aiohttp's ``ClientResponseError``).

Nothing here imports an HTTP client: the attributes are read by their shape, and the header values go
through the same parser as the HTTP integrations' (all forms, any bytes, never raises). The engine then
treats the delay as it treats a response's: followed for a retryable outcome, cut to the policy's
``max_server_delay``, and never slept past the call's deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from .._http._retry_after import DELAY_HEADERS, LONGEST_DELAY, ServerDelay, server_delay

__all__ = ["server_delay_of"]

_MOST_HEADERS = 1000  # a plain dict of headers is searched by name: never walk an unbounded one


def server_delay_of(error: BaseException, wall_clock: Callable[[], float]) -> ServerDelay | None:
    """``(seconds, is_hint)`` that ``error`` asks to wait before a retry, or ``None``; never raises.

    Args:
        error: the exception an attempt raised.
        wall_clock: the wall-clock time in seconds since the epoch (for HTTP-dates).
    """
    try:
        delay = _attribute(getattr(error, "retry_after", None), wall_clock)
        if delay is not None:
            return delay
        response = getattr(error, "response", None)
        if response is not None and not isinstance(response, Mapping):  # a botocore response is a dict
            delay = _of_headers(getattr(response, "headers", None), wall_clock)
            if delay is not None:
                return delay
        return _of_headers(getattr(error, "headers", None), wall_clock)
    except Exception:  # a property that raises: the error asked for nothing we can read
        return None


def _attribute(value: object, wall_clock: Callable[[], float]) -> ServerDelay | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, (int, float)):
        seconds = float(value) if not isinstance(value, int) or value.bit_length() < 64 else LONGEST_DELAY
        if math.isnan(seconds) or seconds < 0.0:
            return None
        return min(seconds, LONGEST_DELAY), False
    if isinstance(value, (str, bytes)):
        return server_delay({"retry-after": _text(value)}, wall_clock)
    return None


def _of_headers(headers: object, wall_clock: Callable[[], float]) -> ServerDelay | None:
    if headers is None or not hasattr(headers, "get"):
        return None
    found: dict[str, str] = {}
    for name in DELAY_HEADERS:
        value = headers.get(name)  # httpx's Headers and aiohttp's CIMultiDict: case-insensitive
        if value is None and type(headers) is dict:
            value = _plain_get(headers, name)
        if isinstance(value, (str, bytes)):
            found[name] = _text(value)
    return server_delay(found, wall_clock) if found else None


def _plain_get(headers: dict[Any, Any], name: str) -> Any:
    """A header of a plain dict, whatever the case of its name."""
    for count, (key, value) in enumerate(headers.items()):
        if count >= _MOST_HEADERS:
            break
        if isinstance(key, str) and key.lower() == name:
            return value
    return None


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("latin-1")
