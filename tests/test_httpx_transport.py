"""AsyncRetryTransport and RetryTransport end to end over respx mocks: retries, safety, bodies, scopes, limits."""

from __future__ import annotations

import dataclasses
import io
import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, cast

import anyio
import httpx
import httpx2
import pytest
import respx

from asyncretry import (
    BreakerState,
    CircuitBreakerConfig,
    CircuitOpenError,
    FixedBackoff,
    NoBackoff,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryQuotaConfig,
    ScopeStatistics,
    history_of,
)
from asyncretry.httpx import (
    EXTENSION,
    AsyncRetryTransport,
    HttpClassifier,
    RetryInfo,
    RetryTransport,
    fetch,
    scope_by_origin,
)
from asyncretry.testing import fixed_random

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

K = OutcomeKind
URL = "https://api.test/items"
OTHER = "https://other.test/items"
QUICK = RetryPolicy(backoff=NoBackoff())  # retries without any wait, for the sync transport's real clock


# ---------------------------------------------------------------------------------------- helpers
class SpyStream(httpx.AsyncByteStream, httpx.SyncByteStream, httpx2.AsyncByteStream, httpx2.SyncByteStream):
    """A response body that records when it was closed (on the running loop's clock); for httpx and httpx2."""

    def __init__(self, body: bytes = b"", *, fail_after: int | None = None) -> None:
        self.body = body
        self.fail_after = fail_after
        self.closed_at: float | None = None

    def _chunks(self) -> Iterator[bytes]:
        for i in range(0, len(self.body), 4):
            if self.fail_after is not None and i >= self.fail_after:
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
            yield self.body[i : i + 4]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks():
            yield chunk

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks()

    async def aclose(self) -> None:
        self.closed_at = anyio.current_time()

    def close(self) -> None:
        self.closed_at = -1.0

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


class Script:
    """A respx side effect answering from a script (responses or exceptions), recording each request."""

    def __init__(self, *steps: httpx.Response | Exception | Callable[[], httpx.Response | Exception]) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []
        self.times: list[float] = []
        self.streams: list[SpyStream] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        try:
            self.times.append(anyio.current_time())
        except RuntimeError:  # called from the sync transport: no event loop
            self.times.append(0.0)
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        if callable(step) and not isinstance(step, httpx.Response):
            step = step()
        if isinstance(step, Exception):
            raise step
        if isinstance(step.stream, SpyStream):
            self.streams.append(step.stream)
        return step

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def bodies(self) -> list[bytes]:
        return [r.content for r in self.requests]


def current(value: Any) -> Any:
    """``value``, made when the tests were collected (of httpx), as the client package under test makes it: an
    error, a response without a body or a classifier of that package (see the ``client_package`` fixture)."""
    if isinstance(value, Exception) and not isinstance(value, httpx.HTTPError):
        return getattr(httpx, type(value).__name__)(*value.args)
    if hasattr(value, "status_code") and not isinstance(value, httpx.Response):
        return httpx.Response(value.status_code)
    if value is not None and hasattr(value, "retry_non_idempotent") and not isinstance(value, HttpClassifier):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return HttpClassifier(**fields)
    return value


def spied(status: int, body: bytes = b"", **kwargs: Any) -> Callable[[], httpx.Response]:
    """A fresh response with a SpyStream body for each time the script reaches it."""
    return lambda: httpx.Response(status, stream=SpyStream(body), **kwargs)


def retry_client(
    script: Script, url: str = URL, method: str = "GET", router: respx.MockRouter | None = None, **options: Any
) -> httpx.AsyncClient:
    router = router if router is not None else respx.MockRouter(assert_all_called=False)
    router.route(method=method, url=url).mock(side_effect=script)
    options.setdefault("rng", fixed_random(0.0))
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), **options)
    return httpx.AsyncClient(transport=transport)


def info(resp: httpx.Response) -> RetryInfo:
    value = resp.extensions[EXTENSION]
    assert isinstance(value, RetryInfo)
    return value


def scope_stats(transport: AsyncRetryTransport | RetryTransport, key: str) -> ScopeStatistics:
    scopes: tuple[ScopeStatistics, ...] = transport.statistics().scopes
    return next(s for s in scopes if s.key == key)


def quota_left(transport: AsyncRetryTransport | RetryTransport, key: str = "https://api.test:443") -> float:
    quota = scope_stats(transport, key).quota
    assert quota is not None
    return quota.available


def transport_of(client: httpx.AsyncClient | httpx.Client) -> Any:
    return client._transport


# ------------------------------------------------------------------------------------- the one line
@pytest.mark.anyio
async def test_one_line_makes_a_client_retry() -> None:
    """AsyncRetryTransport() over httpx's own transport (mocked by respx) retries 503, 503, then returns 200."""
    with respx.mock:
        answers = [httpx.Response(503), httpx.Response(503), httpx.Response(200, text="ok")]
        route = respx.get(URL).mock(side_effect=answers)
        async with httpx.AsyncClient(transport=AsyncRetryTransport(rng=fixed_random(0.5))) as client:
            resp = await client.get(URL)
    assert resp.status_code == 200
    assert resp.text == "ok"
    assert route.call_count == 3
    assert info(resp).attempts == 3
    assert info(resp).gave_up is None
    assert info(resp).scope == "https://api.test:443"
    assert [a.kind for a in info(resp).history.attempts] == [K.TRANSIENT, K.TRANSIENT, K.SUCCESS]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429, 509])
async def test_retryable_statuses_are_retried(status: int) -> None:
    """Every transient and throttling status is retried up to max_attempts; the last response is returned."""
    script = Script(httpx.Response(status))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert resp.status_code == status
    assert script.count == 3
    assert info(resp).gave_up == "max_attempts"
    expected = K.THROTTLING if status in (429, 509) else K.TRANSIENT
    assert {a.kind for a in info(resp).history.attempts} == {expected}


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    """A 4xx is final: one request, returned as is, with gave_up 'not_retryable'."""
    script = Script(httpx.Response(status, json={"message": "no"}))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert script.count == 1
    assert resp.status_code == status
    assert resp.json() == {"message": "no"}
    assert info(resp).gave_up == "not_retryable"


@pytest.mark.anyio
@pytest.mark.parametrize("status", [200, 201, 204, 301, 304])
async def test_successes_are_returned_at_once(status: int) -> None:
    """2xx and 3xx responses end the call after one request."""
    script = Script(httpx.Response(status, headers={"location": "/elsewhere"} if status == 301 else {}))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert (resp.status_code, script.count, info(resp).attempts, info(resp).gave_up) == (status, 1, 1, None)


