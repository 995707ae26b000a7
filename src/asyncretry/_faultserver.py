"""Runs an ASGI application under uvicorn on 127.0.0.1 in a background thread: :class:`FaultServer`.

The server has an asyncio loop of its own in its thread, so the clients under test may run on asyncio or
trio. :mod:`asyncretry._testserver`'s :class:`~asyncretry._testserver.FaultyApp` is what it usually runs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._validate import check_int, check_seconds

__all__ = ["FaultServer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(slots=True)
class _Thread:
    server: Any
    thread: threading.Thread
    error: list[BaseException] = field(default_factory=list)


class FaultServer:
    """Runs an ASGI app (usually a :class:`FaultyApp`) under uvicorn in a background thread.

    Args:
        app: the ASGI application.
        host: the address to listen on (default ``"127.0.0.1"``).
        port: the port (default 0: any free port; read the chosen one from :attr:`port`).
        startup_timeout: seconds to wait for the server to listen (default 10).
        shutdown_timeout: seconds open connections get to finish when stopping (default 1).

    Use it as a context manager (``with FaultServer(app) as server: ...``) or call :meth:`start` and
    :meth:`stop`. The server has its own asyncio loop, so clients may run on asyncio or trio.
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 10.0,
        shutdown_timeout: float = 1.0,
    ) -> None:
        self.app = app
        self.host = host
        self._port = check_int("port", port, low=0, high=65535)
        self._startup_timeout = check_seconds("startup_timeout", startup_timeout, low_open=True)
        self._shutdown_timeout = check_seconds("shutdown_timeout", shutdown_timeout)
        self._running: _Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        if self._running is None:
            raise RuntimeError("the server is not running; call start() first")
        return self._port

    @property
    def url(self) -> str:
        """The server's base URL, ``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def open_connections(self) -> int:
        """How many client connections the server has open right now."""
        if self._running is None:
            return 0
        return len(self._running.server.server_state.connections)

    def start(self) -> FaultServer:
        """Start listening; returns once the server accepts connections.

        Raises:
            RuntimeError: the server is already running, or did not start in time.
        """
        import uvicorn

        if self._running is not None:
            raise RuntimeError("the server is already running")
        config = uvicorn.Config(
            self.app, host=self.host, port=self._port, loop="asyncio", http="h11", lifespan="off",
            log_level="warning", access_log=False, timeout_graceful_shutdown=math.ceil(self._shutdown_timeout),
        )
        server = uvicorn.Server(config)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                server.run()
            except BaseException as error:  # uvicorn exits with SystemExit when it cannot bind: report it
                errors.append(error)

        thread = threading.Thread(target=run, name=f"asyncretry-faultserver-{id(self):x}", daemon=True)
        running = _Thread(server, thread, errors)
        thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not server.started:
            if not running.thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                running.thread.join(self._startup_timeout)
                cause = running.error[0] if running.error else None
                raise RuntimeError(f"the fault server did not start on {self.host}:{self._port}") from cause
            time.sleep(0.001)
        self._port = server.servers[0].sockets[0].getsockname()[1]
        self._running = running
        return self

    def stop(self) -> None:
        """Stop the server and wait for its thread to end (idempotent)."""
        running, self._running = self._running, None
        if running is None:
            return
        running.server.should_exit = True
        running.thread.join(self._shutdown_timeout + 5.0)
        if running.thread.is_alive():
            running.server.force_exit = True
            running.thread.join(5.0)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._running is not None else "stopped"
        return f"<FaultServer {where} app={type(self.app).__name__}>"
