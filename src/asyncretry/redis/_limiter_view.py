"""What a process knows of its fleet's limiter: the view the last round trip gave, and the statistics it shows."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._events import LimiterRule
from .._primitives._limiter import LimiterStatistics

__all__ = ["RedisLimiterStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisLimiterStatistics(LimiterStatistics):
    """A snapshot of a :class:`RedisAdaptiveRateLimiter`.

    ``enabled``, ``fill_rate``, ``max_capacity``, ``available``, ``measured_rate``, ``last_max_rate`` and
    ``last_throttle_time`` are the fleet's, as of the last round trip (``last_throttle_time`` on this
    process's clock); the counters are this process's. While degraded, the local shadow's figures.

    Attributes:
        degraded: whether the last operation could not reach Redis.
        round_trips: scripts this limiter ran on Redis.
        fallbacks: operations that could not reach Redis.
        holds_heard: of ``holds``, those this process took from another process's announcement.
    """

    degraded: bool
    round_trips: int
    fallbacks: int
    holds_heard: int


@dataclass(slots=True)
class _View:
    """The fleet limiter as the last round trip saw it."""

    enabled: bool = False
    fill_rate: float = 0.5
    max_capacity: float = 1.0
    tokens: float = 0.0
    measured_rate: float = 0.0
    last_max_rate: float = 0.0
    last_throttle_time: float = 0.0  # local clock
    accrued: float = 0.0  # tokens the fleet's bucket has taken in since it was created
    rule: LimiterRule | None = None  # the rule that last set the fleet's fill rate
    seen_at: float = math.nan  # local clock
