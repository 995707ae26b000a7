"""The rate-controller protocol the adaptive limiter drives, and the registry of one controller per profile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .._events import LimiterRule
from ._adaptive import INDEPENDENT_RULES, AsyncretryRateController
from ._cubic import AwsRateController
from ._fair import FairRateController
from ._limiter_config import AdaptiveLimiterConfig

__all__ = ["RateController", "new_rate_controller"]


class RateController(Protocol):
    """What :class:`~asyncretry.AdaptiveRateLimiter` needs from a profile: a synchronous state machine.

    ``update()`` is told the time and whether the response was a throttle, and leaves the new
    ``fill_rate`` / ``max_capacity`` for the limiter to apply to its token bucket, and ``rule``, the rule
    that last set the fill rate (``None`` before any did); ``answers_backoff`` then says whether the retry
    engine may skip its throttling backoff after that throttle.
    """

    @property
    def enabled(self) -> bool: ...
    @property
    def fill_rate(self) -> float: ...
    @property
    def max_capacity(self) -> float: ...
    @property
    def measured_rate(self) -> float: ...
    @property
    def last_max_rate(self) -> float: ...
    @property
    def last_throttle_time(self) -> float: ...
    @property
    def answers_backoff(self) -> bool: ...
    @property
    def rule(self) -> LimiterRule | None: ...

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None: ...


def _independent(config: AdaptiveLimiterConfig, start: float) -> AsyncretryRateController:
    """The ``"independent"`` profile: the default profile's controller with :data:`INDEPENDENT_RULES`."""
    return AsyncretryRateController(config, start, rules=INDEPENDENT_RULES)


_CONTROLLERS: dict[str, Callable[[AdaptiveLimiterConfig, float], RateController]] = {
    "asyncretry": AsyncretryRateController,
    "aws": AwsRateController,
    "fair": FairRateController,
    "independent": _independent,
}


def new_rate_controller(config: AdaptiveLimiterConfig, start: float) -> RateController:
    """The rate controller of ``config.profile``, starting at time ``start`` (seconds)."""
    return _CONTROLLERS[config.profile](config, start)
