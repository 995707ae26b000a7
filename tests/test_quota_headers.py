"""Announced quotas: the IETF RateLimit field and its older drafts, X-RateLimit-* (GitHub, X, Discord, Reddit),
OpenAI's and Anthropic's headers, the most restrictive of them, and values no server should send, which must
never raise."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import NamedTuple

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from asyncretry._http._quota_headers import QUOTA_HEADERS, AnnouncedQuota, announced_quota
from asyncretry._http._retry_after import LONGEST_DELAY
from test_httpx_retry_after import NOT_NUMBERS  # the values that are not numbers, for delays and counts alike

NOW = 1_750_000_000.0  # the injected wall clock, seconds since the epoch: 2025-06-15T15:06:40Z
IN_30_SECONDS = "2025-06-15T15:07:10Z"
MOST = 10**18  # the largest count read


def wall() -> float:
    return NOW


def quota_of(headers: dict[str, str]) -> AnnouncedQuota | None:
    return announced_quota(httpx.Headers(headers), wall)


# ------------------------------------------------------------------------------ the RateLimit field
@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ('"default";r=0;t=30', AnnouncedQuota(0, 30.0, "ratelimit")),
        ("default;r=50;t=30", AnnouncedQuota(50, 30.0, "ratelimit")),
        ('"default";r=50;t=30;pk=:dmlwLWFwcC0xMjM=:', AnnouncedQuota(50, 30.0, "ratelimit")),
        ('"a,b;c=d";r=2;t=9', AnnouncedQuota(2, 9.0, "ratelimit")),
        ('"say \\"hi\\"";r=4;t=6', AnnouncedQuota(4, 6.0, "ratelimit")),
        ('"default";r=9;t=30;r=1', AnnouncedQuota(1, 30.0, "ratelimit")),
    ],
    ids=["quoted name", "token name", "partition key", "separators quoted", "escaped quotes", "last duplicate"],
)
def test_a_ratelimit_policy_is_read(field: str, expected: AnnouncedQuota) -> None:
    """A policy's r and t parameters are the count and the reset, whatever its name and other parameters."""
    assert quota_of({"RateLimit": field}) == expected


def test_the_most_restrictive_policy_of_a_list_wins() -> None:
    """Of a burst and a daily policy, the exhausted daily one is announced."""
    assert quota_of({"RateLimit": '"burst";r=5;t=1, "daily";r=0;t=3600'}) == AnnouncedQuota(0, 3600.0, "ratelimit")


def test_policies_with_as_few_left_are_told_apart_by_the_longer_reset() -> None:
    """Two exhausted policies: the one that resets later is announced."""
    field = '"hour";r=0;t=600, "minute";r=0;t=45'
    assert quota_of({"RateLimit": field}) == AnnouncedQuota(0, 600.0, "ratelimit")


def test_policies_without_both_parameters_are_skipped() -> None:
    """A policy missing r or t does not count; a complete one beside it does."""
    field = '"a";r=0, "b";t=5, "c";r=9;t=60'
    assert quota_of({"RateLimit": field}) == AnnouncedQuota(9, 60.0, "ratelimit")


def test_the_draft_07_dictionary_is_read() -> None:
    """The earlier Dictionary form gives its remaining and reset keys."""
    field = "limit=100, remaining=0, reset=30"
    assert quota_of({"RateLimit": field}) == AnnouncedQuota(0, 30.0, "ratelimit")


def test_the_older_drafts_header_pair_is_read() -> None:
    """RateLimit-Remaining with RateLimit-Reset in delta-seconds."""
    headers = {"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"}
    assert quota_of(headers) == AnnouncedQuota(0, 30.0, "ratelimit-remaining")


def test_a_field_of_exactly_4096_characters_is_read_and_a_longer_one_is_not() -> None:
    """The field limit is 4096 characters, one more is refused."""
    policy = '"default";r=0;t=30;note="'
    at_limit = policy + "x" * (4096 - len(policy) - 1) + '"'
    assert len(at_limit) == 4096
    assert quota_of({"RateLimit": at_limit}) == AnnouncedQuota(0, 30.0, "ratelimit")
    assert quota_of({"RateLimit": policy + "x" * (4097 - len(policy) - 1) + '"'}) is None


