"""Quotas servers announce in response headers: how many requests are left, and when the window resets.

Five families are read, and every complete announcement (a remaining count and a reset time from the
same family) takes part; the most restrictive one wins (the fewest left, then the longest wait):

* the IETF ``RateLimit`` field: a structured-field List of policies (``"daily";r=0;t=3600``, drafts 08
  and later) or the draft-07 Dictionary (``limit=100, remaining=0, reset=30``);
* the older IETF drafts' ``RateLimit-Remaining`` with ``RateLimit-Reset`` (delta-seconds);
* the de-facto ``X-RateLimit-Remaining`` with ``X-RateLimit-Reset-After`` (delta-seconds) or
  ``X-RateLimit-Reset``, which servers fill with epoch seconds, epoch milliseconds, delta-seconds or
  (rarely) an HTTP-date, and X's (Twitter's) spelling, ``x-rate-limit-remaining`` and ``x-rate-limit-reset``;
* OpenAI's ``x-ratelimit-{remaining,reset}-{requests,tokens}``, resets in Go duration syntax (``6m0s``);
* Anthropic's ``anthropic-ratelimit-{requests,tokens}-{remaining,reset}``, resets as RFC 3339 times.

An IETF announcement also takes its window's length and its quota from the ``RateLimit-Policy`` field
when it is there: the ``w`` and ``q`` of the policy with the same name (``"daily";q=1000;w=86400``, drafts
08 and later), or, for the draft-07 Dictionary and the older drafts, which name no policy (``100;w=60``,
the quota first), the policy with the shortest ``w`` listed. The other families do not say their window.

``X-RateLimit-Reset`` does not say its unit, so its size decides: from 10**12 on it is epoch
milliseconds, from 10**9 on epoch seconds, below that a delay in seconds. The thresholds are safe:
epoch seconds passed 10**9 in 2001 and stay below 10**12 for another 30,000 years, epoch milliseconds
passed 10**12 in 2001 too, and a delay of 10**9 seconds would be 31 years, beyond the longest delay
read from any header (:data:`LONGEST_DELAY`) anyway.

A header value may be any bytes, so nothing here raises: a value that cannot be read is skipped. Only
ASCII digits count (an Arabic-Indic five or a superscript two are not numbers, nor are ``1_000``,
``-1``, ``1e3`` or ``nan``), only spaces and tabs around a value are dropped, and numbers too large to
mean anything are capped without being converted: a count at 10**18, a reset at :data:`LONGEST_DELAY`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ._retry_after import LONGEST_DELAY, http_date

__all__ = ["QUOTA_HEADERS", "AnnouncedQuota", "announced_quota"]


@dataclass(frozen=True, slots=True)
class AnnouncedQuota:
    """A quota a server announced in a response's headers.

    Attributes:
        remaining: the requests (or tokens) left in the current window, at least 0 and at most 10**18.
        reset: the seconds until the window resets, from 0 to :data:`LONGEST_DELAY`.
        header: the lower-case name of the header the reading came from (``"ratelimit"``,
            ``"x-ratelimit-remaining"``, ...), for events and messages.
        rounding: how much sooner than ``reset`` the window may in fact reset: the place of the reset's
            last digit. 1.0 for whole seconds (delta-seconds, epoch seconds, an HTTP-date, ``6m0s``), which
            servers round, mostly up; 0.01 for ``64.57``, 0.001 for epoch milliseconds or ``20ms``.
        window: the length of the quota's window in seconds, when the server says it (the ``w`` of the
            IETF ``RateLimit-Policy`` field), else ``None``.
        quota: the requests the window admits, when the server says it with the window (the ``q`` of the
            same ``RateLimit-Policy`` entry), else ``None``.
    """

    remaining: int
    reset: float
    header: str
    rounding: float = 1.0
    window: float | None = None
    quota: int | None = None

    @property
    def spent(self) -> bool:
        """Whether none of the quota is left until ``reset``."""
        return self.remaining == 0

    @property
    def resets_within_window(self) -> bool:
        """Whether the server said a window at least twice the reset's rounding: the reset is then known
        to within half a window, so a wait until it ends in the next window, not past it."""
        return self.window is not None and self.rounding <= self.window * _OVERSHOOT_OF_WINDOW

    @property
    def pace(self) -> float | None:
        """The most requests per second the quota admits over time (``quota`` per ``window``) when its
        window is too short to wait for its reset (not :attr:`resets_within_window`: a 1-s window
        announced in whole seconds), else ``None``. Sent no faster, a window never runs out early."""
        if self.quota is None or self.window is None or self.resets_within_window:
            return None
        return self.quota / self.window


_STRUCTURED = "ratelimit"
_POLICY = "ratelimit-policy"  # the IETF field that describes each policy: its quota (q) and window (w)
_OLDER_DRAFT = ("ratelimit-remaining", "ratelimit-reset")
_DE_FACTO = ("x-ratelimit-remaining", "x-ratelimit-reset-after", "x-ratelimit-reset")
_X = ("x-rate-limit-remaining", "x-rate-limit-reset")  # the X (Twitter) API's spelling of the de-facto pair
_OPENAI = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
)
_ANTHROPIC = (
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
)

_ANNOUNCING: tuple[str, ...] = (
    _STRUCTURED, *_OLDER_DRAFT, *_DE_FACTO, *_X, *(name for pair in _OPENAI + _ANTHROPIC for name in pair)
)
QUOTA_HEADERS: tuple[str, ...] = (*_ANNOUNCING, _POLICY)
"""Every header :func:`announced_quota` may read (lower-case names)."""

_OVERSHOOT_OF_WINDOW = 0.5  # a reset known to within half its window (AnnouncedQuota.resets_within_window)
_MOST = 10**18  # the largest count read: more is as good as unlimited
_MOST_DIGITS = len(str(_MOST)) - 1  # numbers with more digits (leading zeros aside) are capped unread
_OWS = " \t"  # RFC 9110 optional whitespace; str.strip() would also eat Unicode spaces
_INTEGER = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")

_LONGEST_FIELD = 4096  # a RateLimit field longer than this is refused, not parsed
_LONGEST_DURATION = 32
_DURATION = re.compile(r"(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ms|h|m|s))+")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|h|m|s)")
_SECONDS_PER_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}
_FINEST_PLACE = 9  # digits after the point that count towards a reset's rounding (nanoseconds)
_LONGEST_TIMESTAMP = 40
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)

# Sizes of an X-RateLimit-Reset value from which it is an epoch time (see the module docstring).
_EPOCH_MILLISECONDS = 1e12
_EPOCH_SECONDS = 1e9


class _WallClock:
    """The caller's wall clock, read on first use and at most once."""

    __slots__ = ("_now", "_read")

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read
        self._now: float | None = None

    def __call__(self) -> float:
        if self._now is None:
            self._now = self._read()
        return self._now


