"""`@retry` on generator functions: the start of the stream is retried, not what follows.

Each attempt calls the generator function and asks for its first item. A failure before that item (the
connection refused, the first page not served) is an attempt's failure like any other: the generator is
made again and restarted, under the policy. Once an item has been yielded, the caller has acted on it and
a restart would hand it over twice: a later failure is raised to the caller as it is (stamina does the
same). The items after the first, values sent in (``asend``/``send``), exceptions thrown in and closing
are passed through to the user's generator unchanged.

Hedging is refused (two generators started at once, one thrown away), and so is a classifier that
judges results (``retry_if_result``): an item is not the return value it would judge.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._retrier import Retrier

__all__ = ["retried_async_generator", "retried_generator"]

_EMPTY: Any = object()
"""The first "item" of a generator that ended before yielding one."""


def _check(shared: Retrier, fn: Callable[..., Any]) -> None:
    """Refuse what cannot be honoured for a generator: hedging and judging results."""
    policy = shared.policy
    if policy.hedging is not None:
        raise ValueError(
            f"@retry on the generator function {fn!r}: hedging would start two generators at once and throw "
            "one away; use a policy without hedging"
        )
    if policy.classifier.retry_if_result is not None:
        raise ValueError(
            f"@retry on the generator function {fn!r}: the classifier's retry_if_result judges a return value, "
            "and a generator's items are not one; use a classifier without retry_if_result"
        )


def retried_async_generator(
    shared: Retrier, scope: str, fn: Callable[..., AsyncGenerator[Any, Any]], label: Callable[[], str]
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """An async generator function whose start (up to its first item) is retried under ``shared``."""
    _check(shared, fn)

    async def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[AsyncGenerator[Any, Any], Any]:
        generator = fn(*args, **kwargs)
        try:
            return generator, await generator.__anext__()
        except StopAsyncIteration:
            return generator, _EMPTY  # ended at once: a success with nothing to yield

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        generator, item = await shared._call(scope, start, (args, kwargs), {}, label)
        if item is _EMPTY:
            return
        try:
            while True:
                try:
                    sent = yield item
                except Exception as thrown:  # thrown in by the caller: the user's generator handles it
                    item = await generator.athrow(thrown)
                else:
                    item = await generator.asend(sent)
        except StopAsyncIteration:
            return
        finally:
            await generator.aclose()

    wrapper.retrier = shared  # type: ignore[attr-defined]
    return wrapper


def retried_generator(
    shared: Retrier, scope: str, fn: Callable[..., Generator[Any, Any, Any]], label: Callable[[], str]
) -> Callable[..., Generator[Any, Any, Any]]:
    """A generator function whose start (up to its first item) is retried under ``shared``, sleeping in between."""
    _check(shared, fn)

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Generator[Any, Any, Any], Any, Any]:
        generator = fn(*args, **kwargs)
        try:
            return generator, next(generator), None
        except StopIteration as stop:
            return generator, _EMPTY, stop.value  # ended at once: a success with nothing to yield

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        generator, item, returned = shared._call_sync(scope, start, (args, kwargs), {}, label)
        if item is _EMPTY:
            return returned
        try:
            while True:
                try:
                    sent = yield item
                except Exception as thrown:  # thrown in by the caller: the user's generator handles it
                    item = generator.throw(thrown)
                else:
                    item = generator.send(sent)
        except StopIteration as stop:
            return stop.value
        finally:
            generator.close()

    wrapper.retrier = shared  # type: ignore[attr-defined]
    return wrapper
