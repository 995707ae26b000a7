"""asyncretry.otel: scripted runs checked exactly against the SDK's in-memory metric reader and span exporter."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
import respx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from asyncretry import (
    GLOBAL_EVENTS,
    CircuitBreaker,
    CircuitBreakerConfig,
    EventBus,
    FixedBackoff,
    HedgingConfig,
    NoBackoff,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    otel,
)
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryTransport
from asyncretry.testing import fixed_random

URL = "https://api.example/items"
ORIGIN = {"asyncretry.scope": "https://api.example:443", "server.address": "api.example", "server.port": 443}


class ServiceError(Exception):
    """A service error carrying an AWS-style error code (``SlowDown`` is throttling)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def failing(*errors: BaseException, result: Any = "ok") -> Any:
    """An async operation raising ``errors`` in turn, then returning ``result``."""
    steps = list(errors)

    async def op() -> Any:
        await anyio.lowlevel.checkpoint()
        if steps:
            raise steps.pop(0)
        return result

    return op


@dataclass
class Telemetry:
    """An SDK meter provider with an in-memory reader, and a tracer whose finished spans are kept."""

    reader: InMemoryMetricReader
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    tracer: Tracer

    def metrics(self) -> dict[str, dict[frozenset[tuple[str, Any]], Any]]:
        """Every metric point: counters and gauges as their value, histograms as (count, sum)."""
        found: dict[str, dict[frozenset[tuple[str, Any]], Any]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points = found.setdefault(metric.name, {})
                    for point in metric.data.data_points:
                        key = frozenset((point.attributes or {}).items())
                        if isinstance(point, HistogramDataPoint):
                            points[key] = (point.count, point.sum)
                        else:
                            assert isinstance(point, NumberDataPoint)
                            points[key] = point.value
        return found

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def scoped(scope: dict[str, Any], **values: Any) -> frozenset[tuple[str, Any]]:
    """A point's attributes: the scope's, plus keyword arguments with ``__`` for ``.`` (``error__type``)."""
    return frozenset({**scope, **{k.replace("__", "."): v for k, v in values.items()}}.items())


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(reader, meter_provider, exporter, tracer_provider.get_tracer("tests"))
    meter_provider.shutdown()
    tracer_provider.shutdown()


@pytest.fixture
def instrumentation(telemetry: Telemetry) -> Iterator[otel.Instrumentation]:
    before = GLOBAL_EVENTS._listeners
    with otel.instrument(meter_provider=telemetry.meter_provider) as instrumented:
        yield instrumented
    assert GLOBAL_EVENTS._listeners == before  # uninstrument() took its listener off the global bus


def scope(name: str) -> dict[str, Any]:
    return {"asyncretry.scope": name}


# ------------------------------------------------------------------------------- the retry engine
@pytest.mark.anyio
async def test_a_scripted_run_gives_exact_metrics(telemetry: Telemetry, instrumentation: otel.Instrumentation) -> None:
    """Two failures then a success, then a call out of attempts: attempts, retries, delays and give-ups."""
    retrier = Retrier(RetryPolicy(), rng=fixed_random(0.5))  # AWS standard backoff: 0.5 s, then 1 s
    assert await retrier.call_in("db", failing(ConnectionResetError(), ServiceError("SlowDown"))) == "ok"
    with pytest.raises(TimeoutError):
        await retrier.call_in("db", failing(TimeoutError(), TimeoutError(), TimeoutError()))
    db = scope("db")
    assert telemetry.metrics() == {
        "asyncretry.attempts": {
            scoped(db, asyncretry__outcome="connection", error__type="ConnectionResetError"): 1,
            scoped(db, asyncretry__outcome="throttling", error__type="SlowDown"): 1,
            scoped(db, asyncretry__outcome="success"): 1,
            scoped(db, asyncretry__outcome="timeout", error__type="TimeoutError"): 3,
        },
        "asyncretry.retries": {
            scoped(db, asyncretry__outcome="connection", error__type="ConnectionResetError"): 1,
            scoped(db, asyncretry__outcome="throttling", error__type="SlowDown"): 1,
            scoped(db, asyncretry__outcome="timeout", error__type="TimeoutError"): 2,
        },
        "asyncretry.retry.delay": {
            scoped(db, asyncretry__outcome="connection", asyncretry__server_directed=False): (1, 0.5),
            scoped(db, asyncretry__outcome="throttling", asyncretry__server_directed=False): (1, 1.0),
            scoped(db, asyncretry__outcome="timeout", asyncretry__server_directed=False): (2, 1.5),
        },
        "asyncretry.throttles": {scoped(db, error__type="SlowDown"): 1},
        "asyncretry.give_ups": {
            scoped(db, asyncretry__why="max_attempts", asyncretry__outcome="timeout", error__type="TimeoutError"): 1,
        },
    }


@pytest.mark.anyio
async def test_the_delay_histogram_uses_backoff_sized_buckets(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Delays land in buckets from milliseconds to minutes (the advised boundaries), not the SDK's defaults."""
    retrier = Retrier(RetryPolicy(backoff=FixedBackoff(0.3), max_attempts=4))
    with pytest.raises(ConnectionResetError):
        await retrier.call(failing(*[ConnectionResetError()] * 4))
    data = telemetry.reader.get_metrics_data()
    assert data is not None
    metrics = [m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics]
    (histogram,) = [m for m in metrics if m.name == "asyncretry.retry.delay"]
    (point,) = histogram.data.data_points
    assert isinstance(point, HistogramDataPoint)
    assert histogram.unit == "s"
    assert tuple(point.explicit_bounds) == otel.DELAY_BUCKETS
    assert point.bucket_counts[otel.DELAY_BUCKETS.index(0.5)] == 3  # 0.25 < 0.3 <= 0.5
    assert (point.count, point.min, point.max) == (3, 0.3, 0.3)


@pytest.mark.anyio
async def test_each_retry_is_an_event_on_the_callers_span(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """The current span gets one asyncretry.retry event per retry, and asyncretry.give_up when retries fail."""
    retrier = Retrier(RetryPolicy(backoff=FixedBackoff(0.25)))
    with telemetry.tracer.start_as_current_span("fetch"), pytest.raises(ConnectionResetError):
        await retrier.call_in("api", failing(*[ConnectionResetError()] * 3))
    (span,) = telemetry.spans()
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("asyncretry.retry", {
            "asyncretry.scope": "api", "asyncretry.attempt": 1, "asyncretry.delay": 0.25,
            "asyncretry.outcome": "connection", "error.type": "ConnectionResetError",
            "asyncretry.server_directed": False,
        }),
        ("asyncretry.retry", {
            "asyncretry.scope": "api", "asyncretry.attempt": 2, "asyncretry.delay": 0.25,
            "asyncretry.outcome": "connection", "error.type": "ConnectionResetError",
            "asyncretry.server_directed": False,
        }),
        ("asyncretry.give_up", {
            "asyncretry.scope": "api", "asyncretry.why": "max_attempts", "asyncretry.attempts": 3,
            "asyncretry.outcome": "connection", "error.type": "ConnectionResetError", "asyncretry.elapsed": 0.5,
        }),
    ]


@pytest.mark.anyio
async def test_a_first_attempt_that_is_final_adds_no_span_event(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A non-retryable first failure is counted as a give-up but leaves the span alone (it is not a retry story)."""
    retrier = Retrier()
    with telemetry.tracer.start_as_current_span("validate"), pytest.raises(ValueError, match="bad"):
        await retrier.call(failing(ValueError("bad")))
    (span,) = telemetry.spans()
    assert span.events == ()
    assert telemetry.metrics()["asyncretry.give_ups"] == {
        scoped(scope("default"), asyncretry__why="not_retryable", asyncretry__outcome="not_retryable",
               error__type="ValueError"): 1,
    }


@pytest.mark.anyio
async def test_concurrent_calls_each_tag_their_own_span(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Events run in the caller's task: with 50 concurrent calls, every span holds exactly its own retries."""
    retrier = Retrier(RetryPolicy(backoff=FixedBackoff(0.1), max_attempts=5))

    async def one(i: int) -> None:
        with telemetry.tracer.start_as_current_span(f"call-{i}"):
            await retrier.call_in(f"s{i}", failing(*[ConnectionResetError()] * (i % 4)))

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(one, i)
    spans = telemetry.spans()
    assert len(spans) == 50
    for span in spans:
        i = int(span.name.split("-")[1])
        assert [e.attributes["asyncretry.scope"] for e in span.events if e.attributes] == [f"s{i}"] * (i % 4)


@pytest.mark.anyio
async def test_spans_can_be_left_alone(telemetry: Telemetry) -> None:
    """With spans=False the metrics are recorded and the current span gets no event."""
    with otel.instrument(meter_provider=telemetry.meter_provider, spans=False):
        retrier = Retrier(RetryPolicy(backoff=NoBackoff()))
        with telemetry.tracer.start_as_current_span("quiet"):
            assert await retrier.call(failing(ConnectionResetError())) == "ok"
    (span,) = telemetry.spans()
    assert span.events == ()
    assert sum(telemetry.metrics()["asyncretry.retries"].values()) == 1


@pytest.mark.anyio
async def test_an_instrumentation_can_listen_to_one_bus_only(telemetry: Telemetry) -> None:
    """instrument(bus=...) records the events of that bus (and its children), not of other retriers."""
    bus = EventBus()
    with otel.instrument(meter_provider=telemetry.meter_provider, bus=bus):
        mine = Retrier(RetryPolicy(backoff=NoBackoff()), events=EventBus(parent=bus))
        other = Retrier(RetryPolicy(backoff=NoBackoff()))
        assert await mine.call_in("mine", failing(ConnectionResetError())) == "ok"
        assert await other.call_in("other", failing(ConnectionResetError())) == "ok"
    assert set(telemetry.metrics()["asyncretry.retries"]) == {
        scoped(scope("mine"), asyncretry__outcome="connection", error__type="ConnectionResetError"),
    }


# ---------------------------------------------------------------------------------------- gauges
@pytest.mark.anyio
async def test_gauges_read_the_live_state_of_an_observed_retrier(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Quota available, the limiter's fill rate once it limits, and the breaker state as 1/0 per state."""
    policy = RetryPolicy(
        mode="adaptive", backoff=NoBackoff(), throttling_backoff=NoBackoff(), max_attempts=2,
        breaker=CircuitBreakerConfig(failure_ratio=None, consecutive_failures=2, break_duration=30.0),
    )
    retrier = Retrier(policy, name="orders")
    instrumentation.observe(retrier)
    assert await retrier.call_in("calm", failing()) == "ok"
    with pytest.raises(ServiceError):
        await retrier.call_in("hot", failing(ServiceError("SlowDown"), ServiceError("SlowDown")))
    stats = {s.key: s for s in retrier.statistics().scopes}
    hot_limiter = stats["hot"].limiter
    assert hot_limiter is not None
    assert hot_limiter.enabled
    calm = {**scope("calm"), "asyncretry.retrier": "orders"}
    hot = {**scope("hot"), "asyncretry.retrier": "orders"}
    found = telemetry.metrics()
    assert found["asyncretry.quota.available"] == {scoped(calm): 500.0, scoped(hot): 495.0}
    assert found["asyncretry.limiter.fill_rate"] == {scoped(hot): hot_limiter.fill_rate}  # "calm" does not limit
    states = ("closed", "open", "half_open", "isolated")
    assert found["asyncretry.breaker.state"] == {
        **{scoped(calm, asyncretry__breaker__state=s): int(s == "closed") for s in states},
        **{scoped(hot, asyncretry__breaker__state=s): int(s == "open") for s in states},
    }
    assert found["asyncretry.breaker.transitions"] == {scoped(scope("hot"), asyncretry__breaker__state="open"): 1}


async def _called_in_turn(retrier: Retrier, scope_key: str, caller: str) -> None:
    """One call of ``caller`` in scope ``scope_key``: a single attempt that succeeds."""
    async for attempt in retrier.attempts(scope=scope_key, caller=caller):
        async with attempt:
            pass


@pytest.mark.anyio
async def test_the_turns_gauge_shows_the_calls_waiting_for_their_callers_turn(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """At a rate limit of 10 calls a second with a burst of one, caller "a" sends four calls and "b" one: a's
    first takes the token, its second and b's call wait in the rate limit's line, and a's last two wait for
    a's turn. The gauge shows those 2, as the scope's statistics do, then 0 once every call was admitted.
    A scope where no call waited for its turn reports no point."""
    retrier = Retrier(RetryPolicy(rate_limit=10.0, rate_limit_burst=1.0), name="orders")
    instrumentation.observe(retrier)
    await _called_in_turn(retrier, "calm", "a")  # its scope's token is there: admitted without a turn
    async with anyio.create_task_group() as tg:
        for caller in ("a", "a", "a", "a", "b"):
            tg.start_soon(_called_in_turn, retrier, "busy", caller)
            await anyio.lowlevel.checkpoint()  # each call reaches the line before the next starts
        await anyio.sleep(0.01)
        turns = {s.key: s.turns for s in retrier.statistics().scopes}
        during = telemetry.metrics()
    busy = {**scope("busy"), "asyncretry.retrier": "orders"}
    calm = {**scope("calm"), "asyncretry.retrier": "orders"}
    assert turns["calm"] is None
    assert turns["busy"] is not None
    assert turns["busy"].waiting == 2
    assert during["asyncretry.turns.waiting"] == {scoped(busy): 2}
    assert scoped(calm) in during["asyncretry.quota.available"]  # the calm scope is observed all the same
    assert telemetry.metrics()["asyncretry.turns.waiting"] == {scoped(busy): 0}


@pytest.mark.anyio
async def test_the_turns_gauge_of_an_observed_transport_carries_the_origin(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Three requests of tenant "heavy" through a transport with a rate limit: while the third waits for the
    tenant's turn, the gauge shows 1 under the scope's origin and the transport's name."""
    router = respx.MockRouter()
    router.get(URL).mock(return_value=httpx.Response(200))
    policy = RetryPolicy(rate_limit=10.0, rate_limit_burst=1.0)
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), policy=policy, name="api")
    instrumentation.observe(transport)
    async with httpx.AsyncClient(transport=transport) as client:

        async def one() -> None:
            assert (await client.get(URL, extensions={EXTENSION: {"caller": "heavy"}})).status_code == 200

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
                await anyio.lowlevel.checkpoint()
            await anyio.sleep(0.01)
            (turns,) = [s.turns for s in transport.statistics().scopes]
            during = telemetry.metrics()
    assert turns is not None
    assert turns.waiting == 1
    assert during["asyncretry.turns.waiting"] == {scoped(ORIGIN, asyncretry__retrier="api"): 1}
    assert telemetry.metrics()["asyncretry.turns.waiting"] == {scoped(ORIGIN, asyncretry__retrier="api"): 0}


@pytest.mark.anyio
async def test_a_dry_quota_is_counted_once_per_episode(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """QuotaExhausted counts episodes: three refused calls in a row are one exhaustion, three give-ups."""
    config = RetryQuotaConfig(max_capacity=5, retry_cost=5, timeout_retry_cost=5, throttling_retry_cost=5)
    retrier = Retrier(RetryPolicy(quota=config, backoff=NoBackoff()))
    for _ in range(3):
        with pytest.raises(ConnectionResetError):
            await retrier.call_in("q", failing(*[ConnectionResetError()] * 3))
    found = telemetry.metrics()
    assert found["asyncretry.quota.exhaustions"] == {scoped(scope("q")): 1}
    assert found["asyncretry.give_ups"] == {
        scoped(scope("q"), asyncretry__why="quota", asyncretry__outcome="connection",
               error__type="ConnectionResetError"): 3,
    }


@pytest.mark.anyio
async def test_primitives_can_be_observed_directly_with_extra_attributes(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A quota or breaker observed on its own reports under its name, plus the attributes given."""
    quota = RetryQuota(name="shared")
    assert quota.try_acquire(12)
    breaker = CircuitBreaker(CircuitBreakerConfig(), name="db")
    breaker.isolate()
    undo = instrumentation.observe(quota, attributes={"service": "billing"})
    instrumentation.observe(breaker)
    found = telemetry.metrics()
    assert found["asyncretry.quota.available"] == {scoped(scope("shared"), service="billing"): 488.0}
    assert found["asyncretry.breaker.state"][scoped(scope("db"), asyncretry__breaker__state="isolated")] == 1
    undo()
    assert "asyncretry.quota.available" not in telemetry.metrics()


@pytest.mark.anyio
async def test_a_collection_from_another_thread_reads_objects_on_their_loop(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A reader collecting in its own thread (a scrape, an exporter) gets the snapshots taken on the loop thread."""
    reads: list[int] = []

    class Watched(RetryQuota):
        def statistics(self) -> Any:
            reads.append(threading.get_ident())
            return super().statistics()

    quota = Watched(name="watched")
    assert quota.try_acquire(5)
    instrumentation.observe(quota)
    reads.clear()
    found = await anyio.to_thread.run_sync(telemetry.metrics)
    assert found["asyncretry.quota.available"] == {scoped(scope("watched")): 495.0}
    assert reads  # one snapshot per gauge, every one of them taken on the loop's thread
    assert set(reads) == {threading.get_ident()}


def test_a_collection_after_the_loop_ended_drops_its_objects(telemetry: Telemetry) -> None:
    """Objects whose event loop has finished are dropped at the next collection instead of failing it."""
    with otel.instrument(meter_provider=telemetry.meter_provider) as instrumented:
        for backend in ("asyncio", "trio"):

            async def observe() -> None:
                instrumented.observe(RetryQuota(name="gone"))
                instrumented.observe(CircuitBreaker(CircuitBreakerConfig(), name="gone too"))

            anyio.run(observe, backend=backend)
        collected: list[dict[str, Any]] = []
        worker = threading.Thread(target=lambda: collected.append(telemetry.metrics()))
        worker.start()
        worker.join()
        assert "asyncretry.quota.available" not in collected[0]
        assert "asyncretry.breaker.state" not in collected[0]
        assert "observed=0" in repr(instrumented)


@pytest.mark.anyio
async def test_a_blocked_loop_makes_the_collection_skip_its_gauges(telemetry: Telemetry) -> None:
    """If the loop does not answer within collect_timeout, the collection goes on without its gauges."""
    with otel.instrument(meter_provider=telemetry.meter_provider, collect_timeout=0.005) as instrumented:
        instrumented.observe(RetryQuota(name="busy"))
        collected: list[dict[str, Any]] = []
        worker = threading.Thread(target=lambda: collected.append(telemetry.metrics()))
        worker.start()
        worker.join()  # blocks the loop's thread on purpose: it cannot answer the collector
        assert "asyncretry.quota.available" not in collected[0]
        assert telemetry.metrics()["asyncretry.quota.available"] == {scoped(scope("busy")): 500.0}


def test_the_sync_transport_is_read_directly_under_its_lock(telemetry: Telemetry) -> None:
    """Observed outside any event loop, the sync transport is read in the collecting thread."""
    router = respx.MockRouter()
    router.get(URL).mock(return_value=httpx.Response(200))
    transport = RetryTransport(httpx.MockTransport(router.handler), name="sync")
    with otel.instrument(meter_provider=telemetry.meter_provider) as instrumented:
        instrumented.observe(transport)
        with httpx.Client(transport=transport) as client:
            assert client.get(URL).status_code == 200
        collected: list[dict[str, Any]] = []
        worker = threading.Thread(target=lambda: collected.append(telemetry.metrics()))
        worker.start()
        worker.join()
    assert collected[0]["asyncretry.quota.available"] == {scoped(ORIGIN, asyncretry__retrier="sync"): 500.0}


def test_a_sync_transport_busy_deciding_is_skipped_rather_than_read_mid_decision(telemetry: Telemetry) -> None:
    """While a request thread holds the sync transport's lock, a collection waits at most collect_timeout."""
    transport = RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)), name="sync")
    with otel.instrument(meter_provider=telemetry.meter_provider, collect_timeout=0.005) as instrumented:
        instrumented.observe(transport)
        with httpx.Client(transport=transport) as client:
            assert client.get(URL).status_code == 200
        with transport.retrier.lock:
            assert "asyncretry.quota.available" not in telemetry.metrics()
        assert telemetry.metrics()["asyncretry.quota.available"] == {scoped(ORIGIN, asyncretry__retrier="sync"): 500.0}


# ------------------------------------------------------------------------------------------- httpx
async def _get(transport: AsyncRetryTransport, url: str = URL) -> httpx.Response:
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.get(url)


@pytest.mark.anyio
async def test_a_resent_request_sets_the_resend_count_on_the_current_span(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """503 then 200 through an observed transport: http.request.resend_count=1, one retry event, origin attributes."""
    router = respx.MockRouter()
    router.get(URL).mock(side_effect=[httpx.Response(503), httpx.Response(200)])
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler), rng=fixed_random(0.5))
    instrumentation.observe(transport)
    with telemetry.tracer.start_as_current_span("GET"):
        assert (await _get(transport)).status_code == 200
    (span,) = telemetry.spans()
    assert span.attributes == {"http.request.resend_count": 1}
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("asyncretry.retry", {
            "asyncretry.scope": "https://api.example:443", "asyncretry.attempt": 1, "asyncretry.delay": 0.5,
            "asyncretry.outcome": "transient", "error.type": "HTTP 503", "asyncretry.server_directed": False,
            "asyncretry.target": "GET https://api.example/items",  # the request, without query or credentials
        }),
    ]
    found = telemetry.metrics()
    assert found["asyncretry.attempts"] == {
        scoped(ORIGIN, asyncretry__outcome="transient", error__type="HTTP 503"): 1,
        scoped(ORIGIN, asyncretry__outcome="success"): 1,
    }
    assert found["asyncretry.quota.available"] == {scoped(ORIGIN, asyncretry__retrier="httpx"): 500.0}


@pytest.mark.anyio
async def test_a_request_sent_once_has_no_resend_count(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A 404 is final at once: no resend count, no span event, a not_retryable give-up in the metrics."""
    router = respx.MockRouter()
    router.get(URL).mock(return_value=httpx.Response(404))
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler))
    instrumentation.observe(transport)
    with telemetry.tracer.start_as_current_span("GET"):
        assert (await _get(transport)).status_code == 404
    (span,) = telemetry.spans()
    assert (span.attributes, span.events) == ({}, ())
    assert telemetry.metrics()["asyncretry.give_ups"] == {
        scoped(ORIGIN, asyncretry__why="not_retryable", asyncretry__outcome="not_retryable", error__type="HTTP 404"): 1,
    }


@pytest.mark.anyio
async def test_a_server_directed_delay_is_marked(telemetry: Telemetry, instrumentation: otel.Instrumentation) -> None:
    """A 429 with Retry-After: 3 records a 3 s delay with asyncretry.server_directed=True, and a throttle."""
    router = respx.MockRouter()
    router.get(URL).mock(side_effect=[httpx.Response(429, headers={"Retry-After": "3"}), httpx.Response(200)])
    transport = AsyncRetryTransport(httpx.MockTransport(router.async_handler))
    assert (await _get(transport)).status_code == 200
    found = telemetry.metrics()
    assert found["asyncretry.retry.delay"] == {
        scoped(ORIGIN, asyncretry__outcome="throttling", asyncretry__server_directed=True): (1, 3.0),
    }
    assert found["asyncretry.throttles"] == {scoped(ORIGIN, error__type="HTTP 429"): 1}


def _slow_then(*latencies: float, statuses: tuple[int, ...] = ()) -> httpx.MockTransport:
    """A mock server whose n-th send takes ``latencies[n-1]`` (virtual) seconds and answers ``statuses[n-1]``."""
    sent: list[int] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        sent.append(len(sent) + 1)
        number = len(sent)
        await anyio.sleep(latencies[number - 1])
        return httpx.Response(statuses[number - 1] if number <= len(statuses) else 200)

    return httpx.MockTransport(handle)


@pytest.mark.anyio
async def test_a_hedge_is_a_resend_a_span_event_and_counted(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """A GET hedged after 0.1 s: http.request.resend_count=1, an asyncretry.hedge event, asyncretry.hedges=1."""
    policy = RetryPolicy(hedging=HedgingConfig(delay=0.1, budget_ratio=1.0))
    transport = AsyncRetryTransport(_slow_then(1.0, 0.05), policy=policy)
    instrumentation.observe(transport)
    with telemetry.tracer.start_as_current_span("GET"):
        assert (await _get(transport)).status_code == 200
    (span,) = telemetry.spans()
    assert span.attributes == {"http.request.resend_count": 1}
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("asyncretry.hedge", {
            "asyncretry.scope": "https://api.example:443", "asyncretry.attempt": 2, "asyncretry.hedging": 1,
            "asyncretry.delay": pytest.approx(0.1),
            "asyncretry.target": "GET https://api.example/items",
        }),
    ]
    found = telemetry.metrics()
    assert found["asyncretry.hedges"] == {scoped(ORIGIN): 1}
    assert found["asyncretry.attempts"] == {scoped(ORIGIN, asyncretry__outcome="success"): 1}


@pytest.mark.anyio
async def test_an_attempt_ending_after_a_later_hedge_never_lowers_the_resend_count(
    telemetry: Telemetry, instrumentation: otel.Instrumentation
) -> None:
    """Hedges #2 and #3 go out; #2 fails, then #1 answers: the resend count stays 2 (three sends)."""
    policy = RetryPolicy(hedging=HedgingConfig(delay=0.1, max_hedges=2, budget_ratio=2.0))
    transport = AsyncRetryTransport(_slow_then(0.3, 0.15, 1.0, statuses=(200, 503, 200)), policy=policy)
    instrumentation.observe(transport)
    with telemetry.tracer.start_as_current_span("GET"):
        assert (await _get(transport)).status_code == 200
    (span,) = telemetry.spans()
    assert span.attributes == {"http.request.resend_count": 2}


def test_the_sync_transport_sets_the_resend_count_too(telemetry: Telemetry) -> None:
    """The synchronous transport resends in the calling thread, on that thread's current span."""
    router = respx.MockRouter()
    router.get(URL).mock(side_effect=[httpx.Response(502), httpx.Response(503), httpx.Response(200)])
    transport = RetryTransport(httpx.MockTransport(router.handler), policy=RetryPolicy(backoff=NoBackoff()))
    with otel.instrument(meter_provider=telemetry.meter_provider) as instrumented:
        instrumented.observe(transport)
        with httpx.Client(transport=transport) as client, telemetry.tracer.start_as_current_span("GET"):
            assert client.get(URL).status_code == 200
    (span,) = telemetry.spans()
    assert span.attributes == {"http.request.resend_count": 2}
    assert [e.attributes["error.type"] for e in span.events if e.attributes] == ["HTTP 502", "HTTP 503"]


# ------------------------------------------------------------------------------------- lifecycle
@pytest.mark.anyio
async def test_after_uninstrument_nothing_is_recorded(telemetry: Telemetry) -> None:
    """uninstrument() stops both the event metrics and the gauges; observing afterwards is an error."""
    instrumented = otel.instrument(meter_provider=telemetry.meter_provider)
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()))
    instrumented.observe(retrier)
    instrumented.uninstrument()
    instrumented.uninstrument()  # twice is harmless
    assert await retrier.call(failing(ConnectionResetError())) == "ok"
    assert telemetry.metrics() == {}
    with pytest.raises(RuntimeError, match="uninstrumented"):
        instrumented.observe(retrier)


