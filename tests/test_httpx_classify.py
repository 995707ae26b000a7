"""How httpx outcomes are judged: statuses, AWS error codes (from any body a server sends), connection errors,
idempotency, replayable bodies, and the classifier's settings checked at construction."""

from __future__ import annotations

import gzip
import io
import json
import ssl
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import OutcomeKind, RetryPolicy
from asyncretry.httpx import (
    EXTENSION,
    AsyncRetryTransport,
    HttpClassifier,
    RetryInfo,
    RetryTransport,
    error_code_of_response,
)
from asyncretry.httpx._classify import body_replay, headers_read
from asyncretry.testing import fixed_random, test_mode

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

K = OutcomeKind
URL = "https://api.test/items"


def request(method: str = "GET", **kwargs: object) -> httpx.Request:
    return httpx.Request(method, URL, **kwargs)  # type: ignore[arg-type]


def response(status: int, **kwargs: object) -> httpx.Response:
    return httpx.Response(status, request=request(), **kwargs)  # type: ignore[arg-type]


def kind_of(classifier: HttpClassifier, status: int, code: str | None = None) -> OutcomeKind:
    return classifier.status_kind(response(status), code)[0]


# ------------------------------------------------------------------------------------------ statuses
@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
def test_server_errors_and_408_are_transient(status: int) -> None:
    """500, 502, 503, 504 and 408 are transient failures, retried."""
    assert kind_of(HttpClassifier(), status) is K.TRANSIENT


@pytest.mark.parametrize("status", [429, 509])
def test_429_and_509_are_throttling(status: int) -> None:
    """429 and 509 mean "slow down": throttling, which the adaptive limiter reacts to."""
    assert kind_of(HttpClassifier(), status) is K.THROTTLING


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 413, 422, 501, 505])
def test_other_errors_are_not_retried(status: int) -> None:
    """Other client errors (and 5xx outside the transient set, like 501) are final."""
    assert kind_of(HttpClassifier(), status) is K.NOT_RETRYABLE


@pytest.mark.parametrize("status", [200, 201, 202, 204, 206, 301, 302, 303, 304, 307, 308])
def test_2xx_and_3xx_are_successes(status: int) -> None:
    """Every 2xx and 3xx response is a success (redirects are the client's business)."""
    assert kind_of(HttpClassifier(), status) is K.SUCCESS


def test_the_status_sets_are_configurable() -> None:
    """Custom transient and throttling sets replace the defaults."""
    classifier = HttpClassifier(transient_statuses=frozenset({520, 521}), throttling_statuses=frozenset({420}))
    assert kind_of(classifier, 520) is K.TRANSIENT
    assert kind_of(classifier, 420) is K.THROTTLING
    assert kind_of(classifier, 503) is K.NOT_RETRYABLE
    assert kind_of(classifier, 429) is K.NOT_RETRYABLE


@given(st.integers(min_value=100, max_value=599))
def test_every_status_has_exactly_one_kind(status: int) -> None:
    """For any status, the kind follows the sets: throttling, transient, failure from 400, else success."""
    classifier = HttpClassifier()
    kind = kind_of(classifier, status)
    if status in classifier.throttling_statuses:
        assert kind is K.THROTTLING
    elif status in classifier.transient_statuses:
        assert kind is K.TRANSIENT
    elif status >= 400:
        assert kind is K.NOT_RETRYABLE
    else:
        assert kind is K.SUCCESS


@pytest.mark.parametrize(
    ("field", "value"),
    [("transient_statuses", frozenset({99})), ("throttling_statuses", frozenset({600}))],
)
def test_statuses_out_of_range_are_refused(field: str, value: frozenset[int]) -> None:
    """A status code outside 100..599 is a configuration error naming the field."""
    with pytest.raises(ValueError, match=field):
        HttpClassifier(**{field: value})  # type: ignore[arg-type]


