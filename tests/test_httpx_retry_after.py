"""Server-directed delays: Retry-After (seconds and HTTP-dates), retry-after-ms, x-amz-retry-after, caps, deadlines,
and values no server should send (non-ASCII digits, 5,000 digits, garbage dates) that must never raise."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import RetryPolicy
from asyncretry._http._retry_after import LONGEST_DELAY
from asyncretry._http._retry_after import http_date as read_http_date
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo, RetryTransport, server_delay
from asyncretry.testing import fixed_random, test_mode

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

URL = "https://api.test/items"
NOW = 1_750_000_000.0  # the injected wall clock, seconds since the epoch


def wall() -> float:
    return NOW


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + seconds_from_now, tz=UTC), usegmt=True)


def delay_of(headers: dict[str, str]) -> tuple[float, bool] | None:
    return server_delay(httpx.Headers(headers), wall)


# ---------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, (7.0, False)),
        ({"Retry-After": " 0 "}, (0.0, False)),
        ({"Retry-After": http_date(12)}, (12.0, False)),
        ({"Retry-After": http_date(-30)}, (0.0, False)),
        ({"retry-after-ms": "1500"}, (1.5, False)),
        ({"retry-after-ms": "2.5"}, (0.0025, False)),
        ({"x-amz-retry-after": "3000"}, (3.0, True)),
    ],
)
def test_server_delays_are_read(headers: dict[str, str], expected: tuple[float, bool]) -> None:
    """Delta-seconds, HTTP-dates (a past date means now), milliseconds and AWS's hint are all understood."""
    found = delay_of(headers)
    assert found is not None
    assert found[0] == pytest.approx(expected[0])
    assert found[1] is expected[1]


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "soon"},
        {"Retry-After": "-5"},
        {"Retry-After": "1.5"},
        {"Retry-After": "Sun, 06 Nov 1994 08:49:37"},  # no zone: not an HTTP-date
        {"Retry-After": ""},
        {"retry-after-ms": "-1"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "inf"},
        {"retry-after-ms": "lots"},
        {"x-amz-retry-after": "-100"},
        {"x-amz-retry-after": "1.5"},
        {"x-amz-retry-after": "later"},
        {},
    ],
)
def test_garbage_and_negative_values_are_ignored(headers: dict[str, str]) -> None:
    """A value that is not a valid non-negative delay is ignored, so the computed backoff applies."""
    assert delay_of(headers) is None


def test_milliseconds_win_over_retry_after_which_wins_over_the_aws_hint() -> None:
    """retry-after-ms is the most precise, then Retry-After, then x-amz-retry-after."""
    assert delay_of({"retry-after-ms": "250", "Retry-After": "9", "x-amz-retry-after": "4000"}) == (0.25, False)
    assert delay_of({"Retry-After": "9", "x-amz-retry-after": "4000"}) == (9.0, False)
    assert delay_of({"retry-after-ms": "junk", "Retry-After": "9"}) == (9.0, False)


@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=40))
def test_no_header_value_gives_a_negative_or_infinite_delay(ms: str, seconds: str, amz: str) -> None:
    """Whatever a server sends, the delay found is None or a finite number of seconds >= 0."""
    headers = httpx.Headers()
    for name, value in (("retry-after-ms", ms), ("retry-after", seconds), ("x-amz-retry-after", amz)):
        try:
            headers[name] = value
        except (UnicodeEncodeError, ValueError):
            continue
    found = server_delay(headers, wall)
    assert found is None or (math.isfinite(found[0]) and found[0] >= 0.0)


