"""A fault-injecting HTTP application for tests, benchmarks and the demo: :class:`FaultyApp`.

:class:`FaultyApp` is a plain ASGI application that answers every path and method. What it does with
each request is decided in this order (the first rule that applies wins):

1. the request's own script: an ``x-faults: reset,503,ok`` header gives the faults of the 1st, 2nd,
   3rd ... arrival of the request whose ``x-request-id`` header it carries (a retried request keeps its
   headers, so its script plays out across the retries); after the script, the rules below apply;
2. the server's script (:attr:`ServerConfig.script`): the faults of the first requests, in arrival order;
3. a burst window (:attr:`ServerConfig.bursts`): every request inside it gets ``burst_status`` (503);
4. the quota (:attr:`ServerConfig.quota`): a fixed window admitting that many requests, announced in
   every answer (``RateLimit``, or ``X-RateLimit-*``); the rest of a spent window gets 429;
5. the capacity (:attr:`ServerConfig.capacity`, :attr:`ServerConfig.capacity_schedule`): a token bucket
   admitting that many requests per second; the others get 429 with ``Retry-After``;
6. random faults drawn from a seeded generator (``reset_rate``, ``error_rate``, ``truncate_rate``,
   ``slow_rate``);
7. ``"ok"``: 200 with a small JSON body.

The faults (:data:`FAULTS`, or any status code as digits, such as ``"503"``):

* ``"ok"``: 200, ``{"id": ..., "arrival": n, "method": ..., "path": ...}`` (padded to ``body_size``);
* ``"slow"``: ``"ok"`` after ``slow_delay`` seconds;
* ``"reset"``: the connection is reset (TCP RST) without a response: the client sees a read error;
* ``"close"``: the connection is closed (FIN) without a response: "server disconnected";
* ``"truncate"``: a 200 announcing more bytes (``Content-Length``) than it sends before closing;
* ``"429"``, ``"503"``, ...: that status with a JSON error body; 429 (``throttle_status``) carries
  ``Retry-After`` when ``retry_after`` is set.

Every request is recorded (:meth:`FaultyApp.received`): method, path, body, ``x-request-id`` and what
was done with it, so a test can check that no request was lost and no POST was sent twice.

``reset``, ``close`` and ``truncate`` act on the connection itself, which ASGI does not expose: they
need uvicorn (the app finds the connection through uvicorn's ``send`` callable). :class:`FaultServer`
runs the app under uvicorn on 127.0.0.1 in a background thread with its own asyncio loop::

    app = FaultyApp(ServerConfig(capacity=200.0, retry_after=1.0))
    with FaultServer(app) as server:
        httpx.get(server.url + "/items")          # e.g. http://127.0.0.1:40123/items
        print(app.statistics())

This module is private: the test suite, ``benchmarks/bench_adaptive_http.py`` and ``asyncretry demo`` use it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio

from ._faultserver import FaultServer as FaultServer
from ._validate import as_seconds, check_int, check_number, check_seconds

__all__ = ["FAULTS", "FaultServer", "FaultyApp", "Received", "ServerConfig", "ServerStatistics"]

_QUOTA_STYLES = ("ratelimit", "x-ratelimit")

FAULTS: tuple[str, ...] = ("ok", "slow", "reset", "close", "truncate")
"""The named faults; any HTTP status code written as digits (``"503"``) is a fault too."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def _check_fault(name: str, fault: str) -> str:
    if not isinstance(fault, str):
        raise TypeError(f"{name} must be a fault name or a status code as a string, got {fault!r}")
    fault = fault.strip().lower()
    if fault.isdigit():
        check_int(name, int(fault), low=100, high=599)
        return fault
    if fault not in FAULTS:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, FAULTS))} or a status code, got {fault!r}")
    return fault



