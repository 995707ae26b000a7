"""The httpx transports against a real uvicorn server on 127.0.0.1 that injects faults (real time, real sockets).

The server (:mod:`asyncretry._testserver`) resets connections, closes them without answering, answers
503 and 429 with Retry-After, answers slowly and cuts bodies short. Whatever it does, every call must
end with a response or a typed exception carrying its history, no POST without an Idempotency-Key may
reach it twice, and no connection may be left checked out of the client's pool.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest

from asyncretry import FixedBackoff, RetryPolicy, history_of
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, AttemptTimeoutError, RetryInfo, RetryTransport, fetch
from conftest import fresh_app, under_load

# Run against httpx and httpx2, on the real server.
pytestmark = [pytest.mark.real_time, pytest.mark.timeout(30), pytest.mark.usefixtures("client_package")]

POLICY = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0.005), max_server_delay=0.2)
TIMEOUT = 2.0  # seconds (a float: the same for httpx and httpx2)


@pytest.fixture
def app(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig())


Client = tuple[httpx.AsyncClient, httpx.AsyncHTTPTransport]


def make_client(server: FaultServer, policy: RetryPolicy = POLICY) -> Client:
    """A retrying client for the server, and the httpx transport under it (to inspect its pool)."""
    inner = httpx.AsyncHTTPTransport()
    transport = AsyncRetryTransport(inner, policy=policy)
    return httpx.AsyncClient(transport=transport, base_url=server.url, timeout=TIMEOUT), inner


def info(resp: httpx.Response) -> RetryInfo:
    value = resp.extensions[EXTENSION]
    assert isinstance(value, RetryInfo)
    return value


def assert_pool_released(inner: httpx.AsyncHTTPTransport | httpx.HTTPTransport) -> None:
    """No request is still queued in or holding a connection of httpcore's pool."""
    pool: Any = inner._pool
    assert pool._requests == []
    for connection in pool.connections:
        assert connection.is_idle() or connection.is_closed(), connection


def orphaned(inner: httpx.AsyncHTTPTransport) -> list[Any]:
    """Connections httpcore's pool holds, once no request is in it, that are neither idle nor closed: still
    connecting, or established and never used (``NEW``) for no request. Slots lost for good."""
    pool: Any = inner._pool
    assert pool._requests == []
    return [connection for connection in pool.connections if not (connection.is_idle() or connection.is_closed())]


async def settled(inner: httpx.AsyncHTTPTransport) -> None:
    """Wait (bounded) until no request is queued in the pool: abandoned sends end within the pool timeout."""
    pool: Any = inner._pool
    with anyio.fail_after(10):
        while pool._requests:
            await anyio.sleep(0.05)


def headers(request_id: str, faults: str | None = None, **extra: str) -> dict[str, str]:
    values = {"x-request-id": request_id, **extra}
    if faults is not None:
        values["x-faults"] = faults
    return values


# ------------------------------------------------------------------------------------------- safety
@pytest.mark.anyio
async def test_idempotent_requests_survive_every_fault(server: FaultServer, app: FaultyApp) -> None:
    """A GET meeting a reset, a close, a 503, a 429 and a truncated body in turn gets its 200 (via fetch)."""
    client, inner = make_client(server, POLICY.replace(max_attempts=6))
    async with client:
        resp = await fetch(client, "GET", "/items/1", headers=headers("g1", "reset,close,503,429,truncate,ok"))
        assert_pool_released(inner)
    assert resp.status_code == 200
    assert resp.json()["arrival"] == 6
    assert info(resp).attempts == 6
    assert [r.fault for r in app.received()] == ["reset", "close", "503", "429", "truncate", "ok"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "outcome"),
    [("reset", "ReadError"), ("close", "RemoteProtocolError"), ("503", 503), ("500", 500), ("429", 429)],
)
async def test_a_post_is_never_sent_twice(
    server: FaultServer, app: FaultyApp, fault: str, outcome: str | int
) -> None:
    """A POST without Idempotency-Key that reached the server is not sent again, whatever happened to it."""
    client, inner = make_client(server)
    async with client:
        if isinstance(outcome, int):
            resp = await client.post("/orders", content=b"order-1", headers=headers("p1", f"{fault},ok"))
            assert resp.status_code == outcome
            assert info(resp).gave_up == "not_retryable"
        else:
            with pytest.raises(getattr(httpx, outcome)) as caught:  # the error of the client under test
                await client.post("/orders", content=b"order-1", headers=headers("p1", f"{fault},ok"))
            history = history_of(caught.value)
            assert history is not None
            assert history.gave_up == "not_retryable"
        assert_pool_released(inner)
    assert app.arrivals("p1") == 1
    assert app.received()[0].body == b"order-1"


