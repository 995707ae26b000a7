"""`fetch`: send a request and read its whole body, retrying failures while reading the body too."""

from __future__ import annotations

from typing import Any

import httpx

from ._report import EXTENSION

__all__ = ["fetch"]


async def fetch(client: httpx.AsyncClient, method: str, url: httpx.URL | str, **kwargs: Any) -> httpx.Response:
    """Send a request through ``client`` and read its whole body inside the retry attempt.

    An error while reading a response body (a connection reset half-way, a truncated body) happens
    after a transport has returned, where a plain ``client.request`` cannot retry it. Through an
    :class:`AsyncRetryTransport`, this reads the body inside the attempt instead, so such errors are
    classified and retried like any other (idempotent requests only) and count against the same
    attempts, quota and deadline.

    Args:
        client: a client whose transport is an :class:`AsyncRetryTransport`.
        method: the HTTP method.
        url: the URL.
        **kwargs: anything ``client.request`` accepts.

    Raises:
        TypeError: the client's transport is not an :class:`AsyncRetryTransport`.
    """
    from ._async._transport import AsyncRetryTransport

    transport = getattr(client, "_transport", None)
    if not isinstance(transport, AsyncRetryTransport):
        raise TypeError(
            "fetch() needs an httpx.AsyncClient whose transport is an AsyncRetryTransport, got "
            f"{type(transport).__name__}"
        )
    extensions = dict(kwargs.pop("extensions", None) or {})
    overrides = dict(extensions.get(EXTENSION) or {})
    overrides["read_body"] = True
    extensions[EXTENSION] = overrides
    return await client.request(method, url, extensions=extensions, **kwargs)
