"""Quotas servers announce spent: the retry waits for the reset, and (``hold_spent_quota``) every task does.

Through both transports of httpx and httpx2, the ``async for`` engine with an exception that carries the
response, hedging and the sync transport; in virtual time, on asyncio and trio (tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest
import respx

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    Classifier,
    EventBus,
    HedgingConfig,
    LimiterHeld,
    LimiterStatistics,
    NoBackoff,
    RateLimitTimeout,
    Retrier,
    RetryPolicy,
)
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo, RetryTransport
from asyncretry.testing import VirtualClock, fixed_random
from conftest import EventLog
from test_httpx_retry_after import Recorder  # a scripted server that notes when each request came

# Run against httpx and httpx2.
pytestmark = pytest.mark.usefixtures("client_package")

URL = "https://api.test/items"
NOW = 1_750_000_000.0  # the injected wall clock, seconds since the epoch
ADAPTIVE = RetryPolicy(mode="adaptive")  # the default profile (every one but "aws") holds on a spent quota
NO_HOLD = RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(hold_spent_quota=False))


def raised() -> RetryPolicy:
    """The engine's own classifier knows no HTTP client: a 429 raised by ``raise_for_status()`` is a throttle by
    its class (looked up in the test, which runs against httpx and httpx2)."""
    return ADAPTIVE.replace(classifier=Classifier(throttling=(httpx.HTTPStatusError,)))


def wall() -> float:
    return NOW


class Window:
    """A server with a fixed-window quota in virtual time: ``quota`` requests per ``seconds``, announced in
    every answer; the rest of a window gets ``status``. ``style``: ``"ietf"`` (``RateLimit``) or
    ``"github"`` (``X-RateLimit-*`` with the reset in epoch seconds, a spent quota answered 403)."""

    def __init__(self, quota: int, seconds: float, *, style: str = "ietf") -> None:
        self.quota, self.seconds, self.style = quota, seconds, style
        self.start = anyio.current_time()
        self.window, self.used = 0, 0
        self.answers: list[tuple[float, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        now = anyio.current_time() - self.start
        window = int(now // self.seconds)
        if window != self.window:
            self.window, self.used = window, 0
        admitted = self.used < self.quota
        self.used += admitted
        reset = (window + 1) * self.seconds - now
        left = self.quota - self.used
        if self.style == "ietf":
            headers = {"RateLimit": f'"window";r={left};t={math.ceil(reset)}'}
            status = 200 if admitted else 429
        else:
            headers = {"X-RateLimit-Remaining": str(left), "X-RateLimit-Reset": str(math.ceil(NOW + now + reset))}
            status = 200 if admitted else 403
        self.answers.append((now, status))
        return httpx.Response(status, headers=headers)

    def count(self, status: int) -> int:
        return sum(1 for _, answered in self.answers if answered == status)


def transport(handler: Callable[[httpx.Request], httpx.Response], policy: RetryPolicy = ADAPTIVE,
              **options: Any) -> AsyncRetryTransport:
    router = respx.MockRouter()
    router.route().mock(side_effect=handler)
    if "retrier" not in options:
        options.update(policy=policy, rng=fixed_random(0.5))
    return AsyncRetryTransport(httpx.MockTransport(router.async_handler), wall_clock=wall, **options)


def limiter_of(sent: AsyncRetryTransport | RetryTransport) -> LimiterStatistics:
    (scope,) = sent.statistics().scopes
    assert scope.limiter is not None
    return scope.limiter


def info(response: httpx.Response) -> RetryInfo:
    found = response.extensions[EXTENSION]
    assert isinstance(found, RetryInfo)
    return found


async def fleet(sent: AsyncRetryTransport, tasks: int, calls: int) -> list[int]:
    """``tasks`` tasks sharing one transport, ``calls`` GETs each; the statuses they ended with."""
    statuses: list[int] = []

    async def worker() -> None:
        async with httpx.AsyncClient(transport=sent) as client:
            for _ in range(calls):
                statuses.append((await client.get(URL)).status_code)

    async with anyio.create_task_group() as tg:
        for _ in range(tasks):
            tg.start_soon(worker)
    return statuses


# ------------------------------------------------------------------------------------------ a fleet of tasks
@pytest.mark.anyio
async def test_tasks_sharing_a_transport_wait_for_the_window_instead_of_collecting_429s() -> None:
    """30 calls against 10 per 10 s: the success that takes a window's last request says so (``r=0``),
    and every task waits for the reset (the hold): not one 429."""
    server = Window(10, 10.0)
    sent = transport(server, ADAPTIVE)
    statuses = await fleet(sent, tasks=10, calls=3)
    assert statuses == [200] * 30
    assert server.count(429) == 0
    assert [round(at) for at, status in server.answers if status == 200][::10] == [0, 10, 20]
    assert limiter_of(sent).holds >= 2  # the success that spent each of the first two windows held


@pytest.mark.anyio
async def test_a_success_that_takes_the_windows_last_request_holds_the_next_calls() -> None:
    """A 200 that announces ``r=0`` is returned as it is; the next call waits for the announced reset."""
    bus = EventBus()
    log = EventLog(bus)
    server = Recorder(httpx.Response(200, headers={"RateLimit": '"q";r=0;t=8'}), httpx.Response(200))
    sent = transport(server, ADAPTIVE, retrier=Retrier(ADAPTIVE, events=bus))
    async with httpx.AsyncClient(transport=sent) as client:
        first = await client.get(URL)
        assert (first.status_code, info(first).attempts) == (200, 1)
        assert (await client.get(URL)).status_code == 200
    assert server.gaps == [pytest.approx(8.0)]
    assert [(e.seconds, e.reason) for e in log.of(LimiterHeld)] == [(8.0, "HTTP 200 (quota spent)")]
    log.undo()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("policy", "headers"),
    [
        (NO_HOLD, {"RateLimit": '"q";r=0;t=8'}),
        (RetryPolicy(), {"RateLimit": '"q";r=0;t=8'}),
        (RetryPolicy.aws_adaptive(), {"RateLimit": '"q";r=0;t=8'}),
        (ADAPTIVE.replace(honour_server_delay=False), {"RateLimit": '"q";r=0;t=8'}),
        (ADAPTIVE, {"RateLimit": '"q";r=3;t=8'}),
    ],
    ids=["no-hold", "standard mode", "aws", "server delays ignored", "quota left"],
)
async def test_a_success_holds_nothing_unless_it_spent_the_quota_under_a_policy_that_holds(
    policy: RetryPolicy, headers: dict[str, str]
) -> None:
    """Successes are read only where a spent quota would hold (``RetryPolicy.holds_spent_quota``), and
    only a spent quota holds."""
    server = Recorder(httpx.Response(200, headers=headers), httpx.Response(200))
    async with httpx.AsyncClient(transport=transport(server, policy)) as client:
        await client.get(URL)
        await client.get(URL)
    assert server.gaps == [pytest.approx(0.0)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("transport_policy", "request_policy", "gap"),
    [(ADAPTIVE, NO_HOLD, 0.0), (NO_HOLD, ADAPTIVE, 8.0)],
    ids=["request opts out", "request opts in"],
)
async def test_a_requests_own_policy_decides_whether_its_success_is_read(
    transport_policy: RetryPolicy, request_policy: RetryPolicy, gap: float
) -> None:
    """A per-request policy is the request's policy here too: the next call waits only if it holds."""
    server = Recorder(httpx.Response(200, headers={"RateLimit": '"q";r=0;t=8'}), httpx.Response(200))
    async with httpx.AsyncClient(transport=transport(server, transport_policy)) as client:
        await client.get(URL, extensions={EXTENSION: {"policy": request_policy}})
        await client.get(URL)
    assert server.gaps == [pytest.approx(gap)]