# ------------------------------------------------------------------------------------------- numbers
def _capped(digits: str) -> int:
    """ASCII digits (possibly none: 0) as an integer, capped at ``_MOST`` without converting long ones."""
    significant = digits.lstrip("0")
    if len(significant) > _MOST_DIGITS:
        return _MOST
    return min(int(significant or "0"), _MOST)


def _whole(value: str) -> int | None:
    """A count: ASCII digits only."""
    text = value.strip(_OWS)
    return _capped(text) if _INTEGER.fullmatch(text) is not None else None


def _floored(value: str) -> int | None:
    """A count that may carry a fraction (``587.0``), rounded down."""
    text = value.strip(_OWS)
    return _capped(text.partition(".")[0]) if _DECIMAL.fullmatch(text) is not None else None


def _decimal(value: str) -> float | None:
    """ASCII digits with an optional fraction, capped at ``_MOST``."""
    text = value.strip(_OWS)
    if _DECIMAL.fullmatch(text) is None:
        return None
    if len(text.partition(".")[0].lstrip("0")) > _MOST_DIGITS:
        return float(_MOST)
    return min(float(text), float(_MOST))


def _bounded(seconds: float) -> float:
    """A reset in ``[0, LONGEST_DELAY]``; NaN and negative times (an epoch in the past) are 0."""
    return min(seconds, LONGEST_DELAY) if seconds > 0.0 else 0.0


def _place(number: str, unit: float = 1.0) -> float:
    """The place of a decimal number's last digit, in seconds when its unit is ``unit`` seconds
    (``"64.57"``: 0.01; ``"30"``: 1.0)."""
    return unit * 10.0 ** -min(len(number.partition(".")[2]), _FINEST_PLACE)


# -------------------------------------------------------------------------------------------- resets
_Reading = tuple[float, float]  # a reset read: (seconds until it, how much sooner it may come)


def _delta_seconds(value: str) -> _Reading | None:
    whole = _whole(value)
    return None if whole is None else (_bounded(float(whole)), 1.0)


def _decimal_seconds(value: str) -> _Reading | None:
    seconds = _decimal(value)
    return None if seconds is None else (_bounded(seconds), _place(value.strip(_OWS)))