def test_bad_classifier_settings_are_refused() -> None:
    """Codes given as one string, a negative body limit and a non-callable predicate are refused."""
    with pytest.raises(TypeError, match="throttling_codes"):
        HttpClassifier(throttling_codes="ThrottlingException")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_error_body"):
        HttpClassifier(max_error_body=-1)
    with pytest.raises(TypeError, match="retry_if_response"):
        HttpClassifier(retry_if_response=42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- AWS error codes
@pytest.mark.parametrize(
    ("headers", "body", "code"),
    [
        ({"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/"}, None, "ThrottlingException"),
        ({"x-amzn-ErrorType": "SlowDown"}, b'{"__type": "Other"}', "SlowDown"),
        ({}, b'{"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}',
         "ProvisionedThroughputExceededException"),
        ({}, b'  {"code": "TooManyRequestsException", "message": "x"}', "TooManyRequestsException"),
        ({}, b'{"Code": "RequestLimitExceeded"}', "RequestLimitExceeded"),
        ({}, b"<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>m</Message></Error>", "SlowDown"),
        ({}, b"<Response><Errors><Error><Code> RequestLimitExceeded </Code></Error></Errors></Response>",
         "RequestLimitExceeded"),
        ({}, b'{"message": "no code"}', None),
        ({}, b"{not json", None),
        ({}, b'["a", "list"]', None),
        ({}, b"<Error><Message>no code</Message></Error>", None),
        ({}, b"plain text", None),
        ({}, b"", None),
        ({}, None, None),
    ],
)
def test_error_codes_are_found_in_headers_json_and_xml(
    headers: dict[str, str], body: bytes | None, code: str | None
) -> None:
    """The code comes from x-amzn-ErrorType first, then JSON __type/code (namespace dropped) or XML <Code>."""
    assert error_code_of_response(httpx.Headers(headers), body) == code


def test_a_400_with_a_throttling_code_is_throttling() -> None:
    """A 400 ThrottlingException is retried as throttling, not refused as a client error."""
    assert kind_of(HttpClassifier(), 400, "ThrottlingException") is K.THROTTLING


def test_a_5xx_with_a_throttling_code_is_throttling() -> None:
    """A 503 SlowDown (S3) counts as throttling, not as a plain transient error."""
    assert kind_of(HttpClassifier(), 503, "SlowDown") is K.THROTTLING


def test_a_4xx_with_a_transient_code_is_transient() -> None:
    """A 400 RequestTimeout is a transient failure."""
    assert kind_of(HttpClassifier(), 400, "RequestTimeout") is K.TRANSIENT


def test_an_unknown_code_leaves_the_status_to_decide() -> None:
    """A 400 ValidationException stays final; a 503 with an unknown code stays transient."""
    assert kind_of(HttpClassifier(), 400, "ValidationException") is K.NOT_RETRYABLE
    assert kind_of(HttpClassifier(), 503, "ServiceUnavailable") is K.TRANSIENT


def test_error_bodies_are_read_only_when_useful() -> None:
    """Only small error bodies that may hold a code (JSON, XML or untyped) without the header are read."""
    classifier = HttpClassifier()
    assert classifier.wants_body(response(400, headers={"content-type": "application/x-amz-json-1.0"}))
    assert classifier.wants_body(response(503, headers={"content-type": "application/xml"}))
    assert classifier.wants_body(response(503))
    assert not classifier.wants_body(response(200, headers={"content-type": "application/json"}))
    assert not classifier.wants_body(response(503, headers={"content-type": "text/html"}))
    assert not classifier.wants_body(response(400, headers={"x-amzn-ErrorType": "X", "content-type": "json"}))
    assert not classifier.wants_body(response(400, headers={"content-length": "70000", "content-type": "json"}))
    assert not classifier.wants_body(response(503, headers={"content-length": "0"}))  # nothing to read
    assert not HttpClassifier(read_error_bodies=False).wants_body(response(400))
    assert not HttpClassifier(throttling_codes=frozenset(), transient_codes=frozenset()).wants_body(response(400))


# --------------------------------------------------------------------------- error bodies, end to end
class ChunkStream(httpx.AsyncByteStream):
    """A response body delivered in chunks that records whether it was read to the end and closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.delivered = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.delivered += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def client_for(router: respx.MockRouter, **kwargs: object) -> httpx.AsyncClient:
    kwargs.setdefault("rng", fixed_random(0.0))
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), **kwargs)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport)


def info(resp: httpx.Response) -> RetryInfo:
    value = resp.extensions[EXTENSION]
    assert isinstance(value, RetryInfo)
    return value


@pytest.mark.anyio
async def test_a_gzip_encoded_error_body_is_decoded_for_its_code() -> None:
    """A gzip-compressed JSON ThrottlingException body is found and retried; the caller still reads it decoded."""
    document = {"__type": "com.amazon.coral#ThrottlingException", "message": "slow down"}
    headers = {"content-type": "application/x-amz-json-1.1", "content-encoding": "gzip"}
    router = respx.MockRouter()
    route = router.get(URL).mock(side_effect=[
        httpx.Response(400, headers=headers, content=gzip.compress(json.dumps(document).encode())),
        httpx.Response(400, headers=headers, content=gzip.compress(json.dumps(document).encode())),
        httpx.Response(400, headers=headers, content=gzip.compress(json.dumps(document).encode())),
    ])
    async with client_for(router) as client:
        resp = await client.get(URL)
    assert route.call_count == 3
    assert [a.kind for a in info(resp).history.attempts] == [K.THROTTLING] * 3
    assert resp.json() == document


@pytest.mark.anyio
async def test_a_large_streamed_error_body_reaches_the_caller_whole() -> None:
    """An error body larger than max_error_body is peeked at, then streamed to the caller byte for byte."""
    chunks = [b'{"code": "ValidationException", "pad": "'] + [bytes([65 + i % 26]) * 4096 for i in range(40)] + [b'"}']
    stream = ChunkStream(chunks)
    router = respx.MockRouter()
    router.post(URL).mock(return_value=httpx.Response(400, headers={"content-type": "application/json"}, stream=stream))
    client = client_for(router, classifier=HttpClassifier(max_error_body=10_000))
    async with client, client.stream("POST", URL, content=b"x") as resp:
        assert stream.delivered < sum(map(len, chunks))  # only a prefix was read so far
        received = b"".join([part async for part in resp.aiter_raw()])
    assert received == b"".join(chunks)
    assert stream.closed
    assert info(resp).attempts == 1


@pytest.mark.anyio
async def test_a_small_error_body_is_read_once_and_released() -> None:
    """An error body read whole for its code is handed to the caller from memory; its stream is closed at once."""
    stream = ChunkStream([b'{"__type": "Validation', b'Exception"}'])
    router = respx.MockRouter()
    router.get(URL).mock(return_value=httpx.Response(400, headers={"content-type": "application/json"}, stream=stream))
    async with client_for(router) as client, client.stream("GET", URL) as resp:
        assert stream.closed  # the connection is back in the pool before the caller reads
        assert await resp.aread() == b'{"__type": "ValidationException"}'
    assert info(resp).history.attempts[0].reason == "HTTP 400 ValidationException"


@pytest.mark.anyio
async def test_retry_if_response_judges_first() -> None:
    """A user predicate over the response decides before the rules: here a 200 whose body says "pending"."""
    def pending(resp: httpx.Response) -> str | None:
        return "still pending" if resp.headers.get("x-state") == "pending" else None

    router = respx.MockRouter()
    route = router.get(URL).mock(side_effect=[
        httpx.Response(200, headers={"x-state": "pending"}),
        httpx.Response(200, headers={"x-state": "done"}),
    ])
    async with client_for(router, classifier=HttpClassifier(retry_if_response=pending)) as client:
        resp = await client.get(URL)
    assert resp.headers["x-state"] == "done"
    assert route.call_count == 2
    assert info(resp).history.attempts[0].reason == "still pending"


@pytest.mark.parametrize(
    ("verdict", "status", "kind"),
    [
        (K.THROTTLING, 200, K.THROTTLING),
        (True, 200, K.TRANSIENT),
        ("custom", 200, K.TRANSIENT),
        (False, 503, K.NOT_RETRYABLE),
        (False, 200, K.SUCCESS),
        (None, 503, K.TRANSIENT),
        (None, 200, K.SUCCESS),
    ],
)
def test_retry_if_response_verdicts(verdict: object, status: int, kind: OutcomeKind) -> None:
    """An OutcomeKind is used as is, True or a reason means transient, False means final, None defers."""
    classifier = HttpClassifier(retry_if_response=lambda _r: verdict)  # type: ignore[arg-type,return-value]
    assert kind_of(classifier, status) is kind


def test_retry_if_response_must_return_a_known_verdict() -> None:
    """A predicate returning something else is a programming error, reported clearly."""
    classifier = HttpClassifier(retry_if_response=lambda _r: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="retry_if_response must return"):
        kind_of(classifier, 200)


# ------------------------------------------------------------------------------- connection errors
def cert_failure() -> httpx.ConnectError:
    error = httpx.ConnectError("certificate verify failed")
    error.__cause__ = ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")
    return error


# Errors by name, made when the test runs: of the client package under test (httpx or httpx2).
NOT_SENT = [("ConnectError", "refused"), ("ConnectTimeout", "slow connect"), ("PoolTimeout", "pool full")]
MAYBE_SENT = [
    ("ReadError", "reset"), ("ReadTimeout", "slow read"), ("WriteTimeout", "slow write"),
    ("WriteError", "broken pipe"), ("RemoteProtocolError", "server disconnected"),
]


def made(name: str, message: str = "e") -> Exception:
    """The client package's error ``name``."""
    error: Exception = getattr(httpx, name)(message)
    return error


@pytest.mark.parametrize(("name", "message"), NOT_SENT, ids=[name for name, _ in NOT_SENT])
@pytest.mark.parametrize("method", ["GET", "POST", "PATCH"])
def test_errors_before_sending_are_retried_for_every_method(name: str, message: str, method: str) -> None:
    """Connect errors, connect timeouts and pool timeouts sent nothing: any method may be retried."""
    error = made(name, message)
    outcome = HttpClassifier().classify_error(error, idempotent=method == "GET", replayable=True)
    assert outcome is not None
    assert outcome.kind.retryable
    assert outcome.error is error


@pytest.mark.parametrize(("name", "message"), MAYBE_SENT, ids=[name for name, _ in MAYBE_SENT])
def test_errors_after_sending_are_retried_only_when_idempotent(name: str, message: str) -> None:
    """Read/write errors and timeouts and protocol errors may have reached the server: only idempotent retries."""
    error = made(name, message)
    classifier = HttpClassifier()
    safe = classifier.classify_error(error, idempotent=True, replayable=True)
    unsafe = classifier.classify_error(error, idempotent=False, replayable=True)
    assert safe is not None
    assert unsafe is not None
    assert safe.kind.retryable
    assert unsafe.kind is K.NOT_RETRYABLE
    assert "not idempotent" in unsafe.reason


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ConnectTimeout", K.TIMEOUT),
        ("ReadTimeout", K.TIMEOUT),
        ("WriteTimeout", K.TIMEOUT),
        ("PoolTimeout", K.TIMEOUT),
        ("ConnectError", K.CONNECTION),
        ("ReadError", K.CONNECTION),
        ("RemoteProtocolError", K.CONNECTION),
    ],
    ids=str,
)
def test_timeouts_cost_the_timeout_cost(name: str, kind: OutcomeKind) -> None:
    """Every httpx timeout is a TIMEOUT (its retry costs the quota's timeout cost); other errors CONNECTION."""
    outcome = HttpClassifier().classify_error(made(name), idempotent=True, replayable=True)
    assert outcome is not None
    assert outcome.kind is kind


