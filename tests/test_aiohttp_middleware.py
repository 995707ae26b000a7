"""The aiohttp middleware against real servers on 127.0.0.1 (asyncio only: aiohttp runs on asyncio).

The project's fault server resets connections, closes them without answering, answers 503 and 429
with Retry-After, answers slowly and cuts bodies short; a raw server (:mod:`rawserver`) sends what no
server should. Whatever they do, every request ends with a response (reporting what happened) or an
``aiohttp.ClientError`` carrying its history, no POST without an Idempotency-Key and no streamed upload
reaches a server twice, and no connection is left checked out of the session's pool.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
import trio

from asyncretry import (
    AttemptTimeout,
    CircuitBreakerConfig,
    CircuitOpenError,
    FixedBackoff,
    HedgingConfig,
    Retrier,
    RetryCapacityExceeded,
    RetryPolicy,
    RetryScheduled,
    TurnStatistics,
    history_of,
)
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.aiohttp import (
    AttemptTimeoutError,
    HttpClassifier,
    RetryMiddleware,
    retry_info,
)
from asyncretry.aiohttp import CircuitOpenError as AiohttpCircuitOpenError
from conftest import EventLog, fresh_app, under_load
from rawserver import STALL, RawServer, response

pytestmark = [pytest.mark.anyio, pytest.mark.real_time, pytest.mark.timeout(60)]

POLICY = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0.005), max_server_delay=0.2)


@pytest.fixture
def anyio_backend() -> str:
    """aiohttp runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def app(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig(retry_after=0.05))


def session(middleware: RetryMiddleware | None = None, **options: Any) -> aiohttp.ClientSession:
    middleware = middleware if middleware is not None else RetryMiddleware(policy=POLICY)
    return aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=10), **options)


def headers(request_id: str, faults: str | None = None, **extra: str) -> dict[str, str]:
    found = {"x-request-id": request_id, **extra}
    if faults is not None:
        found["x-faults"] = faults
    return found


# ------------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("fault", ["reset", "close", "503", "429", "500"])
async def test_idempotent_requests_survive_every_fault(server: FaultServer, app: FaultyApp, fault: str) -> None:
    """A GET and a PUT meet the fault twice, then succeed: the caller gets the 200 and its report."""
    async with session() as client:
        for method in ("GET", "PUT"):
            request_id = f"{method}-{fault}"
            async with client.request(method, server.url + "/items", headers=headers(request_id, f"{fault},{fault},ok"),
                                      data=b"payload") as resp:
                assert resp.status == 200
                assert (await resp.json())["arrival"] == 3
                info = retry_info(resp)
                assert (info.attempts, info.gave_up) == (3, None)
            assert app.arrivals(request_id) == 3


async def test_a_post_without_idempotency_key_after_a_503_is_sent_once(server: FaultServer, app: FaultyApp) -> None:
    """A POST answered 503 is the caller's answer: sent once, reported as final."""
    async with session() as client, client.post(server.url + "/orders", headers=headers("p1", "503,ok"),
                                                 data=b"order") as resp:
        assert resp.status == 503
        info = retry_info(resp)
        assert (info.attempts, info.gave_up) == (1, "not_retryable")
        assert "not idempotent" in info.history.attempts[0].reason
    assert app.arrivals("p1") == 1


async def test_a_post_reset_after_sending_is_raised_with_its_history(server: FaultServer, app: FaultyApp) -> None:
    """A POST whose connection is reset may have reached the server: the aiohttp error is raised, history attached."""
    async with session() as client:
        with pytest.raises(aiohttp.ClientError) as caught:
            await client.post(server.url + "/orders", headers=headers("p2", "reset,ok"), data=b"order")
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    assert app.arrivals("p2") == 1


async def test_a_post_with_an_idempotency_key_is_retried_identically(server: FaultServer, app: FaultyApp) -> None:
    """With an Idempotency-Key a POST is retried, the same body each time."""
    async with session() as client, client.post(server.url + "/orders", data=b"order-7",
                           headers=headers("p3", "503,reset,ok", **{"Idempotency-Key": "k7"})) as resp:
        assert resp.status == 200
        assert retry_info(resp).attempts == 3
    bodies = [r.body for r in app.received() if r.request_id == "p3"]
    assert bodies == [b"order-7"] * 3


async def test_a_streamed_upload_is_never_sent_again(server: FaultServer, app: FaultyApp) -> None:
    """A PUT whose body is an async generator is idempotent, yet sent once: a 503 is the caller's answer."""

    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"a", b"b", b"c"):
            yield part

    async with session() as client, client.put(server.url + "/blob", headers=headers("s1", "503,ok"),
                                                data=chunks()) as resp:
        assert resp.status == 503
        assert "cannot be replayed" in retry_info(resp).history.attempts[0].reason
    assert app.arrivals("s1") == 1


