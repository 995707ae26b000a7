"""What the retry engine costs per call, against tenacity, stamina and httpx-retries in the same run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_engine            # about half a minute
    .venv/bin/python -m benchmarks.bench_engine --quick    # a rough pass in a few seconds

Everything runs on a real asyncio event loop. Each figure is the best of several rounds of many calls
(nanoseconds per call, the operation's own cost included), and the ratio column divides it by the
asyncretry figure of the same group, so the table compares like with like on this machine:

* ``success``: a call whose first attempt succeeds, through ``async for attempt in ...`` (ours,
  tenacity's ``AsyncRetrying``, stamina's ``retry_context``) and through ``Retrier.call``.
  Target: ours at most 0.20x tenacity (bench_floor measures the floor of the work a success must do).
* ``503, 503, 200``: two retryable failures, then a success, with zero delays (``NoBackoff``,
  tenacity's ``wait_none``, stamina with every wait at 0), through the engine's call form.
  Target: ours cheaper than every peer.
* ``503, 503, 200 over httpx``: the same three responses from an ``httpx.MockTransport``, through
  ``httpx_retries.RetryTransport`` (backoff_factor 0) and, when it exists, asyncretry's
  ``AsyncRetryTransport`` over the same mock. A plain client making one request is shown for scale.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from dataclasses import dataclass
from typing import Any

import httpx
import stamina
import stamina.instrumentation
import tenacity
from httpx_retries import Retry, RetryTransport

from asyncretry import Classifier, NoBackoff, Retrier, RetryPolicy, RetryQuotaConfig
from benchmarks._common import Once, ServiceUnavailable, flaky, measure, ok

Case = tuple[str, str, Once]
"""(key, label, one call): the key names the case in TARGETS; the first case of a group is its reference."""


@dataclass(frozen=True, slots=True)
class Row:
    group: str
    key: str
    name: str
    ns: float


TARGETS: list[tuple[str, str, str, float]] = [
    # (ours, peer, what, largest allowed ratio ours / peer)
    ("success/async-for", "success/tenacity", "success path: ours <= 0.20x tenacity", 0.20),
    ("503/call", "503/tenacity", "503, 503, 200: ours cheaper than tenacity", 1.0),
    ("503/call", "503/stamina", "503, 503, 200: ours cheaper than stamina", 1.0),
    ("http/ours", "http/httpx-retries", "503, 503, 200 over httpx: ours <= 1.3x httpx-retries", 1.3),
]


# --------------------------------------------------------------------------------- operations
def mock_transport() -> httpx.MockTransport:
    statuses = itertools.cycle((503, 503, 200))
    return httpx.MockTransport(lambda request: httpx.Response(next(statuses)))


# -------------------------------------------------------------------------------------- cases
def success_cases() -> list[Case]:
    retrier = Retrier(RetryPolicy())  # AWS standard mode, 2020 profile, with its retry quota

    async def ours_async_for() -> Any:
        async for attempt in retrier.attempts():
            async with attempt:
                return await ok()
        return None

    async def ours_call() -> Any:
        return await retrier.call(ok)

    async def tenacity_async_for() -> Any:
        async for attempt in tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none(), reraise=True
        ):
            with attempt:
                return await ok()
        return None

    async def stamina_async_for() -> Any:
        async for attempt in stamina.retry_context(on=ServiceUnavailable, attempts=3):
            with attempt:
                return await ok()
        return None

    return [
        ("success/async-for", "asyncretry: async for attempt in retrier.attempts()", ours_async_for),
        ("success/call", "asyncretry: await retrier.call(op)", ours_call),
        ("success/tenacity", "tenacity: async for attempt in AsyncRetrying(...)", tenacity_async_for),
        ("success/stamina", "stamina: async for attempt in retry_context(...)", stamina_async_for),
        ("success/bare", "(the bare operation, no retry machinery)", ok),
    ]


def flaky_cases() -> list[Case]:
    classifier = Classifier(transient=(ServiceUnavailable,))
    # A capacity so large that the quota never runs dry: each call nets -5 tokens (SPEC 1.1).
    quota = RetryQuotaConfig(max_capacity=10**12)
    standard = Retrier(RetryPolicy(backoff=NoBackoff(), classifier=classifier, quota=quota))
    plain = Retrier(RetryPolicy(mode="legacy", backoff=NoBackoff(), classifier=classifier, max_attempts=3))
    op_standard, op_plain, op_attempts = flaky(), flaky(), flaky()
    op_tenacity, op_stamina = flaky(), flaky()

    async def ours_call() -> Any:
        return await standard.call(op_standard)

    async def ours_legacy() -> Any:
        return await plain.call(op_plain)

    async def ours_async_for() -> Any:
        async for attempt in standard.attempts():
            async with attempt:
                return await op_attempts()
        return None

    async def tenacity_call() -> Any:
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(3),
            wait=tenacity.wait_none(),
            retry=tenacity.retry_if_exception_type(ServiceUnavailable),
            reraise=True,
        )
        return await retrying(op_tenacity)

    async def stamina_async_for() -> Any:
        async for attempt in stamina.retry_context(
            on=ServiceUnavailable, attempts=3, wait_initial=0, wait_max=0, wait_jitter=0
        ):
            with attempt:
                return await op_stamina()
        return None

    return [
        ("503/call", "asyncretry: retrier.call, standard mode with quota", ours_call),
        ("503/legacy", "asyncretry: retrier.call, legacy mode (no quota)", ours_legacy),
        ("503/async-for", "asyncretry: async for attempt in retrier.attempts()", ours_async_for),
        ("503/tenacity", "tenacity: AsyncRetrying(wait=wait_none())(op)", tenacity_call),
        ("503/stamina", "stamina: retry_context(wait_* = 0)", stamina_async_for),
    ]


def httpx_cases() -> tuple[list[Case], list[httpx.AsyncClient], str | None]:
    clients: list[httpx.AsyncClient] = []

    def client(transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
        made = httpx.AsyncClient(transport=transport, base_url="https://example.test")
        clients.append(made)
        return made

    theirs = client(RetryTransport(transport=mock_transport(), retry=Retry(total=2, backoff_factor=0.0)))
    bare = client(httpx.MockTransport(lambda request: httpx.Response(200)))

    async def httpx_retries_get() -> Any:
        response = await theirs.get("/")
        assert response.status_code == 200
        return response

    async def bare_get() -> Any:
        return await bare.get("/")

    cases: list[Case] = []
    missing: str | None = None
    try:
        from asyncretry.httpx import AsyncRetryTransport  # type: ignore[attr-defined,unused-ignore]
    except ImportError as error:
        missing = f"asyncretry.httpx.AsyncRetryTransport is not available yet ({error})"
    else:
        policy = RetryPolicy(backoff=NoBackoff(), quota=RetryQuotaConfig(max_capacity=10**12))
        ours = client(AsyncRetryTransport(mock_transport(), policy=policy))  # same mock, same script

        async def ours_get() -> Any:
            response = await ours.get("/")
            assert response.status_code == 200
            return response

        cases.append(("http/ours", "asyncretry: AsyncRetryTransport(MockTransport)", ours_get))
    cases += [
        ("http/httpx-retries", "httpx-retries: RetryTransport(MockTransport)", httpx_retries_get),
        ("http/bare", "(one plain GET over MockTransport, no retries)", bare_get),
    ]
    return cases, clients, missing


# ---------------------------------------------------------------------------------- measuring
async def run(calls: int, rounds: int) -> tuple[list[Row], list[str]]:
    notes: list[str] = []
    http_cases, clients, missing = httpx_cases()
    groups: list[tuple[str, list[Case], int]] = [
        ("success", success_cases(), calls),
        ("503, 503, 200", flaky_cases(), max(calls // 4, 50)),
        ("503, 503, 200 over httpx", http_cases, max(calls // 40, 20)),
    ]
    if missing:
        notes.append(f"503, 503, 200 over httpx: {missing}; the reference there is httpx-retries.")
    rows: list[Row] = []
    try:
        for group, cases, n in groups:
            best = await measure([(key, once) for key, _, once in cases], n, rounds)
            rows += [Row(group, key, label, best[key]) for key, label, _ in cases]
    finally:
        for made in clients:
            await made.aclose()
    return rows, notes


def render(rows: list[Row], notes: list[str]) -> str:
    width = max(len(r.name) for r in rows)
    lines = [
        f"asyncretry engine benchmark: Python {sys.version.split()[0]}, asyncio, best of rounds",
        "",
        f"  {'case':<{width}}  {'ns/call':>10}  {'ratio':>6}",
    ]
    for group, members in itertools.groupby(rows, key=lambda r: r.group):
        batch = list(members)
        reference = batch[0].ns
        lines.append(group)
        for index, r in enumerate(batch):
            marker = "* " if index == 0 else "  "
            lines.append(f"{marker}{r.name:<{width}}  {r.ns:>10,.0f}  {r.ns / reference:>6.2f}")
        lines.append("")
    lines.append("ratio: the row's time / the time of its group's first row (*).")
    lines.append("")
    by_key = {r.key: r.ns for r in rows}
    for ours, peer, what, limit in TARGETS:
        if ours not in by_key or peer not in by_key:
            lines.append(f"  [n/a ] {what}: not measured")
            continue
        ratio = by_key[ours] / by_key[peer]
        verdict = "met " if ratio <= limit else "MISS"
        lines.append(f"  [{verdict}] {what}: ours / peer = {ratio:.2f}")
    lines.extend(notes)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    # stamina logs every retry by default; nobody else here does, so measure it without that too.
    stamina.instrumentation.set_on_retry_hooks([])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    parser.add_argument("--calls", type=int, default=None, help="calls per round in the success group")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (the best one counts)")
    args = parser.parse_args(argv)
    calls = args.calls or (2_000 if args.quick else 20_000)
    rounds = args.rounds or (3 if args.quick else 7)
    rows, notes = asyncio.run(run(calls, rounds))
    print(render(rows, notes))


if __name__ == "__main__":
    main()
