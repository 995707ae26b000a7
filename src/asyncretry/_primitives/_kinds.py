"""The vocabulary of outcomes shared by the quota (what a retry costs), backoff and the engine."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["OutcomeKind"]


class OutcomeKind(StrEnum):
    """How one attempt ended.

    ``TRANSIENT``, ``THROTTLING``, ``TIMEOUT`` and ``CONNECTION`` are retryable kinds; ``SUCCESS`` and
    ``NOT_RETRYABLE`` end the call.

    Attributes:
        retryable: whether another attempt may follow an outcome of this kind.
    """

    retryable: bool

    def __new__(cls, value: str, retryable: bool = False) -> OutcomeKind:
        # The engine asks each outcome whether it is retryable several times: a plain attribute of the
        # member, not a property that looks it up.
        member = str.__new__(cls, value)
        member._value_ = value
        member.retryable = retryable
        return member

    SUCCESS = "success"
    TRANSIENT = "transient", True
    """A transient server error (500, 502, 503, 504, 408, RequestTimeout ...)."""
    THROTTLING = "throttling", True
    """The server asked us to slow down (429, 509, ThrottlingException ...)."""
    TIMEOUT = "timeout", True
    """The attempt timed out (read/write timeout, per-attempt timeout): costs the timeout retry cost."""
    CONNECTION = "connection", True
    """No response was received (refused, reset, DNS, TLS, protocol error)."""
    NOT_RETRYABLE = "not_retryable"
    """A failure that retrying will not fix (validation, auth, not found, a non-idempotent request)."""
    CANCELLED = "cancelled"
    """Only in a call's history: a hedged call's attempt cancelled because another one answered first."""
