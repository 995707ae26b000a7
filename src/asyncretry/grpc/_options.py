"""Per-call options: ``with call_options(idempotent=True): await stub.Method(request)``.

gRPC interceptors see only the call's method, metadata and timeout, so what one call wants of its
retries travels in a context variable: grpc.aio starts each intercepted call in a task that copies
the caller's context, so the options set around the call are the ones its interceptor reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .. import HedgingConfig, RetryPolicy
from .._validate import check_str

__all__ = ["CallOptions", "call_options", "current_options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOptions:
    """What the calls made inside :func:`call_options` want of their retries (``None``: the interceptors' own).

    Args:
        idempotent: whether the call may run twice (overrides the classifier's method lists).
        retry: ``False`` sends the call once (its failures still reach the breaker and the limiter).
        hedge: ``False`` never hedges the call; a :class:`~asyncretry.HedgingConfig` hedges it so.
        policy: a :class:`~asyncretry.RetryPolicy` for the call (its attempts, backoff, deadline).
        scope: the scope whose quota, limiter and breaker the call uses.
    """

    idempotent: bool | None = None
    retry: bool | None = None
    hedge: HedgingConfig | bool | None = None
    policy: RetryPolicy | None = None
    scope: str | None = None

    def __post_init__(self) -> None:
        for name in ("idempotent", "retry"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool or None, got {value!r}")
        if self.hedge is not None and self.hedge is not False and not isinstance(self.hedge, HedgingConfig):
            raise TypeError(f"hedge must be False, a HedgingConfig or None, got {self.hedge!r}")
        if self.policy is not None and not isinstance(self.policy, RetryPolicy):
            raise TypeError(f"policy must be a RetryPolicy or None, got {self.policy!r}")
        if self.scope is not None:
            check_str("scope", self.scope)


_CURRENT: ContextVar[CallOptions | None] = ContextVar("asyncretry_grpc_options", default=None)


def current_options() -> CallOptions | None:
    """The options of the calls made here (``None`` outside :func:`call_options`)."""
    return _CURRENT.get()


@contextmanager
def call_options(
    *, idempotent: bool | None = None, retry: bool | None = None, hedge: HedgingConfig | bool | None = None,
    policy: RetryPolicy | None = None, scope: str | None = None,
) -> Iterator[CallOptions]:
    """Options for the gRPC calls started inside the ``with`` block (see :class:`CallOptions`)::

        with call_options(idempotent=True):
            reply = await stub.CreateOrder(request)

    Raises:
        TypeError: an option has the wrong type.
    """
    options = CallOptions(idempotent=idempotent, retry=retry, hedge=hedge, policy=policy, scope=scope)
    token = _CURRENT.set(options)
    try:
        yield options
    finally:
        _CURRENT.reset(token)
