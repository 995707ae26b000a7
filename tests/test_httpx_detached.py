"""Sends that the call may cancel itself (a hedged call's, a timed call's) run in a task of their own
through httpx's pool: what they keep of the caller.

In memory (a pool transport that answers without a network), asyncio and trio.
"""

from __future__ import annotations

import contextvars

import httpx
import pytest

from asyncretry import HedgingConfig, RetryPolicy
from asyncretry.httpx import AsyncRetryTransport

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("client_package")]

CALLER = contextvars.ContextVar[str]("caller")


def answering(seen: list[str | None]) -> httpx.AsyncHTTPTransport:
    """httpx's pool transport (of the package the test runs against), answering 200 itself and noting in
    ``seen`` the caller it finds in its context."""

    class Answering(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(CALLER.get(None))
            return httpx.Response(200)

    return Answering()


@pytest.mark.parametrize("policy", [
    RetryPolicy(deadline=5.0, quota=False),
    RetryPolicy(attempt_timeout=5.0, quota=False),
    RetryPolicy(hedging=HedgingConfig(delay=5.0, budget_ratio=1.0), quota=False),
], ids=["deadline", "attempt timeout", "hedging"])
async def test_a_send_in_a_task_of_its_own_sees_the_callers_context_variables(policy: RetryPolicy) -> None:
    """A tracing span or a request id the caller set in a context variable is what the send sees, on trio
    (whose system tasks start from an empty context) as on asyncio."""
    seen: list[str | None] = []
    async with httpx.AsyncClient(transport=AsyncRetryTransport(answering(seen), policy=policy)) as client:
        token = CALLER.set("checkout")
        try:
            response = await client.get("https://api.example/items")
        finally:
            CALLER.reset(token)
    assert response.status_code == 200
    assert seen == ["checkout"]