async def test_a_file_body_is_sent_again_whole(server: FaultServer, app: FaultyApp) -> None:
    """A PUT of a seekable file answered 503 then 200: aiohttp rewinds it, the server gets it whole twice."""
    async with session() as client, client.put(server.url + "/file", headers=headers("f1", "503,ok"),
                          data=io.BytesIO(b"file-content")) as resp:
        assert resp.status == 200
    assert [r.body for r in app.received() if r.request_id == "f1"] == [b"file-content"] * 2


async def test_a_429_with_retry_after_is_followed(server: FaultServer, app: FaultyApp) -> None:
    """A 429 with Retry-After: the retry waits what the server asked (capped by max_server_delay)."""
    async with session() as client, client.get(server.url + "/t", headers=headers("r1", "429,ok")) as resp:
        assert resp.status == 200
        info = retry_info(resp)
        assert info.history.attempts[0].delay_after == pytest.approx(0.2)  # Retry-After: 1, capped


async def test_a_truncated_body_is_retried_with_read_body(server: FaultServer, app: FaultyApp) -> None:
    """Without read_body a body cut short is the caller's ClientPayloadError; with it, it is retried."""
    async with session() as client:
        async with client.get(server.url + "/cut", headers=headers("c1", "truncate,ok")) as resp:
            with pytest.raises(aiohttp.ClientPayloadError):
                await resp.read()
        middleware = RetryMiddleware(policy=POLICY)
        async with client.get(server.url + "/cut", headers=headers("c2", "truncate,truncate,ok"),
                              middlewares=[middleware.options(read_body=True)]) as resp:
            assert resp.status == 200
            assert (await resp.json())["arrival"] == 3


async def test_a_slow_answer_times_out_and_only_safe_requests_are_retried(
    server: FaultServer, app: FaultyApp
) -> None:
    """attempt_timeout: a slow GET is retried; a slow POST is sent once and raised as an aiohttp timeout."""
    app.configure(slow_delay=3.0)  # far past the attempt's timeout, which a quick answer meets on a loaded machine
    middleware = RetryMiddleware(policy=POLICY.replace(attempt_timeout=1.0))
    async with session(middleware) as client:
        async with client.get(server.url + "/slow", headers=headers("t1", "slow,ok")) as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ServerTimeoutError) as caught:
            await client.post(server.url + "/slow", headers=headers("t2", "slow,ok"))
    assert isinstance(caught.value, AttemptTimeoutError)
    assert isinstance(caught.value, AttemptTimeout)
    assert history_of(caught.value) is not None
    assert app.arrivals("t2") == 1


async def test_every_failure_of_120_requests_to_a_dead_port_is_an_aiohttp_error(closed_port: int) -> None:
    """Connection refused, then the quota and the breaker refusing: `except aiohttp.ClientError` catches all,
    each with its history."""
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(0.001), breaker=CircuitBreakerConfig())
    kinds: set[str] = set()
    async with session(RetryMiddleware(policy=policy)) as client:
        for n in range(120):
            try:
                await client.get(f"http://127.0.0.1:{closed_port}/{n}")
            except aiohttp.ClientError as error:
                kinds.add(type(error).__name__)
                if history_of(error) is None and not isinstance(error, CircuitOpenError):
                    pytest.fail(f"{error!r} carries no history")
            else:
                pytest.fail("a dead port answered")
    assert "ClientConnectorError" in kinds or "ClientConnectorDNSError" in kinds
    assert kinds & {"CircuitOpenError", "RetryCapacityExceededError"}


async def test_an_open_breaker_is_an_aiohttp_error_and_a_circuit_open_error(closed_port: int) -> None:
    """The breaker's refusal is caught by `except aiohttp.ClientConnectionError` and `except CircuitOpenError`."""
    policy = RetryPolicy(max_attempts=1, breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=2))
    async with session(RetryMiddleware(policy=policy)) as client:
        for _ in range(2):
            with pytest.raises(aiohttp.ClientConnectorError):
                await client.get(f"http://127.0.0.1:{closed_port}/")
        with pytest.raises(aiohttp.ClientConnectionError) as caught:
            await client.get(f"http://127.0.0.1:{closed_port}/")
    assert isinstance(caught.value, AiohttpCircuitOpenError)
    assert isinstance(caught.value, CircuitOpenError)


