"""What the executor (:mod:`._async._executor`) and the drivers read and hand on around the decision core.

The core (:class:`~._call.Call`) takes every input as an argument: :func:`caller_deadline` reads one of
them (the time the caller's own deadline leaves, from the enclosing cancel scopes), :func:`remaining`
combines it with the call's own deadline; :func:`deliver` hands the events the core decided to the
listeners (user code runs here, after the decision).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ._call import Call

__all__ = ["caller_deadline", "deliver", "remaining"]


def caller_deadline() -> float | None:
    """Seconds left before the enclosing cancel scope's deadline; ``None`` without one (or outside a loop)."""
    try:
        outer = anyio.current_effective_deadline()
    except RuntimeError:  # no event loop: synchronous code has no cancel scopes
        return None
    if outer == math.inf:
        return None
    return outer - anyio.current_time()


def remaining(call: Call, now: float) -> float | None:
    """Seconds left at ``now`` before the call's deadline or the caller's own; ``None`` if unbounded."""
    return call.left(now, caller_deadline())


def deliver(call: Call) -> None:
    """Emit the events the core decided: the listeners (user code) run here, after the decision."""
    events = call.take_events()
    if events is not None:
        bus = call.events
        for event in events:
            bus.emit(event)