@pytest.mark.parametrize("idempotent", [True, False])
def test_certificate_failures_are_never_retried(idempotent: bool) -> None:
    """A failed certificate verification will fail again: it is final even for a GET."""
    outcome = HttpClassifier().classify_error(cert_failure(), idempotent=idempotent, replayable=True)
    assert outcome is not None
    assert outcome.kind is K.NOT_RETRYABLE
    assert "certificate" in outcome.reason


def test_errors_with_a_body_that_cannot_be_replayed_are_final() -> None:
    """Even a connect error is not retried when the request body cannot be sent again."""
    outcome = HttpClassifier().classify_error(httpx.ConnectError("x"), idempotent=True, replayable=False)
    assert outcome is not None
    assert outcome.kind is K.NOT_RETRYABLE
    assert "cannot be replayed" in outcome.reason


def test_local_errors_are_final_and_foreign_errors_are_left_to_the_policy() -> None:
    """httpx errors on our side (bad URL scheme) are final; a non-httpx exception is not judged here."""
    classifier = HttpClassifier()
    local = classifier.classify_error(httpx.UnsupportedProtocol("ftp"), idempotent=True, replayable=True)
    assert local is not None
    assert local.kind is K.NOT_RETRYABLE
    assert classifier.classify_error(ValueError("mine"), idempotent=True, replayable=True) is None


