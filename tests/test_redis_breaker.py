"""RedisCircuitBreaker: one breaker for a fleet; failures anywhere trip it, probes are shared, transitions once."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import redis

from asyncretry import (
    BreakerState,
    BreakerStateChanged,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    ConfigurationError,
    Event,
    EventBus,
)
from asyncretry._primitives._shared import RemoteBreaker
from asyncretry.redis import RedisCircuitBreaker
from conftest_redis import RedisServer
from conftest_redis import anyio_backend as anyio_backend

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

QUICK = CircuitBreakerConfig(consecutive_failures=4, failure_ratio=None, break_duration=0.1)


@asynccontextmanager
async def two_processes(
    server: RedisServer, prefix: str, config: CircuitBreakerConfig = QUICK, **options: object
) -> AsyncIterator[tuple[RedisCircuitBreaker, RedisCircuitBreaker]]:
    """Two breakers with one name on two clients: two processes, as far as Redis can tell."""
    async with (
        server.backend(prefix) as one,
        server.backend(prefix) as two,
    ):
        yield (
            RedisCircuitBreaker(one, config, name="api", **options),  # type: ignore[arg-type]
            RedisCircuitBreaker(two, config, name="api", **options),  # type: ignore[arg-type]
        )


async def fail(breaker: RedisCircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        probe = await breaker.acquire()
        await breaker.record(success=False, probe=probe)


@pytest.mark.anyio
async def test_failures_in_two_processes_trip_one_circuit(redis_server: RedisServer, prefix: str) -> None:
    """Two failures here and two there make the four in a row that open the circuit for both."""
    async with two_processes(redis_server, prefix) as (a, b):
        await fail(a, 2)
        await fail(b, 2)
        with pytest.raises(CircuitOpenError, match="open") as caught:
            await a.acquire()
        assert 0 < caught.value.retry_after <= 0.1
        assert b.statistics().state is BreakerState.OPEN
        assert a.statistics().rejected == 1


@pytest.mark.anyio
async def test_the_failure_ratio_counts_the_whole_fleet(redis_server: RedisServer, prefix: str) -> None:
    """With minimum_throughput 4 and ratio 0.5, two successes in one process and two failures in the other trip it."""
    config = CircuitBreakerConfig(failure_ratio=0.5, minimum_throughput=4, sampling_duration=10)
    async with two_processes(redis_server, prefix, config) as (a, b):
        for _ in range(2):
            await a.record(success=True, probe=await a.acquire())
        await fail(b)
        assert b.statistics().state is BreakerState.CLOSED
        await fail(b)
        stats = b.statistics()
        assert stats.state is BreakerState.OPEN
        assert (stats.failures, stats.successes) == (2, 2)  # the fleet's window, as CircuitBreaker keeps it


@pytest.mark.anyio
async def test_half_open_admits_one_probe_in_the_whole_fleet(redis_server: RedisServer, prefix: str) -> None:
    """After the break one process gets the probe, the other is rejected; the probe's success closes it for both."""
    async with two_processes(redis_server, prefix) as (a, b):
        await fail(a, 4)
        await anyio.sleep(0.12)
        assert a.state is BreakerState.HALF_OPEN  # extrapolated from the last round trip, without one
        assert await a.acquire() == 1  # the fleet's first half-open period
        with pytest.raises(CircuitOpenError, match="half-open"):
            await b.acquire()
        await a.record(success=True, probe=1)
        assert await b.acquire() == 0
        assert b.statistics().state is BreakerState.CLOSED


@pytest.mark.anyio
async def test_a_failed_probe_reopens_with_a_longer_break(redis_server: RedisServer, prefix: str) -> None:
    """A failing probe opens the circuit again for break_duration * multiplier."""
    config = CircuitBreakerConfig(consecutive_failures=1, failure_ratio=None, break_duration=0.1,
                                  break_duration_multiplier=3)
    async with two_processes(redis_server, prefix, config) as (a, b):
        await fail(a)
        await anyio.sleep(0.11)
        await fail(b)  # the probe
        stats = a.statistics()  # a's view is stale: it has not made a round trip since
        with pytest.raises(CircuitOpenError) as caught:
            await a.acquire()
        assert caught.value.retry_after == pytest.approx(0.3, abs=0.02)
        assert a.statistics().break_duration == pytest.approx(0.3)
        assert stats.times_opened == 1
        assert a.statistics().times_opened == 2


