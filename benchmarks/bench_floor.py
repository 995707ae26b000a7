"""The floor under the two success-path targets: what the work a success must do costs, piece by piece.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_floor            # about twenty seconds
    .venv/bin/python -m benchmarks.bench_floor --quick    # rough figures in a few seconds

The success-path targets: ``async for attempt in retrier.attempts(): async with attempt:`` costs at most
0.15x tenacity's ``AsyncRetrying``, and ``AsyncRetryTransport`` (quota, breaker and classification on)
adds at most twice what httpx-retries adds to a successful request (issue 14; the earlier targets, a
tenth of tenacity and no more than httpx-retries, were shown by this benchmark to lie below the floor).
Both budgets are measured here, in the same run as:

* the *frame*: what the shape of the call costs with no work in it (the empty ``async for`` /
  ``async with`` protocol over an object that does nothing; a transport that only passes the request on);
* each operation a success has to do, timed alone in a tight loop, which is its cheapest case (warm
  caches, no glue code between the operations, no attribute stores, no branches).

When frame + operations exceed the budget, no arrangement of the same work meets the target: it would
need less work (no history timings, no quota refund, no breaker sample ...), not faster code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_retries import Retry
from httpx_retries import RetryTransport as HttpxRetriesTransport

from asyncretry import Attempt, AttemptFinished, CircuitBreaker, CircuitBreakerConfig, Retrier, RetryPolicy, RetryQuota
from asyncretry.httpx import AsyncRetryTransport, RetryInfo, scope_by_origin
from benchmarks._common import Once, measure, ok
from benchmarks.bench_engine import success_cases
from benchmarks.bench_transport import Fixed


class _Counters:
    calls = attempts = successes = 0


@dataclass(frozen=True, slots=True)
class Part:
    label: str
    ns: float


@dataclass(frozen=True, slots=True)
class Floor:
    target: str
    budget_label: str
    budget: float
    actual_label: str
    actual: float
    parts: tuple[Part, ...]
    inlined: float  # the same work written as one piece of code (see _Inlined*): the floor with the glue

    @property
    def total(self) -> float:
        return sum(p.ns for p in self.parts)


def _per_call(fn: Callable[[], object], calls: int, rounds: int) -> float:
    """Best-of-rounds nanoseconds of one ``fn()``, less the cost of calling a function that does nothing."""

    def best(f: Callable[[], object]) -> float:
        result = float("inf")
        for _ in range(rounds):
            gc.collect()
            start = time.perf_counter_ns()
            for _ in range(calls):
                f()
            result = min(result, (time.perf_counter_ns() - start) / calls)
        return result

    return max(0.0, best(fn) - best(lambda: None))


class _Nothing:
    """The async-for / async-with protocol with no work in it."""

    def __aiter__(self) -> _Nothing:
        return self

    async def __anext__(self) -> _Nothing:
        return self

    async def __aenter__(self) -> _Nothing:
        return self

    async def __aexit__(self, *exc: object) -> bool:
        return False


class _PassOn(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)


class _InlinedAttempts:
    """The success path's work written as one object, every layer inlined: a measurement, not a design.

    It reads the clock at the start and the end of the attempt, counts the call, the attempt and the
    success, checks for an AttemptFinished listener and gives the quota its success increment, as the
    engine does, but reaches into the quota's state and keeps no history, no scope and no judge.
    """

    def __init__(self, retrier: Retrier, quota: RetryQuota) -> None:
        self._retrier, self._quota, self._clock, self._events = retrier, quota, retrier.clock, retrier.events
        self._tally = _Counters()
        self._started = 0.0
        self._done = False

    def __aiter__(self) -> _InlinedAttempts:
        self._tally.calls += 1
        self._started = self._clock.now()
        return self

    async def __anext__(self) -> _InlinedAttempts:
        if self._done:
            raise StopAsyncIteration
        self._tally.attempts += 1
        return self

    async def __aenter__(self) -> _InlinedAttempts:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> bool:
        if exc is None:
            self._clock.now()
            self._done = True
            self._tally.successes += 1
            self._events.wants(AttemptFinished)
            self._quota._bucket._put_back(1)  # (private: this is the measurement of the inlined work)
        return False


class _InlinedTransport(httpx.AsyncBaseTransport):
    """The transport's success path written as one function, every layer inlined: a measurement, not a design.

    The same work as :class:`AsyncRetryTransport`'s plain success: the scope key and its scope, the
    breaker's state, two clock reads, the status check, the breaker's success sample, the counters,
    the event check, the quota's success increment and a report in ``response.extensions``; reaching
    into the primitives' private state, with no call record, judge or history.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, quota: RetryQuota, breaker: CircuitBreaker) -> None:
        self._inner, self._quota, self._breaker = inner, quota, breaker
        self._retrier = Retrier(RetryPolicy())
        self._clock, self._events = self._retrier.clock, self._retrier.events
        self._scopes: dict[str, object] = {}
        self._tally = _Counters()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = scope_by_origin(request)
        self._scopes.setdefault(key, key)
        breaker = self._breaker
        closed = breaker.is_closed
        started = self._clock.now()
        self._tally.calls += 1
        self._tally.attempts += 1
        response = await self._inner.handle_async_request(request)
        if closed and response.status_code < 400:
            now = self._clock.now()
            breaker._window.add(now, False)  # (private: this is the measurement of the inlined work)
            self._tally.successes += 1
            self._events.wants(AttemptFinished)
            self._quota._bucket._put_back(1)
            response.extensions["asyncretry"] = (key, started, now)
        return response


