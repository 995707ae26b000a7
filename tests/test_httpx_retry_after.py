"""Server-directed delays: Retry-After (seconds and HTTP-date), retry-after-ms, x-amz-retry-after, caps, deadlines."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import RetryPolicy
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo, server_delay
from asyncretry.testing import fixed_random

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