@pytest.mark.anyio
async def test_a_post_with_an_idempotency_key_is_retried_identically(server: FaultServer, app: FaultyApp) -> None:
    """With an Idempotency-Key the POST is retried after a reset and a 503, sending identical bodies."""
    client, _ = make_client(server)
    async with client:
        resp = await client.post(
            "/orders", content=b'{"sku": 42}', headers=headers("p2", "reset,503,ok", **{"Idempotency-Key": "k-2"})
        )
    assert resp.status_code == 200
    assert [r.body for r in app.received()] == [b'{"sku": 42}'] * 3


@pytest.mark.anyio
async def test_no_request_is_lost_under_random_faults(server: FaultServer, app: FaultyApp) -> None:
    """60 concurrent GETs and POSTs against random resets, 503s and slow answers: each ends in a response or a
    typed error with history; no POST reaches the server twice; every attempt reached it; the pool is clean."""
    app.configure(ServerConfig(reset_rate=0.15, error_rate=0.15, slow_rate=0.1, slow_delay=0.02, seed=7))
    client, inner = make_client(server)
    results: dict[str, httpx.Response | Exception] = {}

    async def call(method: str, n: int) -> None:
        request_id = f"{method}-{n}"
        try:
            results[request_id] = await client.request(
                method, f"/items/{n}", content=request_id.encode() if method == "POST" else None,
                headers=headers(request_id),
            )
        except httpx.TransportError as error:
            results[request_id] = error

    async with client:
        async with anyio.create_task_group() as tg:
            for n in range(30):
                tg.start_soon(call, "GET", n)
                tg.start_soon(call, "POST", n)
        assert_pool_released(inner)

    assert len(results) == 60
    assert app.repeated("POST") == {}
    faults = {r.fault for r in app.received()}
    assert {"reset", "503", "ok"} <= faults
    for request_id, result in results.items():
        if isinstance(result, httpx.Response):
            attempts = info(result).attempts
            if result.status_code == 200:
                assert result.json()["id"] == request_id
        else:
            history = history_of(result)
            assert history is not None, f"{request_id}: {result!r} carries no history"
            attempts = len(history.attempts)
        assert app.arrivals(request_id) == attempts, request_id
    gets = [results[f"GET-{n}"] for n in range(30)]
    assert sum(isinstance(r, httpx.Response) and r.status_code == 200 for r in gets) >= 28


# ------------------------------------------------------------------------------------------- bodies
@pytest.mark.anyio
async def test_a_truncated_body_is_the_callers_error_without_fetch(server: FaultServer, app: FaultyApp) -> None:
    """Without fetch the body is read after the transport returned: the truncation surfaces clearly, once."""
    client, inner = make_client(server)
    async with client:
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await client.get("/items/2", headers=headers("t1", "truncate,ok"))
        assert_pool_released(inner)
    assert app.arrivals("t1") == 1


@pytest.mark.anyio
async def test_read_body_retries_a_truncated_body(server: FaultServer, app: FaultyApp) -> None:
    """{"read_body": True} (what fetch sets) retries two truncated bodies and returns the whole third one."""
    client, _ = make_client(server)
    async with client:
        resp = await client.get(
            "/items/3", headers=headers("t2", "truncate,truncate,ok"), extensions={EXTENSION: {"read_body": True}}
        )
    assert resp.json() == {"id": "t2", "arrival": 3, "method": "GET", "path": "/items/3"}


# ------------------------------------------------------------------------------------- server delays
@pytest.mark.anyio
async def test_a_429_with_retry_after_is_followed(server: FaultServer, app: FaultyApp) -> None:
    """Retry-After: 1, capped by max_server_delay=0.2: the retry arrives 0.2 s later, not after the 5 ms backoff."""
    client, _ = make_client(server)
    async with client:
        resp = await client.get("/items/4", headers=headers("r1", "429,ok"))
    assert resp.status_code == 200
    first, second = app.received()
    assert second.time - first.time >= 0.19
    assert info(resp).total_delay == pytest.approx(0.2)


