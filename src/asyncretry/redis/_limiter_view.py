"""What a process knows of its fleet's limiter: the view the last round trip gave, and the statistics it shows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._events import LimiterRule
from .._primitives._limiter import LimiterStatistics
from ._limiter_scripts import script_rule
from ._values import num

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
    # The fleet's paced release after a hold runs until then, its next place due then (local clock).
    paced_until: float = -math.inf
    release_next: float = -math.inf
    # The pace a server announced to the fleet: its bucket fills no faster until then (local clock).
    pace: float = math.inf
    pace_until: float = -math.inf

    def rate(self, now: float) -> float:
        """How fast the fleet's bucket fills at ``now`` (local clock): its fill rate, capped by the pace."""
        return min(self.fill_rate, self.pace) if now < self.pace_until else self.fill_rate

    def available(self, now: float) -> float:
        """The tokens in the fleet's bucket at ``now`` (local clock), as the last round trip predicts (one at
        most while a pace runs, as the scripts keep it)."""
        if not self.enabled or math.isnan(self.seen_at):
            return self.tokens
        capacity = min(self.max_capacity, 1.0) if now < self.pace_until else self.max_capacity
        return min(capacity, self.tokens + max(0.0, now - self.seen_at) * self.rate(now))

    def read(self, reply: list[Any], before: float, now: float) -> float:
        """Take the fleet's state from a limiter script's reply (``before``, ``now``: when the round trip
        left and came back, local clock); the offset of the server's clock from this process's."""
        server_now = num(reply[9])
        self.enabled = bool(int(reply[2]))
        self.fill_rate = num(reply[3])
        self.max_capacity = num(reply[4])
        self.tokens = num(reply[5])
        self.measured_rate = num(reply[6])
        self.last_max_rate = num(reply[7])
        self.last_throttle_time = now - (server_now - num(reply[8]))
        self.seen_at = now
        self.rule = script_rule(int(reply[13]))
        self.accrued = num(reply[11])
        # The release after the fleet's hold runs that long after the script ran, which was after `before`.
        paced_left = num(reply[17])
        self.paced_until = before + paced_left if paced_left > 0.0 else -math.inf
        self.release_next = before + num(reply[16])
        pace_left = num(reply[19])
        self.pace, self.pace_until = (num(reply[18]), before + pace_left) if pace_left > 0.0 else (math.inf, -math.inf)
        return server_now - now
