"""The math of adaptive mode: CUBIC rate control and send-rate measurement (SPEC section 5).

Everything here is pure and synchronous: functions of their inputs, and small state objects that are
told the time instead of reading a clock. :class:`~asyncretry.AdaptiveRateLimiter` owns the clock and
the token bucket and asks a *rate controller* (one per profile) what the fill rate should be.

Only the ``"aws"`` profile exists today: it reproduces the rate limiter that botocore, smithy-kotlin,
smithy-rs, aws-sdk-go-v2 and aws-sdk-java-v2 share, down to their common test tables.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from .._validate import check_choice, check_number, check_seconds

__all__ = [
    "PROFILES",
    "AdaptiveLimiterConfig",
    "AwsRateController",
    "CubicCalculator",
    "RateController",
    "SendRateMeter",
    "cubic_success_rate",
    "cubic_throttle_rate",
    "cubic_window",
    "new_rate_controller",
]

PROFILES = ("aws", "asyncretry")
"""The accepted values of :attr:`AdaptiveLimiterConfig.profile`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveLimiterConfig:
    """Settings of an :class:`~asyncretry.AdaptiveRateLimiter`; the defaults are the AWS SDKs' constants.

    Args:
        profile: the rate-control strategy. ``"aws"`` (the default and, for now, the only choice) is
            the AWS SDKs' CUBIC limiter exactly.
        beta: the factor the rate is multiplied by on a throttle, in ``(0, 1)``; default 0.7.
        scale_constant: CUBIC's ``C``, how fast the rate grows back after a throttle (> 0); default 0.4.
        smoothing: the weight of the newest sample in the measured send rate, in ``(0, 1]``; default 0.8.
        measurement_bucket: the width of one send-rate measurement bucket, seconds (> 0); default 0.5.
        min_fill_rate: the lowest fill rate, tokens per second (> 0); default 0.5.
        min_capacity: the lowest bucket capacity, tokens (>= 1, since every attempt takes one token);
            default 1.0.
        max_rate_growth: the new rate is capped at this many times the measured send rate (> 0);
            default 2.0.
        max_wait: how long :meth:`~asyncretry.AdaptiveRateLimiter.acquire` may wait for a token by
            default, seconds: 0 fails fast, ``None`` (the default) waits as long as needed.

    Raises:
        ValueError / TypeError: a value is out of range or of the wrong type; the message names it.
    """

    profile: str = "aws"
    beta: float = 0.7
    scale_constant: float = 0.4
    smoothing: float = 0.8
    measurement_bucket: float | timedelta = 0.5
    min_fill_rate: float = 0.5
    min_capacity: float = 1.0
    max_rate_growth: float = 2.0
    max_wait: float | timedelta | None = None

    def __post_init__(self) -> None:
        check_choice("profile", self.profile, PROFILES)
        put = object.__setattr__
        for field in ("scale_constant", "min_fill_rate", "max_rate_growth"):
            put(self, field, check_number(field, getattr(self, field), low=0.0, low_open=True))
        put(self, "beta", check_number("beta", self.beta, low=0.0, high=1.0, low_open=True, high_open=True))
        put(self, "smoothing", check_number("smoothing", self.smoothing, low=0.0, high=1.0, low_open=True))
        width = check_seconds("measurement_bucket", self.measurement_bucket, low_open=True)
        put(self, "measurement_bucket", width)
        put(self, "min_capacity", check_number("min_capacity", self.min_capacity, low=1.0))
        if self.max_wait is not None:
            put(self, "max_wait", check_seconds("max_wait", self.max_wait, allow_inf=True))


# --- pure CUBIC functions


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


# --- small state objects


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


