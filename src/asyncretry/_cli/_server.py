"""The demo's server: serves up to a capacity that changes over time, throttles above it, fails now and then.

One :class:`DemoServer` decides every response; it is reached either over real HTTP (:func:`serve` runs it
under uvicorn on 127.0.0.1, for ``asyncretry demo``) or in memory (:meth:`DemoServer.handle` as an
``httpx.MockTransport`` handler, for ``asyncretry simulate`` in virtual time). Both see the same behaviour:

* the capacity follows a :class:`~asyncretry._simulation.Scenario`: a token bucket admits ``C(t)``
  requests per second (the simulation's :class:`~asyncretry._simulation.SimulatedServer`); a request
  above it gets ``429 Too Many Requests`` with ``Retry-After: 1`` at once;
* a capacity of 0 is an outage: every request gets ``503`` at once;
* an admitted request takes ``latency`` seconds, and a fraction ``transient`` of them end in ``503``.
"""

from __future__ import annotations

import contextlib
import math
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from .._primitives._clock import DEFAULT_CLOCK, Clock, RandomSource
from .._simulation import Scenario, SimulatedServer
from .._validate import check_number

__all__ = ["DemoServer", "ServerTrace", "demo_scenario", "serve"]

_BODIES = {200: b"ok\n", 429: b"slow down\n", 503: b"unavailable\n"}
_DEMO_SCRIPT = ((0.0, 1.5), (0.25, 0.5), (0.5, 0.0), (2 / 3, 1.5))
"""The demo's capacity: (start as a fraction of the run, capacity as a fraction of the demand).

Each stretch shows something: room to spare (every configuration does well), half the demand
(throttling: retries, storms, the limiter finding the capacity), an outage (the breaker, the quota), and
room to spare again (who gets back how fast). There is one rise of the capacity, at the outage's end,
where the breaker's probe lets traffic back at the same moment of every run. The script had a second one
(30% of the demand after the outage, then 150%), out of a throttled steady state: the adaptive limiter
finds such a rise only with its next probe, whose phase against the rise is chance, and in a 12-s run
that chance alone moved its share by 8 points from seed to seed.
"""


def demo_scenario(duration: float, demand: float) -> Scenario:
    """The demo's capacity script, scaled to the clients' demand (requests per second).

    Room to spare (150% of the demand) for the first quarter of the run, then 50% of the demand until half
    of it, an outage until two thirds (2 s of the default 12), and room to spare again to the end.
    """
    duration = check_number("duration", duration, low=0.0, low_open=True)
    demand = check_number("demand", demand, low=0.0, low_open=True)
    return Scenario(
        name="demo",
        schedule=tuple((start * duration, share * demand) for start, share in _DEMO_SCRIPT),
        duration=duration,
        description="capacity 150% of the demand, 50%, an outage, then 150% again",
    )


@dataclass(slots=True)
class ServerTrace:
    """What the server saw, per time bin of ``bin_width`` seconds from the start of the run.

    Attributes:
        bin_width: seconds per bin.
        arrivals: requests that arrived (attempts sent by the clients).
        ok: ``200`` responses, by the time they were sent.
        throttled: ``429`` responses.
        failed: ``503`` responses (outage and transient failures).
    """

    bin_width: float
    arrivals: list[int]
    ok: list[int]
    throttled: list[int]
    failed: list[int]

    @classmethod
    def empty(cls, duration: float, bin_width: float) -> ServerTrace:
        bins = max(1, math.ceil(duration / bin_width - 1e-9))
        return cls(bin_width, [0] * bins, [0] * bins, [0] * bins, [0] * bins)