def test_a_10000_character_field_is_refused() -> None:
    """A field far past the limit is not parsed, even with a complete policy in front."""
    field = '"default";r=0;t=30, "padding";note="' + "x" * 9_963 + '"'
    assert len(field) == 10_000
    assert quota_of({"RateLimit": field}) is None


def test_a_list_of_1000_members_within_the_limit_is_read_in_full() -> None:
    """999 names without parameters, then a complete policy: the last member is found."""
    field = ",".join(["p"] * 999 + ['"last";r=3;t=7'])
    assert len(field) < 4096
    assert quota_of({"RateLimit": field}) == AnnouncedQuota(3, 7.0, "ratelimit")


@pytest.mark.parametrize(
    "field",
    ['"default;r=0;t=30', '"default";r=0;t=30, "other', '"end\\";r=0;t=30', '"default";r=0;t=30;note="'],
)
def test_a_field_with_an_unclosed_quoted_string_is_refused(field: str) -> None:
    """An open quoted string makes the whole field unreadable, not just its member."""
    assert quota_of({"RateLimit": field}) is None


# ------------------------------------------------------------------------------- X-RateLimit-*
def test_github_epoch_seconds_are_a_time_to_wait_for() -> None:
    """GitHub's x-ratelimit-reset is the epoch second the window resets: 30 minutes from now."""
    headers = {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "4999",
        "x-ratelimit-used": "1",
        "x-ratelimit-reset": "1750001800",
        "x-ratelimit-resource": "core",
    }
    assert quota_of(headers) == AnnouncedQuota(4999, 1800.0, "x-ratelimit-remaining")


def test_x_spells_the_de_facto_headers_with_another_hyphen() -> None:
    """The X (Twitter) API's x-rate-limit-remaining and x-rate-limit-reset (epoch seconds) are read."""
    headers = {"x-rate-limit-limit": "900", "x-rate-limit-remaining": "847", "x-rate-limit-reset": "1750000900"}
    assert quota_of(headers) == AnnouncedQuota(847, 900.0, "x-rate-limit-remaining")


def test_discord_reset_after_wins_over_its_epoch_reset() -> None:
    """Discord sends both; the delay in X-RateLimit-Reset-After, with its fraction, is the one read."""
    headers = {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "1750000999.25",
        "X-RateLimit-Reset-After": "64.57",
        "X-RateLimit-Bucket": "abcd1234",
    }
    assert quota_of(headers) == AnnouncedQuota(0, 64.57, "x-ratelimit-remaining", rounding=0.01)


def test_an_epoch_reset_with_a_fraction_is_read() -> None:
    """Discord's X-RateLimit-Reset alone: epoch seconds with a fraction."""
    headers = {"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1750000002.25"}
    assert quota_of(headers) == AnnouncedQuota(1, 2.25, "x-ratelimit-remaining", rounding=0.01)


def test_an_unreadable_reset_after_falls_back_to_the_reset() -> None:
    """A garbage X-RateLimit-Reset-After is skipped, and X-RateLimit-Reset read instead."""
    headers = {"X-RateLimit-Remaining": "1", "X-RateLimit-Reset-After": "soon", "X-RateLimit-Reset": "1750000010"}
    assert quota_of(headers) == AnnouncedQuota(1, 10.0, "x-ratelimit-remaining")


@pytest.mark.parametrize(("remaining", "expected"), [("587.0", 587), ("0.0", 0), ("4.9", 4), ("12", 12)])
def test_reddit_counts_with_a_fraction_are_rounded_down(remaining: str, expected: int) -> None:
    """Reddit's x-ratelimit-remaining carries a fraction; its x-ratelimit-reset is delta-seconds."""
    headers = {"x-ratelimit-used": "13", "x-ratelimit-remaining": remaining, "x-ratelimit-reset": "412"}
    assert quota_of(headers) == AnnouncedQuota(expected, 412.0, "x-ratelimit-remaining")


@pytest.mark.parametrize(
    ("reset", "expected", "rounding"),
    [
        ("0", 0.0, 1.0),
        ("999999999", 999_999_999.0, 1.0),  # the longest delta: 31 years
        ("1000000000", 0.0, 1.0),  # the first epoch second: 2001, long past
        ("1750000030", 30.0, 1.0),
        ("1749999000", 0.0, 1.0),  # an epoch in the past: reset already
        ("999999999999", LONGEST_DELAY, 1.0),  # the last epoch second before milliseconds, in the year 33658
        ("1750000030500", 30.5, 0.001),  # epoch milliseconds
        ("1749999999000", 0.0, 0.001),  # epoch milliseconds in the past
    ],
)
def test_the_size_of_x_ratelimit_reset_decides_its_unit(reset: str, expected: float, rounding: float) -> None:
    """Below 10**9: delta-seconds; from 10**9: epoch seconds; from 10**12: epoch milliseconds."""
    headers = {"X-RateLimit-Remaining": "2", "X-RateLimit-Reset": reset}
    assert quota_of(headers) == AnnouncedQuota(2, expected, "x-ratelimit-remaining", rounding)


