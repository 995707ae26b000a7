"""Transitional: the engine before the protocol. Removed once the retry engine takes remote parts.

The engine of this release accepts only the in-process classes (``isinstance(part, RetryQuota)`` ...)
and drives a part with ``remote = True`` through the ``*_async`` names. The Redis classes no longer
subclass the in-process ones (they implement :mod:`asyncretry._primitives._shared`'s protocols), so
:func:`old_engine_part` wraps one in a thin subclass of the matching in-process class that forwards the
calls that engine makes to the protocol's methods. Nothing else uses this module.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from .._primitives._breaker import CircuitBreaker
from .._primitives._bucket import AsyncTokenBucket
from .._primitives._quota import QuotaStatistics, RetryQuota
from ._breaker import RedisBreakerStatistics, RedisCircuitBreaker
from ._bucket import RedisBucketStatistics, RedisTokenBucket
from ._quota import RedisRetryQuota

__all__ = ["old_engine_part"]


class _Quota(RetryQuota):  # transitional: the engine before the protocol
    remote: ClassVar[bool] = True

    def __init__(self, part: RedisRetryQuota) -> None:
        super().__init__(part.config, name=part.name)
        self.part = part

    @property
    def available(self) -> float:
        return self.part.available

    def try_acquire(self, n: float) -> bool:
        raise TypeError("initial_try_cost on a Redis quota needs the new engine (await quota.try_acquire(n))")

    async def try_acquire_async(self, n: float) -> bool:
        return await self.part.try_acquire(n)

    async def acquire(self, n: float, *, timeout: float | timedelta | None = None) -> None:
        await self.part.acquire(n, timeout=timeout)

    def release(self, n: float) -> None:
        self.part.release_later(n)  # the engine's cancellation path: sent with the next round trip

    async def release_async(self, n: float) -> None:
        await self.part.release(n)

    def statistics(self) -> QuotaStatistics:
        return self.part.statistics()


class _Breaker(CircuitBreaker):  # transitional: the engine before the protocol
    remote: ClassVar[bool] = True

    def __init__(self, part: RedisCircuitBreaker) -> None:
        super().__init__(part.config, name=part.name)
        self.part = part

    async def acquire_async(self) -> bool:
        return await self.part.acquire()

    async def record_async(self, *, success: bool, probe: bool) -> None:
        await self.part.record(success=success, probe=probe)

    def release(self, probe: bool) -> None:
        self.part.release(probe)

    def statistics(self) -> RedisBreakerStatistics:
        return self.part.statistics()


class _Bucket(AsyncTokenBucket):  # transitional: the engine before the protocol
    remote: ClassVar[bool] = True

    def __init__(self, part: RedisTokenBucket) -> None:
        super().__init__(part.rate, part.capacity, name=part.name)
        self.part = part

    async def acquire(self, n: float = 1, *, timeout: float | timedelta | None = None) -> None:
        await self.part.acquire(n, timeout=timeout)

    def statistics(self) -> RedisBucketStatistics:
        return self.part.statistics()


def old_engine_part(part: Any) -> Any:
    """A Redis quota, breaker or bucket as this release's engine accepts it (anything else as it is)."""
    if isinstance(part, RedisRetryQuota):
        return _Quota(part)
    if isinstance(part, RedisCircuitBreaker):
        return _Breaker(part)
    if isinstance(part, RedisTokenBucket):
        return _Bucket(part)
    return part