# ------------------------------------------------------------------------------- through the engine
class Recorder:
    """A respx side effect answering a script of responses and recording when each request came."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(anyio.current_time())
        return self.responses[len(self.times) - 1]

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


async def send(recorder: Recorder, policy: RetryPolicy | None = None, u: float = 0.5) -> httpx.Response:
    router = respx.MockRouter()
    router.get(URL).mock(side_effect=recorder)
    transport = AsyncRetryTransport(
        httpx.MockTransport(router.async_handler), policy=policy, rng=fixed_random(u), wall_clock=wall
    )
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.get(URL)


def info(resp: httpx.Response) -> RetryInfo:
    value = resp.extensions[EXTENSION]
    assert isinstance(value, RetryInfo)
    return value



@pytest.mark.anyio
async def test_retry_after_seconds_sets_the_delay() -> None:
    """A 503 with Retry-After: 7 is retried exactly 7 s later, not after the computed backoff."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "7"}), httpx.Response(200))
    resp = await send(recorder)
    assert resp.status_code == 200
    assert recorder.gaps == [pytest.approx(7.0)]
    assert info(resp).total_delay == pytest.approx(7.0)
    assert info(resp).history.attempts[0].delay_after == pytest.approx(7.0)


@pytest.mark.anyio
async def test_retry_after_http_date_is_read_against_the_wall_clock() -> None:
    """Retry-After as an HTTP-date 12 s ahead of the injected wall clock means a 12 s delay."""
    recorder = Recorder(httpx.Response(429, headers={"Retry-After": http_date(12)}), httpx.Response(200))
    resp = await send(recorder)
    assert recorder.gaps == [pytest.approx(12.0)]
    assert info(resp).attempts == 2


@pytest.mark.anyio
async def test_retry_after_ms_sets_the_delay() -> None:
    """retry-after-ms: 1500 delays the retry by 1.5 s."""
    recorder = Recorder(httpx.Response(503, headers={"retry-after-ms": "1500"}), httpx.Response(200))
    await send(recorder)
    assert recorder.gaps == [pytest.approx(1.5)]


@pytest.mark.anyio
async def test_garbage_retry_after_falls_back_to_the_backoff() -> None:
    """An unreadable Retry-After is ignored: the retry waits the computed backoff (0.5 x 1 s here)."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "whenever"}), httpx.Response(200))
    await send(recorder, u=0.5)
    assert recorder.gaps == [pytest.approx(0.5)]


@pytest.mark.anyio
async def test_server_delays_are_capped() -> None:
    """A server cannot park the client: Retry-After: 3600 is cut to max_server_delay (4 s here)."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "3600"}), httpx.Response(200))
    resp = await send(recorder, RetryPolicy(max_server_delay=timedelta(seconds=4)))
    assert recorder.gaps == [pytest.approx(4.0)]
    assert resp.status_code == 200


@pytest.mark.anyio
async def test_server_delays_can_be_ignored() -> None:
    """With honour_server_delay=False the computed backoff applies whatever the server asks."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "30"}), httpx.Response(200))
    await send(recorder, RetryPolicy(honour_server_delay=False), u=0.5)
    assert recorder.gaps == [pytest.approx(0.5)]


@pytest.mark.anyio
async def test_a_delay_beyond_the_deadline_returns_the_response_at_once() -> None:
    """Retry-After: 30 with 10 s left of the deadline: the 503 is returned at once, without sleeping."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "30"}), httpx.Response(200))
    start = anyio.current_time()
    resp = await send(recorder, RetryPolicy(deadline=10.0))
    assert resp.status_code == 503
    assert anyio.current_time() == start
    assert len(recorder.times) == 1
    assert info(resp).gave_up == "server_delay"
    assert info(resp).attempts == 1


@pytest.mark.anyio
async def test_a_delay_beyond_the_enclosing_timeout_returns_the_response_at_once() -> None:
    """The caller's own cancel scope counts as a deadline too: no sleep that it would cut short."""
    recorder = Recorder(httpx.Response(429, headers={"Retry-After": "20"}), httpx.Response(200))
    with anyio.fail_after(5):
        resp = await send(recorder)
    assert resp.status_code == 429
    assert info(resp).gave_up == "server_delay"


@pytest.mark.anyio
async def test_a_delay_within_the_deadline_is_followed() -> None:
    """Retry-After: 3 with 10 s of deadline left is followed."""
    recorder = Recorder(httpx.Response(503, headers={"Retry-After": "3"}), httpx.Response(200))
    resp = await send(recorder, RetryPolicy(deadline=10.0))
    assert resp.status_code == 200
    assert recorder.gaps == [pytest.approx(3.0)]