@pytest.mark.anyio
async def test_instrumenting_the_same_provider_again_keeps_the_gauges_working(telemetry: Telemetry) -> None:
    """A provider keeps the first gauge of a name: a second instrumentation still feeds it."""
    with otel.instrument(meter_provider=telemetry.meter_provider) as first:
        first.observe(RetryQuota(name="one"))
        assert set(telemetry.metrics()["asyncretry.quota.available"]) == {scoped(scope("one"))}
    with otel.instrument(meter_provider=telemetry.meter_provider) as second:
        second.observe(RetryQuota(name="two"))
        assert set(telemetry.metrics()["asyncretry.quota.available"]) == {scoped(scope("two"))}


@pytest.mark.parametrize("target", [object(), "retrier", 3, Retrier])
def test_observing_something_unknown_is_a_type_error(telemetry: Telemetry, target: object) -> None:
    """Only retriers, transports, quotas, limiters and breakers have gauges."""
    with (
        otel.instrument(meter_provider=telemetry.meter_provider) as instrumented,
        pytest.raises(TypeError, match="target must be a Retrier"),
    ):
        instrumented.observe(target)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_a_bad_collect_timeout_is_refused(telemetry: Telemetry, bad: float) -> None:
    """collect_timeout must be a positive, finite number of seconds."""
    with pytest.raises(ValueError, match="collect_timeout must be"):
        otel.instrument(meter_provider=telemetry.meter_provider, collect_timeout=bad)


