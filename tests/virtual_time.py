"""Virtual time for the suite's async code, on either anyio backend.

asyncio runs on asyncretry's own virtual-time loop, trio on ``MockClock(autojump_threshold=0)``; both jump
straight to the next timer, so a backoff or a sleep takes no real time and timing is exact.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import trio.testing

from asyncretry.testing import virtual_time_loop

T = TypeVar("T")


def backend_options(backend: str) -> dict[str, Any]:
    """anyio's ``backend_options`` that run ``backend`` ("asyncio" or "trio") in virtual time."""
    if backend == "asyncio":
        return {"loop_factory": virtual_time_loop}
    return {"clock": trio.testing.MockClock(autojump_threshold=0)}


def run(main: Callable[[], Awaitable[T]], backend: str) -> T:
    """``anyio.run(main)`` on ``backend`` in virtual time."""
    return anyio.run(main, backend=backend, backend_options=backend_options(backend))