@pytest.mark.anyio
async def test_a_hedge_whose_success_spends_the_quota_holds_the_scope() -> None:
    """Hedged requests go through the same reading: the hedge that answers first with ``r=0`` holds."""
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep(3.0)  # the slow first send
        return httpx.Response(200, headers={"RateLimit": '"q";r=0;t=20'})

    policy = ADAPTIVE.replace(hedging=HedgingConfig(delay=1.0, max_hedges=1, budget_ratio=1.0))
    sent = AsyncRetryTransport(httpx.MockTransport(handler), policy=policy, wall_clock=wall)  # an async handler
    async with httpx.AsyncClient(transport=sent) as client:
        assert (await client.get(URL)).status_code == 200
    assert calls == 2
    assert limiter_of(sent).holds >= 1


@pytest.mark.anyio
async def test_reading_a_successs_quota_leaves_its_body_unread() -> None:
    """The headers are read, not the body: a streamed success is still a stream for the caller."""
    chunks: list[bytes] = []

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in (b"x" * 500, b"y" * 500):
                chunks.append(chunk)
                yield chunk

    spent = {"RateLimit": '"q";r=0;t=8'}
    sent = transport(lambda request: httpx.Response(200, headers=spent, stream=Body()), ADAPTIVE)
    async with httpx.AsyncClient(transport=sent) as client, client.stream("GET", URL) as response:
        assert chunks == []
        assert await response.aread() == b"x" * 500 + b"y" * 500
    assert limiter_of(sent).holds == 1


