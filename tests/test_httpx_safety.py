"""The httpx transports keep their promises on every path: timeouts meet the same replay and idempotency rules,
async files are rewound, stalled error bodies cannot stall the call, and what they raise is an httpx.HTTPError."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

from asyncretry import (
    AttemptTimeout,
    CircuitBreakerConfig,
    CircuitOpenError,
    NoBackoff,
    RetryPolicy,
    RetryQuotaConfig,
    history_of,
)
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.httpx import (
    AsyncRetryTransport,
    HttpClassifier,
    RetryInfo,
    RetryTransport,
    retry_info,
)
from conftest import fresh_app

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

URL = "https://api.test/items"
QUICK = RetryPolicy(backoff=NoBackoff())


# ------------------------------------------------------------------------------------- helpers
class Stalling(httpx.AsyncByteStream, httpx.SyncByteStream):
    """An error body that sends its first bytes, then nothing for an hour (of virtual time)."""

    def __init__(self, first: bytes = b'{"__type": "Throt') -> None:
        self.first = first
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        await anyio.sleep(3600)
        yield b'tlingException"}'

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.ReadTimeout("timed out")  # what httpx's read timeout does to a blocking read

    async def aclose(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def app(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig(slow_delay=3.0))


# ------------------------------------------------------------------- 1. timeouts meet the judge
@pytest.mark.real_time
@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_a_timed_out_post_without_idempotency_key_is_not_sent_again(server: FaultServer, app: FaultyApp) -> None:
    """attempt_timeout on a POST without Idempotency-Key: the body reached the server once; the caller gets
    AttemptTimeout (also an httpx.TimeoutException) with its history, judged 'not idempotent'."""
    policy = RetryPolicy(attempt_timeout=0.5, backoff=NoBackoff())
    transport = AsyncRetryTransport(policy=policy)
    async with httpx.AsyncClient(transport=transport, base_url=server.url) as client:
        with pytest.raises(AttemptTimeout) as caught:
            await client.post("/orders", content=b"order-1", headers={"x-request-id": "t1", "x-faults": "slow,slow,ok"})
    assert isinstance(caught.value, httpx.TimeoutException)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    assert "not idempotent" in history.attempts[-1].reason
    assert app.arrivals("t1") == 1  # counted when the body arrived; a second send would have come before the raise


@pytest.mark.real_time
@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_a_timed_out_get_is_retried(server: FaultServer, app: FaultyApp) -> None:
    """The same timeout on an idempotent GET is retried: the judge only refuses what may not be sent again."""
    policy = RetryPolicy(attempt_timeout=1.0, backoff=NoBackoff())  # the slow answer takes 3 s, a quick one far less
    async with httpx.AsyncClient(transport=AsyncRetryTransport(policy=policy), base_url=server.url) as client:
        resp = await client.get("/items", headers={"x-request-id": "t2", "x-faults": "slow,ok"})
    assert resp.status_code == 200
    assert retry_info(resp).attempts == 2


@pytest.mark.anyio
async def test_a_timed_out_one_shot_body_is_not_replayed() -> None:
    """A one-shot async-generator body whose attempt timed out: AttemptTimeout, never httpx.StreamConsumed."""
    sent: list[bytes] = []

    async def slow(request: httpx.Request) -> httpx.Response:
        sent.append(await request.aread())
        await anyio.sleep(10)
        return httpx.Response(200)

    async def body() -> AsyncIterator[bytes]:
        yield b"once"

    policy = RetryPolicy(attempt_timeout=1.0, backoff=NoBackoff(), max_attempts=3)
    async with httpx.AsyncClient(transport=AsyncRetryTransport(httpx.MockTransport(slow), policy=policy)) as client:
        with pytest.raises(AttemptTimeout) as caught:
            await client.put(URL, content=body())
    history = history_of(caught.value)
    assert history is not None
    assert "cannot be replayed" in history.attempts[0].reason
    assert sent == [b"once"]


# -------------------------------------------------------------------------- 2. async file bodies
@pytest.mark.real_time
@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_an_async_file_is_rewound_before_a_retry(server: FaultServer, app: FaultyApp, tmp_path: Path) -> None:
    """A PUT streamed from anyio.open_file, answered 503 then 200: the retry sends the whole file again."""
    path = tmp_path / "upload.bin"
    content = bytes(range(256)) * 64
    path.write_bytes(content)
    transport = AsyncRetryTransport(policy=QUICK)
    async with httpx.AsyncClient(transport=transport, base_url=server.url) as client, await anyio.open_file(
        path, "rb"
    ) as file:
        resp = await client.put("/objects/1", content=file, headers={"x-request-id": "f1", "x-faults": "503,ok"})
    assert resp.status_code == 200
    assert [r.body for r in app.received()] == [content, content]


@pytest.mark.real_time
@pytest.mark.timeout(30)
def test_a_file_is_rewound_before_a_retry_by_the_sync_transport(
    server: FaultServer, app: FaultyApp, tmp_path: Path
) -> None:
    """The sync twin: a PUT streamed from an open file is sent whole on every attempt."""
    path = tmp_path / "upload.bin"
    content = b"0123456789" * 1000
    path.write_bytes(content)
    with httpx.Client(transport=RetryTransport(policy=QUICK), base_url=server.url) as client, path.open("rb") as file:
        resp = client.put("/objects/2", content=file, headers={"x-request-id": "f2", "x-faults": "503,ok"})
    assert resp.status_code == 200
    assert [r.body for r in app.received()] == [content, content]


class _AsyncOnly:
    """An async file-like object whose position can only be read by awaiting (nothing synchronous to rewind)."""

    def __init__(self) -> None:
        self.chunks = [b"abc", b"def"]

    async def read(self, n: int = -1) -> bytes:
        return b""

    async def seek(self, offset: int) -> int:
        return 0

    async def tell(self) -> int:
        return 0

    def __aiter__(self) -> AsyncIterator[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            for chunk in self.chunks:
                yield chunk
        return chunks()


@pytest.mark.anyio
async def test_an_async_body_that_cannot_be_rewound_is_never_replayed() -> None:
    """An async file-like body with no synchronous file under it is sent once: a 503 is the caller's answer."""
    bodies: list[bytes] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(await request.aread())
        return httpx.Response(503)

    transport = AsyncRetryTransport(httpx.MockTransport(answer), policy=QUICK)
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.put(URL, content=_AsyncOnly())
    assert resp.status_code == 503
    assert bodies == [b"abcdef"]
    assert "cannot be replayed" in retry_info(resp).history.attempts[0].reason


