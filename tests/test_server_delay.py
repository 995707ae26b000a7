"""Server-requested delays read from any exception the engine classifies: a ``retry_after`` attribute,
the ``Retry-After`` of ``httpx.HTTPStatusError.response`` (httpx and httpx2) and of aiohttp's ``ClientResponseError``;
capped by ``max_server_delay``, bounded by the deadline, never raising whatever the values."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from asyncretry import Classifier, FixedBackoff, Retrier, RetryPolicy, history_of
from asyncretry.testing import VirtualClock, fixed_random

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000.0  # the injected wall clock's time (seconds since the epoch)


class Busy(Exception):
    """A retryable error that carries what its test gives it as attributes."""

    def __init__(self, **attributes: Any) -> None:
        super().__init__("busy")
        for name, value in attributes.items():
            setattr(self, name, value)


def policy(**changes: Any) -> RetryPolicy:
    transient = (Busy, httpx.HTTPStatusError, httpx2.HTTPStatusError, aiohttp.ClientResponseError)
    classifier = Classifier(transient=transient, wall_clock=lambda: NOW)
    return RetryPolicy(max_attempts=2, backoff=FixedBackoff(0.5), classifier=classifier, **changes)


async def sleeps_after(error: Exception, **changes: Any) -> list[float]:
    """The sleeps of a call whose first attempt raises ``error`` and whose second succeeds."""
    clock = VirtualClock()
    retrier = Retrier(policy(**changes), clock=clock, rng=fixed_random(0.5))
    errors = [error]

    async def op() -> str:
        if errors:
            raise errors.pop()
        return "ok"

    assert await retrier.call(op) == "ok"
    return clock.sleeps


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + seconds_from_now, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7.0),
        (2.5, 2.5),
        (timedelta(seconds=4), 4.0),
        ("3", 3.0),
        (b"3", 3.0),
        (http_date(12), 12.0),
        (http_date(-30), 0.0),
        (0, 0.0),
    ],
)
async def test_a_retry_after_attribute_sets_the_delay(value: object, expected: float) -> None:
    """``retry_after`` in seconds, as a timedelta or as a Retry-After value (seconds or HTTP-date) is followed
    (a delay of 0, or a date already past, retries at once)."""
    assert await sleeps_after(Busy(retry_after=value)) == ([expected] if expected else [])


@pytest.mark.parametrize("value", [-1, math.nan, True, "soon", "\u0665", object(), timedelta(seconds=-3), None])
async def test_a_retry_after_that_is_not_a_delay_leaves_the_backoff(value: object) -> None:
    """A negative, NaN, boolean or unreadable ``retry_after`` is ignored: the backoff is used."""
    assert await sleeps_after(Busy(retry_after=value)) == [0.5]


@pytest.mark.parametrize("value", [10**400, math.inf, timedelta(days=10_000), "9" * 5000, http_date(10**7)])
async def test_a_huge_retry_after_is_cut_to_max_server_delay(value: object) -> None:
    """However far away the delay asked, the client waits at most ``max_server_delay``."""
    assert await sleeps_after(Busy(retry_after=value), max_server_delay=20) == [20.0]


async def test_a_retry_after_past_the_deadline_gives_up_at_once() -> None:
    """A delay longer than the time the deadline leaves ends the call at once (why: server_delay)."""
    retrier = Retrier(policy(deadline=10), clock=VirtualClock(), rng=fixed_random(0.5))

    async def op() -> None:
        raise Busy(retry_after=30)

    with pytest.raises(Busy) as caught:
        await retrier.call(op)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "server_delay"
    assert len(history.attempts) == 1


async def test_server_delays_of_exceptions_can_be_ignored() -> None:
    """honour_server_delay=False keeps the backoff, whatever the exception asks."""
    assert await sleeps_after(Busy(retry_after=9), honour_server_delay=False) == [0.5]


async def test_a_final_error_is_not_delayed() -> None:
    """The delay is read only for a retryable outcome: a final error ends the call at once."""
    retrier = Retrier(policy(), clock=(clock := VirtualClock()))

    async def op() -> None:
        raise ValueError("final")

    with pytest.raises(ValueError, match="final"):
        await retrier.call(op)
    assert clock.sleeps == []


def status_error(status: int, headers: dict[str, str], client: Any = httpx) -> Exception:
    """``raise_for_status()``'s error, of ``client`` (the httpx or the httpx2 module)."""
    request = client.Request("GET", "https://api.test/items")
    response = client.Response(status, headers=headers, request=request)
    error: Exception = client.HTTPStatusError(f"HTTP {status}", request=request, response=response)
    return error


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "6"}, 6.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": http_date(8)}, 8.0),
        ({"Retry-After": "later"}, 0.5),
        ({}, 0.5),
    ],
)
@pytest.mark.parametrize("client", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_the_retry_after_of_an_httpx_status_error_is_followed(
    headers: dict[str, str], expected: float, client: Any
) -> None:
    """``raise_for_status()``'s HTTPStatusError (httpx's and httpx2's): its response's Retry-After (every form)
    sets the delay."""
    assert await sleeps_after(status_error(503, headers, client)) == [expected]


def response_error(headers: Any) -> aiohttp.ClientResponseError:
    return aiohttp.ClientResponseError(None, (), status=503, message="Service Unavailable", headers=headers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (CIMultiDictProxy(CIMultiDict({"Retry-After": "6"})), 6.0),
        (CIMultiDictProxy(CIMultiDict({"RETRY-AFTER-MS": "250"})), 0.25),
        ({"Retry-After": http_date(9)}, 9.0),
        (None, 0.5),
    ],
)
async def test_the_retry_after_of_an_aiohttp_response_error_is_followed(headers: Any, expected: float) -> None:
    """``raise_for_status()``'s ClientResponseError: its ``headers``' Retry-After sets the delay (any case)."""
    assert await sleeps_after(response_error(headers)) == [expected]