@pytest.mark.anyio
async def test_the_fleets_probes_vote_when_failures_to_reopen_is_above_one(
    redis_server: RedisServer, prefix: str
) -> None:
    """Three probes across two processes, two to close or re-open: one failure among them is outvoted."""
    config = CircuitBreakerConfig(consecutive_failures=1, failure_ratio=None, break_duration=0.02,
                                  break_duration_multiplier=2, half_open_max_probes=3,
                                  half_open_successes_to_close=2, half_open_failures_to_reopen=2)
    async with two_processes(redis_server, prefix, config) as (a, b):
        await fail(a)
        await anyio.sleep(0.025)
        probes = [await a.acquire(), await b.acquire(), await b.acquire()]
        assert probes == [1, 1, 1]
        with pytest.raises(CircuitOpenError):
            await a.acquire()
        await a.record(success=False, probe=1)
        assert b.statistics().state is BreakerState.HALF_OPEN
        await b.record(success=True, probe=1)
        await b.record(success=True, probe=1)
        assert a.statistics().state is BreakerState.HALF_OPEN  # a's view is one round trip old
        assert await a.acquire() == 0
        assert a.statistics().state is BreakerState.CLOSED
        await fail(a)  # trip again; this time two probes fail
        await anyio.sleep(0.025)
        assert [await a.acquire(), await b.acquire()] == [2, 2]
        await a.record(success=False, probe=2)
        await b.record(success=False, probe=2)
        stats = b.statistics()
        assert stats.state is BreakerState.OPEN
        assert stats.break_duration == pytest.approx(0.04)


@pytest.mark.anyio
async def test_a_probe_of_an_earlier_half_open_period_casts_no_vote(redis_server: RedisServer, prefix: str) -> None:
    """The fleet's tickets are its half-open periods: a slow probe reported, or released, in the next
    period changes nothing there."""
    config = CircuitBreakerConfig(consecutive_failures=1, failure_ratio=None, break_duration=0.02,
                                  half_open_max_probes=4, half_open_successes_to_close=2,
                                  half_open_failures_to_reopen=2)
    async with two_processes(redis_server, prefix, config) as (a, b):
        await fail(a)
        await anyio.sleep(0.025)
        first = [await a.acquire(), await a.acquire(), await b.acquire(), await b.acquire()]
        assert first == [1, 1, 1, 1]
        await a.record(success=False, probe=1)
        await a.record(success=False, probe=1)  # re-opened; b's two probes still run
        await anyio.sleep(0.025)
        failed, running = await a.acquire(), await a.acquire()
        assert failed == running == 2
        await a.record(success=False, probe=failed)
        b.release(first[2])  # cancelled late: travels with b's next round trip and frees nothing
        await b.record(success=False, probe=first[3])  # late, and ignored
        stats = b.statistics()
        assert (stats.state, stats.probes_in_flight) == (BreakerState.HALF_OPEN, 1)
        await a.record(success=True, probe=running)
        await b.record(success=True, probe=await b.acquire())
        assert b.statistics().state is BreakerState.CLOSED


@pytest.mark.anyio
async def test_an_abandoned_probe_slot_is_freed_by_release_or_by_its_lease(
    redis_server: RedisServer, prefix: str
) -> None:
    """A cancelled probe is handed back with the next round trip; one never reported frees itself after probe_lease."""
    async with two_processes(redis_server, prefix, probe_lease=0.2) as (a, b):
        await fail(a, 4)
        await anyio.sleep(0.11)
        assert await a.acquire() == 1
        a.release(1)  # cancelled: deferred
        assert await a.acquire() == 1  # the release travelled with this very round trip
        with pytest.raises(CircuitOpenError):
            await b.acquire()
        await anyio.sleep(0.21)  # a "died" holding the probe
        assert await b.acquire() == 1


@pytest.mark.anyio
async def test_isolate_and_reset_act_on_the_whole_fleet(redis_server: RedisServer, prefix: str) -> None:
    """isolate() rejects every process's calls and keeps the key until reset()."""
    async with two_processes(redis_server, prefix, key_ttl=1.0) as (a, b):
        await a.isolate()
        with pytest.raises(CircuitOpenError, match="reset by hand") as caught:
            await b.acquire()
        assert math.isinf(caught.value.retry_after)
        with redis.Redis.from_url(redis_server.url) as client:
            assert client.pttl(a.key) == -1  # no expiry while isolated
        await b.reset()
        assert await a.acquire() == 0
        with redis.Redis.from_url(redis_server.url) as client:
            assert 0 < int(client.pttl(a.key)) <= 1000