def test_an_http_date_in_x_ratelimit_reset_is_read() -> None:
    """Some servers send an HTTP-date instead of a number: the time until it is the reset."""
    date = format_datetime(datetime.fromtimestamp(NOW + 60, tz=UTC), usegmt=True)
    headers = {"X-RateLimit-Remaining": "2", "X-RateLimit-Reset": date}
    assert quota_of(headers) == AnnouncedQuota(2, 60.0, "x-ratelimit-remaining")


# ------------------------------------------------------------------------------- OpenAI, Anthropic
@pytest.mark.parametrize(
    ("duration", "expected", "rounding"),
    [("1s", 1.0, 1.0), ("6m0s", 360.0, 1.0), ("20ms", 0.02, 0.001), ("1h2m3.5s", 3723.5, 0.1), ("0.5s", 0.5, 0.1),
     ("1.5h", 5400.0, 360.0), ("1m30s", 90.0, 1.0), ("0s", 0.0, 1.0), ("1s" * 16, 16.0, 1.0), ("2m", 120.0, 60.0)],
)
def test_openai_resets_are_go_durations(duration: str, expected: float, rounding: float) -> None:
    """Hours, minutes, seconds and milliseconds, with fractions, in any combination up to 32 characters;
    the rounding is the place of the smallest unit's last digit."""
    headers = {"x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": duration}
    assert quota_of(headers) == AnnouncedQuota(59, expected, "x-ratelimit-remaining-requests", rounding)


def test_openai_requests_and_tokens_give_the_more_restrictive_quota() -> None:
    """OpenAI announces a request and a token quota: the one with fewer left is read."""
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-remaining-tokens": "149984",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert quota_of(headers) == AnnouncedQuota(59, 1.0, "x-ratelimit-remaining-requests")


@pytest.mark.parametrize(
    ("timestamp", "expected", "rounding"),
    [
        (IN_30_SECONDS, 30.0, 1.0),
        ("2025-06-15T15:06:41.5Z", 1.5, 0.1),
        ("2025-06-15T15:06:41.250000001Z", 1.25, 1e-9),  # fractions past microseconds are dropped
        ("2025-06-15T17:07:10+02:00", 30.0, 1.0),
        ("2025-06-15T10:07:10-05:00", 30.0, 1.0),
        ("2025-06-15 15:07:10z", 30.0, 1.0),  # RFC 3339 allows a space and lower-case letters
        ("2025-06-15T15:06:00Z", 0.0, 1.0),  # in the past: reset already
        ("9999-12-31T23:59:59-23:59", LONGEST_DELAY, 1.0),
        ("0001-01-01T00:00:00+23:59", 0.0, 1.0),
    ],
)
def test_anthropic_resets_are_rfc_3339_times(timestamp: str, expected: float, rounding: float) -> None:
    """The time until an RFC 3339 timestamp with its zone, against the injected wall clock."""
    headers = {"anthropic-ratelimit-tokens-remaining": "38000", "anthropic-ratelimit-tokens-reset": timestamp}
    assert quota_of(headers) == AnnouncedQuota(38000, expected, "anthropic-ratelimit-tokens-remaining", rounding)


def test_anthropic_requests_and_tokens_give_the_more_restrictive_quota() -> None:
    """Anthropic announces a request and a token quota: the one with fewer left is read."""
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-06-15T15:06:41Z",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "38000",
        "anthropic-ratelimit-tokens-reset": IN_30_SECONDS,
    }
    assert quota_of(headers) == AnnouncedQuota(49, 1.0, "anthropic-ratelimit-requests-remaining")


