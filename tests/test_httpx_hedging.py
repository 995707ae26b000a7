"""Hedged requests through the async httpx transport.

In memory (``httpx.MockTransport``, virtual time, asyncio and trio): which requests are hedged, which
response wins, that every other response is closed, and that cancelling the caller stops every send.
Against the fault server on 127.0.0.1 (real sockets): the hedge answers for a slow first send, and the
connection pool is back to its baseline afterwards, cancellation included.
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest

from asyncretry import FixedBackoff, HedgingConfig, OutcomeKind, RetryPolicy
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.httpx import AsyncRetryTransport, RetryTransport, retry_info
from conftest import fresh_app
from test_httpx_integration import assert_pool_released, orphaned, settled

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

URL = "https://api.example/items"
HEDGE = HedgingConfig(delay=0.1, budget_ratio=1.0)
POLICY = RetryPolicy(hedging=HEDGE, backoff=FixedBackoff(0.5), quota=False)


class Body(httpx.AsyncByteStream, httpx2.AsyncByteStream):
    """A response body that remembers whether it was closed (a body for httpx and for httpx2)."""

    def __init__(self, label: str, closed: list[str]) -> None:
        self.label = label
        self.closed = closed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.label.encode()

    async def aclose(self) -> None:
        self.closed.append(self.label)


class Server:
    """An in-memory server: the n-th request it receives takes ``latencies[n-1]`` seconds, answers ``statuses``."""

    def __init__(self, *latencies: float, statuses: tuple[int, ...] = ()) -> None:
        self.latencies = list(latencies)
        self.statuses = statuses
        self.received: list[tuple[str, float]] = []
        self.cancelled: list[int] = []
        self.closed: list[str] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        number = len(self.received) + 1
        self.received.append((request.method, anyio.current_time()))
        try:
            await anyio.sleep(self.latencies[number - 1])
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(number)
            raise
        status = self.statuses[number - 1] if number <= len(self.statuses) else 200
        return httpx.Response(status, stream=Body(f"#{number}", self.closed))

    def transport(self, policy: RetryPolicy = POLICY) -> AsyncRetryTransport:
        return AsyncRetryTransport(httpx.MockTransport(self.handle), policy=policy)


async def send(transport: AsyncRetryTransport, method: str = "GET", **options: Any) -> tuple[httpx.Response, float]:
    """The response and the (virtual) seconds it took, its body read."""
    began = anyio.current_time()
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.request(method, URL, **options)
        await response.aread()
    return response, anyio.current_time() - began


def approx(expected: float) -> Any:
    return pytest.approx(expected)


# ------------------------------------------------------------------------------------- in memory
@pytest.mark.anyio
async def test_a_slow_get_is_hedged_and_the_hedge_answers() -> None:
    """No answer after 0.1 s: the GET is sent again; its answer (at 0.15 s) is returned, the first send cancelled."""
    server = Server(1.0, 0.05)
    response, elapsed = await send(server.transport())
    assert (response.status_code, response.content, elapsed) == (200, b"#2", approx(0.15))
    assert server.cancelled == [1]
    info = retry_info(response)
    assert (info.attempts, info.history.hedges, info.gave_up) == (2, 1, None)
    assert [(a.number, a.kind) for a in info.history.attempts] == [(1, OutcomeKind.CANCELLED), (2, OutcomeKind.SUCCESS)]


@pytest.mark.anyio
async def test_the_losing_response_is_closed() -> None:
    """Both sends answer at 0.2 s: the response returned is open, the other one is closed."""
    server = Server(0.2, 0.1)
    async with httpx.AsyncClient(transport=server.transport()) as client:
        response = await client.send(client.build_request("GET", URL), stream=True)
        (closed,) = server.closed
        assert sorted([closed.encode(), await response.aread()]) == [b"#1", b"#2"]


@pytest.mark.anyio
async def test_a_failed_response_overlapped_by_the_first_send_is_closed() -> None:
    """The hedge gets a 503 while the first send runs on: the 503 is closed, the first send's 200 returned."""
    server = Server(0.3, 0.01, statuses=(200, 503))
    async with httpx.AsyncClient(transport=server.transport()) as client:
        response = await client.send(client.build_request("GET", URL), stream=True)
        assert server.closed == ["#2"]
        assert (response.status_code, await response.aread()) == (200, b"#1")


@pytest.mark.anyio
async def test_a_post_is_never_hedged_unless_idempotent() -> None:
    """Under a hedging policy a slow POST is sent once; with an Idempotency-Key it is hedged like a GET."""
    server = Server(1.0)
    response, elapsed = await send(server.transport(), "POST", content=b"order")
    assert (response.status_code, elapsed, len(server.received)) == (200, approx(1.0), 1)
    keyed = Server(1.0, 0.05)
    response, elapsed = await send(keyed.transport(), "POST", content=b"order", headers={"Idempotency-Key": "k1"})
    assert (response.content, elapsed, [m for m, _ in keyed.received]) == (b"#2", approx(0.15), ["POST", "POST"])


