"""The test mode: no waits and fewer attempts, for the tests of code that uses asyncretry.

Two scopes: :func:`test_mode` (a context manager) applies to the current task and the tasks it starts;
with ``process_wide=True``, and with :func:`set_testing` (stamina's switch), it applies to every task and
every thread of the process, threads started with :class:`threading.Thread` included (they do not inherit
context variables). A call looks at its task's mode first, then at the process's.
"""

from __future__ import annotations

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
_process: list[TestMode | None] = [None]
"""The process-wide mode (one slot: a rebinding that every thread sees at once)."""


def current_test_mode() -> TestMode | None:
    """The test mode a call starting now obeys: its task's, else the process's, else ``None``."""
    mode = _TEST_MODE.get()
    return mode if mode is not None else _process[0]


def set_testing(testing: bool, *, max_attempts: int | None = None, no_wait: bool = True) -> None:
    """Switch the process-wide test mode on or off: every task and every thread sees it.

    For a test session (a ``conftest.py`` fixture) or code under test that starts its own threads;
    a :func:`test_mode` block still wins inside it.

    Args:
        testing: ``True`` to switch it on, ``False`` to switch it off (the other arguments are then ignored).
        max_attempts: cap on the attempts of every call (>= 1), or ``None`` to keep each policy's.
        no_wait: skip backoff sleeps (default ``True``).

    Raises:
        TypeError, ValueError: a setting of the wrong type or out of range.
    """
    check_bool("testing", testing)
    _process[0] = TestMode(max_attempts, no_wait) if testing else None


def is_testing() -> bool:
    """Whether a test mode applies to a call starting here (this task's, or the process's)."""
    return current_test_mode() is not None


@contextmanager
def test_mode(
    *, max_attempts: int | None = None, no_wait: bool = True, process_wide: bool = False  # noqa: PT028
) -> Iterator[TestMode]:
    """Within this block, retries do not wait and (optionally) make at most ``max_attempts`` attempts.

    By default it applies to the current task and the tasks it starts (a context variable), so
    concurrent tests do not disturb each other. Threads do not inherit it: with ``process_wide=True``
    it applies to every task and thread of the process until the block ends (then the previous
    process-wide mode is restored).

    Args:
        max_attempts: cap on the attempts of every call (>= 1), or ``None`` to keep each policy's.
        no_wait: skip backoff sleeps (default ``True``).
        process_wide: apply to every task and every thread, not only to this task (default ``False``).
    """
    mode = TestMode(max_attempts, no_wait)
    if check_bool("process_wide", process_wide):
        previous = _process[0]
        _process[0] = mode
        try:
            yield mode
        finally:
            _process[0] = previous
        return
    token = _TEST_MODE.set(mode)
    try:
        yield mode
    finally:
        _TEST_MODE.reset(token)


test_mode.__test__ = False  # type: ignore[attr-defined]