def _check_rate(name: str, value: float) -> float:
    return check_number(name, value, low=0.0, high=1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """What :class:`FaultyApp` does to the requests it receives (see the module docstring for the order).

    Times are seconds since the app's start: when the :class:`FaultyApp` was made or last
    :meth:`~FaultyApp.reset` (call ``reset()`` right before a run so that schedules start with it).

    Args:
        capacity: requests per second admitted, or ``None`` (default) for no limit; the others are
            answered ``throttle_status`` (429).
        capacity_burst: how many requests may be admitted at once after a quiet spell (default
            ``max(1, capacity / 20)``: 50 ms worth of requests).
        capacity_schedule: ``(seconds since the start, capacity)`` steps that change the capacity over time
            (``None`` lifts the limit); before the first step, ``capacity`` applies.
        throttle_status: the status of requests beyond the capacity (default 429).
        retry_after: seconds sent in ``Retry-After`` with throttle answers (rounded up to whole seconds),
            or ``None`` (default 1.0) for no header.
        bursts: ``(seconds since the start, duration)`` windows in which every request gets ``burst_status``.
        burst_status: the status answered in a burst (default 503).
        script: the faults of the first requests, in arrival order (``("503", "reset", "ok")``).
        error_rate: the probability that a request gets ``burst_status`` (default 0).
        reset_rate: the probability that a connection is reset instead of answered (default 0).
        truncate_rate: the probability that a 200's body is cut short (default 0).
        slow_rate: the probability that a request is answered after ``slow_delay`` (default 0).
        slow_delay: seconds a slow answer waits (default 0.5).
        latency: seconds every answer waits (default 0).
        body_size: the least size of an ``"ok"`` body in bytes (padded with spaces; default 0).
        seed: the seed of the random faults (default 0), so that a run can be repeated.
        quota: ``(requests, seconds)``: a fixed-window quota, the first ``requests`` of each window of
            ``seconds`` from the start admitted, the others answered ``throttle_status``; every answer
            announces the window's remaining count and reset. ``None`` (default): no quota.
        quota_headers: how the quota is announced: ``"ratelimit"`` (the IETF ``RateLimit`` field,
            ``"window";r=...;t=...`` with the reset in whole seconds, rounded up, and ``RateLimit-Policy``,
            ``"window";q=...;w=...`` with the window in whole seconds) or ``"x-ratelimit"``
            (``X-RateLimit-Remaining`` and ``X-RateLimit-Reset-After`` in seconds with a fraction).
    """

    capacity: float | None = None
    capacity_burst: float | None = None
    capacity_schedule: tuple[tuple[float, float | None], ...] = ()
    throttle_status: int = 429
    retry_after: float | timedelta | None = 1.0
    bursts: tuple[tuple[float, float], ...] = ()
    burst_status: int = 503
    script: tuple[str, ...] = ()
    error_rate: float = 0.0
    reset_rate: float = 0.0
    truncate_rate: float = 0.0
    slow_rate: float = 0.0
    slow_delay: float | timedelta = 0.5
    latency: float | timedelta = 0.0
    body_size: int = 0
    seed: int = 0
    quota: tuple[int, float] | None = None
    quota_headers: str = "ratelimit"

    def __post_init__(self) -> None:
        s = object.__setattr__
        if self.capacity is not None:
            s(self, "capacity", check_number("capacity", self.capacity, low=0.0, low_open=True))
        if self.capacity_burst is not None:
            s(self, "capacity_burst", check_number("capacity_burst", self.capacity_burst, low=1.0))
        steps: list[tuple[float, float | None]] = []
        for start, rate in self.capacity_schedule:
            begin = check_seconds("capacity_schedule[...][0]", start)
            if steps and begin <= steps[-1][0]:
                raise ValueError(
                    f"capacity_schedule must be in increasing order of time, got {self.capacity_schedule!r}"
                )
            limit = None if rate is None else check_number("capacity_schedule[...][1]", rate, low=0.0, low_open=True)
            steps.append((begin, limit))
        s(self, "capacity_schedule", tuple(steps))
        check_int("throttle_status", self.throttle_status, low=400, high=599)
        check_int("burst_status", self.burst_status, low=400, high=599)
        if self.retry_after is not None:
            s(self, "retry_after", check_seconds("retry_after", self.retry_after))
        windows = tuple(
            (check_seconds("bursts[...][0]", start), check_seconds("bursts[...][1]", length))
            for start, length in self.bursts
        )
        s(self, "bursts", windows)
        script: Any = self.script
        if isinstance(script, str):
            raise TypeError(f"script must be a sequence of faults, got the string {script!r}")
        s(self, "script", tuple(_check_fault("script[...]", f) for f in script))
        for name in ("error_rate", "reset_rate", "truncate_rate", "slow_rate"):
            s(self, name, _check_rate(name, getattr(self, name)))
        s(self, "slow_delay", check_seconds("slow_delay", self.slow_delay))
        s(self, "latency", check_seconds("latency", self.latency))
        check_int("body_size", self.body_size, low=0, high=64 * 1024 * 1024)
        check_int("seed", self.seed)
        if self.quota is not None:
            requests, seconds = self.quota
            s(self, "quota", (check_int("quota[0]", requests, low=1),
                              check_seconds("quota[1]", seconds, low=0.0, low_open=True)))
        if self.quota_headers not in _QUOTA_STYLES:
            raise ValueError(f"quota_headers must be one of {', '.join(map(repr, _QUOTA_STYLES))}, "
                             f"got {self.quota_headers!r}")

    def capacity_at(self, elapsed: float) -> float | None:
        """The capacity (requests per second) in force ``elapsed`` seconds after the start."""
        capacity = self.capacity
        for start, rate in self.capacity_schedule:
            if start > elapsed:
                break
            capacity = rate
        return capacity


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the server saw it.

    Attributes:
        number: its arrival number (1 for the first request since the start or the last reset).
        time: when it arrived, in seconds since the start.
        method: the HTTP method.
        path: the path (without the query string).
        request_id: its ``x-request-id`` header, or ``None``.
        arrival: how many times a request with this id had arrived, this one included (1 without an id).
        body: the request body.
        fault: what the server did (``"ok"``, ``"503"``, ``"reset"`` ...).
    """

    number: int
    time: float
    method: str
    path: str
    request_id: str | None
    arrival: int
    body: bytes
    fault: str


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """Counters of a :class:`FaultyApp` since its start (or the last :meth:`FaultyApp.reset`).

    Attributes:
        requests: requests received.
        answered: requests answered with a complete response (any status).
        ok: 200 answers (slow ones included).
        throttled: answers with ``throttle_status`` (beyond the capacity, or scripted).
        errors: other error statuses.
        resets: connections reset or closed without a response.
        truncated: bodies cut short.
        in_flight: requests being handled right now.
        max_in_flight: the most requests handled at once.
        elapsed: seconds since the start.
    """

    requests: int
    answered: int
    ok: int
    throttled: int
    errors: int
    resets: int
    truncated: int
    in_flight: int
    max_in_flight: int
    elapsed: float


class _Capacity:
    """A plain token bucket on the server's clock (the server runs in its own thread and loop)."""

    __slots__ = ("_last", "_rate", "_tokens")

    def __init__(self) -> None:
        self._rate: float | None = None
        self._tokens = 0.0
        self._last = 0.0

    def admit(self, rate: float | None, burst: float | None, now: float) -> bool:
        if rate is None:
            self._rate = None
            return True
        size = burst if burst is not None else max(1.0, rate / 20.0)
        if self._rate is None:  # the limit starts (or starts again): a full bucket
            self._tokens, self._last = size, now
        self._rate = rate
        self._tokens = min(size, self._tokens + (now - self._last) * rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class FaultyApp:
    """An ASGI application that answers every request, injecting the faults its :class:`ServerConfig` asks for.

    Args:
        config: what to do (default ``ServerConfig()``: answer every request ``"ok"``).
        clock: monotonic seconds for the capacity, the bursts and the records (default
            :func:`time.monotonic`; the app runs in the server's own thread and loop).

    Thread-safe: the server's thread handles requests while others read the counters or reconfigure.
    """

    def __init__(self, config: ServerConfig | None = None, *, clock: Callable[[], float] | None = None) -> None:
        self._clock = clock if clock is not None else time.monotonic
        self._lock = threading.Lock()
        self._config = config if config is not None else ServerConfig()
        if not isinstance(self._config, ServerConfig):
            raise TypeError(f"config must be a ServerConfig, got {config!r}")
        self._reset_state()

    def _reset_state(self) -> None:
        self._start = self._clock()
        self._rng = random.Random(self._config.seed)
        self._capacity = _Capacity()
        self._window = (-1, 0)  # the quota's window (its number since the start) and the requests it admitted
        self._received: list[Received] = []
        self._arrivals: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()
        self._in_flight = 0
        self._max_in_flight = 0

    # ------------------------------------------------------------------------------ control
    @property
    def config(self) -> ServerConfig:
        """The configuration in force."""
        return self._config

    def configure(self, config: ServerConfig | None = None, /, **changes: Any) -> ServerConfig:
        """Replace the configuration (or change some of its fields); counters and the clock go on.

        Returns:
            The new configuration.
        """
        with self._lock:
            new = config if config is not None else self._config
            if changes:
                new = dataclasses.replace(new, **changes)
            if not isinstance(new, ServerConfig):
                raise TypeError(f"config must be a ServerConfig, got {config!r}")
            if new.seed != self._config.seed:
                self._rng = random.Random(new.seed)
            self._config = new
            return new

    def reset(self) -> None:
        """Forget every request and start the clock (capacity schedule, bursts, script) again."""
        with self._lock:
            self._reset_state()

    # ---------------------------------------------------------------------------- inspection
    def received(self) -> list[Received]:
        """Every request received since the start (or the last reset), in arrival order."""
        with self._lock:
            return list(self._received)

    def arrivals(self, request_id: str) -> int:
        """How many times a request with this ``x-request-id`` arrived."""
        with self._lock:
            return self._arrivals[request_id]

    def repeated(self, method: str | None = None) -> dict[str, int]:
        """The request ids received more than once (with their counts), of one method or all."""
        with self._lock:
            counts = Counter(
                r.request_id for r in self._received
                if r.request_id is not None and (method is None or r.method == method.upper())
            )
        return {rid: n for rid, n in counts.items() if n > 1}

    def statistics(self) -> ServerStatistics:
        """A snapshot of the counters."""
        with self._lock:
            c = self._counts
            return ServerStatistics(
                requests=len(self._received),
                answered=c["answered"],
                ok=c["ok"],
                throttled=c["throttled"],
                errors=c["errors"],
                resets=c["resets"],
                truncated=c["truncated"],
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                elapsed=self._clock() - self._start,
            )

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<FaultyApp requests={stats.requests} ok={stats.ok} throttled={stats.throttled} "
            f"config={self._config!r}>"
        )

    # ------------------------------------------------------------------------------- the app
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"FaultyApp serves HTTP only, got a {scope['type']!r} connection")
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        with self._lock:
            record, config, announced = self._decide(scope, headers, body)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            await self._act(record, config, receive, send, announced)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _decide(
        self, scope: Scope, headers: dict[str, str], body: bytes
    ) -> tuple[Received, ServerConfig, list[tuple[bytes, bytes]]]:
        """Choose the fault of one request and record it (under the lock); the quota's announcement."""
        config = self._config
        now = self._clock() - self._start
        request_id = headers.get("x-request-id")
        arrival = 1
        if request_id is not None:
            self._arrivals[request_id] += 1
            arrival = self._arrivals[request_id]
        number = len(self._received) + 1
        fault = self._fault(config, headers.get("x-faults"), arrival, number, now)
        record = Received(
            number=number, time=now, method=str(scope["method"]).upper(), path=str(scope["path"]),
            request_id=request_id, arrival=arrival, body=body, fault=fault,
        )
        self._received.append(record)
        return record, config, self._announcement(config, now)

    def _used(self, seconds: float, now: float) -> tuple[int, int]:
        """The quota's window at ``now`` (its number since the start) and the requests it admitted so far."""
        window = int(now // seconds)
        number, used = self._window
        return window, used if window == number else 0

    def _spend(self, quota: tuple[int, float], now: float) -> bool:
        """Take one request from the quota's window at ``now``; whether the window had one left."""
        window, used = self._used(quota[1], now)
        self._window = window, used + (used < quota[0])
        return used < quota[0]

    def _announcement(self, config: ServerConfig, now: float) -> list[tuple[bytes, bytes]]:
        """The quota's headers as of ``now`` (none without a quota)."""
        if config.quota is None:
            return []
        requests, seconds = config.quota
        window, used = self._used(seconds, now)
        left, reset = requests - used, (window + 1) * seconds - now
        if config.quota_headers == "ratelimit":
            return [(b"ratelimit", f'"window";r={left};t={math.ceil(reset)}'.encode()),
                    (b"ratelimit-policy", f'"window";q={requests};w={math.ceil(seconds)}'.encode())]
        return [(b"x-ratelimit-remaining", str(left).encode()), (b"x-ratelimit-reset-after", f"{reset:.3f}".encode())]

    def _fault(self, config: ServerConfig, script: str | None, arrival: int, number: int, now: float) -> str:
        if script:
            faults = [f for f in script.split(",") if f.strip()]
            if arrival <= len(faults):
                return _check_fault("x-faults", faults[arrival - 1])
        if number <= len(config.script):
            return config.script[number - 1]
        for start, length in config.bursts:
            if start <= now < start + length:
                return str(config.burst_status)
        if config.quota is not None and not self._spend(config.quota, now):
            return str(config.throttle_status)
        if not self._capacity.admit(config.capacity_at(now), config.capacity_burst, now):
            return str(config.throttle_status)
        rng = self._rng
        for rate, fault in (
            (config.reset_rate, "reset"),
            (config.error_rate, str(config.burst_status)),
            (config.truncate_rate, "truncate"),
            (config.slow_rate, "slow"),
        ):
            if rate and rng.random() < rate:
                return fault
        return "ok"

    def _count(self, *names: str) -> None:
        with self._lock:
            self._counts.update(names)

    async def _act(
        self, record: Received, config: ServerConfig, receive: Receive, send: Send, announced: list[tuple[bytes, bytes]]
    ) -> None:
        fault = record.fault
        latency = as_seconds(config.latency)
        if fault == "slow":
            latency += as_seconds(config.slow_delay)
        if latency > 0.0:
            await anyio.sleep(latency)
        if fault in ("reset", "close"):
            _connection_of(send).abort_connection(reset=fault == "reset")
            self._count("resets")
            await _wait_disconnect(receive)
            return
        if fault in ("ok", "slow", "truncate"):
            payload = {"id": record.request_id, "arrival": record.arrival, "method": record.method, "path": record.path}
            content = json.dumps(payload).encode()
            content += b" " * max(0, config.body_size - len(content))
            if fault == "truncate":
                connection = _connection_of(send)
                content += b" " * max(0, 64 - len(content))
                await send({"type": "http.response.start", "status": 200, "headers": _headers(len(content), announced)})
                await send({"type": "http.response.body", "body": content[: len(content) // 2], "more_body": True})
                connection.abort_connection(reset=False)
                self._count("truncated")
                await _wait_disconnect(receive)
                return
            await _respond(send, 200, content, announced)
            self._count("answered", "ok")
            return
        status = int(fault)
        extra = list(announced)
        if status == config.throttle_status:
            code = "TooManyRequestsException"
            if config.retry_after is not None:
                extra.append((b"retry-after", str(math.ceil(as_seconds(config.retry_after))).encode()))
            counter = "throttled"
        else:
            code = "ServiceUnavailable" if status == 503 else f"HTTP{status}"
            counter = "errors"
        content = json.dumps({"code": code, "message": f"injected {status}", "id": record.request_id}).encode()
        await _respond(send, status, content, extra)
        self._count("answered", counter)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def _headers(length: int, extra: tuple[tuple[bytes, bytes], ...] | list[tuple[bytes, bytes]] = ()) -> list[Any]:
    return [(b"content-type", b"application/json"), (b"content-length", str(length).encode()), *extra]


async def _respond(send: Send, status: int, content: bytes, extra: Any) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _headers(len(content), extra)})
    await send({"type": "http.response.body", "body": content, "more_body": False})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away before sending it all
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _wait_disconnect(receive: Receive) -> None:
    # The server notices the closed connection on its next loop turn; returning before that would
    # make it try to answer 500 on the dead connection.
    with anyio.move_on_after(2.0):
        while (await receive())["type"] != "http.disconnect":
            pass


class _Connection:
    """The TCP connection under an ASGI request, reached through uvicorn's ``send`` callable."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def abort_connection(self, *, reset: bool) -> None:
        """Close the connection at once: with a TCP reset (RST) if ``reset``, else with a plain FIN."""
        transport = self._transport
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                # A zero linger time makes close() send RST instead of FIN: the client's read fails.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        else:
            transport.close()


def _connection_of(send: Send) -> _Connection:
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None or not hasattr(transport, "abort"):
        raise RuntimeError("the 'reset', 'close' and 'truncate' faults need the app to run under uvicorn")
    return _Connection(transport)
