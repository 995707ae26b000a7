"""asyncretry.otel and the adaptive limiter: its cuts, counted by the rule that decided each."""

from __future__ import annotations

import anyio
import pytest

from asyncretry import AdaptiveRateLimiter, otel
from test_otel import Telemetry, scope, scoped
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