@pytest.mark.anyio
async def test_without_the_hold_each_call_that_meets_the_spent_quota_waits_for_the_reset_alone() -> None:
    """``hold_spent_quota=False``: every task meets the spent window once (its call then waits for the
    reset): more 429s, and still every call is served."""
    server = Window(10, 10.0)
    sent = transport(server, NO_HOLD)
    statuses = await fleet(sent, tasks=10, calls=3)
    assert statuses == [200] * 30
    assert 2 < server.count(429) <= 20  # at most one per task per spent window
    assert limiter_of(sent).holds == 0


@pytest.mark.anyio
async def test_without_the_server_delays_the_same_fleet_hits_the_spent_window_again_and_again() -> None:
    """The comparison: with ``honour_server_delay=False`` nothing holds, and the spent windows answer 429s."""
    server = Window(10, 10.0)
    sent = transport(server, ADAPTIVE.replace(honour_server_delay=False))
    statuses = await fleet(sent, tasks=10, calls=3)
    assert server.count(429) > 10
    assert statuses.count(200) < 30
    assert limiter_of(sent).holds == 0


# ------------------------------------------------------------------------------------------ one call
@pytest.mark.anyio
async def test_a_github_403_with_its_quota_spent_is_a_throttle_retried_at_the_reset() -> None:
    """GitHub answers a spent quota 403 with X-RateLimit-Remaining: 0 and the reset in epoch seconds."""
    server = Recorder(
        httpx.Response(403, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 30)}),
        httpx.Response(200),
    )
    async with httpx.AsyncClient(transport=transport(server)) as client:
        response = await client.get(URL)
    assert response.status_code == 200
    assert server.gaps == [pytest.approx(30.0)]
    first = info(response).history.attempts[0]
    assert (first.kind.value, first.reason) == ("throttling", "HTTP 403 (quota spent)")


@pytest.mark.anyio
async def test_a_403_that_announces_quota_left_stays_final() -> None:
    """Only a spent quota makes a 403 a throttle: with requests left it is a refusal."""
    handler = respx.MockRouter()
    handler.route().mock(return_value=httpx.Response(
        403, headers={"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": str(int(NOW) + 30)}))
    sent = AsyncRetryTransport(httpx.MockTransport(handler.async_handler), policy=ADAPTIVE, wall_clock=wall)
    async with httpx.AsyncClient(transport=sent) as client:
        response = await client.get(URL)
    assert response.status_code == 403
    assert info(response).attempts == 1
    assert limiter_of(sent).holds == 0


@pytest.mark.anyio
async def test_a_post_is_not_sent_again_but_its_spent_quota_still_holds_the_next_call() -> None:
    """A 429 on a POST is final (not idempotent); the quota it announces spent holds the scope all the same."""
    server = Recorder(httpx.Response(429, headers={"RateLimit": '"q";r=0;t=8'}), httpx.Response(200))
    async with httpx.AsyncClient(transport=transport(server, ADAPTIVE)) as client:
        assert (await client.post(URL, content=b"x")).status_code == 429
        assert (await client.get(URL)).status_code == 200
    assert server.gaps == [pytest.approx(8.0)]