# ------------------------------------------------------------------------------- across families
def test_the_most_restrictive_announcement_of_all_families_wins() -> None:
    """A RateLimit policy, an X-RateLimit pair and an exhausted OpenAI token quota: the token quota wins."""
    headers = {
        "RateLimit": '"default";r=10;t=30',
        "X-RateLimit-Remaining": "3",
        "X-RateLimit-Reset-After": "5",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "1m",
    }
    assert quota_of(headers) == AnnouncedQuota(0, 60.0, "x-ratelimit-remaining-tokens", rounding=60.0)


def test_families_with_as_few_left_are_told_apart_by_the_longer_reset() -> None:
    """Two exhausted quotas from two families: the one that resets later is announced."""
    headers = {"RateLimit-Remaining": "0", "RateLimit-Reset": "30", "X-RateLimit-Remaining": "0",
               "X-RateLimit-Reset-After": "45"}
    assert quota_of(headers) == AnnouncedQuota(0, 45.0, "x-ratelimit-remaining")


def test_an_unreadable_family_does_not_hide_a_readable_one() -> None:
    """A garbage RateLimit field is skipped; the older drafts' pair beside it is read."""
    headers = {"RateLimit": '"default;r=0', "RateLimit-Remaining": "4", "RateLimit-Reset": "8"}
    assert quota_of(headers) == AnnouncedQuota(4, 8.0, "ratelimit-remaining")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Retry-After": "30"},
        {"RateLimit": '"default";r=0'},
        {"RateLimit": '"default";t=30'},
        {"RateLimit": "limit=100, remaining=0"},
        {"RateLimit-Remaining": "0"},
        {"RateLimit-Reset": "30"},
        {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0"},
        {"X-RateLimit-Reset": "1750000030", "X-RateLimit-Reset-After": "30"},
        {"RateLimit-Remaining": "0", "X-RateLimit-Reset": "30"},
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-tokens": "1s"},
        {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-tokens-reset": IN_30_SECONDS},
    ],
)
def test_a_count_without_its_reset_announces_nothing(headers: dict[str, str]) -> None:
    """Only a remaining count and a reset of the same family make an announcement."""
    assert quota_of(headers) is None


def test_plain_mappings_and_aiohttp_headers_are_read() -> None:
    """A dict with lower-case names and aiohttp's case-insensitive CIMultiDict work like httpx.Headers."""
    assert announced_quota({"ratelimit": '"default";r=1;t=2'}, wall) == AnnouncedQuota(1, 2.0, "ratelimit")
    aiohttp_headers = CIMultiDict({"X-RateLimit-Remaining": "3", "X-RateLimit-Reset-After": "4"})
    assert announced_quota(aiohttp_headers, wall) == AnnouncedQuota(3, 4.0, "x-ratelimit-remaining")


def test_the_wall_clock_is_read_at_most_once_and_only_for_points_in_time() -> None:
    """Epoch and RFC 3339 resets share one reading of the clock; delays and durations need none."""
    readings: list[float] = []

    def clock() -> float:
        readings.append(NOW)
        return NOW

    both = {"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1750000030",
            "anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": IN_30_SECONDS}
    found = announced_quota(httpx.Headers(both), clock)
    assert found == AnnouncedQuota(0, 30.0, "anthropic-ratelimit-tokens-remaining")
    assert len(readings) == 1
    delays = {"RateLimit": '"default";r=0;t=30', "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "12",
              "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1s", "x-ratelimit-reset-after": "no"}
    assert announced_quota(httpx.Headers(delays), clock) == AnnouncedQuota(0, 30.0, "ratelimit")
    assert len(readings) == 1


# ------------------------------------------------------------------- the window: RateLimit-Policy
def test_a_policy_takes_its_window_from_the_policy_field_entry_of_the_same_name() -> None:
    """Drafts 08 and later name each policy in both fields: the spent burst policy has a 2-s window."""
    headers = {"RateLimit": '"burst";r=0;t=1, "daily";r=7;t=3600',
               "RateLimit-Policy": '"burst";q=10;w=2, "daily";q=1000;w=86400'}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit", window=2.0, quota=10)


def test_express_rate_limit_draft_8_headers_give_the_window() -> None:
    """express-rate-limit's draft-8 form: spaces after the semicolons, a partition key ending in "="."""
    headers = {"RateLimit": '"100-in-15min"; r=0; t=12',
               "RateLimit-Policy": '"100-in-15min"; q=100; w=900; pk=:ZGFjMjQ2MWE3NjMw=:'}
    assert quota_of(headers) == AnnouncedQuota(0, 12.0, "ratelimit", window=900.0, quota=100)


