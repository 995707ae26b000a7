"""A server that signals overload with 503: declared as throttling, it engages the adaptive limiter."""

from __future__ import annotations

import httpx
import pytest

from asyncretry import RetryPolicy
from asyncretry.httpx import HttpClassifier
from test_httpx_transport import URL, Script, retry_client, scope_stats, transport_of

OVERLOAD = HttpClassifier(throttling_statuses=frozenset({429, 503, 509}))


@pytest.mark.anyio
@pytest.mark.parametrize(("classifier", "engaged"), [(None, False), (OVERLOAD, True)])
async def test_a_503_engages_the_limiter_only_when_declared_as_throttling(
    classifier: HttpClassifier | None, engaged: bool
) -> None:
    """By default a 503 is a transient failure that leaves the limiter off; with 503 among the classifier's
    throttling statuses the same answer is a throttle that turns the default profile's limiter on."""
    script = Script(httpx.Response(200), httpx.Response(200), httpx.Response(503), httpx.Response(200))
    policy = RetryPolicy(mode="adaptive", max_attempts=1)
    async with retry_client(script, policy=policy, classifier=classifier) as client:
        for _ in range(4):
            await client.get(URL)
        stats = scope_stats(transport_of(client), "https://api.test:443").limiter
    assert stats is not None
    assert stats.enabled is engaged
    assert stats.throttles == int(engaged)