# ---------------------------------------------------------------------------------------- idempotency
@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"])
def test_idempotent_methods(method: str) -> None:
    """GET, HEAD, PUT, DELETE, OPTIONS and TRACE may be sent again."""
    assert HttpClassifier().is_idempotent(request(method))


@pytest.mark.parametrize("method", ["POST", "PATCH"])
def test_post_and_patch_need_a_key_or_an_opt_in(method: str) -> None:
    """POST and PATCH are idempotent only with an Idempotency-Key, retry_non_idempotent or a per-request opt-in."""
    classifier = HttpClassifier()
    assert not classifier.is_idempotent(request(method))
    assert classifier.is_idempotent(request(method, headers={"Idempotency-Key": "k-1"}))
    assert classifier.is_idempotent(request(method, headers={"idempotency-key": "k-1"}))
    assert HttpClassifier(retry_non_idempotent=True).is_idempotent(request(method))
    assert classifier.is_idempotent(request(method), True)


def test_the_per_request_opt_in_wins_both_ways() -> None:
    """An explicit per-request verdict overrides the method: a GET can be declared unsafe to repeat."""
    assert not HttpClassifier().is_idempotent(request("GET"), False)
    assert not HttpClassifier(retry_non_idempotent=True).is_idempotent(request("POST"), False)


