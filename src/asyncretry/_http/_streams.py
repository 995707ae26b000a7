"""The rest of a response stream that a transport has started reading (to peek at an error body).

Read by shape (``__aiter__``/``__iter__``, ``aclose``/``close``), importing no client.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Remaining"]


class Remaining:
    """The rest of a partly read stream (the iterator already started) and its closer."""

    def __init__(self, iterator: Any, stream: Any) -> None:
        self._iterator = iterator
        self._stream = stream

    async def __aiter__(self) -> Any:
        async for chunk in self._iterator:
            yield chunk

    def __iter__(self) -> Any:
        yield from self._iterator

    async def aclose(self) -> None:
        await self._stream.aclose()

    def close(self) -> None:
        self._stream.close()