# ------------------------------------------------------------------------------ x-amz-retry-after
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header_ms", "status", "expected"),
    [
        # 2026 profile, u = 0.5: throttling backoff t = 0.5 * 1 s = 0.5; transient t = 0.5 * 0.05 s = 0.025
        ("3000", 429, 3.0),  # inside [t, t + 5]: followed
        ("0", 429, 0.5),  # below t: raised to t
        ("60000", 429, 5.5),  # above t + 5: cut to t + 5
        ("2000", 503, 2.0),
        ("9000", 503, 5.025),
    ],
)
async def test_x_amz_retry_after_is_clamped_around_the_backoff(header_ms: str, status: int, expected: float) -> None:
    """Profile 2026 honours x-amz-retry-after, clamped into [t, t + 5] around the computed backoff t."""
    recorder = Recorder(httpx.Response(status, headers={"x-amz-retry-after": header_ms}), httpx.Response(200))
    await send(recorder, RetryPolicy(profile="2026"), u=0.5)
    assert recorder.gaps == [pytest.approx(expected)]


@pytest.mark.anyio
async def test_x_amz_retry_after_is_ignored_by_the_2020_profile() -> None:
    """The 2020 profile (botocore's default) does not honour x-amz-retry-after: backoff 0.5 x 1 s."""
    recorder = Recorder(httpx.Response(429, headers={"x-amz-retry-after": "4000"}), httpx.Response(200))
    await send(recorder, RetryPolicy(profile="2020"), u=0.5)
    assert recorder.gaps == [pytest.approx(0.5)]


@pytest.mark.anyio
async def test_x_amz_retry_after_can_be_turned_on_for_the_2020_profile() -> None:
    """honour_amz_retry_after=True makes any profile follow the (clamped) hint."""
    recorder = Recorder(httpx.Response(429, headers={"x-amz-retry-after": "4000"}), httpx.Response(200))
    await send(recorder, RetryPolicy(profile="2020", honour_amz_retry_after=True), u=0.5)
    assert recorder.gaps == [pytest.approx(4.0)]


@pytest.mark.anyio
async def test_server_delays_are_not_read_for_requests_that_will_not_be_retried() -> None:
    """A POST's 503 is final at once, whatever Retry-After says: no sleep, one request."""
    router = respx.MockRouter()
    route = router.post(URL).mock(return_value=httpx.Response(503, headers={"Retry-After": "5"}))
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), rng=fixed_random(0.5))
    start = anyio.current_time()
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.post(URL, content=b"order")
    assert resp.status_code == 503
    assert route.call_count == 1
    assert anyio.current_time() == start


# --------------------------------------------------------------------------------- hostile values
HEADERS = [b"retry-after", b"retry-after-ms", b"x-amz-retry-after"]
NOT_NUMBERS = [
    "\u00b2".encode(),  # superscript two, in UTF-8: str.isdigit() says yes, int() says no
    b"\xb2",  # the same as one raw byte (httpx reads it as Latin-1)
    "\u0665".encode(),  # Arabic-Indic five: int() reads it as 5
    "\uff11".encode(),  # a full-width one
    b"1_000",  # int() and float() accept underscores
    b"1e3",
    b"+5",
    b"+1",
    b"-1",
    b"-0",
    b"nan",
    b"inf",
    b"Infinity",
    b"0x10",
    b"",
    b"   ",
    b"\t",
    b"5 5",
    b"\x005",  # NUL bytes
    b"5\x00",
    b"\xa05",  # a Latin-1 no-break space: str.strip() would remove it, RFC 9110 whitespace is " " and tab
    b"\xff\xfe\x00",
]
"""Values that are not numbers of ASCII digits, whatever Python's own parsers make of them (also read by
tests/test_quota_headers.py)."""


@pytest.mark.parametrize("name", HEADERS)
@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_only_ascii_digits_make_a_delay(name: bytes, value: bytes) -> None:
    """Non-ASCII digits, underscores, exponents, signs and stray bytes are not delays, and raise nothing."""
    assert server_delay(httpx.Headers([(name, value)]), wall) is None


