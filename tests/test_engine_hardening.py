"""The engine holds under hostile use: bad parts refused at construction, bounded work per new scope,
exact counters, and nothing lost to a cancellation at an awkward moment."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from asyncretry import (
    CircuitBreakerConfig,
    FixedBackoff,
    NoBackoff,
    Retrier,
    RetryPolicy,
)
from asyncretry._engine._scopes import Scope
from asyncretry.httpx import AsyncRetryTransport

pytestmark = pytest.mark.anyio


class Down(ConnectionError):
    """The server is down."""


async def down() -> None:
    raise Down("503")


@pytest.mark.parametrize("part", ["quota", "limiter", "breaker", "rate_limit", "budget"])
@pytest.mark.parametrize("value", [True, 5, "shared", 1.5])
def test_a_shared_part_that_is_not_one_is_refused_at_construction(part: str, value: object) -> None:
    """Retrier(quota=True) and the like fail when the retrier is made, naming the parameter, not at the first
    retry of an outage."""
    with pytest.raises(TypeError, match=part):
        Retrier(**{part: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "value"), [("events", "bus"), ("clock", 5), ("rng", 0.5), ("name", 3)])
def test_other_wrong_arguments_are_refused_at_construction(name: str, value: object) -> None:
    """events, clock, rng and name of the wrong kind fail at construction, naming themselves."""
    with pytest.raises(TypeError, match=name):
        Retrier(**{name: value})  # type: ignore[arg-type]


async def test_a_new_key_looks_at_a_bounded_number_of_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """At max_scopes with every scope in use, a new key looks at a few scopes, never the whole table, and
    the table stays at its bound."""
    retrier = Retrier(RetryPolicy(), max_scopes=2_000)
    for n in range(2_000):
        await retrier.call_in(f"k{n}", anyio.sleep, 0)
    looked: list[str] = []
    real = Scope.busy

    def spy(self: Scope) -> bool:
        looked.append(self.key)
        return real(self)

    monkeypatch.setattr(Scope, "busy", spy)
    for n in range(100):
        await retrier.call_in(f"new{n}", anyio.sleep, 0)
    assert len(retrier.scope_keys()) == 2_000
    assert len(looked) <= 100 * 4
    assert retrier.statistics().evicted_scopes == 100


async def test_a_retry_refused_by_the_breaker_is_not_counted_as_a_retry() -> None:
    """RetrierStatistics.retries counts the retries that began: one the breaker refused is not one."""
    policy = RetryPolicy(
        quota=False, backoff=FixedBackoff(0.1), max_attempts=10,
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=6, break_duration=30.0),
    )
    retrier = Retrier(policy)
    with pytest.raises(Down):  # the real error ends the call; why: the breaker
        await retrier.call(down)
    stats = retrier.statistics()
    assert stats.attempts == 6
    assert stats.retries == 5


class _SlowClose(httpx.AsyncByteStream):
    """A body whose close yields to the event loop without shielding (as a real connection's may)."""

    async def __aiter__(self) -> Any:
        yield b""

    async def aclose(self) -> None:
        await anyio.sleep(0.01)


async def test_a_cancellation_while_a_discarded_response_closes_loses_no_quota() -> None:
    """A 503 pays a retry, and the call is cancelled while that 503 is being closed: the quota gets the
    retry's cost back (500 of 500), because the close finishes shielded and the wait after it refunds."""
    def unavailable(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, stream=_SlowClose())

    transport = AsyncRetryTransport(httpx.MockTransport(unavailable), policy=RetryPolicy(backoff=FixedBackoff(1.0)))
    async with httpx.AsyncClient(transport=transport) as client:
        with anyio.move_on_after(0.005):
            await client.get("https://api.test/")
    (scope,) = transport.statistics().scopes
    assert scope.quota is not None
    assert scope.quota.available == 500


async def test_no_reference_cycle_is_left_by_a_finished_call() -> None:
    """A finished call (its attempts, history and outcome) is freed by reference counting alone: no cycle."""
    import gc

    retrier = Retrier(RetryPolicy(backoff=NoBackoff(), quota=False))
    await retrier.call(anyio.sleep, 0)  # warm: the scope exists
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        for _ in range(200):
            attempts = retrier.attempts()
            async for attempt in attempts:
                async with attempt:
                    pass
            with pytest.raises(Down):
                await retrier.call(down)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{found} objects were only freed by the cycle collector (gen0 count was {before})"