async def test_a_spent_quota_ends_with_the_real_aiohttp_error(server: FaultServer, app: FaultyApp) -> None:
    """When the retry quota refuses a retry, the call ends with its last real error (the connection reset, an
    aiohttp.ClientError, never a RetryCapacityExceeded), whose history says the quota stopped it."""
    retrier = Retrier(POLICY)
    middleware = RetryMiddleware(retrier=retrier)
    async with session(middleware) as client:
        caught: list[BaseException] = []
        for n in range(200):
            try:
                async with client.get(server.url + "/q", headers=headers(f"q{n}", "reset,reset,reset,reset,ok")):
                    pass
            except aiohttp.ClientError as error:
                caught.append(error)
                history = history_of(error)
                if history is not None and history.gave_up == "quota":
                    break
    assert caught
    last = caught[-1]
    assert isinstance(last, aiohttp.ClientOSError)
    assert not isinstance(last, RetryCapacityExceeded)
    history = history_of(last)
    assert history is not None
    assert history.gave_up == "quota"


async def test_connections_are_back_to_baseline_after_1000_retried_requests(
    server: FaultServer, app: FaultyApp
) -> None:
    """1,000 GETs each answered 503 then 200, 20 at a time on a pool of 10: every retried 503 is released (a
    leak would exhaust the pool and hang), at most 10 connections ever open, none after the session closes."""
    connector = aiohttp.TCPConnector(limit=10)
    most = 0
    async with session(connector=connector) as client:
        limit = anyio.Semaphore(20)

        async def call(n: int) -> None:
            nonlocal most
            async with limit:
                async with client.get(server.url + f"/b/{n}", headers=headers(f"b{n}", "503,ok")) as resp:
                    assert resp.status == 200
                    assert retry_info(resp).attempts == 2
                    await resp.read()
                most = max(most, server.open_connections())

        with anyio.fail_after(50):
            async with anyio.create_task_group() as tg:
                for n in range(1000):
                    tg.start_soon(call, n)
    assert most <= 10
    with anyio.fail_after(5):
        while server.open_connections():
            await anyio.sleep(0.01)
    assert app.statistics().requests == 2000


# ----------------------------------------------------------------------------------- hostile servers
async def test_a_hostile_retry_after_cannot_park_the_client() -> None:
    """Retry-After of 10**30 seconds, or a date in 9999: the client waits max_server_delay, never more; with a
    deadline shorter than that, it gives up at once."""
    answers = [
        response(503, {"Retry-After": "1" + "0" * 30}),
        response(503, {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}),
        response(503, {"retry-after-ms": "9" * 5000}),
        response(200, body=b"ok"),
    ]
    with RawServer(lambda n: answers[min(n - 1, 3)]) as raw:
        async with session() as client:
            with anyio.fail_after(5):
                async with client.get(raw.url) as resp:
                    assert resp.status == 200
                    assert retry_info(resp).total_delay == pytest.approx(0.6)
    with RawServer(lambda n: answers[0]) as raw:
        async with session(RetryMiddleware(policy=POLICY.replace(deadline=0.1))) as client:
            with anyio.fail_after(1):
                async with client.get(raw.url) as resp:
                    assert resp.status == 503
                    assert retry_info(resp).gave_up == "server_delay"


async def test_an_error_code_in_the_body_is_read_and_the_body_kept() -> None:
    """A 400 whose JSON body says ThrottlingException is retried as throttling; the last one's body is still
    the caller's to read."""
    body = json.dumps({"__type": "com.amazon#ThrottlingException", "message": "slow down"}).encode()
    with RawServer(lambda n: response(400, {"Content-Type": "application/json"}, body)) as raw:
        async with session() as client, client.get(raw.url) as resp:
            assert resp.status == 400
            assert await resp.read() == body
            info = retry_info(resp)
            assert info.attempts == 5
            assert info.history.attempts[0].reason == "HTTP 400 ThrottlingException"
            assert info.history.attempts[0].kind.value == "throttling"


async def test_an_error_type_header_needs_no_body() -> None:
    """x-amzn-ErrorType names the code: a 400 with a transient code is retried, the 200 returned."""
    answers = [response(400, {"x-amzn-ErrorType": "RequestTimeout:http://internal/"}), response(200, body=b"ok")]
    with RawServer(lambda n: answers[min(n - 1, 1)]) as raw:
        async with session() as client, client.get(raw.url) as resp:
            assert resp.status == 200
            assert retry_info(resp).history.attempts[0].reason == "HTTP 400 RequestTimeout"