@pytest.mark.parametrize(("profile", "expected"), [("2026", 3.0), ("2020", 0.5)])
async def test_an_x_amz_retry_after_header_is_a_hint(profile: str, expected: float) -> None:
    """``x-amz-retry-after`` read from an exception is AWS's hint: followed (clamped around the backoff)
    where the policy honours it, ignored where it does not."""
    error = response_error({"x-amz-retry-after": "3000"})
    assert await sleeps_after(error, profile=profile) == [expected]


async def test_the_retry_after_attribute_wins_over_the_headers() -> None:
    """An exception that gives both asks for its ``retry_after`` attribute's delay."""
    error = status_error(503, {"Retry-After": "6"})
    error.retry_after = 2  # type: ignore[attr-defined]
    assert await sleeps_after(error) == [2.0]


async def test_a_botocore_style_response_dict_is_not_read_as_headers() -> None:
    """A ``response`` that is a dict (botocore's) is left to the botocore rules: no Retry-After from it."""
    assert await sleeps_after(Busy(response={"headers": {"Retry-After": "6"}})) == [0.5]


class Raising(Exception):
    """An error whose attributes raise when read."""

    @property
    def retry_after(self) -> float:
        raise RuntimeError("broken property")


async def test_an_attribute_that_raises_asks_for_nothing() -> None:
    """A ``retry_after`` property that raises is ignored: the backoff is used, nothing escapes."""
    retrier = Retrier(RetryPolicy(max_attempts=2, backoff=FixedBackoff(0.5),
                                  classifier=Classifier(transient=(Raising,))), clock=(clock := VirtualClock()))
    errors = [Raising()]

    async def op() -> str:
        if errors:
            raise errors.pop()
        return "ok"

    assert await retrier.call(op) == "ok"
    assert clock.sleeps == [0.5]


@given(st.dictionaries(st.sampled_from(["Retry-After", "retry-after-ms", "x-amz-retry-after", "other"]),
                       st.one_of(st.text(max_size=40), st.binary(max_size=40)), max_size=4))
def test_any_headers_give_a_bounded_delay_or_none(headers: dict[str, Any]) -> None:
    """Whatever the header values (any text, any bytes), the engine's classifier answers, never raises,
    and any delay it reads is between 0 and the longest delay a header may ask."""
    outcome = policy().classifier.classify_error(response_error(headers))
    assert outcome.kind.retryable
    assert outcome.server_delay is None or 0.0 <= outcome.server_delay <= 1e9


def test_the_wall_clock_must_be_callable() -> None:
    """Classifier(wall_clock=...) refuses what it cannot call, naming the parameter."""
    with pytest.raises(TypeError, match="wall_clock must be callable"):
        Classifier(wall_clock=3)  # type: ignore[arg-type]