def test_policies_in_repeated_policy_fields_are_all_read() -> None:
    """express-rate-limit appends a field per limiter: the fields read as one list."""
    headers = httpx.Headers([("RateLimit", '"minute";r=0;t=1'), ("RateLimit-Policy", '"day";q=900;w=86400'),
                             ("RateLimit-Policy", '"minute";q=10;w=60')])
    assert announced_quota(headers, wall) == AnnouncedQuota(0, 1.0, "ratelimit", window=60.0, quota=10)


@pytest.mark.parametrize(
    "policy",
    ['"daily";q=10;w=2', 'burst;q=10;w=2', '"burst";q=10', '"burst";q=10;w=0', '"burst";w=', '"burst;w=2'],
    ids=["another name", "a token, not the string", "no w", "w=0", "empty w", "unclosed quote"],
)
def test_a_policy_the_policy_field_does_not_describe_has_no_window(policy: str) -> None:
    """Only the entry with the very same name gives a window, and only a whole w above 0."""
    headers = {"RateLimit": '"burst";r=0;t=1', "RateLimit-Policy": policy}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit")


def test_the_draft_07_dictionary_takes_the_shortest_window_listed() -> None:
    """The Dictionary names no policy: of ``10;w=1, 1000;w=3600`` the 1-s window counts."""
    assert quota_of({"RateLimit": "limit=100, remaining=0, reset=1", "RateLimit-Policy": "100;w=60"}) == (
        AnnouncedQuota(0, 1.0, "ratelimit", window=60.0, quota=100))
    headers = {"RateLimit": "limit=10, remaining=0, reset=1", "RateLimit-Policy": "10;w=1, 1000;w=3600"}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit", window=1.0, quota=10)


def test_the_older_drafts_header_pair_takes_the_shortest_window_listed() -> None:
    """express-rate-limit's draft-6 form: RateLimit-Policy beside the Limit, Remaining and Reset headers."""
    headers = {"RateLimit-Policy": "100;w=900", "RateLimit-Limit": "100", "RateLimit-Remaining": "0",
               "RateLimit-Reset": "1"}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit-remaining", window=900.0, quota=100)


def test_other_families_never_take_a_window_from_the_policy_field() -> None:
    """X-RateLimit-* and the vendors' headers do not say their window; an IETF field beside them does not either."""
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "1", "RateLimit-Policy": "100;w=60"}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "x-ratelimit-remaining")


def test_the_policy_field_alone_announces_nothing() -> None:
    """A window without a count and a reset is no announcement."""
    assert quota_of({"RateLimit-Policy": '"default";q=100;w=60'}) is None


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_a_window_is_ascii_digits_only(value: bytes) -> None:
    """A w that is not a whole number of seconds gives no window, and the announcement is still read."""
    headers = httpx.Headers([(b"RateLimit", b'"p";r=0;t=1'), (b"RateLimit-Policy", b'"p";q=5;w=' + value)])
    assert announced_quota(headers, wall) == AnnouncedQuota(0, 1.0, "ratelimit")


# ------------------------------------------------------------------- the quota and its pace
@pytest.mark.parametrize(
    ("policy", "quota"),
    [('"second";q=20;w=1', 20), ('"second";w=1;q=20', 20), ('"second";q=20;q=30;w=1', 30), ("20;w=1", 20),
     ('"second";w=1', None), ('"second";q=;w=1', None), ('"second";q=2.5;w=1', None), ('"second";q=-1;w=1', None),
     ('"second";q=' + "9" * 30 + ";w=1", 10**18)],
    ids=["q then w", "w then q", "a later q wins", "the older drafts' leading count", "no q", "empty q",
         "a fraction", "a sign", "30 digits: capped"],
)
def test_a_policy_gives_its_quota_beside_its_window(policy: str, quota: int | None) -> None:
    """The quota is the same entry's ``q`` (the older drafts: its leading count), a whole count or nothing."""
    name = '"second"' if policy.startswith('"') else ""
    announced = {"RateLimit": f"{name};r=3;t=1" if name else "limit=20, remaining=3, reset=1",
                 "RateLimit-Policy": policy}
    assert quota_of(announced) == AnnouncedQuota(3, 1.0, "ratelimit", window=1.0, quota=quota)