async def engine_floor(calls: int, rounds: int) -> Floor:
    quota = RetryQuota()
    retrier = Retrier(RetryPolicy(), quota=quota)  # AWS standard mode with its retry quota, as in bench_engine

    async def ours() -> Any:
        async for attempt in retrier.attempts():
            async with attempt:
                return await ok()
        return None

    async def frame() -> Any:
        async for attempt in _Nothing():
            async with attempt:
                return await ok()
        return None

    inlined_quota = RetryQuota()

    async def inlined() -> Any:
        async for attempt in _InlinedAttempts(retrier, inlined_quota):
            async with attempt:
                return await ok()
        return None

    # tenacity's case exactly as bench_engine measures it: the budget is 0.15x that figure
    theirs = {key: once for key, _, once in success_cases()}["success/tenacity"]

    best = await measure(
        [("ours", ours), ("frame", frame), ("tenacity", theirs), ("bare", ok), ("inlined", inlined)], calls, rounds
    )
    await ours()  # the scope exists
    clock, events = retrier.clock, retrier.events
    tally = _Counters()

    def counters() -> None:
        tally.calls += 1
        tally.attempts += 1
        tally.successes += 1

    n = calls * 10
    parts = (
        Part("the empty async for / async with protocol", best["frame"] - best["bare"]),
        Part("two clock reads (the attempt's start and end)", _per_call(lambda: (clock.now(), clock.now()), n, rounds)),
        Part("the per-call and per-attempt objects", _per_call(lambda: (retrier.attempts(), Attempt()), n, rounds)),
        Part("the quota's success refund (SPEC 1.1), quota full", _per_call(lambda: quota.release(1), n, rounds)),
        Part("the event check (AttemptFinished)", _per_call(lambda: events.wants(AttemptFinished), n, rounds)),
        Part("the retrier's counters (calls, attempts, successes)", _per_call(counters, n, rounds)),
    )
    return Floor(
        "issue 14: success path <= 0.15x tenacity", "0.15x tenacity's success path",
        (best["tenacity"] - best["bare"]) * 0.15, "asyncretry's success path", best["ours"] - best["bare"], parts,
        best["inlined"] - best["bare"],
    )


