"""Making an asyncretry error into its HTTP client's twin class: a new instance, never a changed ``__class__``.

Each HTTP integration defines, for the errors asyncretry raises itself, classes that inherit from both the
asyncretry error and the client's own error (``asyncretry.aiohttp.CircuitOpenError`` is an
``asyncretry.CircuitOpenError`` and an ``aiohttp.ClientConnectionError``). :func:`twin_of` builds the
instance of such a class that carries everything the original error carried.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["twin_of"]

E = TypeVar("E", bound=BaseException)


def twin_of(error: BaseException, kind: type[E]) -> E:
    """A new ``kind`` instance carrying all of ``error``: its arguments and attributes (the attempt
    history among them), its notes, cause, context and traceback.

    ``kind`` must be a subclass of ``type(error)`` that adds no constructor state of its own: the
    instance is made without calling ``__init__`` (which may take arguments ``error`` no longer has)
    and receives ``error``'s attributes instead.
    """
    if not issubclass(kind, type(error)):
        raise TypeError(f"kind must be a subclass of {type(error).__name__}, got {kind.__name__}")
    twin = kind.__new__(kind)
    twin.args = error.args
    twin.__dict__.update(vars(error))
    notes = getattr(error, "__notes__", None)
    if notes is not None:
        twin.__notes__ = list(notes)
    twin.__cause__, twin.__context__ = error.__cause__, error.__context__
    twin.__suppress_context__ = error.__suppress_context__
    return twin.with_traceback(error.__traceback__)
