"""One behavioural specification, every HTTP client: the same cases run through each integration.

Each case sends requests through one client with asyncretry in it (the httpx and httpx2 transports, async
and sync, and the aiohttp middleware) to the project's fault-injecting server on 127.0.0.1, and states what must
happen whatever the client: the same retries, the same refusals to replay, the same reading of
``Retry-After``, the same report on the response, the client's own error class (with the history) on
failure, and every connection given back. The sync httpx client runs in a worker thread; aiohttp runs on
asyncio only, so it is not paired with trio (tests/test_aiohttp_middleware.py shows trio refused).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import aiohttp
import anyio
import anyio.to_thread
import httpx
import httpx2
import pytest

import asyncretry.aiohttp
import asyncretry.httpx
import asyncretry.httpx2
from asyncretry import FixedBackoff, RetryPolicy, history_of
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.httpx import RetryInfo
from conftest import fresh_app

pytestmark = [pytest.mark.anyio, pytest.mark.real_time, pytest.mark.timeout(60)]

POLICY = RetryPolicy(max_attempts=6, backoff=FixedBackoff(0.005), max_server_delay=0.2)
TIMEOUT = 10.0


@dataclass(frozen=True)
class Answer:
    """What a client returned: the status, the body and asyncretry's report on the response."""

    status: int
    body: bytes
    info: RetryInfo


class Client(Protocol):
    """One HTTP client with asyncretry in it, driven the same way whatever the package."""

    error: type[Exception]  # the base class of the client's own errors

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | list[bytes] | None = None
    ) -> Answer:
        """Send one request (a list body is streamed, chunk by chunk) and read the whole answer."""
        ...

    async def aclose(self) -> None: ...


async def _streamed(chunks: list[bytes]) -> AsyncIterator[bytes]:
    """A body the client cannot replay: an async generator."""
    for chunk in chunks:
        yield chunk


class HttpxClient:
    """httpx's or httpx2's async client over asyncretry's transport (``package``: the module, ``integration``:
    asyncretry's integration for it)."""

    def __init__(self, policy: RetryPolicy, package: Any = httpx, integration: Any = asyncretry.httpx) -> None:
        self.error: type[Exception] = package.HTTPError
        self._integration = integration
        transport = integration.AsyncRetryTransport(package.AsyncHTTPTransport(), policy=policy)
        self._client = package.AsyncClient(transport=transport, timeout=TIMEOUT)

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | list[bytes] | None = None
    ) -> Answer:
        content = _streamed(body) if isinstance(body, list) else body
        resp = await self._client.request(method, url, headers=headers, content=content)
        return Answer(resp.status_code, await resp.aread(), self._integration.retry_info(resp))

    async def aclose(self) -> None:
        await self._client.aclose()


class SyncHttpxClient:
    """httpx's or httpx2's sync client over the sync transport, called from a worker thread so that the
    test's event loop goes on."""

    def __init__(self, policy: RetryPolicy, package: Any = httpx, integration: Any = asyncretry.httpx) -> None:
        self.error: type[Exception] = package.HTTPError
        self._integration = integration
        transport = integration.RetryTransport(package.HTTPTransport(), policy=policy)
        self._client = package.Client(transport=transport, timeout=TIMEOUT)

    def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | list[bytes] | None) -> Answer:
        content = iter(body) if isinstance(body, list) else body
        resp = self._client.request(method, url, headers=headers, content=content)
        return Answer(resp.status_code, resp.read(), self._integration.retry_info(resp))

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | list[bytes] | None = None
    ) -> Answer:
        return await anyio.to_thread.run_sync(partial(self._send, method, url, headers, body))

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._client.close)


class AiohttpClient:
    error: type[Exception] = aiohttp.ClientError

    def __init__(self, policy: RetryPolicy) -> None:
        middleware = asyncretry.aiohttp.RetryMiddleware(policy=policy)
        self._session = aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=TIMEOUT))

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | list[bytes] | None = None
    ) -> Answer:
        data = _streamed(body) if isinstance(body, list) else body
        async with self._session.request(method, url, headers=headers, data=data) as resp:
            return Answer(resp.status, await resp.read(), asyncretry.aiohttp.retry_info(resp))

    async def aclose(self) -> None:
        await self._session.close()


CLIENTS: dict[str, Callable[[RetryPolicy], Client]] = {
    "httpx": HttpxClient,
    "httpx-sync": SyncHttpxClient,
    "httpx2": partial(HttpxClient, package=httpx2, integration=asyncretry.httpx2),
    "httpx2-sync": partial(SyncHttpxClient, package=httpx2, integration=asyncretry.httpx2),
    "aiohttp": AiohttpClient,
}
Make = Callable[[RetryPolicy], AbstractAsyncContextManager[Client]]  # a client following a policy, to open
PAIRS = [(name, backend) for name in CLIENTS for backend in ("asyncio", "trio")
         if not (name == "aiohttp" and backend == "trio")]


@pytest.fixture(params=PAIRS, ids=[f"{name}-{backend}" for name, backend in PAIRS])
def pair(request: pytest.FixtureRequest) -> tuple[str, str]:
    value: tuple[str, str] = request.param
    return value


@pytest.fixture
def anyio_backend(pair: tuple[str, str]) -> str:
    return pair[1]


@pytest.fixture
def app(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig(retry_after=1.0))


@asynccontextmanager
async def _opened(kind: str, policy: RetryPolicy) -> AsyncIterator[Client]:
    """The client ``kind`` with asyncretry in it, following ``policy``, closed on leaving."""
    client = CLIENTS[kind](policy)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def make(pair: tuple[str, str]) -> Make:
    return partial(_opened, pair[0])