@dataclass(slots=True)
class DemoServer:
    """Decides the demo server's responses (see the module's docstring).

    Call :meth:`start` at the beginning of every run: it restarts the scenario and the trace.

    Args:
        scenario: the capacity script; a capacity of 0 is an outage.
        transient: the fraction of admitted requests that fail with ``503``, in ``[0, 1]``. Default 0.03.
        latency: the service time of an admitted request, seconds (>= 0). Default 0.02.
        burst: the token bucket's size, as seconds of capacity (> 0). Default 0.2.
        retry_after: the ``Retry-After`` of a ``429``, whole seconds (>= 0). Default 1.
        bin_width: the trace's resolution, seconds (> 0). Default 0.25.
        slow: the fraction of admitted requests that take ``20 * latency`` instead, in ``[0, 1]``: a latency
            tail, what hedged requests are for. Default 0.
        rng: the random source for transient failures (default: a ``random.Random(0)``).
        clock: the time source (default: the running event loop's clock).
    """

    scenario: Scenario
    transient: float = 0.03
    latency: float = 0.02
    burst: float = 0.2
    retry_after: int = 1
    bin_width: float = 0.25
    rng: RandomSource = field(default_factory=lambda: random.Random(0).random)
    slow: float = 0.0
    clock: Clock = DEFAULT_CLOCK
    trace: ServerTrace = field(init=False)
    _start: float = field(init=False, default=0.0)
    _bucket: SimulatedServer = field(init=False)

    def __post_init__(self) -> None:
        check_number("transient", self.transient, low=0.0, high=1.0)
        check_number("latency", self.latency, low=0.0)
        check_number("burst", self.burst, low=0.0, low_open=True)
        check_number("retry_after", self.retry_after, low=0.0)
        check_number("bin_width", self.bin_width, low=0.0, low_open=True)
        check_number("slow", self.slow, low=0.0, high=1.0)
        self.trace = ServerTrace.empty(self.scenario.duration, self.bin_width)
        self._bucket = SimulatedServer(self.scenario, burst=self.burst)

    def start(self) -> None:
        """Start the scenario now: a full bucket, an empty trace."""
        self._start = self.clock.now()
        self._bucket = SimulatedServer(self.scenario, burst=self.burst, start=self._start)
        self.trace = ServerTrace.empty(self.scenario.duration, self.bin_width)

    def _bin(self, now: float) -> int:
        return min(max(0, int((now - self._start) / self.bin_width)), len(self.trace.arrivals) - 1)

    def decide(self) -> tuple[int, float]:
        """Record an arriving request and return its status and how long it takes to answer, seconds."""
        now = self.clock.now()
        self.trace.arrivals[self._bin(now)] += 1
        if self.scenario.capacity_at(now - self._start) <= 0.0:
            return 503, 0.0
        if not self._bucket.admit(now):
            return 429, 0.0
        if self.transient and self.rng() < self.transient:
            return 503, self.latency
        if self.slow and self.rng() < self.slow:
            return 200, 20 * self.latency
        return 200, self.latency

    async def respond(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Decide, take the service time, record the response; returns status, headers and body."""
        status, service = self.decide()
        if service > 0.0:
            await self.clock.sleep(service)
        trace, k = self.trace, self._bin(self.clock.now())
        if status == 200:
            trace.ok[k] += 1
        elif status == 429:
            trace.throttled[k] += 1
        else:
            trace.failed[k] += 1
        body = _BODIES[status]
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        if status == 429:
            headers.append((b"retry-after", str(self.retry_after).encode()))
        return status, headers, body

    async def handle(self, request: httpx.Request) -> httpx.Response:
        """The in-memory way in: an ``httpx.MockTransport`` handler."""
        status, headers, body = await self.respond()
        return httpx.Response(status, headers=headers, content=body)

    async def asgi(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        """The HTTP way in: an ASGI application."""
        if scope["type"] != "http":
            return
        status, headers, body = await self.respond()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def listening_socket() -> socket.socket:
    """A TCP socket bound to a free port on 127.0.0.1, for the demo server.

    Made with ``IPPROTO_TCP``, not 0: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on sockets
    that say they are TCP, and with it on, the body sent after the headers waits for the client's delayed
    ACK: about 40 ms added to a random share of the answers on reused connections.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.asynccontextmanager
async def serve(app: Callable[..., Awaitable[None]], *, start_timeout: float = 10.0) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 (a free port) in this event loop; yields its base URL.

    Needs asyncio (uvicorn's own loop). The server stops when the block ends.

    Raises:
        RuntimeError: the server did not start within ``start_timeout`` seconds.
    """
    import uvicorn

    class QuietServer(uvicorn.Server):
        # uvicorn would take over Ctrl+C and re-raise it after shutdown; the demo handles it itself.
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    sock = listening_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, interface="asgi3", lifespan="off", log_config=None, log_level="warning", access_log=False, backlog=1024,
        timeout_keep_alive=30, timeout_graceful_shutdown=1,
    )
    server = QuietServer(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(start_timeout):
                while not server.started:
                    if server.should_exit:
                        raise RuntimeError("the demo server could not start")
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
    finally:
        sock.close()