@pytest.mark.anyio
@pytest.mark.parametrize(("policy", "gap"), [(NO_HOLD, 2.0), (ADAPTIVE, 5.0)], ids=["no-hold", "default"])
async def test_retry_after_sets_the_retry_and_the_reset_sets_the_hold(policy: RetryPolicy, gap: float) -> None:
    """Both announced: the retry follows Retry-After; with the hold, its token waits for the quota's reset."""
    server = Recorder(httpx.Response(429, headers={"Retry-After": "2", "RateLimit": '"q";r=0;t=5'}),
                      httpx.Response(200))
    async with httpx.AsyncClient(transport=transport(server, policy)) as client:
        response = await client.get(URL)
    assert info(response).history.attempts[0].delay_after == pytest.approx(2.0)
    assert server.gaps == [pytest.approx(gap)]


@pytest.mark.anyio
async def test_a_reset_beyond_max_server_delay_is_cut_to_it_and_a_deadline_ends_the_call_typed() -> None:
    """An hour's reset holds for ``max_server_delay``; a call whose deadline comes first gives up at once."""
    bus = EventBus()
    log = EventLog(bus)
    spent = httpx.Response(429, headers={"RateLimit": '"hourly";r=0;t=3600'})
    policy = ADAPTIVE.replace(max_server_delay=60.0, deadline=10.0)
    sent = transport(lambda request: spent, policy, retrier=Retrier(policy, events=bus))
    async with httpx.AsyncClient(transport=sent) as client:
        response = await client.get(URL)
    assert response.status_code == 429
    assert info(response).gave_up == "server_delay"
    assert [(e.seconds, e.reason) for e in log.of(LimiterHeld)] == [(60.0, "HTTP 429")]
    assert limiter_of(sent).held == pytest.approx(60.0)
    log.undo()


@pytest.mark.anyio
async def test_with_server_delays_ignored_a_spent_quota_holds_nothing() -> None:
    spent = httpx.Response(429, headers={"RateLimit": '"q";r=0;t=5'})
    sent = transport(lambda request: spent, ADAPTIVE.replace(honour_server_delay=False, backoff=NoBackoff(),
                                                             throttling_backoff=NoBackoff()))
    async with httpx.AsyncClient(transport=sent) as client:
        assert (await client.get(URL)).status_code == 429
    assert limiter_of(sent).holds == 0


@pytest.mark.anyio
async def test_hostile_quota_headers_are_ignored_by_the_transport() -> None:
    """A value that is not a count or a time announces nothing: the 429 is retried after the backoff."""
    answers = iter([
        httpx.Response(429, headers=[(b"RateLimit", b'"q";r=\xd9\xa0;t=5'), (b"X-RateLimit-Remaining", b"-0"),
                                     (b"X-RateLimit-Reset", b"9" * 5000)]),
        httpx.Response(200),
    ])
    sent = transport(lambda request: next(answers), ADAPTIVE)
    async with httpx.AsyncClient(transport=sent) as client:
        response = await client.get(URL)
    assert response.status_code == 200
    assert limiter_of(sent).holds == 0


# ------------------------------------------------------------------------------------------ other ways in
@pytest.mark.anyio
async def test_an_exception_carrying_the_response_holds_the_scope_and_sets_the_retry() -> None:
    """``raise_for_status()`` inside ``async for``: the HTTPStatusError's response announces the spent quota."""
    retrier = Retrier(raised(), rng=fixed_random(0.5))
    request = httpx.Request("GET", URL)
    answers = iter([httpx.Response(429, headers={"RateLimit": '"q";r=0;t=4'}, request=request),
                    httpx.Response(200, request=request)])
    times: list[float] = []
    async for attempt in retrier.attempts():
        async with attempt:
            times.append(anyio.current_time())
            next(answers).raise_for_status()
    assert times[1] - times[0] == pytest.approx(4.0)
    (scope,) = retrier.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.holds == 1


@pytest.mark.anyio
@pytest.mark.parametrize(("policy_field", "holds"), [({}, 0), ({"RateLimit-Policy": '"q";q=10;w=2'}, 1)],
                         ids=["window unsaid", "2-s window"])