@pytest.mark.anyio
async def test_a_streamed_body_is_never_hedged() -> None:
    """A PUT whose body is a stream cannot be sent twice at once: sent once under a hedging policy."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"part"

    server = Server(1.0)
    response, elapsed = await send(server.transport(), "PUT", content=chunks())
    assert (response.status_code, elapsed, len(server.received)) == (200, approx(1.0), 1)


@pytest.mark.anyio
async def test_hedging_is_chosen_per_request() -> None:
    """{'hedge': False} opts a request out of the policy's hedging; {'hedge': HedgingConfig} opts one in."""
    server = Server(1.0)
    _, elapsed = await send(server.transport(), extensions={"asyncretry": {"hedge": False}})
    assert (elapsed, len(server.received)) == (approx(1.0), 1)
    plain = RetryPolicy(backoff=FixedBackoff(0.5), quota=False)
    opted = Server(1.0, 0.05)
    response, elapsed = await send(opted.transport(plain), extensions={"asyncretry": {"hedge": HEDGE}})
    assert (response.content, elapsed) == (b"#2", approx(0.15))
    policy = Server(1.0, 0.05)
    response, _ = await send(policy.transport(plain), extensions={"asyncretry": {"policy": POLICY}})
    assert response.content == b"#2"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "options", "error", "message"),
    [
        ("GET", {"extensions": {"asyncretry": {"hedge": True}}}, ValueError, "the policy has no hedging"),
        ("GET", {"extensions": {"asyncretry": {"hedge": "yes"}}}, TypeError, "must be True, False or a HedgingConfig"),
        ("POST", {"content": b"x", "extensions": {"asyncretry": {"hedge": HEDGE}}}, ValueError, "not idempotent"),
    ],
)
async def test_hedging_asked_for_what_cannot_be_hedged_is_an_error(
    method: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """An explicit 'hedge' the request cannot honour fails before anything is sent, saying why."""
    server = Server(0.01)
    with pytest.raises(error, match=message):
        await send(server.transport(RetryPolicy()), method, **options)
    assert server.received == []


def test_the_sync_transport_refuses_hedging() -> None:
    """The synchronous transport cannot send twice at once: a hedging policy or a per-request hedge is refused."""
    with pytest.raises(ValueError, match="hedging"):
        RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)), policy=POLICY)
    transport = RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)))
    with httpx.Client(transport=transport) as client, pytest.raises(ValueError, match="hedging"):
        client.get(URL, extensions={"asyncretry": {"hedge": HEDGE}})


@pytest.mark.anyio
async def test_cancelling_the_caller_cancels_every_send() -> None:
    """Cancelled at 0.5 s, both sends of a hedged GET are cancelled; no response is left behind."""
    server = Server(1.0, 1.0)
    transport = server.transport()
    async with httpx.AsyncClient(transport=transport) as client:
        with anyio.move_on_after(0.5):
            await client.get(URL)
    assert sorted(server.cancelled) == [1, 2]
    stats = transport.statistics()
    assert (stats.attempts, stats.hedges, stats.successes, stats.failures) == (2, 1, 0, 0)


async def tail_run(policy: RetryPolicy, requests: int = 2000) -> tuple[float, float]:
    """One client's ``requests`` GETs, one after another, against sends of which 5% take 20x longer
    (seeded): the p99 latency and the sends per request."""
    rng = random.Random(7)
    sends = 0

    async def handle(request: httpx.Request) -> httpx.Response:
        nonlocal sends
        sends += 1
        await anyio.sleep(0.2 if rng.random() < 0.05 else 0.01)
        return httpx.Response(200)

    latencies = []
    transport = AsyncRetryTransport(httpx.MockTransport(handle), policy=policy)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(requests):
            began = anyio.current_time()
            await client.get(URL)
            latencies.append(anyio.current_time() - began)
    latencies.sort()
    return latencies[math.ceil(0.99 * requests) - 1], sends / requests


@pytest.mark.anyio
async def test_hedging_cuts_the_latency_tail_for_a_few_extra_requests() -> None:
    """5% of sends 20x slower (virtual time): hedging after the p90 cuts p99 to under a third for <= 10% more sends."""
    plain_p99, plain_sends = await tail_run(RetryPolicy())
    hedged_p99, hedged_sends = await tail_run(RetryPolicy(hedging=HedgingConfig(delay=0.02, quantile=0.9)))
    assert (plain_p99, plain_sends) == (approx(0.2), 1.0)
    assert hedged_p99 <= plain_p99 / 3
    assert 1.0 < hedged_sends <= 1.10


# ------------------------------------------------------------------------------------ real server
@pytest.fixture
def app(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig(slow_delay=3.0))  # far past a quick answer, even on a loaded machine


def real_client(server: FaultServer, policy: RetryPolicy) -> tuple[httpx.AsyncClient, httpx.AsyncHTTPTransport]:
    inner = httpx.AsyncHTTPTransport()
    transport = AsyncRetryTransport(inner, policy=policy)
    return httpx.AsyncClient(transport=transport, base_url=server.url, timeout=httpx.Timeout(5.0)), inner


