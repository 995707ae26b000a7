"""A light client's floor: a limiter whose lowest rate is above the client's demand never holds its calls back.

A limiter per client cannot tell a light client's share from its demand: each congestion event restarts it
from what it was served, which is its own rate, and it then holds back its own calls until it climbs back.
A service that knows its steady rate sets the limiter's lowest rate above it (``min_fill_rate``; the
``"fair"`` profile's is ``fair_floor``), and whatever its throttles say, the limiter then never makes
one of its calls wait. These tests drive each profile's limiter on the event loop's virtual clock, on
asyncio and trio, with the same light client: 4 calls a second, every third answer a throttle, and then
two seconds of nothing but throttles (an outage).
"""

from __future__ import annotations

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter

DEMAND = 4.0  # the light client's calls per second
FLOOR = 2 * DEMAND
LATENCY = 0.02
PROFILES = ("asyncretry", "independent", "fair", "aws")


def _config(profile: str, floor: float | None) -> AdaptiveLimiterConfig:
    """The profile's config, with its lowest rate at ``floor`` (``None``: the profile's own)."""
    if floor is None:
        return AdaptiveLimiterConfig(profile=profile)
    if profile == "fair":
        return AdaptiveLimiterConfig(profile=profile, fair_floor=floor)
    return AdaptiveLimiterConfig(profile=profile, min_fill_rate=floor)


async def _light_client(limiter: AdaptiveRateLimiter, seconds: float) -> float:
    """Send ``DEMAND`` calls a second for ``seconds`` through ``limiter``: every third answer a throttle, and
    every answer of the last two seconds. Returns the lowest fill rate seen after a throttle."""
    lowest = float("inf")
    began = anyio.current_time()
    for k in range(round(seconds * DEMAND)):
        await anyio.sleep_until(began + k / DEMAND)
        await limiter.acquire()
        sent = anyio.current_time()
        await anyio.sleep(LATENCY)
        throttled = k % 3 == 2 or sent - began >= seconds - 2.0
        limiter.update(throttled, sent_at=sent)
        if throttled:
            lowest = min(lowest, limiter.fill_rate)
    return lowest


@pytest.mark.anyio
@pytest.mark.parametrize("profile", PROFILES)
async def test_a_floor_above_the_demand_never_makes_a_call_wait(profile: str) -> None:
    """With its lowest rate at twice the client's demand, the limiter is enabled and cut by the throttles, but
    never below the floor, and none of the client's calls waits for a token."""
    limiter = AdaptiveRateLimiter(_config(profile, FLOOR))
    lowest = await _light_client(limiter, 10.0)
    stats = limiter.statistics()
    assert stats.enabled
    assert stats.throttles > 0
    assert lowest >= FLOOR
    assert stats.waits == 0


@pytest.mark.anyio
@pytest.mark.parametrize("profile", PROFILES)
async def test_without_the_floor_the_same_throttles_hold_the_light_client_back(profile: str) -> None:
    """With the profile's own lowest rate, the same throttles cut the limiter below the client's demand and
    its calls wait: the floor is what keeps them moving."""
    limiter = AdaptiveRateLimiter(_config(profile, None))
    lowest = await _light_client(limiter, 10.0)
    assert lowest < DEMAND
    assert limiter.statistics().waits > 0
