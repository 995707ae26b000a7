"""Per-call options: ``with call_options(idempotent=True): await stub.Method(request)``.

gRPC interceptors see only the call's method, metadata and timeout, so what one call wants of its
retries travels in a context variable: grpc.aio starts each intercepted call in a task that copies
the caller's context, so the options set around the call are the ones its interceptor reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .. import HedgingConfig, RequestOverrides, RetryPolicy

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
        caller: who the call is for (a tenant, a user, a job): its waits for the scope's rate limits take
            turns with other callers' (see :meth:`asyncretry.Retrier.attempts`).
    """

    idempotent: bool | None = None
    retry: bool | None = None
    hedge: HedgingConfig | bool | None = None
    policy: RetryPolicy | None = None
    scope: str | None = None
    caller: str | None = None

    def __post_init__(self) -> None:
        # The rules of every per-request override (the HTTP integrations' too), each error naming its option.
        RequestOverrides(
            idempotent=self.idempotent, retry=self.retry, hedge=self.hedge, policy=self.policy, scope=self.scope,
            caller=self.caller,
        )
        if self.hedge is True:
            raise TypeError("hedge must be False, a HedgingConfig or None, got True")


_CURRENT: ContextVar[CallOptions | None] = ContextVar("asyncretry_grpc_options", default=None)


def current_options() -> CallOptions | None:
    """The options of the calls made here (``None`` outside :func:`call_options`)."""
    return _CURRENT.get()


def call_options(
    *, idempotent: bool | None = None, retry: bool | None = None, hedge: HedgingConfig | bool | None = None,
    policy: RetryPolicy | None = None, scope: str | None = None, caller: str | None = None,
) -> AbstractContextManager[CallOptions]:
    """Options for the gRPC calls started inside the ``with`` block (see :class:`CallOptions`)::

        with call_options(idempotent=True):
            reply = await stub.CreateOrder(request)

    Raises:
        TypeError: an option has the wrong type (at once, before the ``with`` block).
        ValueError: an option is out of range (an empty scope or caller).
    """
    return _applied(CallOptions(idempotent=idempotent, retry=retry, hedge=hedge, policy=policy, scope=scope,
                                caller=caller))


@contextmanager
def _applied(options: CallOptions) -> Iterator[CallOptions]:
    token = _CURRENT.set(options)
    try:
        yield options
    finally:
        _CURRENT.reset(token)