def _epoch_or_delta(value: str, now: _WallClock) -> _Reading | None:
    """``X-RateLimit-Reset``: epoch milliseconds, epoch seconds, delta-seconds or an HTTP-date."""
    number = _decimal(value)
    if number is None:
        text = value.strip(_OWS)
        if not text[:1].isalpha():  # every HTTP-date form starts with a day name: no clock for garbage
            return None
        when = http_date(text, now())
        return None if when is None else (_bounded(when - now()), 1.0)
    if number >= _EPOCH_MILLISECONDS:
        return _bounded(number / 1000.0 - now()), _place(value.strip(_OWS), 0.001)
    if number >= _EPOCH_SECONDS:
        number -= now()
    return _bounded(number), _place(value.strip(_OWS))


def _go_duration(value: str) -> _Reading | None:
    """A Go-style duration (``1h2m3.5s``, ``20ms``): decimal parts in h, m, s or ms, at least one."""
    text = value.strip(_OWS)
    if len(text) > _LONGEST_DURATION or _DURATION.fullmatch(text) is None:
        return None
    seconds, rounding = 0.0, LONGEST_DELAY
    for number, unit in _DURATION_PART.findall(text):
        size = 0.001 if unit == "ms" else _SECONDS_PER_UNIT[unit]
        seconds += float(number) * size
        rounding = min(rounding, _place(number, size))
    return _bounded(seconds), rounding


def _rfc3339(value: str, now: _WallClock) -> _Reading | None:
    """The seconds until an RFC 3339 time with its zone (``2026-11-30T17:30:00Z``)."""
    text = value.strip(_OWS)
    matched = _RFC3339.fullmatch(text) if len(text) <= _LONGEST_TIMESTAMP and text.isascii() else None
    if matched is None:
        return None
    try:
        when = datetime.fromisoformat(text.upper()).timestamp()  # upper(): RFC 3339 allows "t" and "z"
    except (ValueError, OverflowError, OSError):
        return None  # a month 13, a leap second, an offset of 24 hours, a year out of range
    return _bounded(when - now()), _place(matched[1] or "")


# --------------------------------------------------------------------------------- RateLimit field
def _members(field: str) -> list[list[str]] | None:
    """The field's members, each cut into its ``;`` segments, or ``None`` if a quoted string is open.

    Commas and semicolons inside quoted strings (where a backslash escapes the next character) do not cut.
    """
    members: list[list[str]] = []
    segments: list[str] = []
    start = 0
    quoted = escaped = False
    for index, char in enumerate(field):
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in ",;":
            segments.append(field[start:index].strip(_OWS))
            start = index + 1
            if char == ",":
                members.append(segments)
                segments = []
    if quoted:
        return None
    segments.append(field[start:].strip(_OWS))
    members.append(segments)
    return members


def _parameters(segments: list[str]) -> dict[str, str]:
    """A member's ``key=value`` parameters by key; a later duplicate wins, as RFC 8941 says."""
    return {key: value for key, _, value in (segment.partition("=") for segment in segments)}


_Policy = tuple[float, int | None]  # a policy's window (seconds) and its quota (requests), if said


def _policies(field: str | None) -> dict[str, _Policy]:
    """The window (``w``: whole seconds, above 0) and quota (``q``, or the older drafts' leading count) of
    each policy a ``RateLimit-Policy`` field lists, by the policy's name as written: ``'"daily"'`` (drafts
    08 and later); the drafts before name none (``100;w=60`` gives ``{"100": (60.0, 100)}``). Of two
    policies with one name, the shorter window counts."""
    members = None if field is None or len(field) > _LONGEST_FIELD else _members(field)
    found: dict[str, _Policy] = {}
    for head, *parameters in members or ():
        named = _parameters(parameters)
        value = named.get("w")
        seconds = None if value is None else _whole(value)
        if seconds and (head not in found or seconds < found[head][0]):
            count = named.get("q", None if head.startswith('"') else head)
            found[head] = (_bounded(float(seconds)), None if count is None else _whole(count))
    return found


def _announcement(
    remaining: str | None, reset: str | None, header: str, policy: _Policy | None
) -> AnnouncedQuota | None:
    if remaining is None or reset is None:
        return None
    count, reading = _whole(remaining), _delta_seconds(reset)
    if count is None or reading is None:
        return None
    window, quota = (None, None) if policy is None else policy
    return AnnouncedQuota(count, reading[0], header, reading[1], window, quota)


