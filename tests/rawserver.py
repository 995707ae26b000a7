"""A raw HTTP/1.1 server on 127.0.0.1 for the aiohttp middleware tests: it answers any bytes a test gives it.

The fault server (:mod:`asyncretry._testserver`) answers well-formed responses; a hostile server sends
whatever it likes: any status, header bytes and body, a ``Content-Length`` it does not keep, a body
that stalls. :class:`RawServer` runs in a thread with its own asyncio loop; each request is read (head
and ``Content-Length`` body), then answered with the next of the test's answers and the connection
closed (a stalled answer holds its connection until the server stops).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

STALL = b"<stall>"
"""Put at the end of an answer: the rest never comes (the connection stays open until the server stops)."""


class RawServer:
    """Answers each request with ``answer(n)`` (``n``: 1 for the first request), raw bytes."""

    def __init__(self, answer: Callable[[int], bytes]) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self._stop: asyncio.Event | None = None
        self.port = 0

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._stop.wait()
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            self.requests.append(head + body)
            answer = self.answer(len(self.requests))
            stall = answer.endswith(STALL)
            writer.write(answer.removesuffix(STALL))
            await writer.drain()
            if stall:
                assert self._stop is not None
                await self._stop.wait()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


def response(status: int, headers: dict[str, str] | list[tuple[bytes, bytes]] | None = None, body: bytes = b"",
             *, length: bool = True) -> bytes:
    """The bytes of an HTTP/1.1 response (``Connection: close``; ``Content-Length`` unless ``length=False``)."""
    items = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()] if isinstance(headers, dict) \
        else list(headers or [])
    if length:
        items.append((b"Content-Length", str(len(body)).encode()))
    lines = [f"HTTP/1.1 {status} X".encode()] + [k + b": " + v for k, v in items] + [b"Connection: close", b"", b""]
    return b"\r\n".join(lines) + body
