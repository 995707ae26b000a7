"""Trace one request answered 503, 503, 200 through AsyncRetryTransport: how many asyncretry functions run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.trace_hops

With :func:`sys.setprofile`, every Python-level call (and coroutine resumption) into a function of the
``asyncretry`` package is counted, and so is every *module switch*: a call into an asyncretry module
other than the one the previous asyncretry call was in. The inner transport is an in-memory
``httpx.MockTransport``; the retrier has the default policy (the AWS standard quota) with no backoff.
A first request warms the scope up (made once per origin), so the figures are those of a request like
every later one. The numbers are deterministic: they change only when the code does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

import asyncretry
from asyncretry import NoBackoff, RetryPolicy
from asyncretry.httpx import AsyncRetryTransport

PACKAGE = str(Path(asyncretry.__file__).resolve().parent)
URL = "https://api.test/items"


class Tracer:
    """Counts the calls into asyncretry's modules and the switches between them."""

    def __init__(self) -> None:
        self.calls = 0
        self.switches = 0
        self.by_module: Counter[str] = Counter()
        self._last: str | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGE):
            return
        module = str(frame.f_globals.get("__name__", "?"))
        self.calls += 1
        self.by_module[module] += 1
        if module != self._last:
            self.switches += 1
            self._last = module


def _answers(*statuses: int) -> httpx.MockTransport:
    sent = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal sent
        status = statuses[min(sent, len(statuses) - 1)]
        sent += 1
        return httpx.Response(status, request=request)

    return httpx.MockTransport(handler)


async def trace(statuses: tuple[int, ...]) -> Tracer:
    """Trace one request answered ``statuses`` (after a warm-up request on the same transport)."""
    inner = _answers(200, *statuses)
    transport = AsyncRetryTransport(inner, policy=RetryPolicy(backoff=NoBackoff()))
    await transport.handle_async_request(httpx.Request("GET", URL))  # warm-up: the scope is made
    tracer = Tracer()
    request = httpx.Request("GET", URL)
    sys.setprofile(tracer)
    try:
        response = await transport.handle_async_request(request)
    finally:
        sys.setprofile(None)
    assert response.status_code == statuses[-1]
    return tracer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="also list the calls per module")
    parser.add_argument("--quick", action="store_true", help="accepted for the runner; the trace is always exact")
    args = parser.parse_args()
    for statuses in ((503, 503, 200), (200,)):
        tracer = asyncio.run(trace(statuses))
        label = ", ".join(map(str, statuses))
        print(f"{label:>14}: {tracer.calls} asyncretry calls, {tracer.switches} module switches")
        if args.modules:
            for module, count in tracer.by_module.most_common():
                print(f"{'':>16}{count:4d}  {module}")


if __name__ == "__main__":
    main()