@pytest.mark.parametrize(("name", "is_hint"), [(b"retry-after", False), (b"retry-after-ms", False),
                                                (b"x-amz-retry-after", True)])
@pytest.mark.parametrize("digits", [13, 400, 5_000])
def test_huge_numbers_are_capped_not_overflowed(name: bytes, is_hint: bool, digits: int) -> None:
    """A 13-, 400- or 5,000-digit value is read as LONGEST_DELAY (cut later to max_server_delay)."""
    assert server_delay(httpx.Headers([(name, b"9" * digits)]), wall) == (LONGEST_DELAY, is_hint)


def test_leading_zeros_do_not_make_a_number_huge() -> None:
    """Five thousand zeros before a 7 are still 7 seconds."""
    assert delay_of({"Retry-After": "0" * 5_000 + "7"}) == (7.0, False)
    assert delay_of({"retry-after-ms": "0" * 5_000 + "1500.0"}) == (1.5, False)


def test_milliseconds_take_a_fraction_and_nothing_else() -> None:
    """retry-after-ms reads digits with an optional fraction: "2.", ".5" and "0" are fine, "." is not."""
    assert delay_of({"retry-after-ms": "2."}) == (0.002, False)
    assert delay_of({"retry-after-ms": ".5"}) == (0.0005, False)
    assert delay_of({"retry-after-ms": "0"}) == (0.0, False)
    assert delay_of({"retry-after-ms": "."}) is None


@given(st.binary(max_size=60), st.binary(max_size=60), st.binary(max_size=60))
def test_no_header_bytes_raise_or_give_a_delay_out_of_range(ms: bytes, seconds: bytes, amz: bytes) -> None:
    """Any bytes in the three headers give None or a delay in [0, LONGEST_DELAY], never an exception."""
    headers = httpx.Headers([(b"retry-after-ms", ms), (b"retry-after", seconds), (b"x-amz-retry-after", amz)])
    found = server_delay(headers, wall)
    assert found is None or 0.0 <= found[0] <= LONGEST_DELAY


# ------------------------------------------------------------------------------------- HTTP-dates
SUNDAY = 784_111_777.0  # Sun, 06 Nov 1994 08:49:37 GMT: RFC 9110's example


@pytest.mark.parametrize(
    "text",
    [
        "Sun, 06 Nov 1994 08:49:37 GMT",  # IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT",  # obsolete RFC 850 form
        "Sun Nov  6 08:49:37 1994",  # ANSI C asctime(): no zone, UTC by definition
    ],
)
def test_the_three_http_date_forms_are_read(text: str) -> None:
    """RFC 9110's three forms of the same instant give the same time."""
    assert read_http_date(text, NOW) == SUNDAY


@pytest.mark.parametrize(
    "form",
    [
        lambda t: format_datetime(datetime.fromtimestamp(t, tz=UTC), usegmt=True),
        lambda t: datetime.fromtimestamp(t, tz=UTC).strftime("%A, %d-%b-%y %H:%M:%S GMT"),
        lambda t: time.asctime(time.gmtime(t)),
    ],
    ids=["imf-fixdate", "rfc850", "asctime"],
)
def test_every_date_form_sets_the_delay(form: Callable[[float], str]) -> None:
    """A Retry-After date 12 s ahead of the wall clock, in any of the three forms, is a 12 s delay."""
    assert delay_of({"Retry-After": form(NOW + 12)}) == (12.0, False)


def test_two_digit_years_follow_rfc_9110() -> None:
    """An RFC 850 year more than 50 years ahead (of 2025 here) is the latest past year with those digits."""
    assert datetime.fromtimestamp(NOW, UTC).year == 2025
    in_50_years = read_http_date("Thursday, 06-Nov-75 08:49:37 GMT", NOW)
    in_51_years = read_http_date("Friday, 06-Nov-76 08:49:37 GMT", NOW)
    assert in_50_years == datetime(2075, 11, 6, 8, 49, 37, tzinfo=UTC).timestamp()
    assert in_51_years == datetime(1976, 11, 6, 8, 49, 37, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "Sun, 06 Nov 1994 08:49:37",  # an IMF-fixdate without its zone
        "Sun, 31 Feb 2026 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT",
        "Sun, 06 Nov 99999 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 +9999",
        "Sun, \u0660\u0666 Nov 1994 08:49:37 GMT",  # Arabic-Indic digits
        "Sun Nov  6 08:49:37",
        "Sunday, 06-Nov-94 08:49:37",
        "Sun, 06 Nov 1994 08:49:37 GMT" + " " * 100,
        "yesterday",
        "",
        "\x00\xff",
    ],
)
def test_garbage_dates_are_not_dates(text: str) -> None:
    """Impossible days and hours, years out of range, bad zones, missing parts or non-ASCII digits: None."""
    assert read_http_date(text, NOW) is None


