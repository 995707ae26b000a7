# Generated from src/asyncretry/httpx/_peek.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""Peeking at an error body: the first bytes of a response that needs judging, read and put back for the caller.

Private to :mod:`asyncretry.httpx2`. An error code may be in the body (AWS's JSON and XML errors), so the
transports read up to ``max_error_body`` bytes of it before judging; the bytes read go back in front of
the stream, so that the caller reads the whole body as if nobody had looked. A body that does not come
in time is judged without it, and reading it later raises ``httpx2.ReadTimeout``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import anyio
import httpx2

from .._http._body import decode_bounded
from .._http._streams import Remaining
from ._classify import PrefixedStream
from ._streams import Stalled

__all__ = ["peek_async", "peek_sync"]

Peeked = tuple[httpx2.Response, bytes | None]


def _peeked(response: httpx2.Response, raw: bytes, rest: Any, limit: int) -> Peeked:
    """The response with the bytes read from it put back in front of its stream, and the body decoded
    (``limit`` bounds the decoded bytes too: a compressed bomb is not inflated)."""
    response.stream = PrefixedStream(raw, rest)
    if rest is not None:
        return response, None
    return response, decode_bounded(response.headers, raw, limit)


async def peek_async(response: httpx2.Response, limit: int, budget: float) -> Peeked:
    """Read up to ``limit`` bytes of an error body within ``budget`` seconds, kept for the caller."""
    chunks: list[bytes] = []
    size = 0
    stream = response.stream
    iterator = stream.__aiter__()  # type: ignore[union-attr]
    finished = True
    stalled = False
    try:
        with anyio.move_on_after(budget) as waited:
            async for chunk in iterator:
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    finished = False
                    break
        stalled = waited.cancelled_caught
    except httpx2.ReadTimeout:
        stalled = True  # httpx2's own read timeout came first: the same as running out of budget
    except Exception:
        await response.aclose()
        raise
    raw = b"".join(chunks)
    if stalled:
        # The body did not come in time: judge the response by its status and headers; whoever reads
        # its body later gets what came, then an httpx2.ReadTimeout (never a silently short body).
        response.stream = PrefixedStream(raw, Stalled(stream, budget))
        return response, None
    if finished:
        # Read to the end, the stream still holds its connection until it is closed: close it now,
        # the caller gets the bytes from memory (the response itself stays open for the caller).
        await stream.aclose()  # type: ignore[union-attr]
    return _peeked(response, raw, None if finished else Remaining(iterator, stream), limit)


def peek_sync(response: httpx2.Response, limit: int, budget: float) -> Peeked:
    """:func:`peek_async` for a blocking stream, within httpx2's own read timeout (``budget`` is not used: a
    blocking read cannot be given a budget of its own)."""
    chunks: list[bytes] = []
    size = 0
    stream = response.stream
    iterator = iter(cast(Iterable[bytes], stream))
    finished = True
    try:
        for chunk in iterator:
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                finished = False
                break
    except httpx2.ReadTimeout:
        # A blocking read cannot be given a budget of its own: httpx2's read timeout is the budget.
        # As in the async transport, the response is then judged by its status and headers.
        response.stream = PrefixedStream(b"".join(chunks), Stalled(stream, math.nan))
        return response, None
    except Exception:
        response.close()
        raise
    if finished:
        stream.close()  # type: ignore[union-attr]  # as in the async transport: release the connection now
    return _peeked(response, b"".join(chunks), None if finished else Remaining(iterator, stream), limit)