async def transport_floor(calls: int, rounds: int) -> Floor:
    url = httpx.URL("https://example.test/items")
    inner = Fixed()
    quota, breaker = RetryQuota(), CircuitBreaker(CircuitBreakerConfig())
    ours = AsyncRetryTransport(Fixed(), retrier=Retrier(RetryPolicy(), quota=quota, breaker=breaker))
    theirs = HttpxRetriesTransport(transport=Fixed(), retry=Retry(total=2, backoff_factor=0.0))
    passing = _PassOn(Fixed())
    inlined = _InlinedTransport(Fixed(), RetryQuota(), CircuitBreaker(CircuitBreakerConfig()))

    def send(transport: httpx.AsyncBaseTransport) -> Once:
        async def once() -> Any:
            return await transport.handle_async_request(httpx.Request("GET", url))

        return once

    cases = [
        ("bare", send(inner)), ("ours", send(ours)), ("theirs", send(theirs)), ("pass", send(passing)),
        ("inlined", send(inlined)),
    ]
    best = await measure(cases, calls, rounds)
    request = httpx.Request("GET", url)
    clock, events = ours.retrier.clock, ours.retrier.events
    now = clock.now()
    response = httpx.Response(200)
    finished = ours.retrier.attempts()

    def report() -> None:
        response.extensions["asyncretry"] = RetryInfo(finished)

    n = calls * 10
    parts = (
        Part("a transport that only passes the request on", best["pass"] - best["bare"]),
        Part("the scope key (the request's origin)", _per_call(lambda: scope_by_origin(request), n, rounds)),
        Part("two clock reads (the attempt's start and end)", _per_call(lambda: (clock.now(), clock.now()), n, rounds)),
        Part("the breaker's success sample", _per_call(lambda: breaker.record_success(False, now=now), n, rounds)),
        Part("the quota's success refund (SPEC 1.1), quota full", _per_call(lambda: quota.release(1), n, rounds)),
        Part("the event check (AttemptFinished)", _per_call(lambda: events.wants(AttemptFinished), n, rounds)),
        Part("the report in response.extensions", _per_call(report, n, rounds)),
    )
    return Floor(
        "issue 14: the transport adds <= 2x httpx-retries", "2x httpx-retries' overhead",
        2 * (best["theirs"] - best["bare"]),
        "asyncretry's overhead", best["ours"] - best["bare"], parts, best["inlined"] - best["bare"],
    )


def render(floors: list[Floor]) -> str:
    width = max(len(p.label) for f in floors for p in f.parts) + 2
    lines = [f"asyncretry: the floor under the success-path targets (Python {sys.version.split()[0]}, asyncio)", ""]
    for f in floors:
        lines.append(f.target)
        for p in f.parts:
            lines.append(f"  {p.label:<{width}} {p.ns:>8.0f} ns")
        lines.append(f"  {'= the floor (frame + operations, no glue)':<{width}} {f.total:>8.0f} ns")
        lines.append(f"  {f.budget_label:<{width}} {f.budget:>8.0f} ns   (the budget)")
        lines.append(f"  {'the same work inlined into one piece of code':<{width}} {f.inlined:>8.0f} ns")
        lines.append(f"  {f.actual_label:<{width}} {f.actual:>8.0f} ns")
        verdict = "below the budget" if f.total <= f.budget else f"over the budget by {f.total - f.budget:.0f} ns"
        inlined = "within" if f.inlined <= f.budget else "over"
        lines.append(f"  -> the floor is {verdict}; inlined, the work is {inlined} it ({f.inlined / f.budget:.2f}x); "
                     f"asyncretry is at {f.actual / f.budget:.2f}x the budget")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    args = parser.parse_args(argv)
    calls, rounds = (2_000, 3) if args.quick else (10_000, 7)

    async def both() -> list[Floor]:
        return [await engine_floor(calls, rounds), await transport_floor(calls, rounds)]

    print(render(asyncio.run(both())))


if __name__ == "__main__":
    main()
