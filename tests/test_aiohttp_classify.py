"""The aiohttp middleware's classification: aiohttp's exceptions, which bodies can be sent again, and the same
rules as the httpx transport's for statuses, codes, idempotency and options (one source, checked here)."""

from __future__ import annotations

import io
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import payload
from aiohttp.client_reqrep import ConnectionKey
from yarl import URL

from asyncretry import (
    AsyncRetryError,
    AttemptTimeout,
    BackendUnavailable,
    CircuitOpenError,
    Outcome,
    OutcomeKind,
    RateLimitTimeout,
    RetryBudgetExceeded,
    RetryCapacityExceeded,
)
from asyncretry.aiohttp import HttpClassifier
from asyncretry.aiohttp._classify import body_replayable
from asyncretry.aiohttp._errors import as_aiohttp_error
from asyncretry.httpx import HttpClassifier as HttpxClassifier

KEY = ConnectionKey("api.test", 443, True, True, None, None, None)


def connector_error(os_error: OSError) -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(KEY, os_error)


@pytest.mark.parametrize(
    ("error", "kind", "never_sent"),
    [
        (connector_error(ConnectionRefusedError(111, "refused")), OutcomeKind.CONNECTION, True),
        (aiohttp.ConnectionTimeoutError("connect"), OutcomeKind.TIMEOUT, True),
        (aiohttp.SocketTimeoutError("read"), OutcomeKind.TIMEOUT, False),
        (aiohttp.ServerDisconnectedError(), OutcomeKind.CONNECTION, False),
        (aiohttp.ClientOSError(104, "reset"), OutcomeKind.CONNECTION, False),
        (aiohttp.ClientPayloadError("cut short"), OutcomeKind.CONNECTION, False),
        (aiohttp.InvalidURL("nope"), OutcomeKind.NOT_RETRYABLE, False),
        (aiohttp.ClientConnectorCertificateError(KEY, ssl.SSLCertVerificationError("bad")),
         OutcomeKind.NOT_RETRYABLE, True),
    ],
)
def test_aiohttp_errors_are_classified(error: Exception, kind: OutcomeKind, never_sent: bool) -> None:
    """Each aiohttp error has its kind; only connector errors and connect timeouts mean nothing was sent."""
    classifier = HttpClassifier()
    outcome = classifier.error_outcome(error)
    assert outcome is not None
    assert outcome.kind is kind
    assert classifier.never_sent(error) is never_sent


def test_other_exceptions_are_left_to_the_engine() -> None:
    """An exception that is not aiohttp's is not the middleware's to classify."""
    assert HttpClassifier().error_outcome(ValueError("x")) is None


def test_a_connection_error_of_a_post_is_final_unless_nothing_was_sent() -> None:
    """A POST may be retried after a refused connection (never sent), not after a reset (may have arrived)."""
    classifier = HttpClassifier()
    refused = classifier.classify_error(connector_error(ConnectionRefusedError(111, "x")),
                                        idempotent=False, replayable=True)
    reset = classifier.classify_error(aiohttp.ServerDisconnectedError(), idempotent=False, replayable=True)
    assert refused is not None
    assert reset is not None
    assert refused.kind is OutcomeKind.CONNECTION
    assert reset.kind is OutcomeKind.NOT_RETRYABLE


def request(data: Any) -> aiohttp.ClientRequest:
    return aiohttp.ClientRequest("PUT", URL("http://api.test/x"), data=data)


