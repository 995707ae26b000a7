"""Hedged sends that are never cancelled while they wait in httpcore's connection pool.

httpcore's pool (1.0.9 and earlier, upstream issue httpcore #1093) loses a connection slot for good when a
request is cancelled while it waits for a connection that the pool has just created for it: the connection
stays ``CONNECTING`` with no request, the pool never reclaims it, and once every slot is lost each request
fails with ``PoolTimeout`` against a healthy server. Hedging cancels sends as a matter of course (the losing
send of every hedged call, every send when the caller is cancelled or an attempt times out) and doubles the
requests waiting in a contended pool, so it would trigger that bug long before plain httpx does.

:func:`send_detached` runs one send in a task of its own. The caller waits for it; if the caller stops
waiting (cancelled), the send is *abandoned*. If the pool has already handed it a connection (the request's
first ``trace`` event), it is cancelled at once and the caller waits for httpcore's cleanup, as it would have
without a task of its own (so the pool is at rest when the call returns). If it still waits in the pool's
queue, it goes on alone until the pool hands it a connection (bounded by the request's pool timeout) and is
cancelled there, where httpcore cleans up after a cancellation; the caller is not held up by it. A response
that arrives for nobody is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import httpx

__all__ = ["send_detached"]

_RUNNING: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references to tasks
_CLEANUP = 1.0  # seconds a cancelled caller waits for a send it cancelled to close its connection


class _Send:
    """One detached send: its request, its outcome, and whether anyone still waits for it."""

    __slots__ = ("abandoned", "done", "error", "placed", "response", "scope")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()
        self.placed = False  # the pool has handed the request a connection: cancelling is safe from now on
        self.abandoned = False  # the caller stopped waiting
        self.response: httpx.Response | None = None
        self.error: Exception | None = None

    def traced(self, user_trace: Callable[[str, dict[str, Any]], Awaitable[None]] | None) -> Any:
        """The request's ``trace`` extension: notes the first event, then calls the user's own, if any."""

        async def trace(name: str, info: dict[str, Any]) -> None:
            if not self.placed:
                self.placed = True
                if self.abandoned:
                    self.scope.cancel()  # out of the pool's queue: the connection is cleaned up on cancel
            if user_trace is not None:
                await user_trace(name, info)

        return trace

    async def run(self, transport: httpx.AsyncBaseTransport, request: httpx.Request) -> None:
        response = None
        try:
            with self.scope:
                response = await transport.handle_async_request(request)
        except Exception as error:  # handed to the caller, who raises it (or to nobody once abandoned)
            self.error = error
        if response is not None and self.abandoned:
            await response.aclose()  # nobody will read it
            response = None
        self.response = response
        self.done.set()

    def abandon(self) -> None:
        self.abandoned = True
        if self.placed:
            self.scope.cancel()


def _spawn(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Start ``work`` in a task of its own, outside the caller's task group, on whichever loop runs."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio runs on trio
        import trio

        trio.lowlevel.spawn_system_task(work)
        return
    task = loop.create_task(work())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)


async def send_detached(transport: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
    """``transport.handle_async_request(request)`` in a task of its own, abandoned safely if the caller is cancelled.

    The request is sent as a copy carrying its own ``trace`` extension (the request's own ``trace``, if any, is
    still called), so that two sends of one request at once each know when their connection is placed.
    """
    send = _Send()
    extensions = dict(request.extensions)
    extensions["trace"] = send.traced(request.extensions.get("trace"))
    copy = httpx.Request(request.method, request.url, headers=request.headers, stream=request.stream,
                         extensions=extensions)
    _spawn(lambda: send.run(transport, copy))
    delivered = False
    try:
        await send.done.wait()
        delivered = True
    finally:
        if not delivered:  # cancelled while waiting
            send.abandon()
            with anyio.CancelScope(shield=True):
                if send.placed:  # cancelled at once in its task: wait for httpcore's cleanup, so the pool is at rest
                    with anyio.move_on_after(_CLEANUP):
                        await send.done.wait()
                if send.response is not None:  # it arrived as the caller was cancelled: nobody will read it
                    await send.response.aclose()
    if send.error is not None:
        raise send.error
    assert send.response is not None
    return send.response