def test_the_idempotency_header_and_methods_are_configurable() -> None:
    """A custom header makes requests idempotent; custom method sets are matched case-insensitively."""
    classifier = HttpClassifier(idempotency_header="X-Request-Token", idempotent_methods=frozenset({"get"}))
    assert classifier.is_idempotent(request("POST", headers={"x-request-token": "t"}))
    assert not classifier.is_idempotent(request("POST", headers={"Idempotency-Key": "k"}))
    assert classifier.is_idempotent(request("GET"))
    assert not classifier.is_idempotent(request("PUT"))


# ---------------------------------------------------------------------------------- request bodies
def test_bytes_bodies_are_replayable() -> None:
    """A body given as bytes (or empty) can be sent again as is."""
    assert body_replay(request("POST", content=b"payload")).ok
    assert body_replay(request("GET")).ok
    assert body_replay(request("POST", json={"a": 1})).ok


def test_seekable_file_bodies_are_rewound() -> None:
    """A seekable file is replayable; rewinding returns it to where it stood when the request was made."""
    file = io.BytesIO(b"header|body")
    file.seek(7)
    replay = body_replay(request("PUT", content=file))
    assert replay.ok
    assert replay.rewind is not None
    file.read()
    replay.rewind()
    assert file.read() == b"body"


