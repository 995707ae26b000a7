"""`@retry`: the decorator way in, preserving the wrapped function's signature (ParamSpec)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from ._policy import RetryPolicy
from ._retrier import DEFAULT_SCOPE, Retrier

__all__ = ["retry"]

P = ParamSpec("P")
T = TypeVar("T")


def retry(
    policy: RetryPolicy | None = None,
    /,
    *,
    retrier: Retrier | None = None,
    scope: str = DEFAULT_SCOPE,
    **policy_fields: Any,
) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Retry an async function under a policy; the decorated function keeps its signature.

    All calls of the decorated function share one :class:`Retrier` (one quota, limiter and breaker);
    each call has its own attempts.

    Args:
        policy: the policy; default ``RetryPolicy(**policy_fields)``.
        retrier: an existing retrier to share (then ``policy`` and ``policy_fields`` must be empty).
        scope: the scope the calls belong to.
        **policy_fields: :class:`RetryPolicy` fields, applied on top of ``policy``.

    Example::

        @asyncretry.retry(max_attempts=5, classifier=Classifier(transient=(MyError,)))
        async def fetch(key: str) -> bytes: ...
    """
    if retrier is not None:
        if policy is not None or policy_fields:
            raise TypeError("pass either retrier or a policy (and policy fields), not both")
        shared = retrier
    else:
        base = policy if policy is not None else None
        if base is None:
            final = RetryPolicy(**policy_fields)
        else:
            final = base.replace(**policy_fields) if policy_fields else base
        shared = Retrier(final)

    def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        if not inspect.iscoroutinefunction(fn) and not callable(fn):
            raise TypeError(f"@retry needs an async function, got {fn!r}")
        if shared.name == "retrier":
            shared.name = getattr(fn, "__qualname__", "retrier")

        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            return await shared._call(scope, fn, args, kwargs)

        wrapper.retrier = shared  # type: ignore[attr-defined]
        return wrapper

    return decorate
