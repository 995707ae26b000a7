"""A service that knows its quota: a fixed rate limit in front of the adaptive limiter.

Fifty tasks of one service call a simulated server that admits 50 requests a second from a bucket of
50 ms (2.5 requests) and throttles beyond; each call takes 10 ms. The capacity halves from 10 s to 20 s.
Virtual time, on asyncio and trio.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest

from asyncretry import Retrier, RetryPolicy
from asyncretry._simulation import Scenario, SimulatedServer, SimulatedThrottle

QUOTA = 50.0
HALVED = ((0.0, QUOTA), (10.0, QUOTA / 2), (20.0, QUOTA))
TASKS = 50
RTT = 0.01

ADAPTIVE = RetryPolicy(mode="adaptive")
KNOWN_QUOTA = RetryPolicy(mode="adaptive", rate_limit=QUOTA, rate_limit_burst=1.0)
FIXED_ONLY = RetryPolicy(rate_limit=QUOTA, rate_limit_burst=1.0)


@dataclass
class Run:
    """What the server saw: (time since the start, admitted) per request, and the retrier."""

    retrier: Retrier
    sends: list[tuple[float, bool]] = field(default_factory=list)

    def served(self, begin: float, end: float) -> int:
        return sum(ok for t, ok in self.sends if begin <= t < end)

    def throttled(self, begin: float, end: float) -> int:
        return sum(not ok for t, ok in self.sends if begin <= t < end)


async def _service(policy: RetryPolicy, duration: float) -> Run:
    """TASKS tasks calling in a closed loop through one retrier, for ``duration`` seconds."""
    start = anyio.current_time()
    scenario = Scenario(name="halved", schedule=HALVED, duration=30.0)
    server = SimulatedServer(scenario, burst=0.05, start=start)
    run = Run(Retrier(policy, name="service"))

    async def send() -> None:
        admitted = server.admit(anyio.current_time())
        run.sends.append((anyio.current_time() - start, admitted))
        await anyio.sleep(RTT)
        if not admitted:
            raise SimulatedThrottle("429")

    async def task() -> None:
        while True:
            try:
                async for attempt in run.retrier.attempts():
                    async with attempt:
                        await send()
            except SimulatedThrottle:
                pass  # the call ran out of attempts; the task calls again

    async with anyio.create_task_group() as tg:
        for _ in range(TASKS):
            tg.start_soon(task)
        await anyio.sleep(duration)
        tg.cancel_scope.cancel()
    return run


@pytest.mark.anyio
async def test_without_a_known_quota_the_first_round_trip_is_throttled() -> None:
    """The adaptive limiter limits from the first throttle on: the fifty calls that start together all go
    out, and all but the server's burst come back throttled."""
    run = await _service(ADAPTIVE, 1.0)
    assert run.throttled(0.0, RTT / 2) >= TASKS - 3  # sent at the start, before any answer


@pytest.mark.anyio
async def test_a_known_quota_with_a_burst_of_one_sends_no_request_the_server_throttles() -> None:
    """With the quota as a fixed rate limit (burst 1) in front of the adaptive limiter, the cold start no
    longer bursts: nothing is throttled while the server admits the quota, and the quota is served."""
    run = await _service(KNOWN_QUOTA, 10.0)
    assert run.throttled(0.0, 10.0) == 0
    assert run.served(0.0, 10.0) >= 0.99 * QUOTA * 10.0
    limiter = run.retrier.statistics().scopes[0].limiter
    assert limiter is not None
    assert not limiter.enabled  # no throttle: the adaptive limiter never had to limit


@pytest.mark.anyio
async def test_below_a_known_quota_the_adaptive_limiter_still_finds_the_capacity() -> None:
    """When the server admits half the quota, the fixed rate limit alone keeps sending at the quota and
    half of its requests are throttled; in front of the adaptive limiter, the limiter cuts below it and
    probes now and then: at least twenty times fewer throttles."""
    fixed = await _service(FIXED_ONLY, 20.0)
    known = await _service(KNOWN_QUOTA, 20.0)
    assert fixed.throttled(12.0, 20.0) >= 0.4 * fixed.served(12.0, 20.0)
    assert 20 * known.throttled(12.0, 20.0) <= fixed.throttled(12.0, 20.0)
    limiter = known.retrier.statistics().scopes[0].limiter
    assert limiter is not None
    assert limiter.enabled
    assert limiter.fill_rate < QUOTA