class Unseekable(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        return 0


def test_one_shot_bodies_are_not_replayable() -> None:
    """Generators, async generators and unseekable files can be read only once."""
    def gen() -> Iterator[bytes]:
        yield b"x"

    async def agen() -> AsyncIterator[bytes]:
        yield b"x"

    assert not body_replay(request("POST", content=gen())).ok
    assert not body_replay(request("POST", content=agen())).ok
    assert not body_replay(request("POST", content=Unseekable())).ok


def test_multipart_bodies_are_replayable_when_their_files_are_seekable() -> None:
    """Multipart uploads are replayable when each file can be rewound (httpx rewinds them itself)."""
    assert body_replay(request("POST", files={"f": io.BytesIO(b"data")}, data={"k": "v"})).ok
    assert not body_replay(request("POST", files={"f": Unseekable()})).ok


@pytest.mark.anyio
async def test_the_policy_classifier_still_judges_foreign_errors() -> None:
    """An exception that is not an httpx error (raised by an inner transport) goes to the policy's classifier."""
    class Flaky(Exception):
        is_retryable = True

    router = respx.MockRouter()
    route = router.get(URL).mock(side_effect=[Flaky(), httpx.Response(200)])
    async with client_for(router, policy=RetryPolicy()) as client:
        resp = await client.get(URL)
    assert resp.status_code == 200
    assert route.call_count == 2


def test_the_headers_classification_reads_come_out_as_headers_get_gives_them() -> None:
    """headers_read collects, in one pass, exactly what Headers.get returns for the names classification
    reads: any case, repeated headers joined with ", ", UTF-8 and Latin-1 values; nothing else."""
    headers = httpx.Headers([
        (b"Retry-After", b"3"),
        (b"X-Amzn-ErrorType", b"ThrottlingException:http://internal"),
        (b"content-type", b"application/json"),
        (b"Content-Type", b"charset=utf-8"),
        (b"x-amz-retry-after", "caf\u00e9".encode()),
        (b"x-other", b"ignored"),
    ])
    found = headers_read(headers)
    assert found == {
        name: headers[name]
        for name in ("retry-after", "x-amzn-errortype", "content-type", "x-amz-retry-after")
    }
    assert found["content-type"] == "application/json, charset=utf-8"
    assert found["x-amz-retry-after"] == "caf\u00e9"
    assert headers_read(httpx.Headers([(b"retry-after", "\u00e9".encode("latin-1"))])) == {"retry-after": "\u00e9"}


# ------------------------------------------------------------------------------- settings validation
@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"idempotent_methods": "GET"}, TypeError, "idempotent_methods must be a collection of HTTP methods"),
        ({"idempotent_methods": b"GET"}, TypeError, "idempotent_methods .* got the string b'GET'"),
        ({"idempotent_methods": None}, TypeError, "idempotent_methods must be a collection .* got None"),
        ({"idempotent_methods": iter(["GET"])}, TypeError, "idempotent_methods must be a collection"),
        ({"idempotent_methods": frozenset({"GET", 1})}, TypeError, "idempotent_methods must be an HTTP method"),
        ({"idempotent_methods": frozenset({"GE T"})}, ValueError, "idempotent_methods .* RFC 9110 token"),
        ({"idempotent_methods": frozenset({""})}, ValueError, "idempotent_methods .* non-empty"),
        ({"transient_statuses": "503"}, TypeError, "transient_statuses must be a collection of status codes"),
        ({"transient_statuses": None}, TypeError, "transient_statuses must be a collection"),
        ({"throttling_statuses": 429}, TypeError, "throttling_statuses must be a collection"),
        ({"throttling_statuses": frozenset({"429"})}, TypeError, r"throttling_statuses\[...\] must be an integer"),
        ({"throttling_statuses": frozenset({True})}, TypeError, r"throttling_statuses\[...\] must be an integer"),
        ({"throttling_codes": "SlowDown"}, TypeError, "throttling_codes must be a collection of error codes"),
        ({"transient_codes": None}, TypeError, "transient_codes must be a collection"),
        ({"transient_codes": [b"RequestTimeout"]}, TypeError, "transient_codes must hold error codes"),
        ({"transient_codes": [""]}, ValueError, "transient_codes must hold error codes of 1 to 128"),
        ({"retry_non_idempotent": "false"}, TypeError, "retry_non_idempotent must be True or False, got 'false'"),
        ({"retry_non_idempotent": 0}, TypeError, "retry_non_idempotent must be True or False"),
        ({"read_error_bodies": None}, TypeError, "read_error_bodies must be True or False"),
        ({"idempotency_header": None}, TypeError, "idempotency_header must be a header name"),
        ({"idempotency_header": b"Idempotency-Key"}, TypeError, "idempotency_header must be a header name"),
        ({"idempotency_header": ""}, ValueError, "idempotency_header .* non-empty RFC 9110 token"),
        ({"idempotency_header": "Idempotenz-Schl\u00fcssel"}, ValueError, "idempotency_header .* ASCII"),
        ({"idempotency_header": "Idempotency Key"}, ValueError, "idempotency_header .* token"),
        ({"idempotency_header": "Key:"}, ValueError, "idempotency_header .* token"),
        ({"max_error_body": -1}, ValueError,
         r"max_error_body must be an integer >= 0 and <= 16777216 \(bytes\), got -1$"),
        ({"max_error_body": 10**400}, ValueError, "max_error_body must be an integer >= 0 and <= 16777216"),
        ({"max_error_body": 10**5000}, ValueError, "max_error_body .* an integer of about 5001 digits"),
        ({"max_error_body": -(10**5000)}, ValueError, "max_error_body .* got a negative integer of about 5001 digits"),
        ({"max_error_body": 1.5}, TypeError, "max_error_body must be an integer"),
        ({"transient_statuses": [10**5000]}, ValueError,
         r"transient_statuses\[...\] must be an integer >= 100 and <= 599, got an integer of about 5001 digits"),
        ({"max_error_body": True}, TypeError, "max_error_body must be an integer"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",  # repr() of 10**5000 would raise
)
def test_wrong_settings_fail_at_construction_naming_the_parameter(
    settings: dict[str, object], error: type[Exception], message: str
) -> None:
    """Strings for collections, None, non-bools for flags, bad header names and limits are refused at once."""
    with pytest.raises(error, match=message):
        HttpClassifier(**settings)  # type: ignore[arg-type]