async def test_an_exception_carries_the_window_of_the_spent_quota(policy_field: dict[str, str], holds: int) -> None:
    """The exception's response is read like an answer: ``t=1`` holds the scope only in a window said to be
    2 s long; either way the retry waits for the reset."""
    retrier = Retrier(raised(), rng=fixed_random(0.5))
    request = httpx.Request("GET", URL)
    answer = httpx.Response(429, headers={"RateLimit": '"q";r=0;t=1', **policy_field}, request=request)
    times: list[float] = []
    async for attempt in retrier.attempts():
        async with attempt:
            times.append(anyio.current_time())
            if len(times) == 1:
                answer.raise_for_status()
    assert times[1] - times[0] == pytest.approx(1.0)
    (scope,) = retrier.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.holds == holds


@pytest.mark.anyio
async def test_a_hedged_attempt_that_announces_a_spent_quota_holds_the_scope() -> None:
    """A hedge's answer is reported through the same rule: its spent quota holds the limiter."""
    policy = raised().replace(hedging=HedgingConfig(delay=1.0, max_hedges=1, budget_ratio=1.0))
    retrier = Retrier(policy, rng=fixed_random(0.5))
    request = httpx.Request("GET", URL)
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep(3.0)  # the slow first attempt
            return "slow"
        httpx.Response(429, headers={"RateLimit": '"q";r=0;t=20'}, request=request).raise_for_status()
        return "never"

    assert await retrier.call(call) == "slow"
    (scope,) = retrier.statistics().scopes
    assert scope.limiter is not None
    assert scope.limiter.holds == 1


def test_the_sync_transport_holds_after_a_success_that_spent_the_quota() -> None:
    """Sync code reads successes the same way."""
    clock = VirtualClock(0.0)
    retrier = Retrier(ADAPTIVE, clock=clock, limiter=lambda key: AdaptiveRateLimiter(clock=clock, name=key))
    spent = httpx.Response(200, headers={"RateLimit": '"q";r=0;t=30'})
    sent = RetryTransport(httpx.MockTransport(lambda request: spent), retrier=retrier, wall_clock=wall)
    with httpx.Client(transport=sent) as client:
        assert client.get(URL).status_code == 200
    assert limiter_of(sent).held == pytest.approx(30.0)


def test_the_sync_transport_holds_and_refuses_a_call_whose_deadline_comes_before_the_reset() -> None:
    """Sync code: the hold is the same rule; a call that cannot wait that long ends with a typed error."""
    clock = VirtualClock(0.0)
    answers = iter([httpx.Response(429, headers={"RateLimit": '"q";r=0;t=30'})])
    retrier = Retrier(ADAPTIVE.replace(deadline=5.0), clock=clock,
                      limiter=lambda key: AdaptiveRateLimiter(clock=clock, name=key))
    sent = RetryTransport(httpx.MockTransport(lambda request: next(answers)), retrier=retrier, wall_clock=wall)
    with httpx.Client(transport=sent) as client:
        assert client.post(URL, content=b"x").status_code == 429  # final (not idempotent), and it holds
        assert limiter_of(sent).held == pytest.approx(30.0)
        with pytest.raises(httpx.TransportError) as caught:
            client.get(URL)
    assert isinstance(caught.value, RateLimitTimeout)
    assert (caught.value.wait, caught.value.timeout) == pytest.approx((30.0, 5.0))


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_hold_spent_quota_takes_a_bool_or_none_only(value: object) -> None:
    with pytest.raises(TypeError, match="hold_spent_quota"):
        AdaptiveLimiterConfig(hold_spent_quota=value)  # type: ignore[arg-type]


def test_every_profile_holds_but_the_sdk_exact_one() -> None:
    """``None`` (the default) is the profile's choice, and stays so when the profile is changed."""
    assert AdaptiveLimiterConfig().holds_spent_quota is True
    assert AdaptiveLimiterConfig(profile="fair").holds_spent_quota is True
    assert AdaptiveLimiterConfig(profile="independent").holds_spent_quota is True
    assert AdaptiveLimiterConfig(profile="aws").holds_spent_quota is False
    assert dataclasses.replace(AdaptiveLimiterConfig(), profile="aws").holds_spent_quota is False
    assert AdaptiveLimiterConfig(profile="aws", hold_spent_quota=True).holds_spent_quota is True
    assert AdaptiveLimiterConfig(hold_spent_quota=False).holds_spent_quota is False


