"""asyncretry.otel and the adaptive limiter: its cuts, counted by the rule that decided each, and its holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx
import pytest

from asyncretry import AdaptiveRateLimiter, RetryPolicy, otel
from asyncretry._otel_meters import Meters
from asyncretry.httpx import AsyncRetryTransport
from test_otel import ORIGIN, Telemetry, scope, scoped
from test_otel import instrumentation as instrumentation
from test_otel import telemetry as telemetry

LATENCY = 0.02


@pytest.mark.anyio
async def test_each_cut_of_the_fill_rate_is_counted_by_its_rule(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """The start from the served rate raises the rate, and the growth between events is no cut even where
    it is capped by what the client sent: neither is counted. A measured congestion event and an outage cut
    the rate: each counts once, under its rule."""
    limiter = AdaptiveRateLimiter(name="api")
    start = anyio.current_time()
    for k in range(1, 251):  # 100 a second for 2.5 s, throttled at 1 s (the start) and at 2.5 s
        await anyio.sleep_until(start + k / 100 + LATENCY)
        limiter.update(k in (100, 250), sent_at=start + k / 100)
    assert telemetry.metrics()["asyncretry.limiter.cuts"] == {
        scoped(scope("api"), asyncretry__limiter__rule="restart_below_capacity"): 1
    }
    for k in range(251, 381):  # then 1.3 s of nothing but failures (a window without a success)
        await anyio.sleep_until(start + k / 100 + LATENCY)
        limiter.update(False, sent_at=start + k / 100, failed=True)
    assert telemetry.metrics()["asyncretry.limiter.cuts"] == {
        scoped(scope("api"), asyncretry__limiter__rule="restart_below_capacity"): 1,
        scoped(scope("api"), asyncretry__limiter__rule="outage"): 1,
    }


@pytest.mark.anyio
async def test_each_hold_is_counted_by_what_announced_it_and_an_observed_limiter_shows_what_is_left(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A hold that begins or grows counts once, under the reason that announced it; a shorter one changes
    nothing. The gauge of an observed limiter reads the seconds it still holds, down to 0."""
    limiter = AdaptiveRateLimiter(name="api")
    instrumentation.observe(limiter)
    assert telemetry.metrics()["asyncretry.limiter.held"] == {scoped(scope("api")): 0.0}
    limiter.hold(30.0, reason="HTTP 429")
    limiter.hold(10.0, reason="HTTP 429")  # ends sooner than the hold that runs: no hold
    await anyio.sleep(5.0)
    limiter.hold(40.0, reason="HTTP 403 (quota spent)")  # grows: a hold
    found = telemetry.metrics()
    assert found["asyncretry.limiter.holds"] == {
        scoped(scope("api"), error__type="HTTP 429"): 1,
        scoped(scope("api"), error__type="HTTP 403 (quota spent)"): 1,
    }
    assert found["asyncretry.limiter.held"] == {scoped(scope("api")): 40.0}
    await anyio.sleep(40.0)
    assert telemetry.metrics()["asyncretry.limiter.held"] == {scoped(scope("api")): 0.0}


@pytest.mark.anyio
async def test_an_observed_limiter_shows_the_pace_a_server_announced_while_it_runs(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """No pace, no reading; a pace reads its rate, the latest one announced, until it lapses a minute later."""
    limiter = AdaptiveRateLimiter(name="api")
    instrumentation.observe(limiter)
    assert "asyncretry.limiter.paced" not in telemetry.metrics()
    limiter.pace(20.0, reason="HTTP 200")
    limiter.pace(25.0, reason="HTTP 200")
    assert telemetry.metrics()["asyncretry.limiter.paced"] == {scoped(scope("api")): 25.0}
    await anyio.sleep(60.0)
    assert "asyncretry.limiter.paced" not in telemetry.metrics()


@pytest.mark.anyio
async def test_a_transport_that_meets_a_spent_quota_counts_its_hold(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Through the engine: the default policy holds the scope's limiter on the announced quota, once."""
    answers = iter([httpx.Response(429, headers={"RateLimit": '"q";r=0;t=8'}), httpx.Response(200)])
    transport = AsyncRetryTransport(httpx.MockTransport(lambda request: next(answers)),
                                    policy=RetryPolicy(mode="adaptive"))
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("https://api.example/items")).status_code == 200
    assert telemetry.metrics()["asyncretry.limiter.holds"] == {scoped(ORIGIN, error__type="HTTP 429"): 1}


def test_every_instrument_is_documented_in_the_module_and_on_the_observability_page() -> None:
    """Each instrument asyncretry registers with a meter has a line in ``asyncretry.otel``'s docstring and a
    row in docs/observability.md's table, so that neither list falls behind the code."""
    registered: list[str] = []

    class Meter:
        def __getattr__(self, kind: str) -> Callable[..., None]:
            assert kind.startswith("create_")
            return lambda name, *args, **kwargs: registered.append(name)

    Meters(SimpleNamespace(get_meter=lambda *args, **kwargs: Meter()))  # type: ignore[arg-type]
    page = (Path(__file__).parent.parent / "docs" / "observability.md").read_text()
    assert otel.__doc__ is not None
    assert {"asyncretry.retry.delay", "asyncretry.limiter.holds", "asyncretry.limiter.held"} <= set(registered)
    for name in registered:
        assert f"``{name}``" in otel.__doc__, name
        assert f"| `{name}` |" in page, name