# ----------------------------------------------------------------------- 7. stalled error bodies
@pytest.mark.anyio
async def test_a_stalled_error_body_is_judged_by_status_and_returned_at_once() -> None:
    """A 503 whose body stalls: each peek waits at most error_body_timeout, the 503s are retried by status,
    and the last one is returned without waiting for its body; reading the rest is a ReadTimeout."""
    streams: list[Stalling] = []

    def answer(request: httpx.Request) -> httpx.Response:
        stream = Stalling()
        streams.append(stream)
        return httpx.Response(503, headers={"content-type": "application/json"}, stream=stream)

    transport = AsyncRetryTransport(httpx.MockTransport(answer), policy=QUICK, error_body_timeout=0.25)
    started = anyio.current_time()
    async with httpx.AsyncClient(transport=transport) as client, client.stream("GET", URL) as resp:
        assert resp.status_code == 503
        elapsed = anyio.current_time() - started
        info = retry_info(resp)
        with pytest.raises(httpx.ReadTimeout):
            await resp.aread()
    assert elapsed == pytest.approx(3 * 0.25)
    assert info.attempts == 3
    assert [a.reason for a in info.history.attempts] == ["HTTP 503"] * 3
    assert all(stream.closed for stream in streams)


@pytest.mark.anyio
async def test_a_stalled_error_body_never_waits_past_the_deadline() -> None:
    """The peek's budget is cut to half of what is left of the call's deadline: the 503 comes back in time."""
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"content-type": "application/json"}, stream=Stalling())

    policy = RetryPolicy(deadline=0.1, max_attempts=1)
    transport = AsyncRetryTransport(httpx.MockTransport(answer), policy=policy, error_body_timeout=5.0)
    started = anyio.current_time()
    async with httpx.AsyncClient(transport=transport) as client, client.stream("GET", URL) as resp:
        assert resp.status_code == 503
    assert anyio.current_time() - started <= 0.1