@pytest.mark.anyio
async def test_configured_statuses_are_honoured_end_to_end() -> None:
    """A classifier that calls 520 transient and 503 final changes what the transport retries."""
    classifier = HttpClassifier(transient_statuses=frozenset({520}))
    script = Script(httpx.Response(520), httpx.Response(503))
    async with retry_client(script, classifier=classifier) as client:
        resp = await client.get(URL)
    assert resp.status_code == 503
    assert script.count == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"content-type": "application/x-amz-json-1.0"},
         b'{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"}'),
        ({"content-type": "application/json"}, b'{"code": "TooManyRequestsException"}'),
        ({"content-type": "text/xml"}, b"<Error><Code>RequestLimitExceeded</Code></Error>"),
        ({"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/"}, b"{}"),
    ],
    ids=["json-type", "json-code", "xml", "header"],
)
async def test_a_400_throttling_exception_is_retried_as_throttling(headers: dict[str, str], body: bytes) -> None:
    """A 400 whose error code means throttling is retried (throttling cost, throttling backoff)."""
    script = Script(httpx.Response(400, headers=headers, content=body), httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL)
        assert quota_left(transport_of(client)) == 500  # the 5 tokens of the retry came back on success
    assert resp.status_code == 200
    assert [a.kind for a in info(resp).history.attempts] == [K.THROTTLING, K.SUCCESS]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True], ids=["in-memory", "streamed"])
async def test_an_error_code_is_read_from_a_body_in_memory_or_streamed(streamed: bool) -> None:
    """The code is found whether the body is already read (mock transports) or still a stream (the
    network); either way the caller can still read the whole body of the final response."""
    body = b'{"__type": "ThrottlingException", "message": "slow down"}'
    headers = {"content-type": "application/x-amz-json-1.0"}
    streams: list[SpyStream] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if not streamed:
            return httpx.Response(400, headers=headers, content=body)  # read at once, as mocks make them
        streams.append(SpyStream(body))
        return httpx.Response(400, headers=headers, stream=streams[-1])

    policy = RetryPolicy(max_attempts=2, backoff=NoBackoff())
    transport = AsyncRetryTransport(httpx.MockTransport(answer), policy=policy)
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.get(URL)
    assert [a.kind for a in info(resp).history.attempts] == [K.THROTTLING, K.THROTTLING]
    assert resp.content == body
    assert len(streams) == (2 if streamed else 0)
    assert all(stream.closed for stream in streams)


@pytest.mark.anyio
async def test_an_error_body_over_the_limit_is_not_parsed_even_in_memory() -> None:
    """max_error_body bounds what is parsed for a code, also for a body that is already in memory."""
    body = b'{"__type": "ThrottlingException"}' + b" " * 64

    def read_already(request: httpx.Request) -> httpx.Response:  # no content-length tells its size
        resp = httpx.Response(400, headers={"content-type": "application/json"}, stream=httpx.ByteStream(body))
        resp.read()
        return resp

    transport = AsyncRetryTransport(httpx.MockTransport(read_already), classifier=HttpClassifier(max_error_body=32))
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.get(URL)
    assert [a.kind for a in info(resp).history.attempts] == [K.NOT_RETRYABLE]
    assert resp.content == body