@pytest.mark.parametrize(
    ("quota", "expected"),
    [(AnnouncedQuota(3, 1.0, "ratelimit", window=1.0, quota=20), 20.0),
     (AnnouncedQuota(0, 1.0, "ratelimit", window=1.0, quota=20), 20.0),
     (AnnouncedQuota(3, 0.4, "ratelimit", rounding=0.001, window=1.0, quota=20), None),
     (AnnouncedQuota(3, 1.0, "ratelimit", window=2.0, quota=10), None),
     (AnnouncedQuota(3, 1.0, "ratelimit", window=1.0), None),
     (AnnouncedQuota(3, 1.0, "ratelimit", quota=20), None)],
    ids=["1-s window in whole seconds", "spent or not", "a reset in milliseconds: held instead",
         "a 2-s window: held instead", "no quota said", "no window said"],
)
def test_the_pace_is_the_quota_over_a_window_too_short_to_wait_for(
    quota: AnnouncedQuota, expected: float | None
) -> None:
    """Only a window whose reset is not known to within half of it is paced (the others are held)."""
    assert quota.pace == expected


def test_a_huge_window_is_capped_and_a_policy_field_too_long_is_refused() -> None:
    """30 digits give the longest delay read; a policy field of 5,000 digits gives no window, yet the
    announcement beside it is read."""
    headers = {"RateLimit": '"p";r=0;t=1', "RateLimit-Policy": '"p";q=5;w=' + "9" * 30}
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit", window=LONGEST_DELAY, quota=5)
    headers["RateLimit-Policy"] = '"p";q=5;w=' + "9" * 5000
    assert quota_of(headers) == AnnouncedQuota(0, 1.0, "ratelimit")


# --------------------------------------------------------------------------------- hostile values
class Slot(NamedTuple):
    """Headers with one value under test ("@" marks it) beside a sane partner: 5 left, or 30 seconds."""

    pairs: tuple[tuple[bytes, bytes], ...]
    header: str
    counts: bool  # the value under test is the count (else the reset)
    whole: bool = True  # the header takes whole numbers only
    capped_rounding: float = 1.0  # the rounding of the value under test at its cap (epoch ms: 0.001)

    def headers(self, value: bytes) -> httpx.Headers:
        return httpx.Headers([(name, template.replace(b"@", value)) for name, template in self.pairs])

    def announcement(self, number: float) -> AnnouncedQuota:
        return AnnouncedQuota(int(number), 30.0, self.header) if self.counts else AnnouncedQuota(5, number, self.header)

    def capped(self) -> AnnouncedQuota:
        """The announcement with the value under test at its cap."""
        if self.counts:
            return self.announcement(MOST)
        return replace(self.announcement(LONGEST_DELAY), rounding=self.capped_rounding)


FIELD_SLOTS = {
    "RateLimit r": Slot(((b"RateLimit", b'"default";r=@;t=30'),), "ratelimit", counts=True),
    "RateLimit t": Slot(((b"RateLimit", b'"default";r=5;t=@'),), "ratelimit", counts=False),
    "draft-07 remaining": Slot(((b"RateLimit", b"limit=100, remaining=@, reset=30"),), "ratelimit", counts=True),
    "draft-07 reset": Slot(((b"RateLimit", b"limit=100, remaining=5, reset=@"),), "ratelimit", counts=False),
}
PAIR_SLOTS = {
    "RateLimit-Remaining": Slot(((b"RateLimit-Remaining", b"@"), (b"RateLimit-Reset", b"30")),
                                "ratelimit-remaining", counts=True),
    "RateLimit-Reset": Slot(((b"RateLimit-Remaining", b"5"), (b"RateLimit-Reset", b"@")),
                            "ratelimit-remaining", counts=False),
    "X-RateLimit-Remaining": Slot(((b"X-RateLimit-Remaining", b"@"), (b"X-RateLimit-Reset-After", b"30")),
                                  "x-ratelimit-remaining", counts=True, whole=False),
    "X-RateLimit-Reset-After": Slot(((b"X-RateLimit-Remaining", b"5"), (b"X-RateLimit-Reset-After", b"@")),
                                    "x-ratelimit-remaining", counts=False, whole=False),
    "X-RateLimit-Reset": Slot(((b"X-RateLimit-Remaining", b"5"), (b"X-RateLimit-Reset", b"@")),
                              "x-ratelimit-remaining", counts=False, whole=False, capped_rounding=0.001),
    "x-rate-limit-remaining": Slot(((b"x-rate-limit-remaining", b"@"), (b"x-rate-limit-reset", b"30")),
                                   "x-rate-limit-remaining", counts=True, whole=False),
    "x-rate-limit-reset": Slot(((b"x-rate-limit-remaining", b"5"), (b"x-rate-limit-reset", b"@")),
                               "x-rate-limit-remaining", counts=False, whole=False, capped_rounding=0.001),
    "OpenAI requests": Slot(((b"x-ratelimit-remaining-requests", b"@"), (b"x-ratelimit-reset-requests", b"30s")),
                            "x-ratelimit-remaining-requests", counts=True),
    "OpenAI tokens": Slot(((b"x-ratelimit-remaining-tokens", b"@"), (b"x-ratelimit-reset-tokens", b"30s")),
                          "x-ratelimit-remaining-tokens", counts=True),
    "Anthropic requests": Slot(((b"anthropic-ratelimit-requests-remaining", b"@"),
                                (b"anthropic-ratelimit-requests-reset", IN_30_SECONDS.encode())),
                               "anthropic-ratelimit-requests-remaining", counts=True),
    "Anthropic tokens": Slot(((b"anthropic-ratelimit-tokens-remaining", b"@"),
                              (b"anthropic-ratelimit-tokens-reset", IN_30_SECONDS.encode())),
                             "anthropic-ratelimit-tokens-remaining", counts=True),
}
SLOTS = FIELD_SLOTS | PAIR_SLOTS
WHOLE_SLOTS = {name: slot for name, slot in SLOTS.items() if slot.whole}