class SendRateMeter:
    """Measures the send rate: requests counted in time buckets, smoothed exponentially.

    A bucket's rate is only known once a request lands in a later bucket, so the measured rate lags
    by up to one bucket: that is the SDKs' trade-off, kept for conformance.

    Args:
        start: the time the meter starts, seconds; the first bucket boundary is ``floor(start)``.
        bucket_width: seconds per bucket; default 0.5.
        smoothing: the weight of the newest bucket's rate; default 0.8.
    """

    __slots__ = ("_count", "_last_bucket", "_scale", "_smoothing", "_width", "rate")

    def __init__(self, start: float, *, bucket_width: float = 0.5, smoothing: float = 0.8) -> None:
        # floor(t * (1/width)) / (1/width) rather than floor(t / width) * width: for decimal widths such
        # as 0.1 it lands exactly on the boundary (0.3 -> 0.3, not 0.2), and for 0.5 it is SPEC's floor(2t)/2.
        self._scale = 1.0 / bucket_width
        self._width = bucket_width
        self._smoothing = smoothing
        self._last_bucket = float(math.floor(start))
        self._count = 0
        self.rate = 0.0

    def record(self, now: float) -> float:
        """Count one request sent at ``now``; returns the measured rate (requests per second)."""
        bucket = math.floor(now * self._scale) / self._scale
        self._count += 1
        if bucket > self._last_bucket:
            current = self._count / (bucket - self._last_bucket)
            self.rate = self._smoothing * current + (1.0 - self._smoothing) * self.rate
            self._count = 0
            self._last_bucket = bucket
        elif bucket < self._last_bucket - self._width:
            # Time went backwards, which a monotonic clock never does: the limiter was built on one clock
            # and is used on another (built outside the event loop, used inside a virtual-time loop).
            # Re-anchor instead of freezing the measurement until the new clock catches up. (The first
            # bucket can lie below floor(start), but never by a whole width.)
            self._last_bucket = bucket
            self._count = 1
        return self.rate

    def __repr__(self) -> str:
        return f"SendRateMeter(rate={self.rate!r}, last_bucket={self._last_bucket!r}, count={self._count})"


# --- rate controllers: one per profile