@pytest.mark.anyio
async def test_a_503_slow_down_is_throttling() -> None:
    """A 5xx with a throttling code (S3's 503 SlowDown) counts as throttling."""
    script = Script(httpx.Response(503, content=b"<Error><Code>SlowDown</Code></Error>"), httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert info(resp).history.attempts[0].kind is K.THROTTLING
    assert info(resp).history.attempts[0].reason == "HTTP 503 SlowDown"


# ------------------------------------------------------------------------------------- connection errors
@pytest.mark.anyio
@pytest.mark.parametrize(
    "error", [httpx.ConnectError("refused"), httpx.ConnectTimeout("connect"), httpx.PoolTimeout("pool")],
    ids=lambda e: type(e).__name__,
)
async def test_a_post_that_was_never_sent_is_retried(error: Exception) -> None:
    """Connect errors and pool timeouts sent nothing: even a POST without Idempotency-Key is retried."""
    error = current(error)
    script = Script(error, httpx.Response(201))
    async with retry_client(script, method="POST") as client:
        resp = await client.post(URL, content=b"order-1")
    assert resp.status_code == 201
    assert script.count == 2
    assert script.bodies == [b"order-1", b"order-1"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadError("reset"), httpx.ReadTimeout("read"), httpx.WriteTimeout("write"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_a_post_that_may_have_been_sent_is_never_repeated(error: Exception) -> None:
    """After a read/write error or timeout the POST may have reached the server: raised at once, with history."""
    error = current(error)
    script = Script(error, httpx.Response(201))
    async with retry_client(script, method="POST") as client:
        with pytest.raises(type(error)) as caught:
            await client.post(URL, content=b"order-1")
    assert script.count == 1
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    assert "not idempotent" in history.attempts[0].reason


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error",
    [httpx.ReadError("reset"), httpx.ReadTimeout("read"), httpx.WriteTimeout("write"), httpx.RemoteProtocolError("x")],
    ids=lambda e: type(e).__name__,
)
async def test_a_get_is_retried_after_any_connection_error(error: Exception) -> None:
    """A GET is idempotent: read/write errors, timeouts and protocol errors are retried."""
    error = current(error)
    script = Script(error, httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert resp.status_code == 200
    assert script.count == 2


@pytest.mark.anyio
async def test_timeouts_cost_the_timeout_cost() -> None:
    """Retries after timeouts take 10 tokens each from the quota, after connect errors 5."""
    timeouts = Script(httpx.ReadTimeout("read"))
    async with retry_client(timeouts) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(URL)
        assert quota_left(transport_of(client)) == 500 - 2 * 10
    errors = Script(httpx.ConnectError("refused"))
    async with retry_client(errors) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(URL)
        assert quota_left(transport_of(client)) == 500 - 2 * 5


@pytest.mark.anyio
async def test_a_success_after_a_timeout_refunds_the_last_retry() -> None:
    """ReadTimeout, ReadTimeout, 200: 20 tokens taken, the last 10 given back on success."""
    script = Script(httpx.ReadTimeout("a"), httpx.ReadTimeout("b"), httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL)
        assert quota_left(transport_of(client)) == 490
    assert [a.kind for a in info(resp).history.attempts] == [K.TIMEOUT, K.TIMEOUT, K.SUCCESS]


@pytest.mark.anyio
async def test_exhausted_connection_errors_raise_the_last_error_with_its_history() -> None:
    """When the attempts run out on errors, the caller sees the real last error carrying every attempt."""
    script = Script(httpx.ConnectError("first"), httpx.ConnectError("second"), httpx.ConnectError("third"))
    async with retry_client(script) as client:
        with pytest.raises(httpx.ConnectError, match="third") as caught:
            await client.get(URL)
    history = history_of(caught.value)
    assert history is not None
    assert len(history.attempts) == 3
    assert history.gave_up == "max_attempts"


@pytest.mark.anyio
async def test_certificate_failures_are_never_retried() -> None:
    """A ConnectError caused by a failed certificate verification is raised after one attempt."""
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        # As httpx raises it: the SSL error is the cause (respx side effects would replace the cause).
        nonlocal calls
        calls += 1
        try:
            raise ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")
        except ssl.SSLError as error:
            raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]") from error

    async with httpx.AsyncClient(transport=AsyncRetryTransport(httpx.MockTransport(handler))) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(URL)
    assert calls == 1
    history = history_of(caught.value)
    assert history is not None
    assert "certificate" in history.attempts[0].reason


@pytest.mark.anyio
async def test_an_empty_quota_stops_retries() -> None:
    """With the quota spent, a connection error ends the call as itself (why: quota), as a 503 ends it as the 503."""
    policy = RetryPolicy(quota=RetryQuotaConfig(max_capacity=10, timeout_retry_cost=10), max_attempts=5)
    script = Script(httpx.ConnectError("refused"))
    async with retry_client(script, policy=policy) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(URL)
    assert script.count == 3  # two retries took the 10 tokens; the third could not be paid
    history = history_of(caught.value)
    assert history is not None
    assert (history.gave_up, len(history.attempts)) == ("quota", 3)
    responses = Script(httpx.Response(503))
    async with retry_client(responses, policy=policy) as client:
        resp = await client.get(URL)
    assert resp.status_code == 503
    assert info(resp).gave_up == "quota"


# ----------------------------------------------------------------------------------------- idempotency
@pytest.mark.anyio
@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_non_idempotent_request_gets_its_503_back(method: str) -> None:
    """A POST or PATCH answered 503 is not sent again: the 503 is returned."""
    script = Script(httpx.Response(503))
    async with retry_client(script, method=method) as client:
        resp = await client.request(method, URL, content=b"x")
    assert resp.status_code == 503
    assert script.count == 1
    assert info(resp).gave_up == "not_retryable"
    assert "not idempotent" in info(resp).history.attempts[0].reason


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["PUT", "DELETE", "HEAD", "OPTIONS", "TRACE"])
async def test_idempotent_methods_are_retried(method: str) -> None:
    """PUT, DELETE, HEAD, OPTIONS and TRACE are retried like GET."""
    script = Script(httpx.Response(503), httpx.Response(200))
    async with retry_client(script, method=method) as client:
        resp = await client.request(method, URL)
    assert resp.status_code == 200
    assert script.count == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "extensions", "classifier"),
    [
        ({"Idempotency-Key": "order-1"}, {}, None),
        ({}, {EXTENSION: {"idempotent": True}}, None),
        ({}, {}, HttpClassifier(retry_non_idempotent=True)),
    ],
    ids=["key", "per-request", "classifier"],
)
async def test_a_post_may_be_made_retryable(
    headers: dict[str, str], extensions: dict[str, Any], classifier: HttpClassifier | None
) -> None:
    """A POST is retried with an Idempotency-Key, a per-request opt-in or retry_non_idempotent."""
    classifier = current(classifier)
    script = Script(httpx.ReadError("reset"), httpx.Response(503), httpx.Response(201))
    async with retry_client(script, method="POST", classifier=classifier) as client:
        resp = await client.post(URL, content=b"order-1", headers=headers, extensions=extensions)
    assert resp.status_code == 201
    assert script.bodies == [b"order-1"] * 3


@pytest.mark.anyio
async def test_a_get_may_be_declared_unsafe_to_repeat() -> None:
    """{"idempotent": False} makes even a GET final after it may have reached the server."""
    script = Script(httpx.Response(503), httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL, extensions={EXTENSION: {"idempotent": False}})
    assert resp.status_code == 503
    assert script.count == 1


# ---------------------------------------------------------------------------------------------- bodies
@pytest.mark.anyio
async def test_bytes_bodies_are_replayed_identically() -> None:
    """Each attempt of a PUT sends exactly the same bytes, headers included."""
    payload = bytes(range(256)) * 40
    script = Script(httpx.Response(503), httpx.Response(500), httpx.Response(200))
    async with retry_client(script, method="PUT") as client:
        resp = await client.put(URL, content=payload, headers={"x-trace": "t-1"})
    assert resp.status_code == 200
    assert script.bodies == [payload] * 3
    assert {r.headers["content-length"] for r in script.requests} == {str(len(payload))}
    assert {r.headers["x-trace"] for r in script.requests} == {"t-1"}


@pytest.mark.anyio
async def test_multipart_uploads_with_files_are_replayed_identically() -> None:
    """A multipart body with a file field is rewound and re-sent byte for byte."""
    script = Script(httpx.Response(503), httpx.Response(200))
    file = io.BytesIO(b"file contents " * 100)
    async with retry_client(script, method="PUT") as client:
        resp = await client.put(URL, files={"upload": ("a.txt", file)}, data={"k": "v"})
    assert resp.status_code == 200
    assert len(script.bodies[0]) > 1400
    assert script.bodies[0] == script.bodies[1]


@pytest.mark.anyio
@pytest.mark.parametrize("first", [httpx.Response(503), httpx.ConnectError("refused"), httpx.ReadError("reset")],
                         ids=["503", "ConnectError", "ReadError"])
