"""How a call ends: with its last real outcome once an attempt was made, with the refusal only before one.

Whatever stops the retries (the quota, the budget, the breaker, a rate limit, the deadline, the
attempts), a call that made an attempt ends with what that attempt gave: its exception, raised as
itself, or its result (an httpx response) returned; why it stopped is in the history attached
(:func:`asyncretry.history_of`, ``RetryInfo``). Only a call refused before its first attempt raises
the refusal (``CircuitOpenError``, ``RateLimitTimeout``, ``RetryCapacityExceeded`` for a first-attempt
cost). The engine, both drivers and both httpx transports follow the one rule.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from asyncretry import (
    CircuitBreakerConfig,
    CircuitOpenError,
    Classifier,
    FixedBackoff,
    NoBackoff,
    RateLimitTimeout,
    Retrier,
    RetriesExhausted,
    RetryBudgetConfig,
    RetryHistory,
    RetryPolicy,
    RetryQuotaConfig,
    attach_history,
    history_of,
)
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
from asyncretry.httpx import AsyncRetryTransport, RetryTransport, retry_info
from asyncretry.testing import VirtualClock
from conftest import fresh_app

URL = "https://api.test/items"

# One retry's worth of tokens: the first failure pays for a retry, the second finds the quota empty.
ONE_RETRY = RetryQuotaConfig(max_capacity=5, retry_cost=5, timeout_retry_cost=5, throttling_retry_cost=5)
TIGHT_BUDGET = RetryBudgetConfig(ratio=0.0, min_retries_per_second=0.1, window=10.0)
OPENS_AT_ONCE = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=30.0)

# What stops the retries, as a policy: (why, policy). Each lets the first failure be retried or not at all.
STOPS: list[tuple[str, RetryPolicy]] = [
    ("quota", RetryPolicy(quota=ONE_RETRY, backoff=NoBackoff(), max_attempts=5)),
    ("budget", RetryPolicy(quota=False, budget=TIGHT_BUDGET, backoff=NoBackoff(), max_attempts=5)),
    ("breaker", RetryPolicy(quota=False, breaker=OPENS_AT_ONCE, backoff=FixedBackoff(1.0), max_attempts=5)),
    ("deadline", RetryPolicy(quota=False, backoff=FixedBackoff(10.0), deadline=5.0, max_attempts=5)),
    ("max_attempts", RetryPolicy(quota=False, backoff=NoBackoff(), max_attempts=2)),
]
IDS = [why for why, _ in STOPS]


class Down(Exception):
    """The service is down (retryable by the default classifier through retry_if)."""


def _retryable(policy: RetryPolicy) -> RetryPolicy:
    return policy.replace(classifier=Classifier(retry_if=lambda e: isinstance(e, Down) or None))


def _failing(raised: list[BaseException]) -> Any:
    """An operation that always fails with a fresh ``Down``, kept in ``raised``."""

    async def down() -> None:
        await anyio.lowlevel.checkpoint()
        raised.append(Down("503"))
        raise raised[-1]

    return down


def _check_real(error: BaseException, raised: list[BaseException], why: str) -> None:
    assert error is raised[-1]  # the attempt's own exception object, not a wrapper
    history = history_of(error)
    assert history is not None
    assert history.gave_up == why
    assert len(history.attempts) == len(raised)


# ---------------------------------------------------------------------------------------- engine
@pytest.mark.anyio
@pytest.mark.parametrize(("why", "policy"), STOPS, ids=IDS)
async def test_the_engine_ends_with_the_real_error_whatever_stopped_it(why: str, policy: RetryPolicy) -> None:
    """Retrier.call raises the last attempt's own exception, history attached, for every reason to stop."""
    retrier = Retrier(_retryable(policy), clock=VirtualClock())
    raised: list[BaseException] = []
    down = _failing(raised)
    with pytest.raises(Down) as caught:
        await retrier.call(down)
    _check_real(caught.value, raised, why)


@pytest.mark.anyio
@pytest.mark.parametrize(("why", "policy"), STOPS, ids=IDS)
async def test_the_async_for_loop_ends_with_the_real_error(why: str, policy: RetryPolicy) -> None:
    """``async for attempt in retrier.attempts()`` ends with the last attempt's exception too."""
    retrier = Retrier(_retryable(policy), clock=VirtualClock())
    raised: list[BaseException] = []

    async def loop() -> None:
        async for attempt in retrier.attempts():
            async with attempt:
                raised.append(Down("503"))
                raise raised[-1]

    with pytest.raises(Down) as caught:
        await loop()
    _check_real(caught.value, raised, why)


