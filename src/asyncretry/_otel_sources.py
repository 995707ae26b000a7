"""Where the gauges of :mod:`asyncretry.otel` read their figures: the observed objects, on their own event loop.

A metric reader collects from its own thread (a periodic exporter, a Prometheus scrape), but an observed
retrier, transport, quota, limiter or breaker belongs to an event loop: :class:`LoopRunner` runs the
snapshot on that loop's thread, and :class:`Source` turns one observed object's statistics into
``(attributes, snapshot)`` pairs. :func:`scope_attributes` gives a scope's metric attributes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ._engine._retrier import Retrier, RetrierStatistics
from ._primitives._breaker import BreakerStatistics
from ._primitives._budget import BudgetStatistics
from ._primitives._limiter import LimiterStatistics
from ._primitives._quota import QuotaStatistics
from ._primitives._turns import TurnStatistics

__all__ = [
    "CACHE_LIMIT", "PARTS", "Attributes", "LoopRunner", "Source", "Statistics", "current_runner", "retrier_of",
    "scope_attributes",
]

_log = logging.getLogger("asyncretry.otel")
T = TypeVar("T")

_ORIGIN = re.compile(r"^(?:https?)://(\[[^\]]+\]|[^/:@\[\]]+):(\d+)$")
CACHE_LIMIT = 4096
"""The most entries a cache of attributes keeps before it starts afresh."""
Attributes = dict[str, str | bool | int | float]
"""The attributes of one observation."""
Statistics = (
    RetrierStatistics | QuotaStatistics | LimiterStatistics | BreakerStatistics | BudgetStatistics | TurnStatistics
)
"""What an observed object's ``statistics()`` returns, and the parts of a retrier's scopes (its callers' turns too)."""
PARTS = (QuotaStatistics, LimiterStatistics, BreakerStatistics, BudgetStatistics)
"""The statistics of the parts a gauge reads (a retrier's are read scope by scope)."""


class LoopRunner:
    """Runs a function on the thread of the event loop that owns the observed objects, and waits for it.

    Metric readers collect from their own threads (a periodic exporter, a Prometheus scrape), but the
    objects belong to an event loop: reading them there could wake a waiter from the wrong thread, or,
    under trio, refill a bucket by ``time.monotonic()`` instead of trio's clock.
    """

    __slots__ = ("_submit", "closed", "key", "thread")

    def __init__(self, loop: object, submit: Callable[[Callable[[], None]], object]) -> None:
        self._submit = submit
        self.key = id(loop)  # stable: ``submit`` is bound to the loop, which therefore outlives this runner
        self.thread = threading.get_ident()
        self.closed = False

    def run(self, fn: Callable[[], T], timeout: float) -> T | None:
        """``fn()`` run on the loop's thread; ``None`` if the loop is gone or did not get to it in time."""
        if threading.get_ident() == self.thread:
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except Exception as error:
                    future.set_exception(error)

        try:
            self._submit(job)
        except RuntimeError:  # the loop is closed (asyncio) or the run has finished (trio)
            self.closed = True
            return None
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            _log.debug("asyncretry.otel: the event loop did not answer within %s s; gauges skipped", timeout)
            return None


def current_runner() -> LoopRunner | None:
    """A runner for the event loop running in this thread, ``None`` outside any (synchronous code)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return LoopRunner(loop, loop.call_soon_threadsafe)
    if "trio" in sys.modules:
        import trio

        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        return LoopRunner(token, token.run_sync_soon)
    return None


@dataclass(eq=False, slots=True)
class Source:
    """One observed object: how to snapshot it and the attributes its gauges carry."""

    target: object
    statistics: Callable[[], object]
    attributes: Attributes
    runner: LoopRunner | None
    timeout: float
    owner: object  # the Instrumentation that observes it
    lock: Any = None  # the sync transport's lock: its threads change the state under it

    def snapshot(self, timeout: float) -> Iterator[tuple[Attributes, Statistics]]:
        lock = self.lock
        if lock is None:
            stats = self.statistics()
        else:
            if not lock.acquire(timeout=timeout):
                return
            try:
                stats = self.statistics()
            finally:
                lock.release()
        if isinstance(stats, RetrierStatistics):
            for scope in stats.scopes:
                # A scope's budget, once the engine keeps one per scope (getattr: engines without it); its
                # callers' turns, once a call with a caller has waited there.
                for part in (scope.quota, scope.limiter, scope.breaker, getattr(scope, "budget", None), scope.turns):
                    if part is not None:
                        yield {
                            **scope_attributes(part.name),
                            "asyncretry.retrier": stats.name,
                            **self.attributes,
                        }, part
        elif isinstance(stats, PARTS):
            yield {**scope_attributes(stats.name), **self.attributes}, stats


_SCOPE_ATTRIBUTES: dict[str, Attributes] = {}


def scope_attributes(scope: str) -> Attributes:
    """``asyncretry.scope``, plus ``server.address`` and ``server.port`` when the scope is an origin."""
    found = _SCOPE_ATTRIBUTES.get(scope)
    if found is None:
        found = {"asyncretry.scope": scope}
        match = _ORIGIN.match(scope)
        if match is not None:
            found["server.address"] = match[1].strip("[]")
            found["server.port"] = int(match[2])
        if len(_SCOPE_ATTRIBUTES) >= CACHE_LIMIT:
            _SCOPE_ATTRIBUTES.clear()
        _SCOPE_ATTRIBUTES[scope] = found
    return found


def retrier_of(target: object) -> tuple[Retrier | None, bool, Any]:
    """The retrier behind ``target``, whether ``target`` is an httpx transport, and the sync transport's lock."""
    if isinstance(target, Retrier):
        return target, False, target.lock  # synchronous calls from other threads decide under it
    if "asyncretry.httpx" in sys.modules:
        from .httpx import AsyncRetryTransport, RetryTransport

        if isinstance(target, AsyncRetryTransport):
            return target.retrier, True, None
        if isinstance(target, RetryTransport):
            # Its threads decide under this lock, wherever observe() is called from.
            return target.retrier, True, target.retrier.lock
    return None, False, None