async def test_a_one_shot_async_body_is_never_sent_twice(first: httpx.Response | Exception) -> None:
    """A request streamed from an async generator cannot be replayed: it is never retried, whatever failed."""
    first = current(first)
    async def upload() -> AsyncIterator[bytes]:
        yield b"part 1, "
        yield b"part 2"

    script = Script(first, httpx.Response(200))
    async with retry_client(script, method="PUT") as client:
        if isinstance(first, Exception):
            with pytest.raises(type(first)) as caught:
                await client.put(URL, content=upload())
            history = history_of(caught.value)
            assert history is not None
            assert "cannot be replayed" in history.attempts[0].reason
        else:
            resp = await client.put(URL, content=upload())
            assert resp.status_code == 503
            assert "cannot be replayed" in info(resp).history.attempts[0].reason
    assert script.count == 1


def test_a_seekable_file_body_is_rewound_and_resent_whole() -> None:
    """A file body (through httpx's real transport, mocked by respx) is rewound before each retry."""
    content = b"0123456789" * 1000
    file = io.BytesIO(b"skipped:" + content)
    file.seek(8)
    received: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        received.append(request.read())
        return httpx.Response(503 if len(received) < 3 else 200)

    with respx.mock:
        respx.put(URL).mock(side_effect=answer)
        with httpx.Client(transport=RetryTransport(policy=QUICK)) as client:
            resp = client.put(URL, content=file)
    assert resp.status_code == 200
    assert received == [content] * 3


# ------------------------------------------------------------------------------- discarded responses
@pytest.mark.anyio
async def test_every_discarded_response_is_closed_before_the_backoff() -> None:
    """503, 503, 200 with 1 s waits: each 503 is closed when it arrives, before the wait; the 200 is the caller's."""
    script = Script(spied(503, b"busy"), spied(503, b"busy"), spied(200, b"payload"))
    client = retry_client(script, policy=RetryPolicy(backoff=FixedBackoff(1.0)))
    async with client, client.stream("GET", URL) as resp:
        first, second, last = script.streams
        assert first.closed_at == script.times[0]
        assert second.closed_at == script.times[1]
        assert script.times[1] - script.times[0] == pytest.approx(1.0)
        assert not last.closed
        assert await resp.aread() == b"payload"
    assert last.closed


@pytest.mark.anyio
async def test_the_last_response_is_returned_open_when_retries_run_out() -> None:
    """When the call gives up on a 503, the caller gets that 503 readable; the earlier ones were closed."""
    script = Script(spied(503, b"one"), spied(503, b"two"), spied(503, b"three"))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert resp.content == b"three"
    assert all(s.closed for s in script.streams)  # the client closed the last one after reading it


@pytest.mark.anyio
async def test_a_response_is_closed_when_reading_its_error_body_fails() -> None:
    """If the error body breaks while it is peeked at, the response is closed and the error retried (GET)."""
    broken = httpx.Response(503, headers={"content-type": "application/json"},
                            stream=SpyStream(b'{"code": "x", "pad": "....."}', fail_after=8))
    script = Script(broken, httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL)
    assert resp.status_code == 200
    assert script.streams[0].closed
    assert info(resp).history.attempts[0].kind is K.CONNECTION


# ----------------------------------------------------------------------------------------- overrides
@pytest.mark.anyio
async def test_retry_false_sends_once() -> None:
    """{"retry": False} turns retries off for one request only."""
    script = Script(httpx.Response(503), httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL, extensions={EXTENSION: {"retry": False}})
        assert resp.status_code == 503
        assert (await client.get(URL)).status_code == 200
    assert script.count == 2


@pytest.mark.anyio
async def test_a_per_request_policy_replaces_the_transports() -> None:
    """{"policy": RetryPolicy(max_attempts=5)} gives that request five attempts."""
    script = Script(httpx.Response(503))
    async with retry_client(script) as client:
        resp = await client.get(URL, extensions={EXTENSION: {"policy": RetryPolicy(max_attempts=5)}})
    assert script.count == 5
    assert info(resp).attempts == 5


@pytest.mark.anyio
async def test_a_per_request_scope_is_used_and_reported() -> None:
    """{"scope": "orders-table"} puts the request in that scope; RetryInfo names it."""
    script = Script(httpx.Response(200))
    async with retry_client(script) as client:
        resp = await client.get(URL, extensions={EXTENSION: {"scope": "orders-table"}})
        assert transport_of(client).retrier.scope_keys() == ["orders-table"]
    assert info(resp).scope == "orders-table"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("override", "error", "match"),
    [
        ({"colour": "red"}, ValueError, r"unknown keys \['colour'\]"),
        ({"retry": False, "retries": 3}, ValueError, "retries"),
        ({"policy": {"max_attempts": 2}}, TypeError, "policy"),
        (["retry"], TypeError, "mapping"),
    ],
)
async def test_bad_overrides_are_refused(override: Any, error: type[Exception], match: str) -> None:
    """Unknown override keys, a policy that is not a RetryPolicy and a non-mapping fail loudly, naming the problem."""
    script = Script(httpx.Response(200))
    async with retry_client(script) as client:
        with pytest.raises(error, match=match):
            await client.get(URL, extensions={EXTENSION: override})
    assert script.count == 0


@pytest.mark.anyio
async def test_retry_info_reports_attempts_delays_and_history() -> None:
    """RetryInfo carries the attempts, the total delay slept, the scope and each attempt's record."""
    script = Script(httpx.Response(503), httpx.Response(429), httpx.Response(200))
    async with retry_client(script, policy=RetryPolicy(backoff=FixedBackoff(0.25))) as client:
        resp = await client.get(URL)
    report = info(resp)
    assert report.attempts == 3
    assert report.total_delay == pytest.approx(0.5)
    assert report.gave_up is None
    assert [a.reason for a in report.history.attempts] == ["HTTP 503", "HTTP 429", "ok"]
    assert report.history.total_delay == pytest.approx(0.5)


# --------------------------------------------------------------------- a first attempt that succeeds
def breaker_samples(transport: AsyncRetryTransport, key: str = "https://api.test:443") -> tuple[int, int]:
    breaker = scope_stats(transport, key).breaker
    assert breaker is not None
    return breaker.successes, breaker.failures