@pytest.mark.parametrize(("why", "policy"), STOPS[:3] + STOPS[4:], ids=IDS[:3] + IDS[4:])
def test_the_sync_twin_ends_with_the_real_error(why: str, policy: RetryPolicy) -> None:
    """The synchronous driver (sync_call) follows the same rule (no deadline: it would sleep for real)."""
    retrier = Retrier(_retryable(policy).replace(backoff=NoBackoff()), clock=VirtualClock())
    raised: list[BaseException] = []

    def down() -> None:
        raised.append(Down("503"))
        raise raised[-1]

    with pytest.raises(Down) as caught:
        retrier.sync_call(down)
    _check_real(caught.value, raised, why)


@pytest.mark.anyio
async def test_a_result_refused_its_retry_is_retries_exhausted_saying_why() -> None:
    """A retryable result whose retry the quota refuses: the call form raises RetriesExhausted(why='quota')
    with the last result; the attempts loop simply ends with it."""
    policy = RetryPolicy(quota=ONE_RETRY, backoff=NoBackoff(), max_attempts=5,
                         classifier=Classifier(retry_if_result=lambda r: r == "busy"))
    retrier = Retrier(policy, clock=VirtualClock())

    async def busy() -> str:
        await anyio.lowlevel.checkpoint()
        return "busy"

    with pytest.raises(RetriesExhausted) as caught:
        await retrier.call(busy)
    assert (caught.value.why, caught.value.last_result) == ("quota", "busy")
    attempts = retrier.attempts()
    async for attempt in attempts:
        async with attempt:
            attempt.result = "busy"
    assert (attempts.gave_up, attempts.number) == ("quota", 1)


@pytest.mark.anyio
async def test_a_rate_limit_that_refuses_a_retry_ends_with_the_real_error() -> None:
    """A retry whose rate-limit token would come after the deadline: the real error (why: rate_limit);
    the same wait before the first attempt raises RateLimitTimeout."""
    policy = _retryable(RetryPolicy(quota=False, backoff=NoBackoff(), rate_limit=0.01, deadline=10.0))
    retrier = Retrier(policy, clock=VirtualClock())
    raised: list[BaseException] = []
    down = _failing(raised)
    with pytest.raises(Down) as caught:
        await retrier.call(down)
    _check_real(caught.value, raised, "rate_limit")
    with pytest.raises(RateLimitTimeout) as refused:
        await retrier.call(down)
    history = history_of(refused.value)
    assert history is not None
    assert (history.gave_up, history.attempts) == ("rate_limit", ())


@pytest.mark.anyio
async def test_only_a_call_refused_before_its_first_attempt_raises_the_refusal() -> None:
    """An open breaker refuses the next call before any attempt: CircuitOpenError, with an empty history."""
    retrier = Retrier(_retryable(STOPS[2][1]), clock=VirtualClock())
    down = _failing([])
    with pytest.raises(Down):
        await retrier.call(down)
    with pytest.raises(CircuitOpenError) as caught:
        await retrier.call(down)
    history = history_of(caught.value)
    assert history is not None
    assert (history.gave_up, history.attempts) == ("breaker", ())


# ------------------------------------------------------------------------------------ transports
def _answers(*answers: Any) -> Any:
    """A MockTransport handler giving ``answers`` in turn (the last repeats): a status or an exception class."""
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        answer = answers[min(len(sent), len(answers) - 1)]
        sent.append(1)
        if isinstance(answer, int):
            return httpx.Response(answer, request=request)
        raise answer("down", request=request)

    return handler


HTTP_STOPS = [(why, policy.replace(classifier=Classifier())) for why, policy in STOPS]


@pytest.mark.anyio
@pytest.mark.parametrize(("why", "policy"), HTTP_STOPS, ids=IDS)
@pytest.mark.parametrize("error", [httpx.ReadTimeout, httpx.ConnectError])
async def test_the_async_transport_raises_the_real_httpx_error(
    why: str, policy: RetryPolicy, error: type[httpx.TransportError]
) -> None:
    """A ReadTimeout or ConnectError ends the call as itself, whatever stopped the retries, history attached."""
    transport = AsyncRetryTransport(httpx.MockTransport(_answers(error)), policy=policy, clock=VirtualClock())
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(error) as caught:
            await client.get(URL)
    assert type(caught.value) is error
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == why