@given(st.text(max_size=50))
def test_no_text_makes_http_date_raise(text: str) -> None:
    """http_date answers a time or None for any text."""
    found = read_http_date(text, NOW)
    assert found is None or math.isfinite(found)


# ---------------------------------------------------------------- hostile values through the transports
HOSTILE = [
    pytest.param([(b"retry-after", "\u00b2".encode())], 0.5, 0.5, id="retry-after-superscript"),
    pytest.param([(b"retry-after", b"\xb2")], 0.5, 0.5, id="retry-after-raw-byte"),
    pytest.param([(b"retry-after", "\u0665".encode())], 0.5, 0.5, id="retry-after-arabic-five"),
    pytest.param([(b"retry-after-ms", b"1_000")], 0.5, 0.5, id="retry-after-ms-underscore"),
    pytest.param([(b"x-amz-retry-after", "\u00b2".encode())], 0.5, 0.5, id="amz-superscript"),
    pytest.param([(b"x-amz-retry-after", b"9" * 400)], 0.5, 5.5, id="amz-400-digits"),
    pytest.param([(b"x-amz-retry-after", b"9" * 5_000)], 0.5, 5.5, id="amz-5000-digits"),
    pytest.param([(b"retry-after", b"9" * 400)], 60.0, 60.0, id="retry-after-400-digits"),
    pytest.param([(b"retry-after", b"9" * 5_000)], 60.0, 60.0, id="retry-after-5000-digits"),
]
"""Headers of a 429, and the delay before the retry in profiles 2020 and 2026 (u = 0.5: backoff 0.5 s;
a huge Retry-After is cut to max_server_delay, 60 s; 2026 clamps a huge hint to the backoff + 5 s)."""


@pytest.mark.anyio
@pytest.mark.parametrize(("headers", "delay_2020", "delay_2026"), HOSTILE)
async def test_hostile_delays_reach_the_async_caller_as_responses(
    headers: list[tuple[bytes, bytes]], delay_2020: float, delay_2026: float
) -> None:
    """Through AsyncRetryTransport, in both profiles, a hostile delay header never raises: retried as expected."""
    for profile, delay in (("2020", delay_2020), ("2026", delay_2026)):
        recorder = Recorder(httpx.Response(429, headers=headers), httpx.Response(200))
        resp = await send(recorder, RetryPolicy(profile=profile), u=0.5)  # type: ignore[arg-type]
        assert resp.status_code == 200
        assert recorder.gaps == [pytest.approx(delay)]


@pytest.mark.parametrize(("headers", "delay_2020", "delay_2026"), HOSTILE)
def test_hostile_delays_reach_the_sync_caller_as_responses(
    headers: list[tuple[bytes, bytes]], delay_2020: float, delay_2026: float
) -> None:
    """Through RetryTransport, in both profiles, a hostile delay header never raises: retried as expected."""
    for profile, delay in (("2020", delay_2020), ("2026", delay_2026)):
        answers = iter([httpx.Response(429, headers=headers), httpx.Response(200)])
        transport = RetryTransport(
            httpx.MockTransport(lambda request, answers=answers: next(answers)),
            policy=RetryPolicy(profile=profile),  # type: ignore[arg-type]
            rng=fixed_random(0.5), wall_clock=wall,
        )
        with test_mode(no_wait=True), httpx.Client(transport=transport) as client:
            resp = client.get(URL)
        assert resp.status_code == 200
        assert info(resp).history.attempts[0].delay_after == pytest.approx(delay)