@pytest.mark.anyio
async def test_a_503_burst_is_ridden_out(server: FaultServer, app: FaultyApp) -> None:
    """During a 0.6 s burst of 503s, retries spaced 0.1 s apart carry 10 concurrent GETs through to 200."""
    # (the window opens at reset: long enough that a loaded machine's first sends still land in it)
    app.configure(ServerConfig(bursts=((0.0, 0.6),)))
    app.reset()
    client, inner = make_client(server, POLICY.replace(backoff=FixedBackoff(0.1), max_attempts=12))
    statuses: list[int] = []

    async def call(n: int) -> None:
        statuses.append((await client.get(f"/b/{n}", headers=headers(f"b{n}"))).status_code)

    async with client:
        async with anyio.create_task_group() as tg:
            for n in range(10):
                tg.start_soon(call, n)
        assert_pool_released(inner)
    assert statuses == [200] * 10
    assert app.statistics().errors >= 10


@pytest.mark.anyio
async def test_slow_answers_time_out_and_only_safe_requests_are_retried(server: FaultServer, app: FaultyApp) -> None:
    """A read timeout is retried for a GET; for a POST it is raised (the server may be processing it)."""
    app.configure(ServerConfig(slow_delay=0.5))
    inner = httpx.AsyncHTTPTransport()
    transport = AsyncRetryTransport(inner, policy=POLICY)
    async with httpx.AsyncClient(transport=transport, base_url=server.url, timeout=httpx.Timeout(0.1)) as client:
        resp = await client.get("/slow", headers=headers("s1", "slow,ok"))
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/slow", content=b"x", headers=headers("s2", "slow,ok"))
        assert_pool_released(inner)
    assert resp.status_code == 200
    assert app.arrivals("s1") == 2
    assert app.arrivals("s2") == 1
    assert info(resp).history.attempts[0].reason == "ReadTimeout"


@pytest.mark.anyio
@pytest.mark.parametrize("policy", [
    RetryPolicy(attempt_timeout=0.02, max_attempts=2, backoff=FixedBackoff(0.005), quota=False),
    RetryPolicy(deadline=0.03, max_attempts=2, backoff=FixedBackoff(0.005), quota=False),
], ids=["attempt timeout", "deadline"])
async def test_sends_the_call_cancels_itself_lose_no_connection_of_a_busy_pool(
    server: FaultServer, policy: RetryPolicy
) -> None:
    """Twice as many callers as the pool has connections, whose attempts time out while they wait for one,
    60 times over: no send that the call cancels itself is cancelled while it waits in httpcore's pool (there
    it would keep that connection for good), so afterwards no slot is lost and the next request is served."""
    fresh_app(server, ServerConfig(latency=0.01, slow_rate=0.2, slow_delay=0.05))
    slots = 4
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots))
    client = httpx.AsyncClient(
        transport=AsyncRetryTransport(inner, policy=policy), base_url=server.url, timeout=httpx.Timeout(2.0, pool=1.0)
    )

    async def caller() -> None:
        try:
            response = await client.get("/items")
            await response.aread()
        except httpx.HTTPError:  # timed out: the storm's business
            pass

    async with client:
        for _ in range(60):
            async with anyio.create_task_group() as group:
                for _ in range(2 * slots):
                    group.start_soon(caller)
        await settled(inner)
        assert orphaned(inner) == []
        fresh_app(server, ServerConfig())
        response = await client.get("/items", extensions={"asyncretry": {"policy": RetryPolicy()}})
        assert response.status_code == 200
        assert_pool_released(inner)


@pytest.mark.anyio
async def test_a_timed_call_ends_on_time_while_its_send_waits_for_a_connection(server: FaultServer) -> None:
    """The pool's only connection is busy for 0.5 s; a call with a 50 ms attempt timeout waits for it in the
    pool's queue: the call ends with its timeout long before that connection is free (its send goes on alone,
    not the caller), and once the slow request is answered, the pool has lost nothing."""
    app = fresh_app(server, ServerConfig(slow_delay=0.5))
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1))
    policy = RetryPolicy(attempt_timeout=0.05, max_attempts=1, quota=False)
    client = httpx.AsyncClient(
        transport=AsyncRetryTransport(inner, policy=policy), base_url=server.url, timeout=httpx.Timeout(5.0)
    )
    slow = {"asyncretry": {"policy": RetryPolicy()}}
    async with client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.get("/items", headers=headers("busy", "slow"), extensions=slow))
            with anyio.fail_after(5):
                while app.arrivals("busy") == 0:  # until the slow request holds the connection
                    await anyio.sleep(0.01)
            began = anyio.current_time()
            with pytest.raises(AttemptTimeoutError):
                await client.get("/items", headers=headers("timed"))
            assert anyio.current_time() - began < 0.4  # not held until the connection is free at 0.5 s
        await settled(inner)
        assert orphaned(inner) == []
        assert (await client.get("/items", headers=headers("after"))).status_code == 200
        assert_pool_released(inner)


