"""Sends that run in a task of their own, so that a cancelled caller never cancels one mid-way in the pool.

httpcore's pool (httpx's, 1.0.9 and earlier, upstream issue httpcore #1093) loses a connection slot for
good when a request is cancelled while it waits for a connection that the pool has just created for it: the
connection stays ``CONNECTING`` with no request, the pool never reclaims it, and once every slot is lost each
request fails with ``PoolTimeout`` against a healthy server (httpx2's pool reclaims those, but not the
``NEW`` connections described below). Hedging cancels sends as a matter of course (the losing send of every
hedged call, every send when the caller is cancelled) and doubles the requests waiting in a contended pool,
and a deadline or an attempt timeout cancels every send that outlives it, so the transports would trigger
that bug long before a plain client does.

:func:`run_detached` runs one send in a task of its own. The caller waits for it; if the caller stops
waiting (cancelled), the send is *abandoned*. A send is cancelled only once the HTTP connection has taken
the request (its first ``http11.`` or ``http2.`` ``trace`` event): from there on, httpcore closes or hands
back the connection of a cancelled request. Anywhere before, it can lose the connection: in the pool's
queue (the bug above), and also between a new connection's handshake and its first request (a connection
that is established but never used stays ``NEW`` with no request, and is never reclaimed either). If the
connection has already taken the request, the send is cancelled at once and the caller waits for the
pool's cleanup, as it would have without a task of its own (so the pool is at rest when the call returns).
If not, it goes on alone until it has (bounded by the request's pool and connect timeouts) and is
cancelled there; the caller is not held up by it. A response that arrives for nobody is closed. Nothing
here imports an HTTP client.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

import anyio

__all__ = ["Trace", "run_detached"]

_RUNNING: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references to tasks
_STARTED = ("http11.", "http2.")  # trace events of the HTTP connection's own request
_CLEANUP = 1.0  # seconds a cancelled caller waits for a send it cancelled to close its connection

Trace = Callable[[str, dict[str, Any]], Awaitable[None]]
"""httpcore's ``trace`` request extension."""


class _Closable(Protocol):
    async def aclose(self) -> None: ...


R = TypeVar("R", bound=_Closable)


class _Send(Generic[R]):
    """One detached send: its outcome, and whether anyone still waits for it."""

    __slots__ = ("abandoned", "done", "error", "response", "scope", "started")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()
        self.started = False  # the HTTP connection has taken the request: cancelling is safe from now on
        self.abandoned = False  # the caller stopped waiting
        self.response: R | None = None
        self.error: Exception | None = None

    def traced(self, user_trace: Trace | None) -> Trace:
        """The request's ``trace`` extension: notes the connection's first event, then calls the user's own."""

        async def trace(name: str, info: dict[str, Any]) -> None:
            if not self.started and name.startswith(_STARTED):
                self.started = True
                if self.abandoned:
                    self.scope.cancel()  # inside the connection's request: it is cleaned up on cancel
            if user_trace is not None:
                await user_trace(name, info)

        return trace

    async def run(self, send: Callable[[], Awaitable[R]]) -> None:
        response = None
        try:
            with self.scope:
                response = await send()
        except Exception as error:  # handed to the caller, who raises it (or to nobody once abandoned)
            self.error = error
        if response is not None and self.abandoned:
            await response.aclose()  # nobody will read it
            response = None
        self.response = response
        self.done.set()

    def abandon(self) -> None:
        self.abandoned = True
        if self.started:
            self.scope.cancel()


def _spawn(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Start ``work`` in a task of its own, outside the caller's task group, on whichever loop runs, with the
    caller's context variables (a tracing span, say), as asyncio's tasks have them."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio runs on trio, whose system tasks start from an empty context
        import trio

        trio.lowlevel.spawn_system_task(work, context=contextvars.copy_context())
        return
    task = loop.create_task(work())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)


async def run_detached(send: Callable[[Trace], Awaitable[R]], user_trace: Trace | None) -> R:
    """``send(trace)`` in a task of its own, abandoned safely if the caller is cancelled.

    Args:
        send: sends a copy of the request carrying ``trace`` as its ``trace`` extension (so that two sends
            of one request at once each know when their connection takes them).
        user_trace: the request's own ``trace`` extension, if any (still called).
    """
    state: _Send[R] = _Send()
    trace = state.traced(user_trace)
    _spawn(lambda: state.run(lambda: send(trace)))
    delivered = False
    try:
        await state.done.wait()
        delivered = True
    finally:
        if not delivered:  # cancelled while waiting
            state.abandon()
            with anyio.CancelScope(shield=True):
                if state.started:  # cancelled at once in its task: wait for the pool's cleanup, so it is at rest
                    with anyio.move_on_after(_CLEANUP):
                        await state.done.wait()
                if state.response is not None:  # it arrived as the caller was cancelled: nobody will read it
                    await state.response.aclose()
    if state.error is not None:
        raise state.error
    assert state.response is not None
    return state.response
