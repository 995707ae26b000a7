"""50 concurrent clients against a local server that admits only R requests/s: goodput and throttling per retry mode.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_adaptive_http                 # 10 s per run, about 2 minutes
    .venv/bin/python -m benchmarks.bench_adaptive_http --quick         # 3 s per run
    .venv/bin/python -m benchmarks.bench_adaptive_http --rate 200 --duration 15 --layout independent

The server is :class:`asyncretry._testserver.FaultyApp` under uvicorn on 127.0.0.1, in a subprocess (so
that it does not share the clients' GIL). It admits ``R`` requests per second (a token bucket with 50 ms
of burst) and answers 429 beyond that, without ``Retry-After`` (as AWS services throttle), so what is
measured is each mode's own reaction to throttling. The server is restarted for every run.

Each of the 50 clients sends GETs back to back (a closed loop, no think time) through an
``AsyncRetryTransport`` for ``--duration`` seconds. Two layouts:

* ``independent``: 50 separate clients, each with its own transport (its own quota and limiter), like
  50 SDK clients in 50 processes;
* ``shared``: one client (one transport, so one quota and one limiter for the origin) used by 50 tasks.

Modes: no retries (``max_attempts=1``), standard (``RetryPolicy()``), adaptive with the default limiter
profile (``RetryPolicy(mode="adaptive")``) and AWS's exact adaptive mode (``RetryPolicy.aws_adaptive()``
with the ``"aws"`` limiter profile), plus any other limiter profile the library offers.

Figures, over the whole run and over its second half (after CUBIC has had time to settle):

* goodput / R: successful calls per second divided by R (1.0 means the capacity is fully used);
* throttled: the fraction of the attempts that reached the server and were answered 429;
* attempts/s: the load offered to the server; failed calls: calls that ended with an error (a 429
  after the last attempt, or ``RetryCapacityExceeded`` once the quota was spent);
* Jain: Jain's fairness index over the clients' successful calls (1: all equal; independent layout
  only), and idle: how many clients had no successful call in the whole run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import httpx

from asyncretry import OutcomeKind, RetryPolicy, history_of
from asyncretry._primitives._limiter import AdaptiveLimiterConfig
from asyncretry._primitives._limiter_config import PROFILES as LIMITER_PROFILES
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo
from benchmarks._common import server_url

CLIENTS = 50

SERVER = r"""
import json, sys
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig
app = FaultyApp(ServerConfig(capacity=float(sys.argv[1]), retry_after=None))
with FaultServer(app) as server:
    print(server.url, flush=True)
    sys.stdin.readline()  # serve until the parent says stop
    stats = app.statistics()
