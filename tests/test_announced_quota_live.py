"""A real server on 127.0.0.1 with a fixed-window quota it announces: the clients hold instead of hammering it.

The project's fault server (uvicorn) admits ``quota[0]`` requests per window and announces what is left in
every answer. Through httpx and httpx2 (asyncio and trio) and aiohttp (asyncio only: aiohttp runs on
asyncio), tasks sharing one client take at most one 429 each per spent window; by default the first
answer that says the quota is spent holds the scope's limiter until the reset, unless the reset is one
whole second (the IETF field's ``t=1``), which may come at any moment of that second, in a window of less
than 2 s (``RateLimit-Policy``'s ``w``): there the answers' quota over the window paces the limiter instead.
Real time, bounded: a few seconds.
"""

from __future__ import annotations

import math

import aiohttp
import anyio
import httpx
import pytest

from asyncretry import AdaptiveLimiterConfig, RetryPolicy
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.aiohttp import RetryMiddleware
from asyncretry.httpx import AsyncRetryTransport
from conftest import fresh_app

pytestmark = [pytest.mark.anyio, pytest.mark.real_time, pytest.mark.timeout(60)]

POLICY = RetryPolicy(mode="adaptive", max_attempts=5)
NO_HOLD = POLICY.replace(limiter=AdaptiveLimiterConfig(hold_spent_quota=False))
TASKS = 5
CALLS = 12  # each: 60 calls against 20 per window, three windows at least


def windowed(server: FaultServer, style: str, seconds: float) -> FaultyApp:
    return fresh_app(server, ServerConfig(quota=(20, seconds), quota_headers=style, retry_after=None))


def throttled(app: FaultyApp) -> int:
    """The requests the server answered 429, from its records (made before it answers: no race with the
    counters it updates once an answer is sent)."""
    return sum(1 for record in app.received() if record.fault == "429")


def bound(app: FaultyApp, seconds: float) -> int:
    """The most 429s the clients may take: one per task per window the run touched."""
    return TASKS * (math.floor(app.statistics().elapsed / seconds) + 1)


@pytest.mark.usefixtures("client_package")
@pytest.mark.parametrize(
    ("style", "seconds", "calls", "policy"),
    [
        ("x-ratelimit", 0.4, CALLS, POLICY), ("x-ratelimit", 0.4, CALLS, NO_HOLD),
        ("ratelimit", 1.0, 6, POLICY), ("ratelimit", 1.0, 6, NO_HOLD), ("ratelimit", 2.0, 5, POLICY),
    ],
    ids=["0.4 s-default", "0.4 s-no-hold", "1 s-default", "1 s-no-hold", "2 s-default"],
)
async def test_httpx_tasks_sharing_a_client_take_at_most_one_429_each_per_window(
    server: FaultServer, style: str, seconds: float, calls: int, policy: RetryPolicy
) -> None:
    """60 calls against 20 per 0.4 s (the reset in seconds with a fraction: held by default), 30 against 20
    per 1 s (IETF, the reset in whole seconds: always ``t=1`` in a 1-s window, never held), 25 against 20
    per 2 s (IETF with a 2-s window: held). Where nothing holds, the spent windows answer 429s; where the
    success that takes a window's last request holds, only the requests already on their way meet one."""
    app = windowed(server, style, seconds)
    statuses: list[int] = []
    transport = AsyncRetryTransport(policy=policy)
    async with httpx.AsyncClient(transport=transport, base_url=server.url, timeout=10.0) as client:

        async def worker() -> None:
            for _ in range(calls):
                statuses.append((await client.get("/items")).status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(TASKS):
                tg.start_soon(worker)
    assert statuses == [200] * (TASKS * calls)
    held = policy is POLICY and (style == "x-ratelimit" or seconds >= 2.0)
    assert (0 if held else 1) <= throttled(app) <= bound(app, seconds)
    (scope,) = transport.statistics().scopes
    assert scope.limiter is not None
    assert (scope.limiter.holds >= 1) is held
    paced = policy is POLICY and style == "ratelimit" and seconds < 2.0  # a 1-s window in whole seconds
    assert scope.limiter.paced == (20.0 if paced else None)


class TestAiohttp:
    """The same through the aiohttp middleware (asyncio only)."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        """aiohttp runs on asyncio only."""
        return "asyncio"

    async def test_tasks_sharing_a_session_take_at_most_one_429_each_per_window(self, server: FaultServer) -> None:
        app = windowed(server, "x-ratelimit", 0.4)
        statuses: list[int] = []
        middleware = RetryMiddleware(policy=POLICY)
        async with aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=10)) as client:

            async def worker() -> None:
                for _ in range(CALLS):
                    async with client.get(server.url + "/items") as response:
                        statuses.append(response.status)

            async with anyio.create_task_group() as tg:
                for _ in range(TASKS):
                    tg.start_soon(worker)
        assert statuses == [200] * (TASKS * CALLS)
        assert 1 <= throttled(app) <= bound(app, 0.4)

    @pytest.mark.parametrize(("policy", "paced"), [(POLICY, 20.0), (NO_HOLD, None)], ids=["default", "no-hold"])
    async def test_a_1_s_window_paces_the_session(
        self, server: FaultServer, policy: RetryPolicy, paced: float | None
    ) -> None:
        """20 per 1 s (IETF, ``t=1``: never held): by default the answers' ``q=20;w=1`` paces the scope's
        limiter at 20 a second; every call is served either way."""
        app = windowed(server, "ratelimit", 1.0)
        statuses: list[int] = []
        middleware = RetryMiddleware(policy=policy)
        async with aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=10)) as client:

            async def worker() -> None:
                for _ in range(6):
                    async with client.get(server.url + "/items") as response:
                        statuses.append(response.status)

            async with anyio.create_task_group() as tg:
                for _ in range(TASKS):
                    tg.start_soon(worker)
        assert statuses == [200] * (TASKS * 6)
        assert throttled(app) <= bound(app, 1.0)
        (scope,) = middleware.statistics().scopes
        assert scope.limiter is not None
        assert scope.limiter.paced == paced

    @pytest.mark.parametrize(("policy", "holds"), [(POLICY, 1), (NO_HOLD, 0)], ids=["default", "no-hold"])
    async def test_the_success_that_spends_the_quota_holds_the_session(
        self, server: FaultServer, policy: RetryPolicy, holds: int
    ) -> None:
        """3 per 10 s (IETF, ``t=10``): the third 200 announces ``r=0``; it is returned and read as it is, and
        by default it holds the next calls (no fourth request goes out to meet a 429)."""
        fresh_app(server, ServerConfig(quota=(3, 10.0), quota_headers="ratelimit", retry_after=None))
        middleware = RetryMiddleware(policy=policy)
        async with aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=10)) as client:
            for _ in range(3):
                async with client.get(server.url + "/items") as response:
                    assert response.status == 200
                    assert b"/items" in await response.read()
        (scope,) = middleware.statistics().scopes
        assert scope.limiter is not None
        assert scope.limiter.holds == holds
        assert (scope.limiter.held > 8.0) is bool(holds)
