"""What RetryMiddleware adds to each aiohttp request, against a bare ClientSession and aiohttp-retry in the same run.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_aiohttp            # about half a minute
    .venv/bin/python -m benchmarks.bench_aiohttp --quick    # rough figures in a few seconds

aiohttp has no in-memory transport, so every request goes over a real socket to a local aiohttp.web
server on 127.0.0.1 (in a thread with its own event loop, keep-alive connections): the figures are the
cost of a whole request, and the *overhead* column (a row's time minus the bare session's) is what a
retry layer adds. Each figure is the best of several rounds; the rounds go round-robin over the cases
so that a slow spell of the machine hits every case alike. asyncio only (aiohttp runs on asyncio).

Groups:

* ``success``: ``session.get(...)`` answered 200 at once, body read. A bare ``ClientSession``;
  ``ClientSession(middlewares=[RetryMiddleware()])`` with everything on (the retry quota, a circuit
  breaker, the full HTTP classification); aiohttp-retry's ``RetryClient`` (``ExponentialRetry``, which
  checks the status and the exception type).
* ``the middleware alone``: the middleware called directly with a handler that returns a fixed 200 at
  once (no socket, no session), against a middleware that only calls the handler: the layer's own cost,
  free of the network's noise. aiohttp-retry wraps the session, not the handler, so it has no such row.
* ``503, 503, 200``: two 503s then a 200 with zero backoff, for both retry layers (ours: the quota and
  a breaker that such a sequence does not trip, as in ``bench_transport``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp_retry import ExponentialRetry, RetryClient
from yarl import URL

from asyncretry.aiohttp import RetryMiddleware
from benchmarks._common import Row, measure, table
from benchmarks.bench_transport import flaky_policy, full_policy

Once = Callable[[], Awaitable[Any]]


class Server:
    """An aiohttp.web server on 127.0.0.1 in its own thread: ``/ok`` answers 200, ``/flaky`` 503, 503, 200, ..."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._statuses: dict[str, itertools.cycle[int]] = {}
        self.port = 0

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(body=b'{"ok": true}', content_type="application/json")

    async def _flaky(self, request: web.Request) -> web.Response:
        # Each client its own 503, 503, 200 (a call that got out of step would not be measured as one).
        client = request.headers.get("x-client", "")
        status = next(self._statuses.setdefault(client, itertools.cycle((503, 503, 200))))
        body = b'{"ok": true}' if status == 200 else b""
        return web.Response(status=status, body=body, content_type="application/json")

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/ok", self._ok)
        app.router.add_get("/flaky", self._flaky)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def __enter__(self) -> Server:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def get(session: aiohttp.ClientSession | RetryClient, url: str, client: str = "") -> Once:
    headers = {"x-client": client}

    async def once() -> None:
        async with session.get(url, headers=headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{url} answered {response.status}")

    return once


class Answered:
    """What the stub handler returns: a response that is a plain 200 (all the success path reads of it)."""

    status = 200


def alone(middleware: Callable[[aiohttp.ClientRequest, Any], Awaitable[Any]]) -> Once:
    request = aiohttp.ClientRequest("GET", URL("http://127.0.0.1:9/ok"))
    answered = Answered()

    async def handler(request: aiohttp.ClientRequest) -> Any:
        return answered

    async def once() -> None:
        await middleware(request, handler)

    return once


async def passthrough(request: aiohttp.ClientRequest, handler: Any) -> Any:
    return await handler(request)


async def run(port: int, calls: int, rounds: int) -> list[Row]:
    base = f"http://127.0.0.1:{port}"
    bare = aiohttp.ClientSession()
    with_middleware = aiohttp.ClientSession(middlewares=[RetryMiddleware(policy=full_policy())])
    flaky_middleware = aiohttp.ClientSession(middlewares=[RetryMiddleware(policy=flaky_policy())])
    retry_session = aiohttp.ClientSession()
    theirs = RetryClient(client_session=retry_session,
                         retry_options=ExponentialRetry(attempts=3, start_timeout=0.0, statuses={503}))
    groups = [
        ("success", [
            ("ok/bare", "bare aiohttp.ClientSession", get(bare, base + "/ok")),
            ("ok/ours", "asyncretry RetryMiddleware (quota, breaker)", get(with_middleware, base + "/ok")),
            ("ok/aiohttp-retry", "aiohttp-retry RetryClient (ExponentialRetry)", get(theirs, base + "/ok")),
        ], calls),
        ("the middleware alone", [
            ("alone/passthrough", "a middleware that only calls the handler", alone(passthrough)),
            ("alone/ours", "asyncretry RetryMiddleware (quota, breaker)", alone(RetryMiddleware(policy=full_policy()))),
        ], calls * 5),
        ("503, 503, 200", [
            ("503/aiohttp-retry", "aiohttp-retry: 503, 503, 200 (start_timeout=0)",
             get(theirs, base + "/flaky", "theirs")),
            ("503/ours", "asyncretry: 503, 503, 200 (NoBackoff, quota, breaker)",
             get(flaky_middleware, base + "/flaky", "ours")),
        ], max(calls // 3, 50)),
    ]
    rows: list[Row] = []
    try:
        for group, cases, n in groups:
            best = await measure([(key, once) for key, _, once in cases], n, rounds)
            rows += [Row(group, key, label, best[key]) for key, label, _ in cases]
    finally:
        for session in (bare, with_middleware, flaky_middleware, retry_session):
            await session.close()
    return rows


def render(rows: list[Row]) -> str:
    lines = [
        f"asyncretry aiohttp middleware benchmark: Python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, "
        "asyncio, local server on 127.0.0.1, best of rounds",
        "",
        *table(rows),
    ]
    by_key = {r.key: r.ns for r in rows}
    mine = by_key["ok/ours"] - by_key["ok/bare"]
    theirs = by_key["ok/aiohttp-retry"] - by_key["ok/bare"]
    lines.append(f"  success path: ours adds {mine / 1000:.2f} us, aiohttp-retry adds {theirs / 1000:.2f} us "
                 f"(ours / bare = {by_key['ok/ours'] / by_key['ok/bare']:.3f}, "
                 f"aiohttp-retry / bare = {by_key['ok/aiohttp-retry'] / by_key['ok/bare']:.3f})")
    lines.append(f"  the middleware alone adds {(by_key['alone/ours'] - by_key['alone/passthrough']) / 1000:.2f} us "
                 "over a passthrough middleware")
    lines.append(f"  503, 503, 200: ours / aiohttp-retry = {by_key['503/ours'] / by_key['503/aiohttp-retry']:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds: rough figures, fast")
    parser.add_argument("--calls", type=int, default=None, help="requests per round in the success group")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (the best one counts)")
    args = parser.parse_args(argv)
    calls = args.calls or (300 if args.quick else 2_000)
    rounds = args.rounds or (3 if args.quick else 7)
    with Server() as server:
        print(render(asyncio.run(run(server.port, calls, rounds))))


if __name__ == "__main__":
    main()