@pytest.mark.parametrize("slot", SLOTS.values(), ids=SLOTS.keys())
def test_each_slot_reads_a_plain_number(slot: Slot) -> None:
    """The headers the hostile tests below spoil are read when the value is a plain 7."""
    assert announced_quota(slot.headers(b"7"), wall) == slot.announcement(7)


@pytest.mark.parametrize("slot", SLOTS.values(), ids=SLOTS.keys())
@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_only_ascii_digits_make_a_number(slot: Slot, value: bytes) -> None:
    """Non-ASCII digits, underscores, signs, exponents, nan, inf, blanks and stray bytes are skipped."""
    assert announced_quota(slot.headers(value), wall) is None


@pytest.mark.parametrize("slot", PAIR_SLOTS.values(), ids=PAIR_SLOTS.keys())
def test_a_repeated_header_is_not_read(slot: Slot) -> None:
    """Two values of one header (httpx joins them with a comma) are not a number."""
    name = next(name for name, template in slot.pairs if b"@" in template)
    headers = httpx.Headers([*slot.headers(b"1").raw, (name, b"2")])
    assert headers.get(name.decode()) == "1, 2"
    assert announced_quota(headers, wall) is None


@pytest.mark.parametrize("slot", WHOLE_SLOTS.values(), ids=WHOLE_SLOTS.keys())
@pytest.mark.parametrize("value", [b"1.5", b"0.0", b"1.", b".5"])
def test_whole_number_headers_refuse_fractions(slot: Slot, value: bytes) -> None:
    """Where a count or delay is an integer (everything but X-RateLimit-*), a fraction is not read."""
    assert announced_quota(slot.headers(value), wall) is None


@pytest.mark.parametrize("slot", SLOTS.values(), ids=SLOTS.keys())
@pytest.mark.parametrize("digits", [19, 400, 4_000])
def test_huge_numbers_are_capped_not_converted(slot: Slot, digits: int) -> None:
    """A count past 10**18 is 10**18; a reset past LONGEST_DELAY (whatever its unit) is LONGEST_DELAY."""
    assert announced_quota(slot.headers(b"9" * digits), wall) == slot.capped()


@pytest.mark.parametrize("slot", PAIR_SLOTS.values(), ids=PAIR_SLOTS.keys())
def test_a_5000_digit_value_is_capped(slot: Slot) -> None:
    """5,000 digits (past Python's int() limit) are capped like any other huge number."""
    assert announced_quota(slot.headers(b"9" * 5_000), wall) == slot.capped()


@pytest.mark.parametrize("slot", FIELD_SLOTS.values(), ids=FIELD_SLOTS.keys())
def test_a_5000_digit_value_makes_the_ratelimit_field_too_long(slot: Slot) -> None:
    """In the RateLimit field, 5,000 digits pass the field limit: nothing is read."""
    assert announced_quota(slot.headers(b"9" * 5_000), wall) is None


