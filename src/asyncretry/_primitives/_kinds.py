"""The vocabulary of outcomes shared by the quota (what a retry costs), backoff and the engine."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["OutcomeKind"]


class OutcomeKind(StrEnum):
    """How one attempt ended.

    ``TRANSIENT``, ``THROTTLING``, ``TIMEOUT`` and ``CONNECTION`` are retryable kinds; ``SUCCESS`` and
    ``NOT_RETRYABLE`` end the call.
    """

    SUCCESS = "success"
    TRANSIENT = "transient"
    """A transient server error (500, 502, 503, 504, 408, RequestTimeout ...)."""
    THROTTLING = "throttling"
    """The server asked us to slow down (429, 509, ThrottlingException ...)."""
    TIMEOUT = "timeout"
    """The attempt timed out (read/write timeout, per-attempt timeout): costs the timeout retry cost."""
    CONNECTION = "connection"
    """No response was received (refused, reset, DNS, TLS, protocol error)."""
    NOT_RETRYABLE = "not_retryable"
    """A failure that retrying will not fix (validation, auth, not found, a non-idempotent request)."""
    CANCELLED = "cancelled"
    """Only in a call's history: a hedged call's attempt cancelled because another one answered first."""

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset(
    {OutcomeKind.TRANSIENT, OutcomeKind.THROTTLING, OutcomeKind.TIMEOUT, OutcomeKind.CONNECTION}
)
