"""The floor under the speed targets: what the work a call must do costs, piece by piece.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_floor            # about twenty seconds
    .venv/bin/python -m benchmarks.bench_floor --quick    # rough figures in a few seconds

The success-path targets: ``async for attempt in retrier.attempts(): async with attempt:`` costs at most
0.15x tenacity's ``AsyncRetrying``, and ``AsyncRetryTransport`` (quota, breaker and classification on)
adds at most twice what httpx-retries adds to a successful request (the earlier targets, a
tenth of tenacity and no more than httpx-retries, were shown by this benchmark to lie below the floor).
The third target: two 503s then a 200 at zero delays cost less through ``AsyncRetryTransport`` than
through httpx-retries (which checks the method and the status, and closes the failed response).
Each budget is measured here, in the same run as:

* the *frame*: what the shape of the call costs with no work in it (the empty ``async for`` /
  ``async with`` protocol over an object that does nothing; a transport that only passes the request on);
* each operation the path has to do, timed alone in a tight loop, which is its cheapest case (warm
  caches, no glue code between the operations, no attribute stores, no branches).

When frame + operations exceed the budget, no arrangement of the same work meets the target: it would
need less work (no history timings, no quota refund, no breaker sample ...), not faster code. The
*inlined* line is the same work written as one piece of code, reaching into the primitives' private
state (a measurement, never a design): when even that is over the budget, the target needs less work
too. It runs on fresh objects as the real path does, so it can exceed the floor, whose operations
each run on warm, reused objects.
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

from asyncretry import (
    Attempt,
    AttemptFinished,
    CircuitBreaker,
    CircuitBreakerConfig,
    NoBackoff,
    Outcome,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    RetryScheduled,
)
from asyncretry._http._retry_after import server_delay
from asyncretry.httpx import AsyncRetryTransport, HttpClassifier, RetryInfo, scope_by_origin
from asyncretry.httpx._classify import error_code_of_response, headers_read
from benchmarks._common import Once, measure, ok
from benchmarks.bench_engine import success_cases
from benchmarks.bench_transport import Fixed, flaky_policy


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


class _RetryOn5xx(httpx.AsyncBaseTransport):
    """A retry loop with no rules at all: resend while the status is 5xx (at most three sends)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(2):
            response = await self._inner.handle_async_request(request)
            if response.status_code < 500:
                return response
            await response.aclose()
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