@pytest.mark.anyio
@pytest.mark.real_time
@pytest.mark.timeout(30)
async def test_against_a_real_server_the_hedge_answers_and_the_pool_is_released(
    server: FaultServer, app: FaultyApp
) -> None:
    """The first send is slow (3 s): the hedge after 50 ms answers; the slow send's connection is given up."""
    policy = RetryPolicy(hedging=HedgingConfig(delay=0.05, budget_ratio=1.0))
    client, inner = real_client(server, policy)
    async with client:
        response = await client.get("/items", headers={"x-request-id": "h1", "x-faults": "slow,ok"})
        assert (response.status_code, response.json()["arrival"]) == (200, 2)
        assert retry_info(response).history.hedges == 1
        assert_pool_released(inner)
        again = await client.get("/items", headers={"x-request-id": "h2"})  # the pool still serves
        assert again.status_code == 200
        assert_pool_released(inner)
    assert app.arrivals("h1") == 2


@pytest.mark.anyio
@pytest.mark.real_time
@pytest.mark.timeout(30)
async def test_against_a_real_server_cancelling_leaves_no_connection_checked_out(
    server: FaultServer, app: FaultyApp
) -> None:
    """Both sends are slow; the caller gives up after 1 s: both requests stop and the pool is back at rest."""
    policy = RetryPolicy(hedging=HedgingConfig(delay=0.05, budget_ratio=1.0))
    client, inner = real_client(server, policy)
    async with client:
        with anyio.move_on_after(1.0) as waited:
            await client.get("/items", headers={"x-request-id": "c1", "x-faults": "slow,slow"})
        assert waited.cancelled_caught
        assert_pool_released(inner)
    assert app.arrivals("c1") == 2


# -- the cancellation storm: httpcore's pool must not lose its connections to hedging


@pytest.mark.anyio
@pytest.mark.real_time
@pytest.mark.timeout(120)
async def test_a_storm_of_cancelled_hedged_calls_leaves_the_pool_serving(server: FaultServer) -> None:
    """As many callers as the pool has connections, each hedging at once and cancelled within 30 ms, 60 times
    over: no hedged send is cancelled while it waits for a connection (httpcore #1093 would keep that connection
    CONNECTING for good), so afterwards no slot is lost and the next request is served, not a PoolTimeout."""
    fresh_app(server, ServerConfig(latency=0.01, slow_rate=0.2, slow_delay=0.05))
    slots = 4
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots))
    policy = RetryPolicy(hedging=HedgingConfig(delay=0.005, budget_ratio=1.0), quota=False)
    rng = random.Random(1)
    client = httpx.AsyncClient(
        transport=AsyncRetryTransport(inner, policy=policy), base_url=server.url,
        timeout=httpx.Timeout(2.0, pool=1.0),
    )

    async def impatient() -> None:
        with anyio.move_on_after(rng.uniform(0.0, 0.03)):
            try:
                response = await client.get("/items")
                await response.aread()
            except httpx.HTTPError:  # a pool timeout in the storm itself is the storm's business
                pass

    async with client:
        for _ in range(60):
            async with anyio.create_task_group() as group:
                for _ in range(slots):
                    group.start_soon(impatient)
        await settled(inner)
        assert orphaned(inner) == []
        response = await client.get("/items")
        assert response.status_code == 200
        assert_pool_released(inner)


class _GivesUpAfterHandshake:
    """httpcore's network backend, except that the caller is cancelled the moment the first new connection is
    established, and runs before the send goes on: where a real cancellation can land between a connection's
    handshake and its first request."""

    def __init__(self, real: Any, caller: anyio.CancelScope) -> None:
        self._real = real
        self._caller = caller

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = await self._real.connect_tcp(*args, **kwargs)
        if not self._caller.cancel_called:
            self._caller.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)  # the cancelled caller runs
        return stream

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


@pytest.mark.anyio
@pytest.mark.real_time
@pytest.mark.timeout(30)
async def test_a_call_cancelled_between_a_connections_handshake_and_its_request_loses_no_slot(
    server: FaultServer,
) -> None:
    """The caller gives up just after the pool's only connection is established for its hedged send: the send
    is not cancelled before the connection has taken the request (cancelled there, a connection stays ``NEW``
    for no request and the pool never reclaims it); it is cancelled once it has, the connection is closed,
    and the next request is served, not a PoolTimeout."""
    fresh_app(server, ServerConfig(latency=0.0))
    inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1))
    policy = RetryPolicy(hedging=HedgingConfig(delay=1.0, budget_ratio=1.0), quota=False)
    client = httpx.AsyncClient(
        transport=AsyncRetryTransport(inner, policy=policy), base_url=server.url, timeout=httpx.Timeout(2.0, pool=1.0)
    )
    pool: Any = inner._pool
    real = pool._network_backend
    async with client:
        with anyio.CancelScope() as caller:
            pool._network_backend = _GivesUpAfterHandshake(real, caller)
            await client.get("/items")
        assert caller.cancelled_caught
        await settled(inner)
        assert orphaned(inner) == []
        pool._network_backend = real
        response = await client.get("/items")
        assert response.status_code == 200
        assert_pool_released(inner)
