"""Fleet-wide limits: token bucket, retry quota, circuit breaker and adaptive limiter state on Redis.

Per-process limits are wrong by the number of processes: ten workers with a "100 requests/s" bucket each
send 1,000/s. The primitives here keep their state on Redis (through redis-py's asyncio client, the
``asyncretry[redis]`` extra), so every process that uses the same name shares one bucket, one quota, one
breaker, one adaptive rate::

    from asyncretry import Retrier, RetryPolicy
    from asyncretry.redis import RedisBackend, RedisRetryQuota, RedisTokenBucket

    backend = RedisBackend("redis://localhost:6379/0", prefix="myapp:")
    retrier = Retrier(
        RetryPolicy(),
        quota=lambda scope: RedisRetryQuota(backend, name=scope),
        rate_limit=lambda scope: RedisTokenBucket(backend, 100, 10, name=scope),
    )

Each class implements the remote-state protocol of its kind (every question that needs the server is a
coroutine) around a local in-process twin. One server, a Redis Cluster (``cluster=True``) or a
Sentinel-managed primary (:meth:`RedisBackend.sentinel`). Every operation is one Lua script on the
server's clock; while Redis cannot be reached each primitive
either fails open to a local in-process twin (with a :class:`~asyncretry.BackendLost`) or
fails closed with :class:`~asyncretry.BackendUnavailable`, and goes back to the shared state when Redis
answers again (:class:`~asyncretry.BackendRecovered`). asyncio only: redis-py's asyncio client does not
run on trio. See ``docs/redis.md`` for setup, failure modes and what is guaranteed.
"""

from __future__ import annotations

try:
    import redis.asyncio as _redis_asyncio  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "asyncretry.redis needs redis-py: install the extra with `pip install 'asyncretry[redis]'`"
    ) from error

from ._backend import BackendStatistics as BackendStatistics
from ._backend import RedisBackend as RedisBackend
from ._breaker import RedisBreakerStatistics as RedisBreakerStatistics
from ._breaker import RedisCircuitBreaker as RedisCircuitBreaker
from ._bucket import RedisBucketStatistics as RedisBucketStatistics
from ._bucket import RedisTokenBucket as RedisTokenBucket
from ._budget import RedisBudgetStatistics as RedisBudgetStatistics
from ._budget import RedisRetryBudget as RedisRetryBudget
from ._limiter import RedisAdaptiveRateLimiter as RedisAdaptiveRateLimiter
from ._limiter_view import RedisLimiterStatistics as RedisLimiterStatistics
from ._link import OnUnavailable as OnUnavailable
from ._quota import RedisQuotaStatistics as RedisQuotaStatistics
from ._quota import RedisRetryQuota as RedisRetryQuota

__all__ = [
    "BackendStatistics",
    "OnUnavailable",
    "RedisAdaptiveRateLimiter",
    "RedisBackend",
    "RedisBreakerStatistics",
    "RedisBucketStatistics",
    "RedisBudgetStatistics",
    "RedisCircuitBreaker",
    "RedisLimiterStatistics",
    "RedisQuotaStatistics",
    "RedisRetryBudget",
    "RedisRetryQuota",
    "RedisTokenBucket",
]