print(json.dumps({"requests": stats.requests, "ok": stats.ok, "throttled": stats.throttled}), flush=True)
"""


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    policy: RetryPolicy | None  # None: a bare httpx client, no retry layer at all


@dataclass(slots=True)
class Tally:
    """What the clients saw, stamped with times relative to the start of the run."""

    successes: list[float] = field(default_factory=list)
    failures: list[float] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)
    throttled: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    per_client: list[int] = field(default_factory=lambda: [0] * CLIENTS)  # successes in the window


@dataclass(frozen=True, slots=True)
class Result:
    mode: str
    layout: str
    duration: float
    rate: float
    tally: Tally
    server: dict[str, int]

    def fairness(self) -> tuple[float, int]:
        """(Jain's index over the clients' successes, clients with no success at all); shared layout: 1, 0."""
        counts = self.tally.per_client
        if self.layout == "shared":
            return 1.0, 0
        total, squares = sum(counts), sum(c * c for c in counts)
        jain = total * total / (len(counts) * squares) if squares else 1.0
        return jain, sum(1 for c in counts if c == 0)

    def window(self, start: float) -> tuple[float, float, float, float]:
        """(goodput / R, throttled fraction, attempts/s, failed calls fraction) from ``start`` to the end."""
        span = self.duration - start
        t = self.tally

        def count(times: list[float]) -> int:
            return sum(1 for x in times if x >= start)

        ok, failed, attempts, throttled = (count(t.successes), count(t.failures), count(t.attempts),
                                           count(t.throttled))
        calls = ok + failed
        return (
            ok / span / self.rate,
            throttled / attempts if attempts else 0.0,
            attempts / span,
            failed / calls if calls else 0.0,
        )


def modes() -> list[Mode]:
    found = [
        Mode("no retries (max_attempts=1)", RetryPolicy(max_attempts=1)),
        Mode("standard: RetryPolicy()", RetryPolicy()),
        Mode(f"adaptive: RetryPolicy(mode='adaptive') [{_profile(RetryPolicy(mode='adaptive'))}]",
             RetryPolicy(mode="adaptive")),
        Mode(f"adaptive: RetryPolicy.aws_adaptive() [{_profile(RetryPolicy.aws_adaptive())}]",
             RetryPolicy.aws_adaptive()),
    ]
    shown = {m.policy.limiter_config.profile for m in found if m.policy is not None and m.policy.limiter_config}
    for profile in LIMITER_PROFILES:
        if profile in shown:
            continue
        try:
            policy = RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(profile=profile))
        except (ValueError, TypeError, NotImplementedError):
            continue
        found.append(Mode(f"adaptive: limiter profile {profile!r}", policy))
    return found


def _profile(policy: RetryPolicy | None) -> str:
    config = policy.limiter_config if policy is not None else None
    return "no limiter" if config is None else f"limiter profile {config.profile!r}"


# ------------------------------------------------------------------------------------------- the run
def record(tally: Tally, at: float, started: float, info: RetryInfo | None, error: Exception | None) -> None:
    history = info.history if info is not None else (history_of(error) if error is not None else None)
    if history is not None:
        for attempt in history.attempts:
            when = attempt.started - started + attempt.duration
            tally.attempts.append(when)
            if attempt.kind is OutcomeKind.THROTTLING:
                tally.throttled.append(when)


async def run_once(url: str, mode: Mode, layout: str, duration: float) -> Tally:
    tally = Tally()
    clients: list[httpx.AsyncClient] = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)

    def make() -> httpx.AsyncClient:
        if mode.policy is None:
            client = httpx.AsyncClient(base_url=url, limits=limits, timeout=10.0)
        else:
            transport = AsyncRetryTransport(httpx.AsyncHTTPTransport(limits=limits), policy=mode.policy)
            client = httpx.AsyncClient(transport=transport, base_url=url, timeout=10.0)
        clients.append(client)
        return client

    shared = make() if layout == "shared" else None
    per_client = [shared or make() for _ in range(CLIENTS)]
    started = anyio.current_time()
    clock: Callable[[], float] = anyio.current_time

    stopping = False

    async def worker(index: int, client: httpx.AsyncClient) -> None:
        while True:
            try:
                response = await client.get("/items")
            except Exception as error:  # the call failed after its retries: counted, then go on
                if stopping:
                    return  # the run is over (the engine may refuse to wait in a cancelled scope)
                now = clock() - started
                tally.failures.append(now)
                name = type(error).__name__
                tally.errors[name] = tally.errors.get(name, 0) + 1
                record(tally, now, started, None, error)
                continue
            now = clock() - started
            info = response.extensions.get(EXTENSION)
            if isinstance(info, RetryInfo):
                record(tally, now, started, info, None)
            else:  # no retry layer: one attempt per call
                tally.attempts.append(now)
                if response.status_code == 429:
                    tally.throttled.append(now)
            if response.status_code == 200:
                tally.successes.append(now)
                if now <= duration:
                    tally.per_client[index] += 1
            else:
                tally.failures.append(now)
                key = f"HTTP {response.status_code}"
                tally.errors[key] = tally.errors.get(key, 0) + 1

    try:
        async with anyio.create_task_group() as tg:
            for index, client in enumerate(per_client):
                tg.start_soon(worker, index, client)
            # Stop by cancelling, not with a timeout: the engine never starts a wait that would run past
            # the caller's deadline, so a deadline at the end of the run would change what is measured.
            await anyio.sleep(duration)
            stopping = True
            tg.cancel_scope.cancel()
    finally:
        for client in clients:
            await client.aclose()
    # Only what completed inside the window counts.
    for name in ("successes", "failures", "attempts", "throttled"):
        setattr(tally, name, [x for x in getattr(tally, name) if 0.0 <= x <= duration])
    return tally


class ThrottlingServer:
    """The throttling server (``SERVER``) in a subprocess, admitting ``rate`` requests/s, for a ``with`` block.

    :attr:`url` is where it listens; :meth:`stop` ends it and returns its counts. Leaving the block
    without :meth:`stop` (an error) kills it.
    """

    def __init__(self, rate: float) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(rate)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._stopped = False
        self.url = ""

    def __enter__(self) -> ThrottlingServer:
        assert self._process.stdout is not None
        try:
            self.url = server_url(self._process.stdout.readline())
        except BaseException:
            self.__exit__()
            raise
        return self

    def stop(self) -> dict[str, int]:
        """Tell the server to stop; its counts of ``requests``, ``ok`` and ``throttled``."""
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write("stop\n")
        process.stdin.flush()
        stats: dict[str, int] = json.loads(process.stdout.readline())
        self._stopped = True
        return stats

    def __exit__(self, *exc: object) -> None:
        if not self._stopped:
            self._process.kill()
        self._process.wait(10)


def run_mode(mode: Mode, layout: str, rate: float, duration: float, backend: str) -> Result:
    with ThrottlingServer(rate) as server:
        tally = anyio.run(run_once, server.url, mode, layout, duration, backend=backend)
        stats = server.stop()
    return Result(mode.name, layout, duration, rate, tally, stats)


# ----------------------------------------------------------------------------------------- reporting
def render(results: list[Result], rate: float, duration: float, backend: str) -> str:
    width = max(len(r.mode) for r in results)
    half = duration / 2
    lines = [
        f"adaptive HTTP benchmark: {CLIENTS} clients, server capacity R = {rate:g} req/s (429 beyond, no "
        f"Retry-After), {duration:g} s per run, {backend}, Python {sys.version.split()[0]}",
        "",
        f"  {'mode':<{width}}  {'goodput/R':>9}  {'throttled':>9}  {'attempts/s':>10}  {'failed':>6}"
        f"  {'Jain':>5}  {'idle':>4}  | 2nd half: {'goodput/R':>9}  {'throttled':>9}  {'attempts/s':>10}",
    ]
    for layout in dict.fromkeys(r.layout for r in results):
        lines.append(f"layout: {layout}")
        for r in (x for x in results if x.layout == layout):
            g, th, a, f = r.window(0.0)
            g2, th2, a2, _ = r.window(half)
            jain, idle = r.fairness()
            lines.append(
                f"  {r.mode:<{width}}  {g:>9.3f}  {th:>9.1%}  {a:>10.1f}  {f:>6.1%}  {jain:>5.2f}  {idle:>4}"
                f"  |           {g2:>9.3f}  {th2:>9.1%}  {a2:>10.1f}"
            )
        lines.append("")
    lines.append("server-side check (requests received, answered 200, answered 429) and client errors:")
    for r in results:
        errors = ", ".join(f"{k} x{v}" for k, v in sorted(r.tally.errors.items())) or "none"
        s = r.server
        lines.append(f"  [{r.layout}] {r.mode}: server {s['requests']} / {s['ok']} / {s['throttled']}; "
                     f"errors: {errors}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 s per run instead of 10")
    parser.add_argument("--duration", type=float, default=None, help="seconds per run (default 10)")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second the server admits")
    parser.add_argument("--layout", choices=("independent", "shared", "both"), default="both")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--modes", default=None, help="comma-separated indexes of the modes to run (0-based)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each mode and layout (default 1)")
    args = parser.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 10.0)
    layouts = ("independent", "shared") if args.layout == "both" else (args.layout,)
    chosen = modes()
    if args.modes:
        chosen = [chosen[int(i)] for i in args.modes.split(",")]
    results: list[Result] = []
    for layout in layouts:
        for mode in [m for m in chosen for _ in range(args.runs)]:
            started = time.perf_counter()
            result = run_mode(mode, layout, args.rate, duration, args.backend)
            g, th, _, _ = result.window(0.0)
            jain, idle = result.fairness()
            print(f"  ran [{layout}] {mode.name}: goodput/R {g:.3f}, throttled {th:.1%}, Jain {jain:.2f}, "
                  f"{idle} clients with no success "
                  f"({time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)
            results.append(result)
    print(render(results, args.rate, duration, args.backend))


if __name__ == "__main__":
    main()