def test_without_opentelemetry_the_import_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing asyncretry.otel without the OpenTelemetry API fails with the pip command to run."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "asyncretry.otel")
    with pytest.raises(ImportError, match=r"pip install 'asyncretry\[otel\]'"):
        importlib.import_module("asyncretry.otel")


# ------------------------------------------------------------------------------------ prometheus
@pytest.mark.anyio
async def test_prometheus_exposition_through_the_opentelemetry_exporter() -> None:
    """With the Prometheus reader, the metrics come out under Prometheus names, units and labels."""
    import prometheus_client  # the dev extra installs it with opentelemetry-exporter-prometheus
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    reader = PrometheusMetricReader()  # on prometheus_client's global registry, as in production
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        with otel.instrument(meter_provider=provider) as instrumented:
            retrier = Retrier(RetryPolicy(backoff=FixedBackoff(0.5)), name="api")
            instrumented.observe(retrier)
            assert await retrier.call_in("db", failing(ConnectionResetError())) == "ok"
            text = prometheus_client.generate_latest().decode()
    finally:
        provider.shutdown()  # takes the reader's collector off the global registry again
    lines = set(text.splitlines())
    # The exporter gives every sample of a family the same labels: a success has an empty error_type.
    assert 'asyncretry_attempts_total{asyncretry_outcome="success",asyncretry_scope="db",error_type=""} 1.0' in {
        _without_scope_labels(line) for line in lines
    }
    assert any(line.startswith("asyncretry_retry_delay_seconds_bucket{") and 'le="0.5"' in line for line in lines)
    assert any(line.startswith("asyncretry_quota_available{") and line.endswith(" 500.0") for line in lines)


def _without_scope_labels(line: str) -> str:
    """A sample line without the otel_scope_* labels that the exporter adds (their set varies by version)."""
    if "{" not in line:
        return line
    name, rest = line.split("{", 1)
    labels, value = rest.rsplit("} ", 1)
    kept = [label for label in labels.split(",") if not label.startswith("otel_scope_")]
    return f"{name}{{{','.join(sorted(kept))}}} {value}"
