"""The test mode: no waits and fewer attempts, for the tests of code that uses asyncretry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .._validate import check_bool, check_int

__all__ = ["TestMode", "current_test_mode", "test_mode"]


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
current_test_mode = _TEST_MODE.get


@contextmanager
def test_mode(*, max_attempts: int | None = None, no_wait: bool = True) -> Iterator[TestMode]:  # noqa: PT028
    """Within this block, retries do not wait and (optionally) make at most ``max_attempts`` attempts.

    It applies to the current task and the tasks it starts (a context variable), so parallel tests
    do not disturb each other.

    Args:
        max_attempts: cap on the attempts of every call (>= 1), or ``None`` to keep each policy's.
        no_wait: skip backoff sleeps (default ``True``).
    """
    mode = TestMode(max_attempts, no_wait)
    token = _TEST_MODE.set(mode)
    try:
        yield mode
    finally:
        _TEST_MODE.reset(token)


test_mode.__test__ = False  # type: ignore[attr-defined]
