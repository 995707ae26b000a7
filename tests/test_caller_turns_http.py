"""Callers in turn through the HTTP transports: a request's ``"caller"`` override reaches the engine, so a
light caller's request is not kept behind a heavy caller's queue at the scope's rate limit.

The async transport runs over respx mocks in virtual time on asyncio and trio; the scope's fixed rate limit
(10 requests a second, a burst of one) makes the order of the requests at the server exact.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import httpx
import pytest
import respx

from asyncretry import Retrier, RetryPolicy, TokenBucket, TurnStatistics
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryTransport

URL = "https://api.test/items"
POLICY = RetryPolicy(rate_limit=10.0, rate_limit_burst=1.0)


def _mocked() -> tuple[respx.MockRouter, list[str]]:
    seen: list[str] = []
    router = respx.MockRouter(assert_all_called=False)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["x-name"])
        return httpx.Response(200)

    router.get(URL).mock(side_effect=answer)
    return router, seen


async def _send_all(calls: list[tuple[str, str | None]]) -> list[str]:
    """Send ``calls`` (a name and a caller each) concurrently, in this order, through one client; returns the
    names in the order the server saw them."""
    router, seen = _mocked()
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), policy=POLICY)
    async with httpx.AsyncClient(transport=transport) as client:

        async def one(name: str, caller: str | None) -> None:
            extensions = {EXTENSION: {"caller": caller}} if caller is not None else {}
            response = await client.get(URL, headers={"x-name": name}, extensions=extensions)
            assert response.status_code == 200

        async with anyio.create_task_group() as tg:
            for name, caller in calls:
                tg.start_soon(one, name, caller)
                await anyio.lowlevel.checkpoint()
    return seen


@pytest.mark.anyio
async def test_the_caller_override_serves_a_light_tenant_in_turn() -> None:
    """Ten requests of tenant "heavy" then one of tenant "light": the light one is the third to be sent."""
    calls: list[tuple[str, str | None]] = [(f"heavy{k}", "heavy") for k in range(10)]
    seen = await _send_all([*calls, ("light", "light")])
    assert seen[:3] == ["heavy0", "heavy1", "light"]
    assert [name for name in seen if name != "light"] == [f"heavy{k}" for k in range(10)]


@pytest.mark.anyio
async def test_without_the_override_the_light_request_waits_behind_the_heavy_ones() -> None:
    calls: list[tuple[str, str | None]] = [(f"heavy{k}", None) for k in range(10)]
    seen = await _send_all([*calls, ("light", None)])
    assert seen[-1] == "light"


def test_the_sync_transport_takes_the_caller_override_too() -> None:
    """The sync transport's threads wait for the rate limit in their caller's turn: a request with a caller
    that waits for the scope's rate limit goes through the scope's turns."""
    router, seen = _mocked()
    bucket = TokenBucket(100.0, 1.0, tokens=0.0)  # the request waits 10 ms for its token
    transport = RetryTransport(httpx.MockTransport(router.handler), retrier=Retrier(rate_limit=bucket))
    with httpx.Client(transport=transport) as client:
        response = client.get(URL, headers={"x-name": "one"}, extensions={EXTENSION: {"caller": "tenant-a"}})
    assert response.status_code == 200
    assert seen == ["one"]
    (scope,) = transport.statistics().scopes
    assert scope.turns == TurnStatistics(name=scope.key, callers=0, waiting=0, waits=0, timeouts=0)


@pytest.mark.anyio
@pytest.mark.parametrize("caller", ["", 3])
async def test_a_bad_caller_override_is_refused_before_sending(caller: object) -> None:
    router, seen = _mocked()
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), policy=POLICY)
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises((TypeError, ValueError), match=r"\['caller'\] must be a"):
            await client.get(URL, headers={"x-name": "bad"}, extensions={EXTENSION: {"caller": caller}})
    assert seen == []