@pytest.mark.anyio
async def test_a_first_time_success_is_counted_and_reported_like_any_call() -> None:
    """A request answered at once (no call object is made for it) is reported and counted like one that
    takes the engine's general way (here forced by a per-request scope override)."""

    async def slow_ok(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(0.25)
        return httpx.Response(200)

    policy = RetryPolicy(breaker=CircuitBreakerConfig())
    transport = AsyncRetryTransport(httpx.MockTransport(slow_ok), policy=policy)
    async with httpx.AsyncClient(transport=transport) as client:
        start = anyio.current_time()
        quick = await client.get(URL)
        general = await client.get(URL, extensions={EXTENSION: {"scope": "https://api.test:443"}})
    for resp, began in ((quick, start), (general, start + 0.25)):
        report = info(resp)
        assert (report.attempts, report.total_delay, report.gave_up, report.scope) == (
            1, 0.0, None, "https://api.test:443"
        )
        (record,) = report.history.attempts
        assert (record.number, record.kind, record.reason, record.delay_after, record.error) == (
            1, K.SUCCESS, "ok", None, None
        )
        assert record.started == pytest.approx(began)
        assert record.duration == pytest.approx(0.25)
        assert report.history.elapsed == pytest.approx(0.25)
        assert report.history.gave_up is None
    stats = transport.statistics()
    assert (stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures) == (2, 2, 0, 2, 0)
    assert breaker_samples(transport) == (2, 0)
    assert quota_left(transport) == 500


@pytest.mark.anyio
@pytest.mark.parametrize(
    "first", [httpx.ConnectError("refused"), httpx.Response(503)], ids=["connect-error", "503"]
)
async def test_a_first_attempt_that_fails_goes_on_as_one_call(first: httpx.Response | Exception) -> None:
    """A first attempt begun without a call object and then failing is one call: its history starts with it."""
    first = current(first)
    script = Script(first, httpx.Response(200))
    policy = RetryPolicy(backoff=FixedBackoff(0.5), breaker=CircuitBreakerConfig(failure_ratio=0.9))
    async with retry_client(script, policy=policy) as client:
        resp = await client.get(URL)
        transport = transport_of(client)
    assert resp.status_code == 200
    history = info(resp).history
    assert [a.kind for a in history.attempts] == [
        K.CONNECTION if isinstance(first, Exception) else K.TRANSIENT, K.SUCCESS
    ]
    assert [a.started for a in history.attempts] == pytest.approx(script.times)
    assert history.attempts[0].delay_after == pytest.approx(0.5)
    assert history.elapsed == pytest.approx(0.5)
    stats = transport.statistics()
    assert (stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures) == (1, 2, 1, 1, 0)
    assert breaker_samples(transport) == (1, 1)
    assert quota_left(transport) == 500


@pytest.mark.anyio
async def test_a_cancelled_first_attempt_is_recorded_nowhere() -> None:
    """Cancelled during its first attempt: no success, no failure, no breaker sample, no tokens taken."""
    started = anyio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        await anyio.sleep(60)
        return httpx.Response(200)

    transport = AsyncRetryTransport(httpx.MockTransport(hang), policy=RetryPolicy(breaker=CircuitBreakerConfig()))
    async with httpx.AsyncClient(transport=transport) as client, anyio.create_task_group() as tg:
        tg.start_soon(client.get, URL)
        await started.wait()
        tg.cancel_scope.cancel()
    stats = transport.statistics()
    assert (stats.successes, stats.failures, stats.retries) == (0, 0, 0)
    assert breaker_samples(transport) == (0, 0)
    assert quota_left(transport) == 500


@pytest.mark.anyio
async def test_adaptive_mode_counts_every_first_attempt_and_waits_once_throttled() -> None:
    """Before any throttle a request is admitted at once (and counted); after a 429 the limiter paces
    first attempts too: the next request waits for its token."""
    script = Script(httpx.Response(200), httpx.Response(200), httpx.Response(429), httpx.Response(200))
    policy = RetryPolicy(mode="adaptive", max_attempts=1)
    async with retry_client(script, policy=policy) as client:
        transport = transport_of(client)
        for _ in range(2):
            await client.get(URL)
        before = scope_stats(transport, "https://api.test:443").limiter
        assert (await client.get(URL)).status_code == 429
        start = anyio.current_time()
        assert (await client.get(URL)).status_code == 200
        after = scope_stats(transport, "https://api.test:443").limiter
    assert before is not None
    assert after is not None
    assert (before.enabled, before.acquires, before.updates, before.waits) == (False, 2, 2, 0)
    assert (after.enabled, after.acquires, after.updates, after.throttles) == (True, 4, 4, 1)
    assert after.waits == 1
    assert script.times[-1] > start


@pytest.mark.anyio
async def test_a_half_open_breaker_sends_its_probe_the_general_way() -> None:
    """While the breaker is not closed, a request takes a probe first; a probe's success closes it."""
    breaker = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=5.0)
    script = Script(httpx.Response(503), httpx.Response(200))
    policy = RetryPolicy(max_attempts=1, breaker=breaker)
    async with retry_client(script, policy=policy) as client:
        assert (await client.get(URL)).status_code == 503
        with pytest.raises(CircuitOpenError):
            await client.get(URL)
        await anyio.sleep(5)
        probe = await client.get(URL)
        state = scope_stats(transport_of(client), "https://api.test:443").breaker
    assert probe.status_code == 200
    assert info(probe).attempts == 1
    assert state is not None
    assert state.state is BreakerState.CLOSED


# ------------------------------------------------------------------------------------ reading bodies
def truncated(body: bytes = b"0123456789abcdef") -> Callable[[], httpx.Response]:
    return lambda: httpx.Response(200, stream=SpyStream(body, fail_after=8))


@pytest.mark.anyio
async def test_a_body_cut_short_is_the_callers_error_by_default() -> None:
    """Without read_body the body is streamed after the transport returned: its error reaches the caller."""
    script = Script(truncated(), httpx.Response(200, content=b"whole"))
    async with retry_client(script) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(URL)
    assert script.count == 1


@pytest.mark.anyio
async def test_read_body_retries_a_body_cut_short() -> None:
    """{"read_body": True} reads the body inside the attempt, so a truncated body is retried (GET)."""
    script = Script(truncated(), httpx.Response(200, content=b"whole"))
    async with retry_client(script) as client:
        resp = await client.get(URL, extensions={EXTENSION: {"read_body": True}})
    assert resp.content == b"whole"
    assert script.count == 2
    assert script.streams[0].closed


@pytest.mark.anyio
async def test_fetch_retries_a_body_cut_short() -> None:
    """fetch() is the helper for read_body: same retry, other extensions kept."""
    script = Script(truncated(), truncated(), httpx.Response(200, content=b"whole"))
    async with retry_client(script) as client:
        resp = await fetch(client, "GET", URL, extensions={"trace": "t", EXTENSION: {"scope": "s"}})
    assert resp.content == b"whole"
    assert script.count == 3
    assert script.requests[0].extensions["trace"] == "t"
    assert info(resp).scope == "s"


