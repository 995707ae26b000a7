"""The test mode: no waits and fewer attempts, for the tests of code that uses asyncretry.

:func:`test_mode` (a context manager) applies to the current task and the tasks it starts (a context
variable), and to every other thread while the block is open: a thread does not inherit context
variables, and code under test that starts a :class:`threading.Thread` must not sleep through its
retries either. Tasks of the block's own thread outside the block are left alone, so concurrent tests on
one event loop do not disturb each other. :func:`set_testing` (stamina's switch) turns the same on for
the whole process. A call obeys, first found: its task's block, a block open in another thread, the
process's switch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .._validate import check_bool, check_int

__all__ = ["TestMode", "current_test_mode", "is_testing", "set_testing", "test_mode"]


@dataclass(frozen=True, slots=True)
class TestMode:
    """Active test-mode settings: ``max_attempts`` caps every policy's attempts (``None``: unchanged);
    ``no_wait`` skips every backoff sleep (delays are still computed and recorded)."""

    __test__ = False  # not a pytest test class

    max_attempts: int | None
    no_wait: bool

    def __post_init__(self) -> None:
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, low=1)
        check_bool("no_wait", self.no_wait)


_TEST_MODE: ContextVar[TestMode | None] = ContextVar("asyncretry_test_mode", default=None)
_blocks: list[tuple[int, TestMode]] = []
"""The open :func:`test_mode` blocks, oldest first, with the thread that opened each."""
_process: list[TestMode | None] = [None]
"""The process-wide switch of :func:`set_testing` (one slot: a rebinding every thread sees at once)."""
_lock = threading.Lock()


def current_test_mode() -> TestMode | None:
    """The test mode a call starting now obeys, or ``None``."""
    mode = _TEST_MODE.get()
    if mode is not None:
        return mode
    if _blocks:
        here = threading.get_ident()
        for thread, block in reversed(_blocks):
            if thread != here:  # a block of this thread that this task is not inside: not this task's
                return block
    return _process[0]


def is_testing() -> bool:
    """Whether a call starting here would run in test mode."""
    return current_test_mode() is not None


def set_testing(testing: bool, *, max_attempts: int | None = None, no_wait: bool = True) -> None:
    """Switch the process-wide test mode on or off: every task and every thread sees it.

    For a whole test session (a session-scoped fixture in ``conftest.py``); a :func:`test_mode` block
    still wins inside it.

    Args:
        testing: ``True`` to switch it on, ``False`` to switch it off (the other arguments are then ignored).
        max_attempts: cap on the attempts of every call (>= 1), or ``None`` to keep each policy's.
        no_wait: skip backoff sleeps (default ``True``).

    Raises:
        TypeError, ValueError: a setting of the wrong type or out of range.
    """
    _process[0] = TestMode(max_attempts, no_wait) if check_bool("testing", testing) else None


@contextmanager
def test_mode(*, max_attempts: int | None = None, no_wait: bool = True) -> Iterator[TestMode]:  # noqa: PT028
    """Within this block, retries do not wait and (optionally) make at most ``max_attempts`` attempts.

    It applies to the current task, the tasks it starts, and every other thread while the block is
    open (threads started inside it included); the other tasks of this thread are left alone, so
    concurrent tests on one event loop do not disturb each other.

    Args:
        max_attempts: cap on the attempts of every call (>= 1), or ``None`` to keep each policy's.
        no_wait: skip backoff sleeps (default ``True``).
    """
    mode = TestMode(max_attempts, no_wait)
    entry = (threading.get_ident(), mode)
    token = _TEST_MODE.set(mode)
    with _lock:
        _blocks.append(entry)
    try:
        yield mode
    finally:
        with _lock:
            # Blocks of different threads may close in any order: remove this one, wherever it is.
            for index in range(len(_blocks) - 1, -1, -1):
                if _blocks[index] is entry:
                    del _blocks[index]
                    break
        _TEST_MODE.reset(token)


test_mode.__test__ = False  # type: ignore[attr-defined]