@pytest.mark.anyio
async def test_the_sdk_exact_profile_retries_at_the_reset_without_holding() -> None:
    """``RetryPolicy.aws_adaptive()``: the call waits for the reset, but the limiter keeps the SDKs' behaviour."""
    server = Recorder(httpx.Response(429, headers={"RateLimit": '"q";r=0;t=8'}), httpx.Response(200))
    sent = transport(server, RetryPolicy.aws_adaptive())
    async with httpx.AsyncClient(transport=sent) as client:
        assert (await client.get(URL)).status_code == 200
    assert server.gaps == [pytest.approx(8.0)]
    assert limiter_of(sent).holds == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "hold"),
    [
        ({"RateLimit": '"q";r=0;t=1'}, None),  # within its own rounding: the reset may come at any moment
        ({"RateLimit": '"q";r=0;t=2'}, 2.0),
        ({"RateLimit": '"q";r=0;t=30'}, 30.0),
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.75"}, 0.75),
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 1)}, None),
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW * 1000) + 400)}, 0.4),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m"}, None),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms"}, 0.02),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m0s"}, 60.0),
    ],
    ids=["t=1", "t=2", "t=30", "0.75", "epoch+1", "epoch-ms", "1m", "20ms", "1m0s"],
)
async def test_a_hold_lasts_at_most_twice_the_soonest_the_quota_may_be_fresh(
    headers: dict[str, str], hold: float | None
) -> None:
    """A reset is as fine as its last digit: a whole-second ``t=1`` may come at any moment of that second,
    so it holds nothing (a hold to the announced second could cover a whole 1-s window); longer resets
    hold until the announcement. The call that met the spent quota is final (a POST): the hold is left."""
    sent = transport(lambda request: httpx.Response(429, headers=headers), ADAPTIVE)
    async with httpx.AsyncClient(transport=sent) as client:
        assert (await client.post(URL, content=b"x")).status_code == 429
    stats = limiter_of(sent)
    assert (stats.holds, stats.held) == ((0, 0.0) if hold is None else (1, pytest.approx(hold)))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "hold"),
    [
        ({"RateLimit": '"q";r=0;t=1', "RateLimit-Policy": '"q";q=10;w=2'}, 1.0),
        ({"RateLimit": '"q";r=0;t=1', "RateLimit-Policy": '"q";q=10;w=1'}, None),
        ({"RateLimit": '"q";r=0;t=1', "RateLimit-Policy": '"other";q=10;w=60'}, None),
        ({"RateLimit": "limit=100, remaining=0, reset=1", "RateLimit-Policy": "100;w=900"}, 1.0),
        ({"RateLimit": "limit=10, remaining=0, reset=1", "RateLimit-Policy": "10;w=1, 1000;w=3600"}, None),
        ({"RateLimit-Remaining": "0", "RateLimit-Reset": "1", "RateLimit-Policy": "100;w=60"}, 1.0),
        ({"RateLimit": '"q";r=0;t=40', "RateLimit-Policy": '"q";q=10;w=60'}, 30.0),
    ],
    ids=["w=2", "w=1", "another policy's", "draft-07", "draft-07 shortest 1 s", "older drafts", "max_server_delay"],
)
async def test_a_known_window_of_at_least_twice_the_rounding_holds_until_the_announcement(
    headers: dict[str, str], hold: float | None
) -> None:
    """When the server says the window (``RateLimit-Policy``'s ``w``) and a reset's rounding is at most half
    of it, passing the real reset by up to the rounding costs at most half a window: ``t=1`` holds its
    second. Windows of 1 s, and policies the field does not describe, keep the rule for an unknown window;
    ``max_server_delay`` (30 s here) still bounds the hold."""
    policy = dataclasses.replace(ADAPTIVE, max_server_delay=30.0)
    sent = transport(lambda request: httpx.Response(429, headers=headers), policy)
    async with httpx.AsyncClient(transport=sent) as client:
        assert (await client.post(URL, content=b"x")).status_code == 429
    stats = limiter_of(sent)
    assert (stats.holds, stats.held) == ((0, 0.0) if hold is None else (1, pytest.approx(hold)))
