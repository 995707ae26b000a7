"""The delay a server asked for, and a quota it announced spent, read from any exception the engine classifies.

An exception asks for a delay by any of these, in this order (the first that gives one wins):

1. a ``retry_after`` attribute: seconds (an ``int`` or ``float``), a :class:`datetime.timedelta`, or a
   string read as a ``Retry-After`` header value (delta-seconds or an HTTP-date);
2. the ``Retry-After`` (``retry-after-ms``, ``Retry-After``, ``x-amz-retry-after``) of the response it
   carries: ``error.response.headers`` (httpx's ``HTTPStatusError``, and any error shaped like it);
3. its own ``headers`` (aiohttp's ``ClientResponseError``).

The same headers (2 and 3) are read for a quota the server announced spent (``RateLimit``,
``X-RateLimit-*`` and the like, :func:`~asyncretry._http._quota_headers.announced_quota`): the engine
waits for its reset when no delay was asked, and may hold the scope's limiter until then, or pace it.

Nothing here imports an HTTP client: the attributes are read by their shape, and the header values go
through the same parsers as the HTTP integrations' (all forms, any bytes, never raise). The engine then
treats the delay as it treats a response's: followed for a retryable outcome, cut to the policy's
``max_server_delay``, and never slept past the call's deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from .._http._quota_headers import QUOTA_HEADERS, AnnouncedQuota, announced_quota
from .._http._retry_after import DELAY_HEADERS, LONGEST_DELAY, ServerDelay, server_delay

__all__ = ["server_directions_of"]

_READ = DELAY_HEADERS + QUOTA_HEADERS
_MOST_HEADERS = 1000  # a plain dict of headers is searched by name: never walk an unbounded one


def server_directions_of(
    error: BaseException, wall_clock: Callable[[], float]
) -> tuple[ServerDelay | None, AnnouncedQuota | None]:
    """What ``error`` asks of the next attempts; never raises.

    Returns:
        ``(delay, quota)``: the ``(seconds, is_hint)`` to wait before a retry, or ``None``; and the
        quota the server announced (spent or not), or ``None``. The headers of the response the error
        carries are read first, then its own.

    Args:
        error: the exception an attempt raised.
        wall_clock: the wall-clock time in seconds since the epoch (for HTTP-dates and epoch resets).
    """
    try:
        delay = _attribute(getattr(error, "retry_after", None), wall_clock)
        headers = None
        response = getattr(error, "response", None)
        if response is not None and not isinstance(response, Mapping):  # a botocore response is a dict
            headers = _found(getattr(response, "headers", None))
        if not headers:
            headers = _found(getattr(error, "headers", None))
    except Exception:  # a property that raises: the error asked for nothing we can read
        return None, None
    if not headers:
        return delay, None
    announced = announced_quota(headers, wall_clock)  # the parsers never raise
    if delay is None:
        delay = server_delay(headers, wall_clock)
    return delay, announced


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


def _found(headers: object) -> dict[str, str] | None:
    """The delay and quota headers among ``headers`` (lower-case names), or ``None`` without any."""
    if headers is None or not hasattr(headers, "get"):
        return None
    found: dict[str, str] = {}
    for name in _READ:
        value = headers.get(name)  # httpx's Headers and aiohttp's CIMultiDict: case-insensitive
        if value is None and type(headers) is dict:
            value = _plain_get(headers, name)
        if isinstance(value, (str, bytes)):
            found[name] = _text(value)
    return found or None


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