@pytest.mark.asyncio  # aiohttp's requests are made on a running asyncio loop (asyncio only)
async def test_which_bodies_can_be_sent_again() -> None:
    """No body, bytes, text, JSON, forms and files can be sent again; a streamed upload cannot."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"a"

    form = aiohttp.FormData()
    form.add_field("file", io.BytesIO(b"x"), filename="x.bin")
    multipart = aiohttp.MultipartWriter()
    multipart.append(b"part")
    streamed = aiohttp.MultipartWriter()
    streamed.append_payload(payload.AsyncIterablePayload(chunks()))
    cases: list[tuple[Any, bool]] = [
        (None, True), (b"bytes", True), ("text", True), (io.BytesIO(b"file"), True), (form, True),
        (multipart, True), (chunks(), False), (streamed, False),
    ]
    for data, expected in cases:
        assert body_replayable(request(data)) is expected, data


class Request:
    """A request as the shared rules see it: a method and headers."""

    def __init__(self, method: str, headers: dict[str, str]) -> None:
        self.method = method
        self.headers = httpx.Headers(headers)


@pytest.mark.parametrize(
    ("status", "code"),
    [(200, None), (408, None), (429, None), (400, "ThrottlingException"), (400, "RequestTimeout"), (404, None),
     (500, None), (503, "SlowDown"), (509, None)],
)
def test_both_clients_judge_statuses_and_codes_alike(status: int, code: str | None) -> None:
    """The httpx and aiohttp classifiers are one set of rules: the same kind and reason for every status and code."""
    assert HttpClassifier().kind_of_status(status, code, None) == HttpxClassifier().kind_of_status(status, code, None)


@pytest.mark.parametrize(
    ("method", "headers", "opt_in", "expected"),
    [("GET", {}, None, True), ("POST", {}, None, False), ("POST", {"idempotency-key": "k"}, None, True),
     ("GET", {}, False, False), ("POST", {}, True, True)],
)
def test_both_clients_decide_idempotency_alike(
    method: str, headers: dict[str, str], opt_in: bool | None, expected: bool
) -> None:
    """Method, Idempotency-Key (any case) and the explicit option decide idempotency the same for both clients."""
    req = Request(method, headers)
    assert HttpClassifier().is_idempotent(req, opt_in) is HttpxClassifier().is_idempotent(req, opt_in) is expected


@pytest.mark.parametrize(
    "kwargs",
    [{"transient_statuses": frozenset({99})}, {"max_error_body": -1}, {"idempotency_header": "bad header"},
     {"throttling_codes": "SlowDown"}, {"read_error_bodies": 1}],
)
def test_both_classifiers_refuse_the_same_bad_options(kwargs: dict[str, Any]) -> None:
    """A bad option is refused by both classifiers with the same message."""
    with pytest.raises((TypeError, ValueError)) as aiohttp_error:
        HttpClassifier(**kwargs)
    with pytest.raises((TypeError, ValueError)) as httpx_error:
        HttpxClassifier(**kwargs)
    assert str(aiohttp_error.value) == str(httpx_error.value)


def test_the_final_reason_says_why() -> None:
    """A retryable outcome of a body that cannot be sent again becomes final, its reason saying why."""
    outcome = HttpClassifier().may_resend(Outcome(OutcomeKind.TRANSIENT, "HTTP 503"), idempotent=True,
                                          replayable=False)
    assert outcome.kind is OutcomeKind.NOT_RETRYABLE
    assert outcome.reason == "HTTP 503 (the request body cannot be replayed)"


@pytest.mark.parametrize(
    "error",
    [
        RetryCapacityExceeded(available=1.0, cost=5.0), RetryBudgetExceeded(available=0.0),
        RateLimitTimeout(name="limiter", wait=2.0, timeout=1.0),
        CircuitOpenError(name="breaker", state="open", retry_after=5.0), BackendUnavailable("redis down"),
        AttemptTimeout(1.0),
    ],
    ids=lambda error: type(error).__name__,
)
def test_every_error_asyncretry_decides_is_an_aiohttp_client_error(error: AsyncRetryError) -> None:
    """Each client-side refusal becomes an aiohttp.ClientError that is still the asyncretry error (attributes
    kept; tests/test_integration_errors.py pins the rest of what it carries)."""
    before = dict(vars(error))
    twin = as_aiohttp_error(error)
    assert isinstance(twin, aiohttp.ClientError)
    assert isinstance(twin, type(error))
    assert vars(twin) == before