@pytest.mark.anyio
async def test_each_transition_is_announced_once_by_the_process_that_made_it(
    redis_server: RedisServer, prefix: str
) -> None:
    """closed->open by the process whose failure tripped it, open->half_open->closed by the prober."""
    seen: list[tuple[str, str, str]] = []

    def bus(label: str) -> EventBus:
        events = EventBus()

        def record(event: Event) -> None:
            if isinstance(event, BreakerStateChanged):
                seen.append((label, event.old_state, event.new_state))

        events.subscribe(record)
        return events

    async with (
        redis_server.backend(prefix) as one,
        redis_server.backend(prefix) as two,
    ):
        a = RedisCircuitBreaker(one, QUICK, name="api", events=bus("a"))
        b = RedisCircuitBreaker(two, QUICK, name="api", events=bus("b"))
        await fail(a, 3)
        await fail(b)
        await anyio.sleep(0.11)
        await a.record(success=True, probe=await a.acquire())
        await b.refresh()
    assert seen == [("b", "closed", "open"), ("a", "open", "half_open"), ("a", "half_open", "closed")]


@pytest.mark.anyio
async def test_the_breaker_is_a_remote_breaker_and_statistics_answer_from_the_last_round_trip(
    redis_server: RedisServer, prefix: str
) -> None:
    """It is a RemoteBreaker, not a CircuitBreaker; statistics() and repr cost no round trip."""
    async with redis_server.backend(prefix) as backend:
        breaker = RedisCircuitBreaker(backend, QUICK, name="sync")
        assert isinstance(breaker, RemoteBreaker)
        typed: RemoteBreaker = breaker  # and mypy checks the signatures
        assert typed is breaker
        anything: object = breaker
        assert not isinstance(anything, CircuitBreaker)
        assert not hasattr(breaker, "record_success")
        await fail(breaker, 4)
        trips = breaker.statistics().round_trips
        first = breaker.statistics().retry_after
        await anyio.sleep(0.03)
        assert breaker.statistics().retry_after == pytest.approx(first - 0.03, abs=0.015)
        assert breaker.statistics().opened_at is not None
        assert "open" in repr(breaker)
        assert breaker.statistics().round_trips == trips


def test_bad_settings_are_refused_with_the_parameter_named(redis_server: RedisServer) -> None:
    """probe_lease and key_ttl must be positive durations."""
    with pytest.raises(ValueError, match="probe_lease"):
        RedisCircuitBreaker(redis_server.url, probe_lease=0)
    with pytest.raises(ValueError, match="key_ttl"):
        RedisCircuitBreaker(redis_server.url, key_ttl=-1)
    breaker = RedisCircuitBreaker(redis_server.url)
    assert breaker.key == "asyncretry:breaker:breaker"
    asyncio.run(breaker.backend.aclose())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "value"),
    [("st", "nan"), ("st", "7"), ("st", "-1"), ("st", "1.5"), ("st", "open"), ("until", "inf"), ("s3", "x")],
)
async def test_a_corrupted_key_is_a_configuration_error_in_both_modes(
    redis_server: RedisServer, prefix: str, field: str, value: str
) -> None:
    """A breaker hash another writer corrupted (a state out of range, a field that is not a finite number)
    raises ConfigurationError naming the field from acquire, record and refresh, in both modes; never an
    IndexError or a state made up; the backend stays up, and deleting the key starts the breaker afresh."""
    async with redis_server.backend(prefix) as backend:
        made = RedisCircuitBreaker(backend, QUICK, name="api")
        await fail(made)
        await backend.client.hset(made.key, field, value)
        for on_unavailable in ("fail_open", "fail_closed"):
            breaker = RedisCircuitBreaker(backend, QUICK, name="api", on_unavailable=on_unavailable)
            with pytest.raises(ConfigurationError, match=f"corrupted circuit breaker: field {field} is {value}"):
                await breaker.acquire()
            with pytest.raises(ConfigurationError, match="corrupted"):
                await breaker.record(success=False, probe=0)
            with pytest.raises(ConfigurationError, match="corrupted"):
                await breaker.refresh()
            assert not breaker.statistics().degraded
        assert backend.up
        await backend.client.delete(made.key)
        assert await made.acquire() == 0
