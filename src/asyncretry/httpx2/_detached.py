# Generated from src/asyncretry/httpx/_detached.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""The sends of hedged and timed calls, never cancelled while they wait in httpcore's connection pool.

Each send runs in a task of its own (see :func:`asyncretry._http._detach.run_detached` for why); this module
makes the copy of the request that carries the send's own ``trace`` extension.
"""

from __future__ import annotations

import httpx2

from .._http._detach import Trace, run_detached

__all__ = ["DetachedTransport", "send_detached"]


async def send_detached(transport: httpx2.AsyncBaseTransport, request: httpx2.Request) -> httpx2.Response:
    """``transport.handle_async_request(request)`` in a task of its own, abandoned safely if the caller is cancelled.

    The request is sent as a copy carrying its own ``trace`` extension (the request's own ``trace``, if any, is
    still called), so that two sends of one request at once each know when their connection takes them.
    """

    async def send(trace: Trace) -> httpx2.Response:
        extensions = dict(request.extensions)
        extensions["trace"] = trace
        copy = httpx2.Request(
            request.method, request.url, headers=request.headers, stream=request.stream, extensions=extensions
        )
        return await transport.handle_async_request(copy)

    return await run_detached(send, request.extensions.get("trace"))


class DetachedTransport(httpx2.AsyncBaseTransport):
    """A transport whose every send is :func:`send_detached` through ``inner`` (for sends the call may cancel)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await send_detached(self._inner, request)
