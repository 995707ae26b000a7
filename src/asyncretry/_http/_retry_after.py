"""Server-directed delays: ``Retry-After``, ``retry-after-ms`` and AWS's ``x-amz-retry-after``.

A header value may be any bytes (httpx hands them on decoded as UTF-8 or Latin-1), so nothing here
raises: a value that is not a delay is ignored and the computed backoff is used instead. Only ASCII
digits count (an Arabic-Indic five or a superscript two are not 5 and 2 seconds, ``1_000`` is not a
thousand), and a number too large for any sensible wait (a 5,000-digit one, say) is read as
:data:`LONGEST_DELAY`, which the engine cuts to the policy's ``max_server_delay`` and checks against
the deadline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["DELAY_HEADERS", "LONGEST_DELAY", "ServerDelay", "http_date", "server_delay"]

ServerDelay = tuple[float, bool]
"""(seconds, is_hint): ``is_hint`` is True for ``x-amz-retry-after``, which the engine clamps to the backoff."""

LONGEST_DELAY = 1e9
"""The longest delay read from a header, in seconds (about 31 years): larger numbers are cut to it."""

DELAY_HEADERS = ("retry-after-ms", "retry-after", "x-amz-retry-after")
"""The headers :func:`server_delay` reads, in the order it asks them (lower-case names)."""

_INTEGER = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_LONGEST_DIGITS = 12  # more digits before the point: beyond LONGEST_DELAY in any unit used here
_OWS = " \t"  # RFC 9110 optional whitespace; str.strip() would also eat Unicode spaces

# RFC 9110 section 5.6.7: IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" (email.utils reads it, with its zone),
# the obsolete RFC 850 form "Sunday, 06-Nov-94 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994" (no zone:
# it is UTC). Only these two shapes need a second look.
_ASCTIME = re.compile(r"[A-Za-z]{3} [A-Za-z]{3} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}")
_RFC850 = re.compile(r"[A-Za-z]{6,9}, [0-9]{2}-[A-Za-z]{3}-([0-9]{2}) [0-9]{2}:[0-9]{2}:[0-9]{2} GMT")
_LONGEST_DATE = 40  # the longest form, RFC 850 with "Wednesday", has 33 characters


def _number(text: str, pattern: re.Pattern[str]) -> float | None:
    """ASCII digits (with a fraction if ``pattern`` allows one) as a number, capped at ``LONGEST_DELAY * 1000``."""
    if not (text.isdigit() and text.isascii()) and pattern.fullmatch(text) is None:  # str methods: the quick test
        return None
    if len(text) > _LONGEST_DIGITS and len(text.partition(".")[0].lstrip("0")) > _LONGEST_DIGITS:
        return LONGEST_DELAY * 1000.0  # float() would read it, int() may refuse it: no need to try
    return float(text)


def _rfc850_year(two_digits: int, wall_now: float) -> int:
    # RFC 9110: a two-digit year more than 50 years in the future is the latest past year ending in them.
    this_year = datetime.fromtimestamp(wall_now, UTC).year
    year = this_year - this_year % 100 + two_digits
    return year - 100 if year > this_year + 50 else year


def http_date(text: str, wall_now: float) -> float | None:
    """The time an RFC 9110 HTTP-date names, in seconds since the epoch, or ``None`` if it is not one.

    All three forms are read (IMF-fixdate, RFC 850, asctime); a date without a zone is refused unless
    it is in asctime form, which is UTC by definition.

    Args:
        text: the header value, without surrounding whitespace.
        wall_now: the wall-clock time (seconds since the epoch), for RFC 850's two-digit years.
    """
    if len(text) > _LONGEST_DATE or not text.isascii():  # non-ASCII digits would pass int()
        return None
    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:
            if _ASCTIME.fullmatch(text) is None:
                return None  # an IMF-fixdate without its "GMT": not an HTTP-date
            when = when.replace(tzinfo=UTC)
        short = _RFC850.fullmatch(text)
        if short is not None:
            when = when.replace(year=_rfc850_year(int(short.group(1)), wall_now))
        return when.timestamp()
    except (ValueError, OverflowError, OSError, IndexError, TypeError):
        return None  # not a date, or a day, hour, zone or year out of range (or a wall clock out of range)


def server_delay(headers: Mapping[str, str], wall_clock: Callable[[], float]) -> ServerDelay | None:
    """The delay a response asks for, if any.

    ``retry-after-ms`` (milliseconds, digits with an optional fraction) wins over ``Retry-After``
    (delta-seconds or an HTTP-date), which wins over ``x-amz-retry-after`` (integer milliseconds,
    returned as a hint). Unreadable values are skipped; numbers are cut to :data:`LONGEST_DELAY`.
    Never raises, whatever the values.

    Args:
        headers: the response headers (``httpx.Headers``, or a mapping with lower-case names).
        wall_clock: the wall-clock time in seconds since the epoch (for HTTP-dates).
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        ms = _number(value.strip(_OWS), _DECIMAL)
        if ms is not None:
            return min(ms / 1000.0, LONGEST_DELAY), False
    value = headers.get("retry-after")
    if value is not None:
        text = value.strip(_OWS)
        seconds = _number(text, _INTEGER)
        if seconds is not None:
            return min(seconds, LONGEST_DELAY), False
        now = wall_clock()
        when = http_date(text, now)
        if when is not None:
            return min(max(0.0, when - now), LONGEST_DELAY), False
    value = headers.get("x-amz-retry-after")
    if value is not None:
        ms = _number(value.strip(_OWS), _INTEGER)
        if ms is not None:
            return min(ms / 1000.0, LONGEST_DELAY), True
    return None