def _structured(
    headers: Mapping[str, str], policies: dict[str, _Policy], shortest: _Policy | None
) -> list[AnnouncedQuota]:
    """The policies of a ``RateLimit`` List (``r`` and ``t`` parameters), or its draft-07 Dictionary.

    A policy's window and quota are the ones ``policies`` gives its name; the Dictionary names no policy,
    so they are ``shortest``'s, the policy with the shortest window listed. Later duplicates of a parameter
    or key win, as RFC 8941 says.
    """
    field = headers.get(_STRUCTURED)
    if field is None or len(field) > _LONGEST_FIELD:
        return []
    members = _members(field)
    if members is None:
        return []
    found: list[AnnouncedQuota] = []
    dictionary: dict[str, str] = {}
    for head, *parameters in members:
        if "=" in head and not head.startswith('"'):  # "remaining=0": a Dictionary member, not a policy
            key, _, value = head.partition("=")
            dictionary[key] = value
            continue
        named = _parameters(parameters)
        policy = _announcement(named.get("r"), named.get("t"), _STRUCTURED, policies.get(head))
        if policy is not None:
            found.append(policy)
    draft_07 = _announcement(dictionary.get("remaining"), dictionary.get("reset"), _STRUCTURED, shortest)
    return [*found, draft_07] if draft_07 is not None else found


# --------------------------------------------------------------------------------- header pairs
_Reset = tuple[str, Callable[[str], _Reading | None]]  # a reset header and its reader


def _pair(
    headers: Mapping[str, str], remaining_name: str, count: Callable[[str], int | None], *resets: _Reset,
    policy: _Policy | None = None,
) -> AnnouncedQuota | None:
    """A remaining header with the first of its reset headers that is readable, and the quota's ``policy``
    (its window and quota, when said).

    The reset headers are asked only once the count is readable, and in order.
    """
    value = headers.get(remaining_name)
    remaining = None if value is None else count(value)
    if remaining is None:
        return None
    for reset_name, reset in resets:
        value = headers.get(reset_name)
        reading = None if value is None else reset(value)
        if reading is not None:
            window, quota = (None, None) if policy is None else policy
            return AnnouncedQuota(remaining, reading[0], remaining_name, reading[1], window, quota)
    return None


def announced_quota(headers: Mapping[str, str], wall_clock: Callable[[], float]) -> AnnouncedQuota | None:
    """The most restrictive quota a response announces, if it announces one.

    Every family of headers described in this module is read; of the complete announcements found, the
    one with the fewest requests left wins, and of those the one with the longest reset. Unreadable
    values are skipped; counts are cut to 10**18 and resets to :data:`LONGEST_DELAY`. Never raises,
    whatever the values.

    Args:
        headers: the response headers (``httpx.Headers``, aiohttp's ``CIMultiDict``, or a mapping with
            lower-case names); only ``headers.get`` is called, with the names in :data:`QUOTA_HEADERS`.
        wall_clock: the wall-clock time in seconds since the epoch, called at most once, and only for a
            reset given as a point in time.

    Returns:
        The most restrictive announcement, or ``None`` if no family announced both a remaining count
        and a reset time.
    """
    present: dict[str, str] = {}
    for name in _ANNOUNCING:  # most responses announce nothing: ask for each name once, parse nothing
        value = headers.get(name)
        if value is not None:
            present[name] = value
    if not present:
        return None
    ietf = _STRUCTURED in present or _OLDER_DRAFT[0] in present
    policies = _policies(headers.get(_POLICY)) if ietf else {}
    headers = present
    now = _WallClock(wall_clock)
    shortest = min(policies.values(), key=lambda policy: policy[0], default=None)  # of the forms naming none
    found = _structured(headers, policies, shortest)
    de_facto, reset_after, reset_at = _DE_FACTO
    candidates = [
        _pair(headers, _OLDER_DRAFT[0], _whole, (_OLDER_DRAFT[1], _delta_seconds), policy=shortest),
        _pair(
            headers,
            de_facto,
            _floored,
            (reset_after, _decimal_seconds),  # Discord sends both: the delay needs no clock
            (reset_at, lambda value: _epoch_or_delta(value, now)),
        ),
        _pair(headers, _X[0], _floored, (_X[1], lambda value: _epoch_or_delta(value, now))),
        *(_pair(headers, name, _whole, (reset, _go_duration)) for name, reset in _OPENAI),
        *(_pair(headers, name, _whole, (reset, lambda value: _rfc3339(value, now))) for name, reset in _ANTHROPIC),
    ]
    found += [quota for quota in candidates if quota is not None]
    return min(found, key=lambda quota: (quota.remaining, -quota.reset), default=None)