@pytest.mark.anyio
async def test_fetch_never_repeats_a_post_whose_body_broke() -> None:
    """A POST whose response body breaks may have been processed: fetch raises instead of sending it again."""
    script = Script(truncated(), httpx.Response(201))
    async with retry_client(script, method="POST") as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await fetch(client, "POST", URL, content=b"order")
    assert script.count == 1


@pytest.mark.anyio
async def test_fetch_needs_a_retrying_client() -> None:
    """fetch() on a client without an AsyncRetryTransport is a TypeError saying what is needed."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))) as client:
        with pytest.raises(TypeError, match="AsyncRetryTransport"):
            await fetch(client, "GET", URL)


# ---------------------------------------------------------------------------------------------- scopes
@pytest.mark.parametrize(
    ("url", "scope"),
    [
        ("https://a.test/x?y=1", "https://a.test:443"),
        ("http://a.test/", "http://a.test:80"),
        ("http://a.test:8080/p", "http://a.test:8080"),
        ("https://A.Test:8443", "https://a.test:8443"),
    ],
)
def test_the_default_scope_is_the_origin(url: str, scope: str) -> None:
    """scope_by_origin maps a request to scheme://host:port with default ports filled in."""
    assert scope_by_origin(httpx.Request("GET", url)) == scope


def test_default_ports_and_case_share_one_scope() -> None:
    """An origin written with its default port, or in capitals, is the same scope as the plain one."""
    plain = scope_by_origin(httpx.Request("GET", "https://a.test/x"))
    assert scope_by_origin(httpx.Request("GET", "https://a.test:443/y")) == plain
    assert scope_by_origin(httpx.Request("GET", "HTTPS://A.TEST/z")) == plain
    assert scope_by_origin(httpx.Request("GET", "https://a.test:444/")) != plain


def test_the_default_scope_reads_the_public_url_parts_when_httpx_keeps_no_parsed_tuple() -> None:
    """scope_by_origin reads httpx's parsed URL tuple when it is there, and the public properties otherwise."""

    class PlainUrl:  # an httpx.URL without the private tuple (another httpx version, say)
        scheme, host, port = "http", "b.test", 8081

    class PlainRequest:
        url = PlainUrl()

    assert scope_by_origin(cast(httpx.Request, PlainRequest())) == "http://b.test:8081"


def two_host_client(a: Script, b: Script, **options: Any) -> httpx.AsyncClient:
    router = respx.MockRouter(assert_all_called=False)
    router.get(URL).mock(side_effect=a)
    router.get(OTHER).mock(side_effect=b)
    options.setdefault("rng", fixed_random(0.0))
    return httpx.AsyncClient(transport=AsyncRetryTransport(httpx.MockTransport(router.async_handler), **options))


@pytest.mark.anyio
async def test_an_outage_on_one_host_does_not_drain_anothers_quota() -> None:
    """Quotas are per origin: retries against a failing host leave the healthy host's quota full."""
    failing, healthy = Script(httpx.Response(503)), Script(httpx.Response(200))
    async with two_host_client(failing, healthy) as client:
        for _ in range(10):
            await client.get(URL)
        await client.get(OTHER)
        transport = transport_of(client)
        assert quota_left(transport) == 500 - 10 * 2 * 5
        assert quota_left(transport, "https://other.test:443") == 500


@pytest.mark.anyio
async def test_adaptive_mode_keeps_one_limiter_per_scope() -> None:
    """A throttled host slows down only itself: the other host's limiter never engages and never waits."""
    throttled, healthy = Script(httpx.Response(429)), Script(httpx.Response(200))
    async with two_host_client(throttled, healthy, policy=RetryPolicy(mode="adaptive")) as client:
        for _ in range(5):
            await client.get(URL)
        start = anyio.current_time()
        for _ in range(20):
            await client.get(OTHER)
        assert anyio.current_time() == start
        transport = transport_of(client)
        slow = scope_stats(transport, "https://api.test:443").limiter
        fast = scope_stats(transport, "https://other.test:443").limiter
    assert slow is not None
    assert fast is not None
    assert slow.enabled
    assert slow.throttles == 15
    assert not fast.enabled
    assert fast.waits == 0


@pytest.mark.anyio
async def test_a_key_function_gives_finer_scopes() -> None:
    """scope_key can split one origin by resource (an AWS table, say): each gets its own quota."""
    def by_table(request: httpx.Request) -> str:
        return f"{request.url.host}/{request.headers.get('x-table', '-')}"

    def answer() -> httpx.Response:
        return httpx.Response(503 if script.requests[-1].headers["x-table"] == "hot" else 200)

    script = Script(answer)
    async with retry_client(script, scope_key=by_table) as client:
        hot = await client.get(URL, headers={"x-table": "hot"})
        cold = await client.get(URL, headers={"x-table": "cold"})
        transport = transport_of(client)
        assert sorted(transport.retrier.scope_keys()) == ["api.test/cold", "api.test/hot"]
        assert quota_left(transport, "api.test/hot") == 490
        assert quota_left(transport, "api.test/cold") == 500
    assert info(hot).scope == "api.test/hot"
    assert info(cold).scope == "api.test/cold"


@pytest.mark.anyio
async def test_idle_scopes_are_evicted() -> None:
    """A scope unused for longer than scope_idle_timeout is dropped when new scopes are made."""
    a, b = Script(httpx.Response(200)), Script(httpx.Response(200))
    async with two_host_client(a, b, scope_idle_timeout=10.0) as client:
        await client.get(URL)
        await anyio.sleep(30)
        await client.get(OTHER)
        transport = transport_of(client)
        assert transport.retrier.scope_keys() == ["https://other.test:443"]
        assert transport.statistics().evicted_scopes == 1


@pytest.mark.anyio
async def test_scopes_are_bounded_by_max_scopes() -> None:
    """With max_scopes=3, a hundred hosts leave at most three scopes, the most recently used."""
    router = respx.MockRouter()
    router.get(url__regex=r"https://h\d+\.test/").mock(return_value=httpx.Response(200))
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), max_scopes=3)
    async with httpx.AsyncClient(transport=transport) as client:
        for i in range(100):
            await client.get(f"https://h{i}.test/")
            await anyio.sleep(0.01)
    assert len(transport.retrier.scope_keys()) <= 3
    assert "https://h99.test:443" in transport.retrier.scope_keys()
    assert transport.statistics().evicted_scopes >= 97