def test_a_stalled_error_body_in_the_sync_transport_is_judged_by_status() -> None:
    """The sync twin: httpx's read timeout while peeking is not retried as a ReadTimeout; the 503 is judged
    by its status and returned."""
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"content-type": "application/json"}, stream=Stalling())

    transport = RetryTransport(httpx.MockTransport(answer), policy=QUICK)
    with httpx.Client(transport=transport) as client, client.stream("GET", URL) as resp:
        assert resp.status_code == 503
        assert [a.reason for a in retry_info(resp).history.attempts] == ["HTTP 503"] * 3
        with pytest.raises(httpx.ReadTimeout):
            resp.read()


# --------------------------------------------------------------- 8. everything is an httpx.HTTPError
@pytest.mark.anyio
async def test_an_empty_quota_and_an_open_breaker_are_httpx_errors() -> None:
    """With the quota spent the real ConnectError ends each call; the CircuitOpenError of a call refused
    before its first attempt is caught by `except httpx.HTTPError` too: all with the request and the history."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    policy = RetryPolicy(
        backoff=NoBackoff(), quota=RetryQuotaConfig(max_capacity=5, retry_cost=5, timeout_retry_cost=5),
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=3, break_duration=30.0),
    )
    transport = AsyncRetryTransport(httpx.MockTransport(refuse), policy=policy)
    caught: list[httpx.HTTPError] = []
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(4):
            try:
                await client.get(URL)
            except httpx.HTTPError as failure:
                caught.append(failure)
    assert [type(error) for error in caught[:2]] == [httpx.ConnectError, httpx.ConnectError]
    assert [history_of(error).gave_up for error in caught[:2]] == ["quota", "quota"]  # type: ignore[union-attr]
    assert all(isinstance(error, CircuitOpenError) for error in caught[2:])
    for error in caught:
        assert error.request.url == URL
        assert history_of(error) is not None


def test_the_sync_transport_raises_httpx_errors_too() -> None:
    """The sync twin: an open breaker is an httpx.TransportError and a CircuitOpenError."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    policy = RetryPolicy(backoff=NoBackoff(), max_attempts=1,
                         breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1))
    with httpx.Client(transport=RetryTransport(httpx.MockTransport(refuse), policy=policy)) as client:
        with pytest.raises(httpx.ConnectError):
            client.get(URL)
        with pytest.raises(httpx.TransportError) as caught:
            client.get(URL)
    assert isinstance(caught.value, CircuitOpenError)


# ------------------------------------------------------------------- 9. options of the inner transport
def test_the_transports_build_their_inner_transport_from_httpx_options() -> None:
    """Options httpx ignores on a client with a custom transport configure the transport built underneath."""
    limits = httpx.Limits(max_connections=3, max_keepalive_connections=1)
    async_transport = AsyncRetryTransport(limits=limits, verify=False, retries=2)
    assert isinstance(async_transport.inner, httpx.AsyncHTTPTransport)
    assert async_transport.inner._pool._max_connections == 3
    assert async_transport.inner._pool._retries == 2
    sync_transport = RetryTransport(limits=limits)
    assert isinstance(sync_transport.inner, httpx.HTTPTransport)
    assert sync_transport.inner._pool._max_connections == 3


def test_options_and_a_transport_together_are_refused() -> None:
    """Options for a transport to build make no sense beside a transport given: a TypeError says so."""
    with pytest.raises(TypeError, match="verify"):
        AsyncRetryTransport(httpx.AsyncHTTPTransport(), verify=False)
    with pytest.raises(TypeError, match="unexpected keyword"):
        AsyncRetryTransport(no_such_option=1)


