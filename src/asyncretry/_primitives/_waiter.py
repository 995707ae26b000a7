"""A queued acquisition of a token bucket: its states, how it is woken, and whether an event loop runs.

:class:`~asyncretry._primitives._bucket.TokenBucket` keeps its waiters in a FIFO queue of
:class:`Waiter` objects; the head sleeps in a cancel scope until its tokens are due, the others wait on an
event until they become the head or are served.
"""

from __future__ import annotations

import sys
from asyncio import _get_running_loop  # C-accelerated, returns None instead of raising

import anyio

__all__ = ["CANCELLED", "EXPIRED", "GRANTED", "REJECTED", "WAITING", "Waiter", "in_event_loop"]

WAITING = 0
GRANTED = 1
CANCELLED = 2
EXPIRED = 3
REJECTED = 4


class Waiter:
    """One queued :meth:`TokenBucket.acquire` call."""

    __slots__ = ("event", "n", "scope", "state", "yield_first")

    def __init__(self, n: float, event: anyio.Event | None) -> None:
        self.n = n
        self.state = WAITING
        self.yield_first = False  # yield once after the grant, to let earlier grants resume first
        # Waiters behind the head wait on ``event``; the head sleeps inside ``scope``.
        self.event = event
        self.scope: anyio.CancelScope | None = None

    def wake(self) -> None:
        """Make the waiter look at the bucket again (it was served, or must re-plan)."""
        if self.scope is not None:
            self.scope.cancel()
        elif self.event is not None:
            self.event.set()


def in_event_loop() -> bool:
    if _get_running_loop() is not None:
        return True
    trio = sys.modules.get("trio")  # never import trio just to learn that it is not running
    in_trio_run = getattr(getattr(trio, "lowlevel", None), "in_trio_run", None)
    return in_trio_run is not None and bool(in_trio_run())