@pytest.mark.anyio
async def test_a_fixed_rate_limit_paces_requests_per_scope() -> None:
    """rate_limit=10/s with a burst of 1: requests to one host go out 0.1 s apart; another host is not slowed."""
    paced, free = Script(httpx.Response(200)), Script(httpx.Response(200))
    policy = RetryPolicy(rate_limit=10.0, rate_limit_burst=1.0)
    async with two_host_client(paced, free, policy=policy) as client, anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(client.get, URL)
        tg.start_soon(client.get, OTHER)
    start = paced.times[0]
    assert [t - start for t in paced.times] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert free.times == [start]


@pytest.mark.anyio
async def test_the_circuit_breaker_opens_per_scope() -> None:
    """Three failures in a row open the failing host's breaker: its next call fails fast; the other host is served."""
    breaker = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=3, break_duration=5.0)
    failing, healthy = Script(httpx.Response(503)), Script(httpx.Response(200))
    async with two_host_client(failing, healthy, policy=RetryPolicy(breaker=breaker)) as client:
        first = await client.get(URL)
        assert first.status_code == 503
        with pytest.raises(CircuitOpenError):
            await client.get(URL)
        assert failing.count == 3
        assert (await client.get(OTHER)).status_code == 200
        transport = transport_of(client)
        opened = scope_stats(transport, "https://api.test:443").breaker
        assert opened is not None
        assert opened.state is BreakerState.OPEN
        await anyio.sleep(5)
        failing.steps = [httpx.Response(200)]
        assert (await client.get(URL)).status_code == 200  # the probe succeeds and closes the circuit


# ----------------------------------------------------------------------------- cancellation, timeouts
@pytest.mark.anyio
async def test_cancellation_during_the_backoff_leaves_no_trace() -> None:
    """Cancelled while waiting to retry: the 503 was closed, the retry's tokens come back, nothing is retried."""
    script = Script(spied(503), httpx.Response(200))
    async with retry_client(script, policy=RetryPolicy(backoff=FixedBackoff(10.0))) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get, URL)
            await anyio.sleep(3)
            assert script.streams[0].closed  # closed before the wait began
            assert quota_left(transport_of(client)) == 495
            tg.cancel_scope.cancel()
        assert quota_left(transport_of(client)) == 500
    assert script.count == 1


@pytest.mark.anyio
async def test_a_cancelled_caller_is_cancelled_not_refused_by_the_limiter() -> None:
    """A request made in an already cancelled scope is cancelled, even when the limiter would make it wait."""
    script = Script(httpx.Response(429))
    async with retry_client(script, policy=RetryPolicy(mode="adaptive", max_attempts=1)) as client:
        for _ in range(5):
            await client.get(URL)  # throttled: the limiter is on and short of tokens
        with anyio.CancelScope() as scope:
            scope.cancel()
            await client.get(URL)
        assert scope.cancelled_caught


@pytest.mark.anyio
async def test_a_backoff_past_the_callers_timeout_is_not_started() -> None:
    """Inside the caller's 3 s timeout a 10 s backoff would be cut short: the 503 is returned at once instead."""
    script = Script(httpx.Response(503), httpx.Response(200))
    async with retry_client(script, policy=RetryPolicy(backoff=FixedBackoff(10.0))) as client:
        start = anyio.current_time()
        with anyio.fail_after(3):
            resp = await client.get(URL)
        assert anyio.current_time() == start
        assert quota_left(transport_of(client)) == 500
    assert resp.status_code == 503
    assert info(resp).gave_up == "deadline"


@pytest.mark.anyio
async def test_cancellation_during_a_request_is_never_retried() -> None:
    """A request cancelled in flight is not retried and costs nothing."""
    started = anyio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        await anyio.sleep(60)
        return httpx.Response(200)

    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return await hang(request)

    transport = AsyncRetryTransport(httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport) as client, anyio.create_task_group() as tg:
        tg.start_soon(client.get, URL)
        await started.wait()
        tg.cancel_scope.cancel()
    assert calls == 1
    assert quota_left(transport) == 500


@pytest.mark.anyio
async def test_attempt_timeout_cuts_a_slow_attempt_and_retries_it() -> None:
    """attempt_timeout=1: a response that takes 60 s is abandoned after 1 s and retried as a timeout."""
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep(60)
        return httpx.Response(200)

    transport = AsyncRetryTransport(
        httpx.MockTransport(handler), policy=RetryPolicy(attempt_timeout=1.0), rng=fixed_random(0.0)
    )
    start = anyio.current_time()
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.get(URL)
    assert resp.status_code == 200
    assert anyio.current_time() - start == pytest.approx(1.0)
    assert info(resp).history.attempts[0].kind is K.TIMEOUT


# ------------------------------------------------------------------------------------- construction
@pytest.mark.anyio
async def test_a_shared_retrier_shares_state_between_transports() -> None:
    """Two transports built on one Retrier draw on the same quota."""
    retrier = Retrier(RetryPolicy(), rng=fixed_random(0.0))
    one, two = Script(httpx.Response(503)), Script(httpx.Response(503))
    async with retry_client(one, retrier=retrier, rng=None) as c1, retry_client(two, retrier=retrier, rng=None) as c2:
        await c1.get(URL)
        await c2.get(URL)
    quota = retrier.statistics().scopes[0].quota
    assert quota is not None
    assert quota.available == 500 - 4 * 5


def test_bad_construction_is_refused() -> None:
    """A retrier with a policy, a classifier of the wrong type, and sync-incompatible policies are refused."""
    with pytest.raises(TypeError, match="retrier or policy"):
        AsyncRetryTransport(retrier=Retrier(), policy=RetryPolicy())
    with pytest.raises(TypeError, match="classifier"):
        AsyncRetryTransport(classifier=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="attempt_timeout"):
        RetryTransport(policy=RetryPolicy(attempt_timeout=1.0))

    async def hook(info: Any) -> None:
        return None

    with pytest.raises(ValueError, match="on_give_up"):
        RetryTransport(policy=RetryPolicy(on_give_up=hook))
    with pytest.raises(ValueError, match="max_scopes"):
        AsyncRetryTransport(max_scopes=0)