# ---------------------------------------------------------------------------- 10. typed accessor
@pytest.mark.anyio
async def test_retry_info_reads_the_report_with_its_type() -> None:
    """retry_info(response) is the RetryInfo of a response that came through the transport, LookupError otherwise."""
    with respx.mock:
        respx.get(URL).mock(side_effect=[httpx.Response(503), httpx.Response(200)])
        async with httpx.AsyncClient(transport=AsyncRetryTransport(policy=QUICK)) as client:
            resp = await client.get(URL)
    info = retry_info(resp)
    assert isinstance(info, RetryInfo)
    assert (info.attempts, info.gave_up) == (2, None)
    with pytest.raises(LookupError):
        retry_info(httpx.Response(200))


# -------------------------------------------------------------------- 12. wrong arguments fail early
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: AsyncRetryTransport(httpx.HTTPTransport()), "async transport"),  # type: ignore[arg-type]
        (lambda: RetryTransport(httpx.AsyncHTTPTransport()), "sync transport"),  # type: ignore[arg-type]
        (lambda: AsyncRetryTransport(scope_key="origin"), "scope_key"),  # type: ignore[arg-type]
        (lambda: AsyncRetryTransport(rng=0.5), "rng"),  # type: ignore[arg-type]
        (lambda: AsyncRetryTransport(read_body="false"), "read_body"),  # type: ignore[arg-type]
        (lambda: AsyncRetryTransport(error_body_timeout=-1), "error_body_timeout"),
        (lambda: RetryTransport(wall_clock=3), "wall_clock"),  # type: ignore[arg-type]
        (lambda: AsyncRetryTransport(retrier="shared"), "retrier"),  # type: ignore[arg-type]
    ],
)
def test_wrong_arguments_fail_at_construction(make: Any, message: str) -> None:
    """Each wrong argument is refused when the transport is made, naming what is wrong."""
    with pytest.raises((TypeError, ValueError), match=message):
        make()


def test_the_sync_transport_is_safe_across_threads_with_the_judge() -> None:
    """Threads sharing the sync transport each get their own judge: a POST is never retried, a GET is."""
    calls: list[str] = []
    lock = threading.Lock()

    def answer(request: httpx.Request) -> httpx.Response:
        with lock:
            calls.append(request.method)
        return httpx.Response(503)

    transport = RetryTransport(httpx.MockTransport(answer), policy=QUICK)

    def worker(method: str) -> None:
        with httpx.Client(transport=transport) as client:
            client.request(method, URL)

    threads = [threading.Thread(target=worker, args=(m,)) for m in ("GET", "POST") * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls.count("POST") == 4
    assert calls.count("GET") == 12


def test_classifier_is_kept() -> None:
    """The classifier given is the one used (a smoke check of the constructor's wiring)."""
    classifier = HttpClassifier()
    assert AsyncRetryTransport(classifier=classifier).classifier is classifier


# ---------------------------------------------------------------- 11. logs and spans name the request
@pytest.mark.anyio
async def test_log_records_name_the_request_without_query_or_credentials(caplog: pytest.LogCaptureFixture) -> None:
    """Retry and give-up records say which request (method and URL) but never its query string or credentials."""
    import logging

    caplog.set_level(logging.DEBUG, logger="asyncretry")
    with respx.mock:
        respx.get("https://api.test/items").mock(return_value=httpx.Response(503))
        async with httpx.AsyncClient(transport=AsyncRetryTransport(policy=QUICK)) as client:
            resp = await client.get("https://user:secret@api.test/items?token=hunter2")
    assert resp.status_code == 503
    records = [r for r in caplog.records if r.name == "asyncretry"]
    targets = {getattr(r, "asyncretry_target", None) for r in records if hasattr(r, "asyncretry_attempt")}
    assert targets == {"GET https://api.test/items"}
    text = " ".join(r.getMessage() for r in records)
    assert "GET https://api.test/items" in text
    assert "hunter2" not in text
    assert "secret" not in text
