"""The adaptive limiter behind the installed SDK handler: the SDKs' end-to-end table, and waits that never
block the event loop.

The end-to-end table (``tests/data/adaptive_end_to_end.json``, the SDKs' shared rows) runs through real
aiobotocore and botocore clients: each row is one call answered by the fake endpoint on 127.0.0.1
(``ThrottlingException`` or a success) at the row's time on the retrier's virtual clock, and after it the
client's limiter must show the row's measured rate and fill rate. The rows are 0.2 s apart, so no call
waits for a token (checked), and each call updates the limiter exactly once, as the table is driven.

The stall test runs in real time: many aiobotocore calls against an endpoint that throttles above a
rate, while a ticker task measures how late its 5 ms sleeps wake up. The limiter makes the callers wait
(checked) and the ticker never stalls (a generous bound, not a speed target). The httpx backend runs it
on asyncio and trio.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import anyio
import botocore.session
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.httpxsession import HttpxSession
from aiobotocore.session import get_session
from botocore.exceptions import ClientError

import aws_fake
from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter, ExponentialBackoff, Retrier, RetryPolicy
from asyncretry.aws import install, policy_for
from asyncretry.testing import VirtualClock
from aws_fake import Answer, FakeAws

fake_aws = aws_fake.fake_aws
fake_credentials = aws_fake.fake_credentials

pytestmark = [
    pytest.mark.real_time,
    pytest.mark.filterwarnings("ignore:aiobotocore's httpx backend now prefers httpx2:DeprecationWarning"),
]

ROWS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "adaptive_end_to_end.json").read_text(encoding="utf-8")
)["rows"]
TOLERANCE = 1e-9
KEY = {"TableName": "items", "Key": {"id": {"S": "1"}}}


def _table_retrier(clock: VirtualClock) -> tuple[Retrier, AdaptiveRateLimiter]:
    """SDK-exact adaptive mode, one attempt per call (one update per row), the limiter made at time 0."""
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile="aws"), clock=clock)
    return Retrier(RetryPolicy.aws_adaptive(max_attempts=1), clock=clock, limiter=limiter), limiter


def _check_row(limiter: AdaptiveRateLimiter, row: dict[str, Any]) -> None:
    stats = limiter.statistics()
    assert stats.measured_rate == pytest.approx(row["measured_tx_rate"], rel=0, abs=TOLERANCE), row
    assert stats.fill_rate == pytest.approx(row["fill_rate"], rel=0, abs=TOLERANCE), row
    assert stats.waits == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_limiter_table_passes_through_a_real_aiobotocore_client(
    fake_aws: tuple[str, FakeAws], anyio_backend: str
) -> None:
    """Every row of the SDKs' end-to-end table holds after a real aiobotocore call answered as the row says."""
    url, app = fake_aws
    clock = VirtualClock(0.0)
    retrier, limiter = _table_retrier(clock)
    async with get_session().create_client("dynamodb", region_name="us-east-1", endpoint_url=url) as client:
        install(client, retrier, policy=retrier.policy)
        for row in ROWS:
            clock.advance(row["timestamp"] - clock.now())
            app.play(Answer(400, "ThrottlingException") if row["throttled"] else Answer())
            if row["throttled"]:
                with pytest.raises(ClientError):
                    await client.get_item(**KEY)
            else:
                await client.get_item(**KEY)
            _check_row(limiter, row)
    assert limiter.statistics().updates == len(ROWS)


def test_the_limiter_table_passes_through_a_real_botocore_client(fake_aws: tuple[str, FakeAws]) -> None:
    """The same rows through a botocore client."""
    url, app = fake_aws
    clock = VirtualClock(0.0)
    retrier, limiter = _table_retrier(clock)
    client = botocore.session.get_session().create_client("dynamodb", region_name="us-east-1", endpoint_url=url)
    install(client, retrier, policy=retrier.policy)
    for row in ROWS:
        clock.advance(row["timestamp"] - clock.now())
        app.play(Answer(400, "ThrottlingException") if row["throttled"] else Answer())
        if row["throttled"]:
            with pytest.raises(ClientError):
                client.get_item(**KEY)
        else:
            client.get_item(**KEY)
        _check_row(limiter, row)
    client.close()


WORKERS = 16
CALLS = 6
TICK = 0.005
STALL_SHARE = 0.25
"""The most the ticker's lateness may add up to, as a share of the time the limiter made callers wait. Had
the limiter's waits blocked the loop (a ``time.sleep``, as botocore's sync adaptive mode does), the ticker
would be late by all of that time (more than this share, since the callers waited longer in total than
the run lasted); a loop that runs on is late only by the machine's own hiccups (the scheduler of a loaded
2-core machine, a garbage collection)."""
WORST_BOUND = 2.0
"""The ticker's worst single lateness allowed: generous, for a loaded machine (typically tens of ms)."""


async def test_the_limiter_makes_callers_wait_without_blocking_the_event_loop(
    fake_aws: tuple[str, FakeAws], anyio_backend: str
) -> None:
    """While the limiter makes throttled callers wait, a ticker task keeps waking within the bound
    (aiobotocore's httpx backend, on asyncio and trio)."""
    await _stalls(fake_aws, {"http_session_cls": HttpxSession})


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_limiter_does_not_block_the_event_loop_of_an_aiohttp_client(
    fake_aws: tuple[str, FakeAws], anyio_backend: str
) -> None:
    """The same with aiobotocore's default backend (aiohttp, asyncio only)."""
    await _stalls(fake_aws, {})


async def _stalls(fake_aws: tuple[str, FakeAws], backend: dict[str, Any]) -> None:
    url, app = fake_aws
    app.play()
    app.rate, app.throttled = 30.0, 0  # 30 requests per second
    config = AioConfig(retries={"mode": "adaptive"}, max_pool_connections=WORKERS, **backend)
    fast = ExponentialBackoff(initial=0.01, multiplier=2.0, max_delay=0.05, jitter="full")
    worst = late = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal worst, late
        while not done.is_set():
            before = time.perf_counter()
            await anyio.sleep(TICK)
            lateness = time.perf_counter() - before - TICK
            worst, late = max(worst, lateness), late + max(0.0, lateness)

    async def worker(client: Any) -> None:
        for _ in range(CALLS):
            with contextlib.suppress(ClientError):  # a call may run out of attempts while the limiter adapts
                await client.get_item(**KEY)

    try:
        async with get_session().create_client("dynamodb", region_name="us-east-1", endpoint_url=url,
                                               config=config) as client:
            policy = policy_for(client, limiter=AdaptiveLimiterConfig(), max_attempts=5, backoff=fast,
                                throttling_backoff=fast)
            handler = install(client, policy=policy)
            await client.get_item(**KEY)  # the client's first call loads its endpoint rules (blocking, once)
            async with anyio.create_task_group() as group:
                group.start_soon(ticker)
                with anyio.fail_after(60):
                    async with anyio.create_task_group() as workers:
                        for _ in range(WORKERS):
                            workers.start_soon(worker, client)
                done.set()
    finally:
        app.rate = None
    scope = handler.statistics().scopes[0]
    assert scope.limiter is not None
    assert app.throttled > 0
    assert scope.limiter.waits > 0, scope.limiter
    assert scope.limiter.wait_time > 1.0, scope.limiter
    assert late < STALL_SHARE * scope.limiter.wait_time, f"the ticker was late by {late:.2f} s in all"
    assert worst < WORST_BOUND, f"the event loop stalled for {worst * 1000:.0f} ms"