def headers(request_id: str, faults: str, **extra: str) -> dict[str, str]:
    return {"x-request-id": request_id, "x-faults": faults, **extra}


async def test_an_idempotent_request_survives_every_fault(
    server: FaultServer, app: FaultyApp, make: Make
) -> None:
    """A GET meeting a reset, a close, a 503, a 429 and a 500 in turn gets its 200 and a report of 6 attempts."""
    async with make(POLICY) as client:
        answer = await client.send("GET", server.url + "/items", headers("g1", "reset,close,503,429,500,ok"))
    assert answer.status == 200
    assert (answer.info.attempts, answer.info.gave_up) == (6, None)
    assert [r.fault for r in app.received()] == ["reset", "close", "503", "429", "500", "ok"]


async def test_a_post_without_an_idempotency_key_is_sent_once(
    server: FaultServer, app: FaultyApp, make: Make
) -> None:
    """A POST answered 503 is the caller's answer, reported as not retryable; the server saw it once."""
    async with make(POLICY) as client:
        answer = await client.send("POST", server.url + "/orders", headers("p1", "503,ok"), b"order")
    assert answer.status == 503
    assert (answer.info.attempts, answer.info.gave_up) == (1, "not_retryable")
    assert app.arrivals("p1") == 1


async def test_a_post_with_an_idempotency_key_is_retried_with_the_same_body(
    server: FaultServer, app: FaultyApp, make: Make
) -> None:
    """With an Idempotency-Key a POST is retried through a 503 and a reset, the same bytes each time."""
    async with make(POLICY) as client:
        answer = await client.send(
            "POST", server.url + "/orders", headers("p2", "503,reset,ok", **{"Idempotency-Key": "k2"}), b"order-2"
        )
    assert answer.status == 200
    assert answer.info.attempts == 3
    assert [r.body for r in app.received() if r.request_id == "p2"] == [b"order-2"] * 3


async def test_a_post_cut_off_is_the_clients_own_error_with_its_history(
    server: FaultServer, app: FaultyApp, make: Make
) -> None:
    """A POST whose connection is reset may have been processed: the client's error, sent once, history attached."""
    async with make(POLICY) as client:
        with pytest.raises(Exception) as caught:
            await client.send("POST", server.url + "/orders", headers("p3", "reset,ok"), b"order")
    assert isinstance(caught.value, client.error)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    assert app.arrivals("p3") == 1


async def test_a_streamed_upload_is_never_sent_again(
    server: FaultServer, app: FaultyApp, make: Make
) -> None:
    """A PUT is idempotent, but a body streamed from a generator cannot be replayed: the 503 is the answer."""
    async with make(POLICY) as client:
        answer = await client.send("PUT", server.url + "/blob", headers("s1", "503,ok"), [b"a", b"b", b"c"])
    assert answer.status == 503
    assert answer.info.attempts == 1
    assert "cannot be replayed" in (answer.info.history.attempts[0].reason or "")
    assert [r.body for r in app.received() if r.request_id == "s1"] == [b"abc"]


@pytest.mark.parametrize(("ceiling", "waited"), [(0.2, 0.2), (2.0, 1.0)])
async def test_retry_after_is_followed_up_to_the_policys_ceiling(
    server: FaultServer, app: FaultyApp, make: Make, ceiling: float, waited: float
) -> None:
    """A 429 with ``Retry-After: 1``: the retry waits what the server asked, or max_server_delay if less."""
    async with make(POLICY.replace(max_server_delay=ceiling)) as client:
        answer = await client.send("GET", server.url + "/t", headers("r1", "429,ok"))
    assert answer.status == 200
    assert answer.info.history.attempts[0].delay_after == pytest.approx(waited)


@pytest.mark.parametrize(("status", "sends"), [(500, 3), (502, 3), (503, 3), (429, 3), (400, 1), (404, 1), (501, 1)])
async def test_statuses_are_classified_alike(
    server: FaultServer, app: FaultyApp, make: Make, status: int, sends: int
) -> None:
    """Transient and throttling statuses are retried, client errors and 501 are answers: the same for every client."""
    app.configure(retry_after=None)
    async with make(POLICY.replace(max_attempts=3)) as client:
        answer = await client.send("GET", server.url + "/c", headers(f"c{status}", f"{status},{status},{status}"))
    assert answer.status == status
    assert answer.info.attempts == sends
    assert app.arrivals(f"c{status}") == sends


async def test_a_dead_port_is_the_clients_own_error_every_time(
    closed_port: int, make: Make
) -> None:
    """Nothing listens: each of 20 requests ends with the client's error, carrying every attempt."""
    async with make(POLICY.replace(max_attempts=2)) as client:
        for n in range(20):
            with pytest.raises(Exception) as caught:
                await client.send("GET", f"http://127.0.0.1:{closed_port}/{n}", headers(f"d{n}", "ok"))
            assert isinstance(caught.value, client.error)
            history = history_of(caught.value)
            assert history is not None
            assert len(history.attempts) == 2


async def test_every_connection_is_given_back(server: FaultServer, app: FaultyApp, make: Make) -> None:
    """100 GETs answered 503 then 200, 10 at a time: every discarded 503 is released; none stays open after."""
    statuses: list[int] = []
    limit = anyio.CapacityLimiter(10)
    async with make(POLICY) as client:

        async def call(n: int) -> None:
            async with limit:
                answer = await client.send("GET", server.url + f"/b/{n}", headers(f"b{n}", "503,ok"))
            statuses.append(answer.status)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for n in range(100):
                    tg.start_soon(call, n)
    assert statuses == [200] * 100
    with anyio.fail_after(5):
        while server.open_connections():
            await anyio.sleep(0.01)