@pytest.mark.anyio
async def test_closing_the_transport_closes_the_inner_one_and_repr_names_both() -> None:
    """aclose() reaches the wrapped transport; repr shows the retrier and the inner transport's type."""
    closed: list[bool] = []

    class Inner(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        async def aclose(self) -> None:
            closed.append(True)

    transport = AsyncRetryTransport(Inner(), name="api")
    assert "Inner" in repr(transport)
    assert "'api'" in repr(transport)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get(URL)
    assert closed == [True]
    assert transport.policy is transport.retrier.policy


# ----------------------------------------------------------------------------------- the sync transport
def sync_client(script: Script, method: str = "GET", **options: Any) -> httpx.Client:
    router = respx.MockRouter(assert_all_called=False)
    router.route(method=method, url=URL).mock(side_effect=script)
    options.setdefault("policy", QUICK)
    return httpx.Client(transport=RetryTransport(httpx.MockTransport(router.handler), **options))


def test_sync_transport_retries_and_reports() -> None:
    """RetryTransport retries 503, 503, then returns the 200 with its RetryInfo."""
    script = Script(httpx.Response(503), httpx.Response(503), httpx.Response(200, text="ok"))
    with sync_client(script) as client:
        resp = client.get(URL)
    assert resp.text == "ok"
    assert info(resp).attempts == 3


def test_sync_transport_keeps_posts_safe() -> None:
    """A POST is retried after a connect error (nothing sent) but never after a read error."""
    script = Script(httpx.ConnectError("refused"), httpx.ReadError("reset"), httpx.Response(201))
    with sync_client(script, method="POST") as client, pytest.raises(httpx.ReadError):
        client.post(URL, content=b"order")
    assert script.bodies == [b"order", b"order"]


def test_sync_transport_closes_discarded_responses() -> None:
    """Each discarded response of the sync transport is closed; the last is handed over."""
    script = Script(spied(503), spied(500), spied(200, b"done"))
    with sync_client(script) as client, client.stream("GET", URL) as resp:
        first, second, last = script.streams
        assert first.closed
        assert second.closed
        assert not last.closed
        assert resp.read() == b"done"


def test_sync_transport_reads_error_codes_and_keeps_the_body() -> None:
    """A 400 ThrottlingException is retried by the sync transport; the final body is intact."""
    body = b'{"__type": "ThrottlingException"}'
    script = Script(httpx.Response(400, content=body, headers={"content-type": "application/json"}))
    with sync_client(script) as client:
        resp = client.get(URL)
    assert script.count == 3
    assert resp.content == body


def test_sync_transport_honours_overrides_and_read_body() -> None:
    """Per-request overrides work in sync code too: no retry, and read_body retrying a truncated body."""
    script = Script(httpx.Response(503), truncated(), httpx.Response(200, content=b"whole"))
    with sync_client(script) as client:
        assert client.get(URL, extensions={EXTENSION: {"retry": False}}).status_code == 503
        resp = client.get(URL, extensions={EXTENSION: {"read_body": True}})
    assert resp.content == b"whole"
    assert script.count == 3


def test_threads_can_share_a_sync_transport() -> None:
    """Four threads share one RetryTransport: every request is answered, retried exactly once, counted once."""
    lock = threading.Lock()
    seen: Counter[str] = Counter()

    def answer(request: httpx.Request) -> httpx.Response:
        key = request.headers["x-request-id"]
        with lock:
            seen[key] += 1
            first = seen[key] == 1
        return httpx.Response(503 if first else 200, text=key)

    router = respx.MockRouter()
    router.get(URL).mock(side_effect=answer)
    transport = RetryTransport(httpx.MockTransport(router.handler), policy=QUICK)
    results: list[str] = []
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            with httpx.Client(transport=transport) as client:
                for i in range(25):
                    resp = client.get(URL, headers={"x-request-id": f"{n}-{i}"})
                    with lock:
                        results.append(resp.text)
        except Exception as error:  # reported to the main thread below
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert failures == []
    assert sorted(results) == sorted(f"{n}-{i}" for n in range(4) for i in range(25))
    assert set(seen.values()) == {2}
    stats = transport.statistics()
    assert (stats.calls, stats.attempts, stats.retries, stats.successes) == (100, 200, 100, 100)
    assert quota_left(transport) == 500


# ------------------------------------------------------------------------------------ one way in
@pytest.mark.anyio
@pytest.mark.parametrize(
    "responses", [[httpx.Response(200)], [httpx.Response(503), httpx.Response(200)], [httpx.Response(404)]]
)
async def test_a_request_without_overrides_leaves_what_the_same_request_through_the_general_way_leaves(
    responses: list[httpx.Response], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request starts its call with Retrier.attempts, with or without an override (here a scope
    override naming its own origin): both leave the same counters, quota, breaker, events and report."""
    begun: list[object] = []
    attempts = Retrier.attempts

    def spy(self: Retrier, **kwargs: Any) -> object:
        call = attempts(self, **kwargs)
        begun.append(call)
        return call

    monkeypatch.setattr(Retrier, "attempts", spy)
    results = []
    for extensions in ({}, {EXTENSION: {"scope": "https://api.test:443"}}):
        seen: list[Any] = []
        router = respx.MockRouter()
        router.get(URL).mock(side_effect=[httpx.Response(r.status_code) for r in responses])
        policy = RetryPolicy(backoff=NoBackoff(), breaker=CircuitBreakerConfig(), quota=RetryQuotaConfig())
        transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), policy=policy)
        transport.retrier.subscribe(seen.append)
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(URL, extensions=extensions)
        info = response.extensions[EXTENSION]
        assert isinstance(info, RetryInfo)
        stats = transport.statistics()
        (scope,) = stats.scopes
        assert scope.quota is not None
        assert scope.breaker is not None
        results.append((
            response.status_code, info.attempts, info.gave_up, info.scope,
            [(a.number, a.kind) for a in info.history.attempts],
            (stats.calls, stats.attempts, stats.retries, stats.successes, stats.failures),
            scope.quota.available, (scope.breaker.successes, scope.breaker.failures),
            [(type(e).__name__, getattr(e, "attempt", None), getattr(e, "target", None)) for e in seen],
        ))
    first_way, general_way = results
    assert first_way == general_way
    assert ("AttemptFinished", len(responses), "GET https://api.test/items") in first_way[-1]
    assert len(begun) == 2  # one call each, the same way in
