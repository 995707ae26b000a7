# Generated from src/asyncretry/httpx/_streams.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""The streams of responses a transport has looked into: a stalled error body, and closing.

Private to :mod:`asyncretry.httpx2`: the transports put the bytes they read back in front of these.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import httpx2

from ._classify import PrefixedStream

__all__ = ["Stalled", "discard", "discard_sync"]


async def discard(response: httpx2.Response | None) -> None:
    """Close a response nobody will read (a retried one), even while being cancelled, so that its
    connection goes back to the pool and the retry's bookkeeping is not interrupted half-way."""
    if response is None:
        return
    stream = response.stream
    if type(stream) is httpx2.ByteStream or (isinstance(stream, PrefixedStream) and stream.in_memory):
        await response.aclose()  # a body in memory: closing it cannot wait on anything
        return
    with anyio.move_on_after(5.0, shield=True):
        await response.aclose()


def discard_sync(response: httpx2.Response | None) -> None:
    """Close a response nobody will read (a retried one), in the sync transport."""
    if response is not None:
        response.close()


class Stalled:
    """The rest of an error body that stopped coming while it was peeked at: reading it is a ReadTimeout."""

    def __init__(self, stream: Any, waited: float) -> None:
        self._stream = stream
        self._waited = waited

    def _error(self) -> httpx2.ReadTimeout:
        within = "httpx2's read timeout" if math.isnan(self._waited) else f"{self._waited:g} s"
        return httpx2.ReadTimeout(f"the error body stalled: nothing more came within {within}")

    def __aiter__(self) -> Stalled:
        return self

    async def __anext__(self) -> bytes:
        raise self._error()

    def __iter__(self) -> Any:
        raise self._error()

    async def aclose(self) -> None:
        await self._stream.aclose()

    def close(self) -> None:
        self._stream.close()