class RateController(Protocol):
    """What :class:`~asyncretry.AdaptiveRateLimiter` needs from a profile: a synchronous state machine.

    ``update()`` is told the time and whether the response was a throttle, and leaves the new
    ``fill_rate`` / ``max_capacity`` for the limiter to apply to its token bucket.
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

    def update(self, now: float, throttled: bool, sent_at: float | None = None) -> None: ...


class AwsRateController:
    """The ``"aws"`` profile: SPEC section 5's ``update()`` steps 1-3, exactly as the AWS SDKs do it.

    Args:
        config: the constants.
        start: the limiter's start time ``t0``, seconds (``last_throttle_time = t0``, ``W_max = 0``).

    Until the first update, ``fill_rate`` is ``min_fill_rate`` and ``max_capacity`` ``min_capacity``
    (the SDKs differ here, and it does not matter: the limiter is not enabled before a throttle).
    """

    __slots__ = (
        "_cubic", "_growth", "_meter", "_min_capacity", "_min_fill", "enabled", "fill_rate", "max_capacity"
    )

    def __init__(self, config: AdaptiveLimiterConfig, start: float) -> None:
        self._meter = SendRateMeter(
            start, bucket_width=_seconds(config.measurement_bucket), smoothing=config.smoothing
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
        self.fill_rate = config.min_fill_rate
        self.max_capacity = config.min_capacity

    @property
    def measured_rate(self) -> float:
        return self._meter.rate

    @property
    def last_max_rate(self) -> float:
        return self._cubic.last_max_rate

    @property
    def last_throttle_time(self) -> float:
        return self._cubic.last_throttle_time

    def update(self, now: float, throttled: bool, sent_at: float | None = None) -> None:
        """Feed one response received at ``now``; recomputes ``fill_rate`` and ``max_capacity``.

        ``sent_at`` is accepted for the common interface and ignored: the SDKs do not use it.
        """
        measured = self._meter.record(now)
        if throttled:
            # Once enabled, the bucket's rate is what we were really allowed to send at.
            rate_to_use = min(measured, self.fill_rate) if self.enabled else measured
            calculated = self._cubic.throttle(rate_to_use, now)
            self.enabled = True
        else:
            calculated = self._cubic.success(now)
        new_rate = min(calculated, self._growth * measured)
        self.fill_rate = max(new_rate, self._min_fill)
        self.max_capacity = max(new_rate, self._min_capacity)

    def __repr__(self) -> str:
        return (
            f"AwsRateController(enabled={self.enabled}, fill_rate={self.fill_rate!r}, "
            f"measured_rate={self.measured_rate!r}, last_max_rate={self.last_max_rate!r})"
        )


_CONTROLLERS: dict[str, Callable[[AdaptiveLimiterConfig, float], RateController]] = {
    "aws": AwsRateController,
}


def new_rate_controller(config: AdaptiveLimiterConfig, start: float) -> RateController:
    """The rate controller of ``config.profile``, starting at time ``start`` (seconds)."""
    return _CONTROLLERS[config.profile](config, start)


def _seconds(value: float | timedelta) -> float:
    # The config normalizes durations to floats in __post_init__; this only narrows the type.
    return value.total_seconds() if isinstance(value, timedelta) else value


# ---------------------------------------------------------------- EXPERIMENT (to be cleaned up)
_TUNING: dict[str, float] = {
    "window": 1.0,
    "min_span": 0.25,
    "max_span": 10.0,
    "beta": 0.95,
    "repeat_beta": 0.7,
    "k": 2.5,
    "k_short": 0.5,
    "stable": 0.05,
    "doubling": 0.5,
    "burst_time": 0.1,
    "slot": 0.05,
    "growth": 2.0,
    "guard": 0.1,
    "grown": 0.1,
    "deepest_cut": 0.25,
    "outage_probe": 0.01,
    "lift": 0.01,
    "lift_below": 0.2,
}


class _SlotCounter:
    """Counts events in fixed time slots over a trailing horizon."""

    __slots__ = ("_counts", "_first", "_n", "_width")

    def __init__(self, width: float, horizon: float, start: float) -> None:
        self._width = width
        self._n = max(2, math.ceil(horizon / width) + 1)
        self._counts = [0] * self._n
        self._first = math.floor(start / width) - self._n + 1  # the newest slot is the current one

    def _advance(self, index: int) -> None:
        newest = self._first + self._n - 1
        if index <= newest:
            return
        shift = index - newest
        if shift >= self._n:
            self._counts = [0] * self._n
        else:
            del self._counts[:shift]
            self._counts.extend([0] * shift)
        self._first += shift

    def add(self, now: float) -> None:
        index = math.floor(now / self._width)
        self._advance(index)
        if index >= self._first:
            self._counts[index - self._first] += 1

    def rate(self, now: float, span: float) -> float:
        """Events per second over the trailing ``span`` seconds (whole slots)."""
        index = math.floor(now / self._width)
        self._advance(index)
        slots = max(1, min(self._n, round(span / self._width)))
        # The current slot is partial: count it, and the span ends now.
        total = sum(self._counts[self._n - slots :])
        covered = (slots - 1) * self._width + (now - index * self._width)
        return total / covered if covered > 0 else 0.0


class AsyncretryRateController:
    """EXPERIMENTAL."""

    def __init__(self, config: AdaptiveLimiterConfig, start: float) -> None:
        p = _TUNING
        self._p = p
        self._min_fill = config.min_fill_rate
        self._min_capacity = config.min_capacity
        horizon = p["window"] + 1
        self._good = _SlotCounter(p["slot"], horizon, start)
        self._sent = _SlotCounter(p["slot"], horizon, start)
        self._first_response = math.nan
        self.enabled = False
        self.fill_rate = config.min_fill_rate
        self.max_capacity = config.min_capacity
        self.last_max_rate = 0.0
        self.last_throttle_time = start
        self._decreased_at = -math.inf
        self._event_at = -math.inf
        self._served = 0  # successes so far
        self._marks: deque[tuple[float, int]] = deque()  # (send time, successes before it) of throttles
        self._outage = False
        self._fresh = self._fresh_ok = 0
        self._starting = False
        self._episode_w = 0.0
        self._probe_from = 0.0
        self._k = p["k_short"]
        self._beta = p["beta"]
        self.events = 0
        self.repeats = 0

    @property
    def measured_rate(self) -> float:
        return 0.0

    def _set(self, rate: float) -> None:
        rate = max(rate, self._min_fill)
        self.fill_rate = rate
        self.max_capacity = max(rate * self._p["burst_time"], self._min_capacity)

    def update(self, now: float, throttled: bool, sent_at: float | None = None) -> None:
        p = self._p
        if self._first_response != self._first_response:
            self._first_response = now
        self._sent.add(now)
        if not throttled:
            self._good.add(now)
            self._served += 1
            if not self.enabled:
                return
            if sent_at is None or sent_at > self._decreased_at:
                self._fresh_ok += 1
            if self._outage:
                self._outage = False
                self._recover(now, self._episode_w, p["beta"], p["k_short"])
                return
            self._grow(now)
            return
        sent = sent_at if sent_at is not None else now
        marks = self._marks
        marks.append((sent, self._served))
        while marks[0][0] < sent - p["max_span"]:
            marks.popleft()
        fresh = sent_at > self._decreased_at if sent_at is not None else now - self._decreased_at >= p["guard"]
        if not self.enabled or (self._starting and not fresh):
            # The first throttles: nothing measured under saturation yet. Start from what was served so
            # far (the responses of one round trip arrive together, in any order: take the best).
            self.enabled = True
            self._starting = True
            covered = min(p["window"], max(now - self._first_response, p["guard"]))
            estimate = max(self._good.rate(now, covered), self._episode_w)
            self._episode_w = estimate
            self._recover(now, estimate, p["repeat_beta"], p["k_short"])
            self._decreased_at = now if self.events == 0 else self._decreased_at
            self.events += 1 if self.events == 0 else 0
            return
        if not fresh:
            return
        self._starting = False
        self.events += 1
        new_episode = now - self._event_at > p["window"]
        self._event_at = now
        if self._good.rate(now, p["window"]) <= 0.0:
            self._enter_outage(now)
            return
        if sent - self._decreased_at < p["min_span"]:
            self._fresh += 1
            if self._fresh < 2:
                # right after a cut the server's bucket is still empty: one throttle can be bad luck
                return
            # our last cut did not stop the throttling: cut again, from the rate we were sending at
            self.repeats += 1
            fraction = self._fresh_ok / (self._fresh_ok + self._fresh)
            beta = min(p["repeat_beta"], max(fraction, p["deepest_cut"]))
            self._recover(now, self.fill_rate, beta, p["k_short"])
            return
        estimate = -1.0
        # the server's bucket was empty at both throttles: what it admitted in between is its rate
        for mark_sent, mark_served in reversed(marks):
            if mark_sent <= sent - p["min_span"]:
                estimate = (self._served - mark_served) / (sent - mark_sent)
                break
        served = self._good.rate(now, min(p["window"], now - self._decreased_at))
        if estimate < 0 or served > (1.0 + p["grown"]) * estimate:
            # no reference, or one from before the capacity grew (the server's bucket overflowed while
            # we sent less than it allowed): what it served lately is the better measure
            estimate = served
        probe_start = self._probe_from + self._k
        if sent - probe_start >= p["slot"] and now - probe_start <= p["window"]:
            # what the server admitted while we probed above the estimate: a small burst cannot hide
            # a capacity above our estimate there, so let it lift the estimate a little each cycle
            probed = self._good.rate(now, now - probe_start)
            estimate = max(estimate, min(probed, (1.0 + p["lift"]) * estimate))
        estimate = min(estimate, self.fill_rate)
        if estimate <= 0.0:
            self._enter_outage(now)
            return
        if new_episode:
            self._episode_w = estimate
        previous = self.last_max_rate
        stable = abs(estimate - previous) <= p["stable"] * previous
        self._recover(now, estimate, p["beta"], p["k"] if stable else p["k_short"])

    def _enter_outage(self, now: float) -> None:
        # Nothing served: an outage rather than a lower capacity. Probe slowly, and come back near the
        # capacity seen before it.
        self._outage = True
        self._decreased_at = now
        self.last_throttle_time = now
        self._set(self._p["outage_probe"] * self._episode_w)

    def _recover(self, now: float, w: float, beta: float, k: float) -> None:
        self.last_max_rate = w
        self._decreased_at = now
        self._fresh = self._fresh_ok = 0
        self.last_throttle_time = now
        self._probe_from = now
        self._beta = beta
        self._k = k
        self._set(beta * w)

    def _grow(self, now: float) -> None:
        p = self._p
        w = max(self.last_max_rate, self._min_fill)
        k = self._k
        tau = now - self._probe_from
        if tau < k:
            rate = w * (1.0 - (1.0 - self._beta) * (1.0 - tau / k) ** 3)
            self._set(max(rate, self.fill_rate))
            return
        rate = w * 2.0 ** ((tau - k) / p["doubling"])
        cap = max(p["growth"] * self._sent.rate(now, p["min_span"]), w)
        self._set(min(rate, cap))


_CONTROLLERS["asyncretry"] = AsyncretryRateController  # type: ignore[assignment]