@pytest.mark.anyio
async def test_adaptive_mode_against_a_capacity_limit(server: FaultServer, app: FaultyApp) -> None:
    """20 concurrent clients in adaptive mode against a 100 req/s server: every call ends typed, the pool is clean.

    The policy's deadline bounds the limiter's waits: a call that would wait too long raises RateLimitTimeout.
    """
    app.configure(ServerConfig(capacity=100.0, retry_after=None))
    app.reset()
    policy = RetryPolicy(mode="adaptive", max_attempts=3, max_server_delay=0.2, deadline=0.3)
    client, inner = make_client(server, policy)
    retrying = client._transport
    assert isinstance(retrying, AsyncRetryTransport)
    outcomes: list[int | str] = []
    untraced: list[Exception] = []

    async def worker() -> None:
        begin = anyio.current_time()
        while under_load(begin, outcomes):
            try:
                outcomes.append((await client.get("/cap")).status_code)
            except Exception as error:  # anything typed is acceptable; it must carry its history
                outcomes.append(type(error).__name__)
                if history_of(error) is None:
                    untraced.append(error)

    async with client:
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(worker)
        assert_pool_released(inner)
        limiter = retrying.statistics().scopes[0].limiter
    assert untraced == []
    assert outcomes.count(200) > 0
    assert limiter is not None
    assert limiter.enabled


# ---------------------------------------------------------------------------------------- connections
@pytest.mark.anyio
async def test_closing_the_client_leaves_no_server_connection_open(server: FaultServer, app: FaultyApp) -> None:
    """After a run of faulty requests and closing the client, the server sees no connection left open."""
    client, _ = make_client(server)
    async with client:
        for n in range(5):
            await fetch(client, "GET", f"/c/{n}", headers=headers(f"c{n}", "503,reset,truncate,ok"))
    with anyio.fail_after(2):
        while server.open_connections():
            await anyio.sleep(0.01)


def test_the_sync_transport_against_the_real_server(server: FaultServer, app: FaultyApp) -> None:
    """RetryTransport over httpx's real sync transport: a GET survives reset and 503; a POST is not repeated."""
    inner = httpx.HTTPTransport()
    transport = RetryTransport(inner, policy=RetryPolicy(max_attempts=5, backoff=FixedBackoff(0.0)))
    with httpx.Client(transport=transport, base_url=server.url, timeout=TIMEOUT) as client:
        resp = client.get("/sync", headers=headers("y1", "reset,503,ok"))
        with pytest.raises(httpx.ReadError):
            client.post("/sync", content=b"o", headers=headers("y2", "reset,ok"))
        assert_pool_released(inner)
    assert resp.status_code == 200
    assert app.arrivals("y1") == 3
    assert app.arrivals("y2") == 1


def test_the_fault_server_validates_and_reports() -> None:
    """Bad fault settings are refused naming the field; the server reports where it listens and what it saw."""
    with pytest.raises(ValueError, match="reset_rate"):
        ServerConfig(reset_rate=1.5)
    with pytest.raises(ValueError, match="script"):
        ServerConfig(script=("explode",))
    with pytest.raises(ValueError, match="capacity_schedule"):
        ServerConfig(capacity_schedule=((2.0, 10.0), (1.0, 5.0)))
    config = ServerConfig(capacity=10.0, capacity_schedule=((1.0, 50.0), (2.0, None)))
    assert [config.capacity_at(t) for t in (0.5, 1.5, 2.5)] == [10.0, 50.0, None]
    app = FaultyApp(ServerConfig(script=("503",)))
    with FaultServer(app) as running:
        assert running.url.startswith("http://127.0.0.1:")
        started = time.monotonic()
        assert httpx.get(running.url + "/x").status_code == 503
        assert httpx.get(running.url + "/x").status_code == 200
        assert time.monotonic() - started < 2
    stats = app.statistics()
    assert (stats.requests, stats.errors, stats.ok) == (2, 1, 1)
    assert "FaultServer" in repr(running)
