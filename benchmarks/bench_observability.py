"""What observability costs: the same calls with nobody listening and with OpenTelemetry enabled, same run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_observability            # about half a minute
    .venv/bin/python -m benchmarks.bench_observability --quick    # a rough pass in a few seconds

Everything runs on a real asyncio event loop, with the ``asyncretry`` logger at WARNING (Python's
default). Rounds alternate between the two setups, so that drift of the machine hits both alike; each
figure is the best round (nanoseconds per call, the operation's own cost included):

* ``quiet``: no listener anywhere: emitters check ``wants()`` and construct no event.
* ``otel``: ``asyncretry.otel.instrument()`` on an SDK ``MeterProvider`` with an in-memory reader (what
  a periodic or Prometheus exporter would read), subscribed to the global bus for the round.

Cases: a first-attempt success through ``Retrier.call``; a call answering 503, 503, 200 with zero delays
(two retries: six events, three counters, two histogram records); the same inside a recording span (the
span's own cost is in both columns; ``otel`` adds two span events to it); and one request through
``AsyncRetryTransport`` over an ``httpx.MockTransport`` answering 200.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import time
from typing import Any

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from asyncretry import Classifier, NoBackoff, Retrier, RetryPolicy, RetryQuotaConfig, otel
from asyncretry.httpx import AsyncRetryTransport
from benchmarks._common import Once, ServiceUnavailable, flaky, ok


def cases(tracer_provider: TracerProvider) -> list[tuple[str, Once, int]]:
    """(label, one call, calls per round relative to the success case's count, as a divisor)."""
    classifier = Classifier(transient=(ServiceUnavailable,))
    endless = RetryQuotaConfig(max_capacity=10**12)  # never runs dry: each flaky call nets -9 tokens
    success = Retrier(RetryPolicy())
    retrying = Retrier(RetryPolicy(backoff=NoBackoff(), classifier=classifier, quota=endless))
    in_span = Retrier(RetryPolicy(backoff=NoBackoff(), classifier=classifier, quota=endless))
    op_retrying, op_in_span = flaky(), flaky()
    tracer = tracer_provider.get_tracer("bench")
    transport = AsyncRetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)))
    client = httpx.AsyncClient(transport=transport)

    async def success_call() -> Any:
        return await success.call(ok)

    async def retry_call() -> Any:
        return await retrying.call(op_retrying)

    async def retry_in_span() -> Any:
        with tracer.start_as_current_span("call"):
            return await in_span.call(op_in_span)

    async def http_get() -> Any:
        return await client.get("https://api.example/items")

    return [
        ("success: await retrier.call(op)", success_call, 1),
        ("503, 503, 200: await retrier.call(op)", retry_call, 3),
        ("503, 503, 200 inside a recording span", retry_in_span, 6),
        ("GET 200 through AsyncRetryTransport", http_get, 10),
    ]


async def timed(once: Once, calls: int) -> float:
    """Nanoseconds per call over ``calls`` sequential calls."""
    gc.collect()
    start = time.perf_counter_ns()
    for _ in range(calls):
        await once()
    return (time.perf_counter_ns() - start) / calls


async def run(calls: int, rounds: int) -> list[tuple[str, float, float]]:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    tracer_provider = TracerProvider(shutdown_on_exit=False)  # no exporter: spans are recorded, then dropped
    rows: list[tuple[str, float, float]] = []
    for label, once, divisor in cases(tracer_provider):
        n = max(calls // divisor, 100)
        for _ in range(n // 10):  # warm up both setups (caches, the SDK's attribute sets)
            await once()
        with otel.instrument(meter_provider=meter_provider):
            for _ in range(n // 10):
                await once()
        quiet: list[float] = []
        instrumented: list[float] = []
        for _ in range(rounds):
            quiet.append(await timed(once, n))
            with otel.instrument(meter_provider=meter_provider):
                instrumented.append(await timed(once, n))
        rows.append((label, min(quiet), min(instrumented)))
    assert reader.get_metrics_data() is not None  # the instrumented rounds really recorded
    meter_provider.shutdown()
    tracer_provider.shutdown()
    return rows


def report(rows: list[tuple[str, float, float]]) -> str:
    width = max(len(label) for label, _, _ in rows)
    lines = [f"{'case':<{width}}  {'quiet ns':>10}  {'otel ns':>10}  {'ratio':>6}  {'otel adds':>10}"]
    for label, quiet, instrumented in rows:
        lines.append(
            f"{label:<{width}}  {quiet:>10,.0f}  {instrumented:>10,.0f}  {instrumented / quiet:>6.2f}"
            f"  {instrumented - quiet:>9,.0f}ns"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    parser.add_argument("--calls", type=int, default=None, help="calls per round in the success case")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per setup (the best one counts)")
    args = parser.parse_args(argv)
    calls = args.calls or (5_000 if args.quick else 40_000)
    rounds = args.rounds or (3 if args.quick else 7)
    logging.getLogger("asyncretry").setLevel(logging.WARNING)
    rows = asyncio.run(run(calls, rounds))
    print(report(rows))


if __name__ == "__main__":
    main()