async def test_a_large_or_compressed_error_body_is_not_read_but_handed_on() -> None:
    """A 400 longer than max_error_body, or compressed, or of unknown length, is judged by status and headers
    alone; the caller reads the whole body."""
    big = b'{"code": "SlowDown", "pad": "' + b"x" * 100 + b'"}'
    classifier = HttpClassifier(max_error_body=64)
    for answer in (response(400, {"Content-Type": "application/json"}, big),
                   response(400, {"Content-Type": "application/json"}, big, length=False)):
        with RawServer(lambda n, answer=answer: answer) as raw:  # type: ignore[misc]
            async with session(RetryMiddleware(policy=POLICY, classifier=classifier)) as client, \
                    client.get(raw.url) as resp:
                assert resp.status == 400
                assert retry_info(resp).attempts == 1
                assert await resp.read() == big


async def test_a_stalled_error_body_is_a_timeout_never_a_short_body() -> None:
    """A 503 whose announced body never comes: each attempt waits error_body_timeout, the GET is retried, and
    the caller gets an aiohttp timeout with the history (never a short body)."""
    stalled = response(503, {"Content-Type": "application/json", "Content-Length": "100"}, b'{"co', length=False)
    with RawServer(lambda n: stalled + STALL) as raw:
        middleware = RetryMiddleware(policy=POLICY.replace(max_attempts=3), error_body_timeout=0.05)
        async with session(middleware) as client:
            with anyio.fail_after(5), pytest.raises(aiohttp.ServerTimeoutError) as caught:
                await client.get(raw.url)
        assert len(raw.requests) == 3
    history = history_of(caught.value)
    assert history is not None
    assert [a.kind.value for a in history.attempts] == ["timeout"] * 3


# ------------------------------------------------------------------------------------------ options
async def test_per_request_options(server: FaultServer, app: FaultyApp) -> None:
    """options(retry=False) sends once; options(idempotent=True) retries a POST; options(scope=...) names the
    scope; the session's middleware is shared (one retrier)."""
    middleware = RetryMiddleware(policy=POLICY)
    async with session(middleware) as client:
        async with client.get(server.url + "/o", headers=headers("o1", "503,ok"),
                              middlewares=[middleware.options(retry=False)]) as resp:
            assert (resp.status, retry_info(resp).attempts) == (503, 1)
        async with client.post(server.url + "/o", headers=headers("o2", "503,ok"),
                               middlewares=[middleware.options(idempotent=True, scope="orders")]) as resp:
            assert resp.status == 200
            assert (retry_info(resp).attempts, retry_info(resp).scope) == (2, "orders")
    assert "orders" in middleware.retrier.scope_keys()