@pytest.mark.anyio
@pytest.mark.parametrize(("why", "policy"), HTTP_STOPS, ids=IDS)
async def test_the_async_transport_returns_the_last_response(why: str, policy: RetryPolicy) -> None:
    """A 503 ends the call as the 503 response, readable, its RetryInfo saying why the retries stopped."""
    transport = AsyncRetryTransport(httpx.MockTransport(_answers(503)), policy=policy, clock=VirtualClock())
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(URL)
    assert response.status_code == 503
    assert response.content == b""
    assert retry_info(response).gave_up == why
    assert retry_info(response).history.gave_up == why


@pytest.mark.parametrize(("why", "policy"), HTTP_STOPS[:3] + HTTP_STOPS[4:], ids=IDS[:3] + IDS[4:])
def test_the_sync_transport_follows_the_same_rule(why: str, policy: RetryPolicy) -> None:
    """RetryTransport: the real ConnectError, or the last 503, whatever stopped the retries."""
    policy = policy.replace(backoff=NoBackoff())
    failing = RetryTransport(httpx.MockTransport(_answers(httpx.ConnectError)), policy=policy, clock=VirtualClock())
    with httpx.Client(transport=failing) as client, pytest.raises(httpx.ConnectError) as caught:
        client.get(URL)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == why
    with httpx.Client(transport=RetryTransport(httpx.MockTransport(_answers(503)),
                                               policy=policy, clock=VirtualClock())) as client:
        response = client.get(URL)
    assert (response.status_code, retry_info(response).gave_up) == (503, why)


# ------------------------------------------------------------------------- a server under load
@pytest.fixture
def flaky(server: FaultServer) -> FaultyApp:
    return fresh_app(server, ServerConfig(reset_rate=0.3, error_rate=0.3, seed=11))


@pytest.mark.anyio
@pytest.mark.real_time
@pytest.mark.timeout(120)
async def test_500_concurrent_requests_with_the_quota_drained_fail_with_real_httpx_errors(
    server: FaultServer, flaky: FaultyApp
) -> None:
    """500 concurrent GETs through one client against a server resetting and 503-ing, the quota drained:
    every failure is the real httpx error (never an asyncretry one) with its history; every 503 is a response."""
    policy = RetryPolicy(quota=RetryQuotaConfig(max_capacity=50), backoff=FixedBackoff(0.001), max_attempts=3)
    transport = AsyncRetryTransport(policy=policy, limits=httpx.Limits(max_connections=50))
    failures: list[BaseException] = []
    statuses: list[int] = []
    reasons: set[str | None] = set()

    async def get(n: int) -> None:
        try:
            response = await client.get(f"/items/{n}", headers={"x-request-id": f"r{n}"})
        except Exception as error:  # what the caller of a web handler would see
            failures.append(error)
        else:
            statuses.append(response.status_code)
            reasons.add(retry_info(response).gave_up)

    client = httpx.AsyncClient(transport=transport, base_url=server.url, timeout=httpx.Timeout(60.0))
    async with client, anyio.create_task_group() as group:
        for n in range(500):
            group.start_soon(get, n)
    assert len(failures) + len(statuses) == 500
    for error in failures:
        history = history_of(error)
        assert history is not None, repr(error)
        reasons.add(history.gave_up)
    assert failures, "the server resets 30% of requests: some calls must fail"
    assert all(isinstance(error, httpx.TransportError) for error in failures)
    assert not any(type(error).__module__.startswith("asyncretry") for error in failures)
    assert "quota" in reasons  # the quota was drained: retries were refused, and the calls ended as they were
    assert set(statuses) <= {200, 503}


def test_attach_history_is_what_history_of_reads_with_a_note() -> None:
    """attach_history puts a history on an error an integration raises itself: history_of reads it, and the
    error's notes carry its one-line summary."""
    history = RetryHistory(scope="orders", attempts=(), elapsed=0.0, gave_up="not_retryable")
    error = ConnectionResetError("after the first message")
    attach_history(error, history)
    assert history_of(error) is history
    assert error.__notes__ == [history.summary()]