def test_collections_of_any_kind_are_accepted_and_frozen() -> None:
    """Lists, tuples and sets become frozensets; methods are upper-cased; header names may use any token char."""
    classifier = HttpClassifier(
        idempotent_methods=["get", "PROPFIND"],  # type: ignore[arg-type]
        transient_statuses=(500, 503),  # type: ignore[arg-type]
        throttling_codes={"SlowDown"},  # type: ignore[arg-type]
        idempotency_header="X-Request_Id.v2",
        max_error_body=0,
    )
    assert classifier.idempotent_methods == frozenset({"GET", "PROPFIND"})
    assert classifier.transient_statuses == frozenset({500, 503})
    assert classifier.throttling_codes == frozenset({"SlowDown"})
    assert HttpClassifier(max_error_body=16 * 1024 * 1024).max_error_body == 16 * 1024 * 1024


# ----------------------------------------------------------------------------- hostile error bodies
NESTED = b'{"__type": "ThrottlingException", "detail": ' + b"[" * 32_000 + b"]" * 32_000 + b"}"


@pytest.mark.parametrize(
    ("headers", "body", "code"),
    [
        ({}, NESTED, None),  # 64 KiB nested 32,000 deep: too deep to parse, no RecursionError
        ({}, b"[" * 65_536, None),
        ({}, b'{"a":' * 13_000, None),
        ({}, b'{"code": ' + b"9" * 5_000 + b"}", None),  # int() refuses 5,000 digits: no code, no error
        ({}, b'{"__type": "' + b"A" * 200 + b'"}', None),  # longer than any code
        ({}, b'{"__type": "Slow\\nDown"}', None),  # not printable
        ({}, b"\xff\xfe\x00{", None),
        ({"content-type": "application/json; charset=utf-16"}, '{"code": "SlowDown"}'.encode("utf-16"), "SlowDown"),
        ({"content-type": "application/json; charset=\u00ff"}, b'{"code": "SlowDown"}', "SlowDown"),
        ({"content-type": "text/xml; charset=utf-32"}, "<Error><Code>SlowDown</Code></Error>".encode("utf-32"),
         "SlowDown"),
        ({"x-amzn-ErrorType": "ThrottlingException, ThrottlingException"}, None, "ThrottlingException"),
        ({"x-amzn-ErrorType": "X" * 200}, None, None),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_error_codes_of_hostile_bodies_are_found_or_not_never_raised(
    headers: dict[str, str], body: bytes | None, code: str | None
) -> None:
    """Deep nesting, giant numbers, huge codes, stray bytes and any charset give a code or None, never an error."""
    raw = httpx.Headers([(name.encode(), value.encode()) for name, value in headers.items()])
    assert error_code_of_response(raw, body) == code


@given(
    body=st.binary(max_size=300) | st.text(alphabet='{}[]"\\:, _Codex<>/', max_size=300).map(str.encode),
    content_type=st.binary(max_size=40),
    error_type=st.none() | st.binary(max_size=40),
)
def test_no_body_or_header_makes_the_error_code_raise(
    body: bytes, content_type: bytes, error_type: bytes | None
) -> None:
    """Any bytes in the body, Content-Type and x-amzn-ErrorType give a short printable code or None."""
    raw = [(b"content-type", content_type)] + ([] if error_type is None else [(b"x-amzn-errortype", error_type)])
    code = error_code_of_response(headers_read(httpx.Headers(raw)), body)
    assert code is None or (0 < len(code) <= 128 and code.isprintable())


@pytest.mark.parametrize("length", ["\u0665", "1_0", "9" * 5_000, "-1", "+5", " 12 ", "0x10"])
def test_any_content_length_is_judged_without_error(length: str) -> None:
    """A Content-Length that is not plain ASCII digits (or is absurdly long) means: do not read the body."""
    headers = httpx.Headers([(b"content-length", length.encode()), (b"content-type", b"application/json")])
    wanted = HttpClassifier().wants_body(response(400, headers=headers))
    assert wanted is (length == " 12 ")


def nested_error(request: httpx.Request) -> httpx.Response:
    return httpx.Response(429, headers={"content-type": "application/json"}, stream=httpx.ByteStream(NESTED))


@pytest.mark.anyio
async def test_a_deeply_nested_error_body_reaches_the_async_caller() -> None:
    """Through AsyncRetryTransport, a 64 KiB body nested 32,000 deep is judged by its status and handed on whole."""
    transport = AsyncRetryTransport(httpx.MockTransport(nested_error), policy=RetryPolicy(max_attempts=2))
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.get(URL)
    assert resp.status_code == 429
    assert resp.content == NESTED
    assert [(a.kind, a.reason) for a in info(resp).history.attempts] == [(K.THROTTLING, "HTTP 429")] * 2


def test_a_deeply_nested_error_body_reaches_the_sync_caller() -> None:
    """Through RetryTransport, the same body is judged by its status and handed on whole."""
    transport = RetryTransport(httpx.MockTransport(nested_error), policy=RetryPolicy(max_attempts=2))
    with test_mode(no_wait=True), httpx.Client(transport=transport) as client:
        resp = client.get(URL)
    assert resp.status_code == 429
    assert resp.content == NESTED
    assert [(a.kind, a.reason) for a in info(resp).history.attempts] == [(K.THROTTLING, "HTTP 429")] * 2