class _InlinedRetryTransport(httpx.AsyncBaseTransport):
    """The 503, 503, 200 path's work written as one function, every layer inlined: a measurement, not a design.

    Per attempt: the breaker's admission, two clock reads, the status check, and for a failure the
    headers read once, the error-code check, the status's kind, the server-directed delay, the outcome,
    the idempotency check, the breaker's failure sample, the history row, the backoff, the retry's quota
    cost taken, the breaker's look ahead, the event checks and the failed response closed; the success
    refunds the last retry's cost and leaves the report. It reaches into the quota's private state and
    keeps no call record, judge, scope table or attempt object.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, policy: RetryPolicy) -> None:
        self._inner = inner
        self._retrier = Retrier(policy)
        self._clock, self._events, self._rng = self._retrier.clock, self._retrier.events, self._retrier._rng
        self._classifier = HttpClassifier()
        self._quota = RetryQuota(policy.quota if isinstance(policy.quota, RetryQuotaConfig) else None)
        assert policy.breaker is not None
        self._breaker = CircuitBreaker(policy.breaker)
        assert policy.backoff is not None
        self._backoff = policy.backoff
        self._max_attempts = policy.max_attempts
        self._scopes: dict[str, object] = {}
        self._tally = _Counters()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = scope_by_origin(request)
        self._scopes.setdefault(key, key)
        clock, events, classifier = self._clock, self._events, self._classifier
        breaker, quota = self._breaker, self._quota
        tally = self._tally
        tally.calls += 1
        rows: list[tuple[int, float, float, OutcomeKind, str, str | None]] = []
        delays: list[float] = []
        number, cost, previous = 0, 1, None
        while True:
            number += 1
            tally.attempts += 1
            probe = breaker.acquire()
            started = clock.now()
            response = await self._inner.handle_async_request(request)
            now = clock.now()
            if classifier.plain_success(response.status_code):
                breaker.record_success(probe, now=now)
                tally.successes += 1
                events.wants(AttemptFinished)
                quota._bucket._put_back(cost)  # (private: this is the measurement of the inlined work)
                response.extensions["asyncretry"] = (key, rows, delays, started, now)
                return response
            headers = headers_read(response.headers)
            wants = classifier.wants_body(response, headers)
            code = error_code_of_response(headers, response.content) if wants else None
            kind, reason = classifier.status_kind(response, code)
            asked = server_delay(headers, time.time)
            outcome = Outcome(kind, reason, result=response)
            if not classifier.is_idempotent(request):
                outcome = Outcome(OutcomeKind.NOT_RETRYABLE, reason, result=response)
            breaker.record_failure(probe)
            events.wants(AttemptFinished)
            rows.append((number, started, now - started, outcome.kind, reason, None))
            if not outcome.kind.retryable or number >= self._max_attempts:
                return response
            delay = self._backoff.delay(number, self._rng(), previous) if asked is None else asked[0]
            cost = quota.cost_of(kind)
            if not quota._try_take(cost) or breaker.retry_after() > delay:
                return response
            previous = delay
            delays.append(delay)
            events.wants(RetryScheduled)
            await response.aclose()


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
        Part("the per-call and per-attempt objects", _per_call(lambda: Attempt(retrier.attempts()), n, rounds)),
        Part("the quota's success refund (SPEC 1.1), quota full", _per_call(lambda: quota.release(1), n, rounds)),
        Part("the event check (AttemptFinished)", _per_call(lambda: events.wants(AttemptFinished), n, rounds)),
        Part("the retrier's counters (calls, attempts, successes)", _per_call(counters, n, rounds)),
    )
    return Floor(
        "success path <= 0.15x tenacity", "0.15x tenacity's success path",
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
    send = _sender(url)

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
        "the transport adds <= 2x httpx-retries", "2x httpx-retries' overhead",
        2 * (best["theirs"] - best["bare"]),
        "asyncretry's overhead", best["ours"] - best["bare"], parts, best["inlined"] - best["bare"],
    )


async def retry_floor(calls: int, rounds: int) -> Floor:
    url = httpx.URL("https://example.test/items")
    policy = flaky_policy()  # bench_transport's 503 group: no delays, a quota that never runs dry, a breaker
    ours = AsyncRetryTransport(Fixed(503, 503, 200), policy=policy)
    theirs = HttpxRetriesTransport(transport=Fixed(503, 503, 200), retry=Retry(total=2, backoff_factor=0.0))
    inlined = _InlinedRetryTransport(Fixed(503, 503, 200), policy)
    frame = _RetryOn5xx(Fixed(503, 503, 200))
    send = _sender(url)

    three = Fixed(503, 503, 200)

    async def bare() -> Any:  # the request and the three responses alone: what every retry layer pays the same
        request = httpx.Request("GET", url)
        for _ in range(3):
            await three.handle_async_request(request)

    cases = [
        ("bare", bare), ("ours", send(ours)), ("theirs", send(theirs)), ("frame", send(frame)),
        ("inlined", send(inlined)),
    ]
    best = await measure(cases, calls, rounds)
    request = httpx.Request("GET", url)
    classifier = HttpClassifier()
    clock, events = ours.retrier.clock, ours.retrier.events
    quota = RetryQuota(RetryQuotaConfig(max_capacity=10**12))
    # a breaker that samples every outcome and never trips (the one in the policy would, in a tight loop of 503s)
    breaker = CircuitBreaker(CircuitBreakerConfig(failure_ratio=None, consecutive_failures=10**9))
    backoff, rng = NoBackoff(), ours.retrier._rng
    now = clock.now()
    failed = httpx.Response(503, content=b"ok")  # what Fixed answers
    finished = ours.retrier.attempts()

    def judge() -> None:  # what a 503 says: headers, error code, kind, server-directed delay, outcome, idempotency
        headers = headers_read(failed.headers)
        code = error_code_of_response(headers, failed.content) if classifier.wants_body(failed, headers) else None
        kind, reason = classifier.status_kind(failed, code)
        server_delay(headers, time.time)
        Outcome(kind, reason, result=failed)
        classifier.is_idempotent(request)

    rows: list[tuple[int, float, float, OutcomeKind, str, None]] = []

    def decide() -> None:  # what a retry costs and when it goes: failure sample, backoff, quota, breaker, history
        breaker.record_failure(False)
        rows.append((1, now, 0.0, OutcomeKind.TRANSIENT, "503", None))
        backoff.delay(1, rng(), None)
        quota.try_acquire(quota.cost_of(OutcomeKind.TRANSIENT))
        breaker.retry_after()
        events.wants(RetryScheduled)
        if len(rows) > 1000:
            rows.clear()

    def attempt_state() -> None:  # the breaker's admission, two clock reads, the event check
        breaker.acquire()
        clock.now()
        clock.now()
        events.wants(AttemptFinished)

    def succeed() -> None:
        breaker.record_success(False, now=now)
        quota.release(5)

    def report() -> None:
        failed.extensions["asyncretry"] = RetryInfo(finished)

    n = calls * 10
    parts = (
        Part("a loop that resends on 5xx, no rules", best["frame"] - best["bare"]),
        Part("the scope key (the request's origin)", _per_call(lambda: scope_by_origin(request), n, rounds)),
        Part("3 x per attempt: admission, 2 clock reads, event check", 3 * _per_call(attempt_state, n, rounds)),
        Part("2 x judging a 503 (headers, code, kind, delay, idempotency)", 2 * _per_call(judge, n, rounds)),
        Part("2 x deciding a retry (sample, backoff, quota, breaker, row)", 2 * _per_call(decide, n, rounds)),
        Part("the success: sample, refund of the last retry's cost", _per_call(succeed, n, rounds)),
        Part("the report in response.extensions", _per_call(report, n, rounds)),
    )
    return Floor(
        "503, 503, 200 costs less than through httpx-retries", "httpx-retries' overhead",
        best["theirs"] - best["bare"], "asyncretry's overhead", best["ours"] - best["bare"], parts,
        best["inlined"] - best["bare"],
    )


def _sender(url: httpx.URL) -> Callable[[httpx.AsyncBaseTransport], Once]:
    """``send(transport)``: one GET of ``url`` through ``transport`` (a new request each time, as a client makes)."""

    def send(transport: httpx.AsyncBaseTransport) -> Once:
        async def once() -> Any:
            return await transport.handle_async_request(httpx.Request("GET", url))

        return once

    return send


def render(floors: list[Floor]) -> str:
    width = max(len(p.label) for f in floors for p in f.parts) + 2
    lines = [f"asyncretry: the floor under the speed targets (Python {sys.version.split()[0]}, asyncio)", ""]
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
        return [
            await engine_floor(calls, rounds), await transport_floor(calls, rounds), await retry_floor(calls, rounds)
        ]

    print(render(asyncio.run(both())))


if __name__ == "__main__":
    main()