@pytest.mark.parametrize("slot", SLOTS.values(), ids=SLOTS.keys())
def test_leading_zeros_do_not_make_a_number_huge(slot: Slot) -> None:
    """Four thousand zeros before a 7 are still 7."""
    assert announced_quota(slot.headers(b"0" * 4_000 + b"7"), wall) == slot.announcement(7)


@pytest.mark.parametrize(
    "duration",
    ["5", "-1s", "+1s", "1x", "", " ", "s", "1 s", "1s 2m", "1S", "1e3s", "nans", "infs", "1_0s", "1us", "1ns",
     "1\u00b5s", "\u0665s", "1s2", "1h-1m", "1s" * 17, "0" * 32 + "s"],
)
def test_only_go_durations_in_h_m_s_and_ms_are_openai_resets(duration: str) -> None:
    """Bare numbers, signs, other units, blanks, non-ASCII digits and durations over 32 characters are skipped."""
    headers = httpx.Headers([(b"x-ratelimit-remaining-requests", b"5"),
                             (b"x-ratelimit-reset-requests", duration.encode())])
    assert announced_quota(headers, wall) is None


@pytest.mark.parametrize(
    "timestamp",
    [
        "2025-06-15T15:07:10",  # no zone
        "2025-06-15",
        "1750000030",
        "2025-06-15T15:07:10+0000",  # RFC 3339 offsets have a colon
        "2025-06-15T15:07Z",
        "2025-06-15X15:07:10Z",
        "2025-13-01T00:00:00Z",
        "2025-06-15T24:00:00Z",
        "2025-06-15T15:07:60Z",  # a leap second: datetime cannot hold it
        "2025-06-15T15:07:10+24:00",
        "0000-01-01T00:00:00Z",
        "2025-06-15T15:07:10." + "0" * 30 + "Z",  # over 40 characters
        "\u0662\u0660\u0662\u0665-06-15T15:07:10Z",  # Arabic-Indic digits
        "Sun, 15 Jun 2025 15:07:10 GMT",
        "",
    ],
)
def test_only_rfc_3339_times_with_a_zone_are_anthropic_resets(timestamp: str) -> None:
    """Times without a zone, other date formats, impossible dates and non-ASCII digits are skipped."""
    headers = httpx.Headers([(b"anthropic-ratelimit-tokens-remaining", b"5"),
                             (b"anthropic-ratelimit-tokens-reset", timestamp.encode())])
    assert announced_quota(headers, wall) is None


PIECES = st.sampled_from(
    ["0", "7", "1750000030", "9" * 30, ".", ",", ";", "=", '"', "\\", "r", "t", "w", "q", "remaining", "reset", "h",
     "m", "s", "ms", ":", "-", "+", " ", "\t", IN_30_SECONDS, "Sun, 15 Jun 2025 15:07:40 GMT"]
)
TEXT = st.text(max_size=60) | st.lists(PIECES | st.characters(), max_size=30).map("".join)


def in_range(found: AnnouncedQuota | None) -> bool:
    return found is None or (
        0 <= found.remaining <= MOST
        and math.isfinite(found.reset)
        and 0.0 <= found.reset <= LONGEST_DELAY
        and 1e-9 <= found.rounding <= 3600.0
        and (found.window is None or 1.0 <= found.window <= LONGEST_DELAY)
        and found.header in QUOTA_HEADERS
    )


@given(st.lists(TEXT, min_size=len(QUOTA_HEADERS), max_size=len(QUOTA_HEADERS)))
def test_no_text_in_any_header_raises_or_gives_a_quota_out_of_range(values: list[str]) -> None:
    """Any text in every header read gives None or a count, a finite reset and a rounding within their bounds."""
    assert in_range(announced_quota(dict(zip(QUOTA_HEADERS, values, strict=True)), wall))


@given(st.lists(st.binary(max_size=60), min_size=len(QUOTA_HEADERS), max_size=len(QUOTA_HEADERS)))
def test_no_bytes_in_any_header_raise_or_give_a_quota_out_of_range(values: list[bytes]) -> None:
    """Any bytes, decoded by httpx, in every header read give None or a quota within its bounds."""
    headers = httpx.Headers([(name.encode(), value) for name, value in zip(QUOTA_HEADERS, values, strict=True)])
    assert in_range(announced_quota(headers, wall))
