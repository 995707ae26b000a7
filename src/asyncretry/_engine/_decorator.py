"""`@retry`: the decorator way in, for async and plain functions alike, preserving their signatures (ParamSpec).

``@retry`` on an ``async def`` gives a coroutine function driven by :meth:`Retrier.call`; on a plain
``def`` it gives a plain function driven by :meth:`Retrier.sync_call` (sleeping with :func:`time.sleep`).
On a generator function (``async def`` with ``yield``, or ``def`` with ``yield``) it gives a generator
function whose start is retried (:mod:`._generators`). All share one :class:`Retrier` per decorated
function: one quota, limiter, budget and breaker.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, overload

from .._validate import check_str
from ._classify import On
from ._generators import retried_async_generator, retried_generator
from ._policy import RetryPolicy
from ._retrier import _SYNC_HEDGING, DEFAULT_SCOPE, Retrier

__all__ = ["retry"]

P = ParamSpec("P")
T = TypeVar("T")

@overload
def retry(fn: Callable[P, Coroutine[Any, Any, T]], /) -> Callable[P, Coroutine[Any, Any, T]]: ...
@overload
def retry(fn: Callable[P, T], /) -> Callable[P, T]: ...
@overload
def retry(
    policy: RetryPolicy | None = None,
    /,
    *,
    retrier: Retrier | None = None,
    scope: str = DEFAULT_SCOPE,
    on: On | None = None,
    **policy_fields: Any,
) -> _Decorator: ...
def retry(
    policy: Any = None,
    /,
    *,
    retrier: Retrier | None = None,
    scope: str = DEFAULT_SCOPE,
    on: On | None = None,
    **policy_fields: Any,
) -> Any:
    """Retry a function under a policy; the decorated function keeps its signature (async or not).

    All calls of the decorated function share one :class:`Retrier` (one quota, limiter, budget and
    breaker); each call has its own attempts. ``@retry`` alone uses the default policy (AWS standard mode).
    On a generator function (async or not), the start is retried: a failure before the first item
    restarts it, a failure after an item was yielded is raised as it is.

    Args:
        policy: the policy; default ``RetryPolicy(**policy_fields)``.
        retrier: an existing retrier to share (then ``policy``, ``on`` and ``policy_fields`` must be empty).
        scope: the scope the calls belong to.
        on: retry exactly these errors: an exception class, a tuple of them, or a predicate (stamina's
            ``on=``); a shorthand for ``classifier=``, which it excludes.
        **policy_fields: :class:`RetryPolicy` fields, for a policy made here (not beside ``policy``:
            change a given policy with ``policy.replace(...)``).

    Raises:
        TypeError: a field given twice (in ``policy`` and as an argument, or ``on`` and ``classifier``),
            a retrier beside a policy, or something that cannot be decorated.
        ValueError: a generator function under a policy with hedging or a ``retry_if_result`` classifier.

    Example::

        @asyncretry.retry(on=ConnectionError, max_attempts=5)
        async def fetch(key: str) -> bytes: ...

        @asyncretry.retry
        def read_config() -> dict[str, str]: ...
    """
    check_str("scope", scope)
    if callable(policy) and not isinstance(policy, RetryPolicy):
        return _Decorator(_shared(None, retrier, on, policy_fields), scope)(policy)  # @retry without parentheses
    return _Decorator(_shared(policy, retrier, on, policy_fields), scope)


def _shared(policy: Any, retrier: Retrier | None, on: On | None, fields: dict[str, Any]) -> Retrier:
    if retrier is not None:
        if policy is not None or fields or on is not None:
            raise TypeError("pass either retrier or a policy (and policy fields), not both")
        if not isinstance(retrier, Retrier):
            raise TypeError(f"retrier must be a Retrier, got {retrier!r}")
        return retrier
    if policy is None:
        return Retrier(RetryPolicy(**fields, on=on))
    if not isinstance(policy, RetryPolicy):
        raise TypeError(f"policy must be a RetryPolicy, got {policy!r}")
    if on is not None and not fields:
        return Retrier(policy, on=on)  # what to retry, for a policy that does not say
    if fields:
        names = ", ".join(sorted(fields))
        raise TypeError(
            f"{names} given twice: once in the policy and once as an argument; "
            f"use retry(policy.replace({', '.join(f'{n}=...' for n in sorted(fields))})) to change the policy"
        )
    return Retrier(policy)


class _Decorator:
    """What ``retry(...)`` returns: applied to a function, it wraps it in the shared retrier."""

    def __init__(self, shared: Retrier, scope: str) -> None:
        self.retrier = shared
        self.scope = scope

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]: ...
    def __call__(self, fn: Callable[P, Any]) -> Callable[P, Any]:
        if not callable(fn):
            raise TypeError(f"@retry needs an async or plain function, got {fn!r}")
        shared, scope = self.retrier, self.scope
        name = _qualified_name(fn)
        if shared.name == "retrier":
            shared.name = name

        def label() -> str:  # the function's name, in every event and log line of its calls
            return name

        if _is_kind(fn, inspect.isasyncgenfunction):
            return retried_async_generator(shared, scope, fn, label)
        if _is_kind(fn, inspect.isgeneratorfunction):
            return retried_generator(shared, scope, fn, label)
        if _is_kind(fn, inspect.iscoroutinefunction):
            coroutine_fn: Callable[..., Awaitable[Any]] = fn

            @functools.wraps(fn)
            async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await shared._call(scope, coroutine_fn, args, kwargs, label)

            wrapper.retrier = shared  # type: ignore[attr-defined]
            return wrapper

        if shared.policy.hedging is not None:
            raise ValueError(f"@retry on the plain function {fn!r}: {_SYNC_HEDGING}")

        @functools.wraps(fn)
        def sync_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            return shared._call_sync(scope, fn, args, kwargs, label)

        sync_wrapper.retrier = shared  # type: ignore[attr-defined]
        return sync_wrapper


def _qualified_name(fn: Callable[..., Any]) -> str:
    """``fn``'s qualified name (``Client.fetch``), also behind functools.partial or for a callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None)
    return name if isinstance(name, str) else type(fn).__qualname__


def _is_kind(fn: Callable[..., Any], test: Callable[[Any], bool]) -> bool:
    """Whether ``fn`` passes ``test`` (``inspect.iscoroutinefunction`` ...), also behind functools.partial
    or as an object's ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return test(fn) or (not inspect.isroutine(fn) and test(type(fn).__call__))
