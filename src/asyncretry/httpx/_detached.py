"""The sends of hedged and timed calls, never cancelled while they wait in httpcore's connection pool.

Each send runs in a task of its own (see :func:`asyncretry._http._detach.run_detached` for why); this module
makes the copy of the request that carries the send's own ``trace`` extension.
"""

from __future__ import annotations

import httpx

from .._http._detach import Trace, run_detached

__all__ = ["DetachedTransport", "send_detached"]


async def send_detached(transport: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
    """``transport.handle_async_request(request)`` in a task of its own, abandoned safely if the caller is cancelled.

    The request is sent as a copy carrying its own ``trace`` extension (the request's own ``trace``, if any, is
    still called), so that two sends of one request at once each know when their connection takes them.
    """

    async def send(trace: Trace) -> httpx.Response:
        extensions = dict(request.extensions)
        extensions["trace"] = trace
        copy = httpx.Request(
            request.method, request.url, headers=request.headers, stream=request.stream, extensions=extensions
        )
        return await transport.handle_async_request(copy)

    return await run_detached(send, request.extensions.get("trace"))


class DetachedTransport(httpx.AsyncBaseTransport):
    """A transport whose every send is :func:`send_detached` through ``inner`` (for sends the call may cancel)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await send_detached(self._inner, request)
