"""Whether a request body can be sent again exactly, and how: a body in memory as it is, a file rewound.

The same for every client whose request streams wrap what the user gave (httpx and httpx2 alike): a
stream holding a file-like object under ``_stream`` is rewound to where the first send started, a
multipart body whose file fields all seek is rewound by the client itself, and anything else (a
one-shot generator or async iterator) is never sent twice. Read by shape, importing no client.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["REPLAYABLE", "Replay", "replay_of"]


@dataclass(slots=True)
class Replay:
    """How a request body is sent again: ``ok`` says whether it can be; ``rewind`` restores a file."""

    ok: bool
    rewind: Callable[[], None] | None = None


REPLAYABLE = Replay(True)
"""A body in memory (or none): sent again as it is."""
_NOT_REPLAYABLE = Replay(False)


def replay_of(stream: Any, *, in_memory: bool) -> Replay:
    """Whether (and how) a request body can be sent again exactly.

    Args:
        stream: the client's request stream.
        in_memory: whether that stream is the client's body of bytes (sent again as it is).
    """
    if in_memory:
        return REPLAYABLE
    inner = getattr(stream, "_stream", None)
    if inner is not None and hasattr(inner, "read") and hasattr(inner, "seek"):
        return _file_replay(inner)
    fields = getattr(stream, "fields", None)
    if fields is not None:  # multipart: the client rewinds seekable file fields itself
        for item in fields:
            file = getattr(item, "file", None)
            if file is not None and not (hasattr(file, "seek") and _seekable(file)):
                return _NOT_REPLAYABLE
        return REPLAYABLE
    return _NOT_REPLAYABLE


def _file_replay(inner: Any) -> Replay:
    """A file body: rewound to where it stands now, if it can tell and seek."""
    if inspect.iscoroutinefunction(inner.seek) or inspect.iscoroutinefunction(inner.tell):
        # An async file (anyio.open_file, trio.open_file): rewind the file it wraps, whose
        # tell() and seek() answer at once; an async file-like object without one is not replayed.
        inner = getattr(inner, "wrapped", None)
        if inner is None or inspect.iscoroutinefunction(getattr(inner, "seek", None)):
            return _NOT_REPLAYABLE
    try:
        if not inner.seekable():
            return _NOT_REPLAYABLE
        position = inner.tell()
    except (OSError, ValueError, AttributeError):
        return _NOT_REPLAYABLE
    if type(position) is not int:
        return _NOT_REPLAYABLE  # not a position we know how to return to
    return Replay(True, lambda: inner.seek(position))


def _seekable(file: Any) -> bool:
    try:
        return bool(file.seekable())
    except (OSError, ValueError, AttributeError):
        return False