async def test_the_caller_option_takes_turns_at_the_rate_limit(server: FaultServer, app: FaultyApp) -> None:
    """options(caller=...): of one caller's requests that wait for the scope's rate limit (4 a second, a burst
    of one), one waits at the rate limit and the other behind it, in the caller's turn; all are served."""
    middleware = RetryMiddleware(policy=POLICY.replace(rate_limit=4.0, rate_limit_burst=1.0))
    async with session(middleware) as client:

        async def one(k: int) -> None:
            async with client.get(server.url + "/c", headers=headers(f"c{k}"),
                                  middlewares=[middleware.options(caller="batch")]) as resp:
                assert resp.status == 200

        async with anyio.create_task_group() as tg:
            for k in range(3):
                tg.start_soon(one, k)
    (scope,) = middleware.statistics().scopes
    assert scope.turns == TurnStatistics(name=scope.key, callers=0, waiting=0, waits=1, timeouts=0)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"retries": 3}, ValueError, "unknown keys"),
        ({"idempotent": "yes"}, TypeError, r"\['idempotent'\] must be True or False, got 'yes'"),
        ({"scope": 3}, TypeError, r"\['scope'\] must be a string, got 3"),
        ({"policy": {}}, TypeError, r"\['policy'\] must be a RetryPolicy"),
        ({"hedge": True}, ValueError, "cannot hedge"),
        ({"hedge": HedgingConfig(delay=0.1)}, ValueError, "cannot hedge"),
        ({"policy": RetryPolicy(hedging=HedgingConfig(delay=0.1))}, ValueError, "cannot hedge"),
    ],
)
async def test_bad_options_are_refused_naming_them(options: dict[str, Any], error: type[Exception], match: str) -> None:
    """Each wrong per-request option is refused when the options are made, naming what is wrong."""
    with pytest.raises(error, match=match):
        RetryMiddleware().options(**options)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"policy": RetryPolicy(hedging=HedgingConfig(delay=0.1))}, ValueError, "cannot hedge"),
        ({"classifier": object()}, TypeError, "classifier must be"),
        ({"retrier": Retrier(), "policy": RetryPolicy()}, TypeError, "either retrier or policy"),
        ({"error_body_timeout": -1}, ValueError, "error_body_timeout"),
        ({"read_body": 1}, TypeError, "read_body"),
        ({"scope_key": "origin"}, TypeError, "scope_key must be callable"),
    ],
)
async def test_bad_arguments_are_refused_naming_them(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    """Each wrong argument is refused when the middleware is made, naming what is wrong (hedging included:
    an aiohttp request cannot be sent twice at once)."""
    with pytest.raises(error, match=match):
        RetryMiddleware(**kwargs)


def test_trio_is_refused_with_a_clear_error() -> None:
    """Made under trio, the middleware says that aiohttp runs on asyncio only, and what to use instead."""

    async def make() -> None:
        RetryMiddleware()

    with pytest.raises(RuntimeError, match=r"asyncio only.*asyncretry\.httpx"):
        trio.run(make)


async def test_events_name_the_request_without_its_query(server: FaultServer, app: FaultyApp) -> None:
    """A retry is an event (and a log line) naming method and URL, never the query string."""
    retrier = Retrier(POLICY)
    log = EventLog(retrier.events)
    async with session(RetryMiddleware(retrier=retrier)) as client, \
            client.get(server.url + "/e?token=secret", headers=headers("e1", "503,ok")) as resp:
        assert resp.status == 200
    scheduled = log.of(RetryScheduled)
    assert len(scheduled) == 1
    assert scheduled[0].target == f"GET {server.url}/e"
    assert scheduled[0].reason.startswith("HTTP 503")


async def test_retry_info_of_a_foreign_response_is_a_lookup_error(server: FaultServer, app: FaultyApp) -> None:
    """retry_info() of a response that did not come through the middleware raises LookupError."""
    async with aiohttp.ClientSession() as client, client.get(server.url + "/plain") as resp:
        with pytest.raises(LookupError, match="RetryMiddleware"):
            retry_info(resp)


async def test_adaptive_mode_against_a_capacity_limit(server: FaultServer, app: FaultyApp) -> None:
    """20 concurrent clients in adaptive mode against a 100 req/s server: every call ends in a response or an
    aiohttp error with its history, and the limiter turned itself on."""
    app.configure(ServerConfig(capacity=100.0, retry_after=None))
    app.reset()
    policy = RetryPolicy(mode="adaptive", max_attempts=3, max_server_delay=0.2, deadline=0.3)
    middleware = RetryMiddleware(policy=policy)
    outcomes: list[int | str] = []
    untraced: list[Exception] = []

    async def worker(client: aiohttp.ClientSession) -> None:
        begin = anyio.current_time()
        while under_load(begin, outcomes):
            try:
                async with client.get(server.url + "/cap") as resp:
                    outcomes.append(resp.status)
            except aiohttp.ClientError as error:
                outcomes.append(type(error).__name__)
                if history_of(error) is None:
                    untraced.append(error)

    async with session(middleware) as client, anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(worker, client)
    limiter = middleware.statistics().scopes[0].limiter
    assert untraced == []
    assert outcomes.count(200) > 0
    assert limiter is not None
    assert limiter.enabled


@pytest.mark.parametrize(
    ("header", "value", "delay"),
    [
        ("Retry-After", "0", 0.0),
        ("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT", 0.0),  # a date already past: at once
        ("retry-after-ms", "150", 0.15),
        ("Retry-After", "soon", 0.005),  # not a delay: the backoff
    ],
)
async def test_retry_after_in_every_form(header: str, value: str, delay: float) -> None:
    """Retry-After as seconds or an HTTP-date, retry-after-ms, and garbage (the backoff), over a real socket."""
    answers = [response(503, {header: value}), response(200, body=b"ok")]
    with RawServer(lambda n: answers[min(n - 1, 1)]) as raw:
        async with session() as client, client.get(raw.url) as resp:
            assert resp.status == 200
            assert retry_info(resp).total_delay == pytest.approx(delay)


async def test_each_retry_is_an_event_on_the_callers_span(server: FaultServer, app: FaultyApp) -> None:
    """With OpenTelemetry instrumented, the caller's span gets an asyncretry.retry event per retry (through the
    engine, as for every integration)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from asyncretry import otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        with otel.instrument(), provider.get_tracer("tests").start_as_current_span("fetch"):
            async with session() as client, client.get(server.url + "/s", headers=headers("o1", "503,ok")) as resp:
                assert resp.status == 200
    finally:
        provider.shutdown()
    (span,) = exporter.get_finished_spans()
    retries = [dict(event.attributes or {}) for event in span.events if event.name == "asyncretry.retry"]
    assert len(retries) == 1
    assert retries[0]["asyncretry.outcome"] == "transient"
