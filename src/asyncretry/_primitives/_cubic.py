"""The ``"aws"`` profile: CUBIC as the AWS SDKs compute it, and its rate controller (SPEC section 5).

Pure functions of their inputs (:func:`cubic_window`, :func:`cubic_success_rate`,
:func:`cubic_throttle_rate`), CUBIC's memory (:class:`CubicCalculator`) and :class:`AwsRateController`,
which reproduces botocore, smithy-kotlin, smithy-rs, aws-sdk-go-v2 and aws-sdk-java-v2 down to their
shared test tables. Nothing here reads a clock.
"""

from __future__ import annotations

import math

from .._events import LimiterRule
from ._limiter_config import AdaptiveLimiterConfig, as_seconds
from ._meters import SendRateMeter

__all__ = ["AwsRateController", "CubicCalculator", "cubic_success_rate", "cubic_throttle_rate", "cubic_window"]


def cubic_window(w_max: float, *, beta: float, scale_constant: float) -> float:
    """CUBIC's ``K``: seconds after a throttle until the rate is back at ``w_max``.

    Returns:
        ``cbrt(w_max * (1 - beta) / scale_constant)``.
    """
    return math.cbrt(w_max * (1.0 - beta) / scale_constant)


def cubic_success_rate(elapsed: float, *, w_max: float, window: float, scale_constant: float) -> float:
    """The rate CUBIC allows ``elapsed`` seconds after the last throttle.

    Returns:
        ``scale_constant * (elapsed - window)**3 + w_max`` (requests per second): ``beta * w_max`` right
        after the throttle, ``w_max`` after ``window`` seconds, growing ever faster beyond.
    """
    return scale_constant * (elapsed - window) ** 3 + w_max


def cubic_throttle_rate(rate: float, *, beta: float) -> float:
    """The rate right after a throttle that hit while sending at ``rate``: ``rate * beta``."""
    return rate * beta


class CubicCalculator:
    """CUBIC's memory: the rate at the last throttle (``W_max``), its time, and ``K``.

    Args:
        last_max_rate: ``W_max``, requests per second.
        last_throttle_time: when the last throttle happened, seconds on the caller's clock.
        beta, scale_constant: as in :class:`AdaptiveLimiterConfig`.
    """

    __slots__ = ("_beta", "_scale", "last_max_rate", "last_throttle_time", "window")

    def __init__(
        self,
        *,
        last_max_rate: float,
        last_throttle_time: float,
        beta: float = 0.7,
        scale_constant: float = 0.4,
    ) -> None:
        self._beta = beta
        self._scale = scale_constant
        self.last_max_rate = last_max_rate
        self.last_throttle_time = last_throttle_time
        # K only changes with W_max, so it is computed on a throttle rather than on every success.
        self.window = cubic_window(last_max_rate, beta=beta, scale_constant=scale_constant)

    def success(self, now: float) -> float:
        """The rate CUBIC allows at ``now`` (requests per second); changes no state."""
        return cubic_success_rate(
            now - self.last_throttle_time,
            w_max=self.last_max_rate,
            window=self.window,
            scale_constant=self._scale,
        )

    def throttle(self, rate: float, now: float) -> float:
        """Record a throttle at ``now`` while sending at ``rate``; returns the reduced rate."""
        self.last_max_rate = rate
        self.window = cubic_window(rate, beta=self._beta, scale_constant=self._scale)
        self.last_throttle_time = now
        return cubic_throttle_rate(rate, beta=self._beta)

    def __repr__(self) -> str:
        return (
            f"CubicCalculator(last_max_rate={self.last_max_rate!r}, "
            f"last_throttle_time={self.last_throttle_time!r}, window={self.window!r})"
        )


class AwsRateController:
    """The ``"aws"`` profile: SPEC section 5's ``update()`` steps 1-3, exactly as the AWS SDKs do it.

    Args:
        config: the constants.
        start: the limiter's start time ``t0``, seconds (``last_throttle_time = t0``, ``W_max = 0``).

    Until the first throttle, ``fill_rate`` is 1 (or ``min_fill_rate`` if higher) and ``max_capacity``
    ``min_capacity``: the bucket fills at 1/s, as botocore's does, and holds what it filled when the first
    throttle enables it.
    """

    __slots__ = (
        "_cubic", "_growth", "_meter", "_min_capacity", "_min_fill", "enabled", "fill_rate", "max_capacity", "rule"
    )

    def __init__(self, config: AdaptiveLimiterConfig, start: float) -> None:
        self._meter = SendRateMeter(
            start, bucket_width=as_seconds(config.measurement_bucket), smoothing=config.smoothing
        )
        self._cubic = CubicCalculator(
            last_max_rate=0.0,
            last_throttle_time=start,
            beta=config.beta,
            scale_constant=config.scale_constant,
        )
        self._growth = config.max_rate_growth
        self._min_fill = config.min_fill_rate
        self._min_capacity = config.min_capacity
        self.enabled = False
        # botocore's bucket starts at max_rate 1: until the first throttle it fills at 1/s.
        self.fill_rate = max(1.0, config.min_fill_rate)
        self.max_capacity = config.min_capacity
        # The rule that last set the fill rate; None before any did.
        self.rule: LimiterRule | None = None

    @property
    def measured_rate(self) -> float:
        return self._meter.rate

    @property
    def last_max_rate(self) -> float:
        return self._cubic.last_max_rate

    @property
    def last_throttle_time(self) -> float:
        return self._cubic.last_throttle_time

    @property
    def answers_backoff(self) -> bool:
        """Always ``False``: the SDKs sleep the throttling backoff after every throttle, limiter or not."""
        return False

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None:
        """Feed one response received at ``now``; recomputes ``fill_rate`` and ``max_capacity``.

        ``sent_at`` and ``failed`` are accepted for the common interface and ignored: the SDKs count
        every response that is not a throttle as a success.
        """
        measured = self._meter.record(now)
        if throttled:
            # Once enabled, the bucket's rate is what we were really allowed to send at.
            rate_to_use = min(measured, self.fill_rate) if self.enabled else measured
            calculated = self._cubic.throttle(rate_to_use, now)
            self.enabled = True
            self.rule = "cubic_throttle"
        else:
            calculated = self._cubic.success(now)
            self.rule = "cubic_success"
        new_rate = min(calculated, self._growth * measured)
        self.fill_rate = max(new_rate, self._min_fill)
        self.max_capacity = max(new_rate, self._min_capacity)

    def __repr__(self) -> str:
        return (
            f"AwsRateController(enabled={self.enabled}, fill_rate={self.fill_rate!r}, "
            f"measured_rate={self.measured_rate!r}, last_max_rate={self.last_max_rate!r})"
        )
