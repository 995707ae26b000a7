"""The math of adaptive mode: rate controllers, CUBIC and send-rate measurement (SPEC section 5).

Everything here is pure and synchronous: functions of their inputs, and small state objects that are
told the time instead of reading a clock. :class:`~asyncretry.AdaptiveRateLimiter` owns the clock and
the token bucket and asks a *rate controller* (one per profile) what the fill rate should be.

Two profiles:

* ``"aws"`` reproduces the rate limiter that botocore, smithy-kotlin, smithy-rs, aws-sdk-go-v2 and
  aws-sdk-java-v2 share, down to their common test tables (:class:`AwsRateController`).
* ``"asyncretry"``, the default, measures the server's capacity instead of guessing it from its own
  send rate, and reacts once per congestion event (:class:`AsyncretryRateController`). In a
  virtual-time simulation (``benchmarks/adaptive_sim.py``) it serves 99-100% of a throttled server's
  capacity where AWS's serves 39-93%, and is back at it about a second after the start or the end of
  an outage (AWS's: 10-14 s).
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
    "AsyncretryRateController",
    "AwsRateController",
    "CubicCalculator",
    "RateController",
    "SendRateMeter",
    "SlidingCounter",
    "cubic_success_rate",
    "cubic_throttle_rate",
    "cubic_window",
    "new_rate_controller",
]

PROFILES = ("asyncretry", "aws")
"""The accepted values of :attr:`AdaptiveLimiterConfig.profile`."""

_FRACTIONS = ("utilization", "repeat_decrease", "min_repeat_decrease", "outage_probe")
_DURATIONS = (
    "reaction_time",
    "measurement_window",
    "recovery_time",
    "quick_recovery_time",
    "probe_doubling_time",
    "burst",
    "settle_time",
)
_MARGINS = ("stable_change", "growth_margin", "probe_lift")
_FAIRNESS = ("fair_step", "fair_count")
MAX_BURST = 3600.0
"""The longest ``burst`` (seconds of the fill rate the bucket holds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveLimiterConfig:
    """Settings of an :class:`~asyncretry.AdaptiveRateLimiter`: the profile and its constants.

    Each profile reads only its own constants and the shared ones; the others are ignored.

    Args:
        profile: the rate-control strategy. ``"asyncretry"`` (the default) measures the server's
            capacity and holds just below it (:class:`AsyncretryRateController`); ``"aws"`` is the AWS
            SDKs' CUBIC limiter exactly (:class:`AwsRateController`), as ``RetryPolicy.aws_adaptive()``
            uses it.

    Shared:
        min_fill_rate: the lowest fill rate, tokens per second (> 0); default 0.5.
        min_capacity: the lowest bucket capacity, tokens (>= 1, since every attempt takes one token);
            default 1.0.
        max_rate_growth: the rate never grows beyond this many times the measured send rate (> 0), so
            that a client that sends little does not build up an allowance it never tested; default 2.0.
        max_wait: how long :meth:`~asyncretry.AdaptiveRateLimiter.acquire` may wait for a token by
            default, seconds: 0 fails fast, ``None`` (the default) waits as long as needed.

    ``"aws"`` profile (SPEC section 5):
        beta: the factor the rate is multiplied by on a throttle, in ``(0, 1)``; default 0.7.
        scale_constant: CUBIC's ``C``, how fast the rate grows back after a throttle (> 0); default 0.4.
        smoothing: the weight of the newest sample in the measured send rate, in ``(0, 1]``; default 0.8.
        measurement_bucket: the width of one send-rate measurement bucket, seconds (> 0); default 0.5.

    ``"asyncretry"`` profile (see :class:`AsyncretryRateController` for the rules and the reasons):
        utilization: after a congestion event the rate restarts at this fraction of the measured
            capacity, in ``(0, 1)``; the gap refills the server's burst for the next probe. Default 0.95.
        repeat_decrease: a further throttle right after a decrease (the capacity fell further) keeps at
            most this fraction of the rate, in ``(0, 1)``; default 0.7.
        min_repeat_decrease: ... and at least this fraction (the share of fresh responses that
            succeeded decides in between), in ``(0, repeat_decrease]``; default 0.25.
        reaction_time: seconds (> 0, <= ``measurement_window``) after a decrease during which a
            throttle counts as "the decrease was not enough" rather than as a new congestion event;
            also the shortest span a capacity measurement uses. Default 0.25.
        measurement_window: the span over which the served (successful) rate is measured, seconds
            (> 0); no success in a whole window means an outage. Default 1.0.
        recovery_time: seconds (> 0) the rate takes to climb back from ``utilization`` to the measured
            capacity after an event whose measurement confirmed the previous one; default 2.5.
        quick_recovery_time: the same after an event that changed the estimate (by more than
            ``stable_change``), a blind cut or an outage, seconds (> 0); default 0.5.
        stable_change: how far (a fraction, >= 0) a new capacity measurement may differ from the
            previous one and still count as confirming it; default 0.05.
        probe_doubling_time: once recovered, the rate probes above the estimate, doubling every this
            many seconds (> 0) until a throttle; default 0.5.
        burst: the bucket's capacity as seconds of fill rate (> 0, <= 3600): how many attempts may go out at
            once after a pause; default 0.1.
        growth_margin: if the server lately served more than ``1 + growth_margin`` times the
            capacity measured between throttles, the capacity grew meanwhile: the served rate is used
            instead (>= 0); default 0.1.
        probe_lift: what the server served while the rate probed above the estimate may raise the
            estimate by at most this fraction per event (>= 0), which corrects estimates that are low
            because the server's burst is too small to show the difference; default 0.01.
        outage_probe: during an outage (nothing served for ``measurement_window``) the rate drops to
            this fraction of the capacity measured before it (floored at ``min_fill_rate``), in
            ``(0, 1]``; default 0.01.
        settle_time: the hold after a confirming event grows from ``quick_recovery_time`` to
            ``recovery_time`` as the estimate stays unchanged for this long, seconds (> 0): a capacity
            that just changed is probed again soon, one stable for long seldom. Default 10.
        fair_step: requests per second added to the rate per second since the last decrease, on top
            of the recovery and the probe, while the estimate rests on fewer than ``2 * fair_count``
            successes (one client of a fleet with a limiter each): the one growth that is the same for
            every client, so that their shares converge (>= 0; 0 disables it and rule 9). Once a
            fleet client has counted its congestion events, their rate sets its rate instead, from the
            mean of that sawtooth (rule 9). Default 1.0.
        fair_count: a capacity measurement resting on fewer than this many successes (those counted
            between the two throttles or in the last ``measurement_window``, whichever is more; the
            first one after an outage also counts half of what the estimate predicted for a window) is
            mostly noise: the rate is cut to ``repeat_decrease`` of the fill rate instead, held for
            ``recovery_time``, and grows by ``fair_step`` (rule 7); below ``2 * fair_count`` the probe
            doubles more slowly; after two such measurements in a row the event rate sets the rate
            (rule 9). >= 0; 0 disables this, ``fair_step`` and rule 9. Default 12.
            Both concern a fleet with a limiter per client: ``RedisAdaptiveRateLimiter``, one limiter
            for the whole fleet, does not use them.

    Raises:
        ValueError / TypeError: a value is out of range or of the wrong type; the message names it.
    """

    profile: str = "asyncretry"
    beta: float = 0.7
    scale_constant: float = 0.4
    smoothing: float = 0.8
    measurement_bucket: float | timedelta = 0.5
    min_fill_rate: float = 0.5
    min_capacity: float = 1.0
    max_rate_growth: float = 2.0
    max_wait: float | timedelta | None = None
    utilization: float = 0.95
    repeat_decrease: float = 0.7
    min_repeat_decrease: float = 0.25
    reaction_time: float | timedelta = 0.25
    measurement_window: float | timedelta = 1.0
    recovery_time: float | timedelta = 2.5
    quick_recovery_time: float | timedelta = 0.5
    stable_change: float = 0.05
    probe_doubling_time: float | timedelta = 0.5
    burst: float | timedelta = 0.1
    growth_margin: float = 0.1
    probe_lift: float = 0.01
    outage_probe: float = 0.01
    settle_time: float | timedelta = 10.0
    fair_step: float = 1.0
    fair_count: float = 12.0

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
        for field in ("utilization", "repeat_decrease"):
            value = getattr(self, field)
            put(self, field, check_number(field, value, low=0.0, high=1.0, low_open=True, high_open=True))
        put(self, "min_repeat_decrease", check_number(
            "min_repeat_decrease", self.min_repeat_decrease, low=0.0, high=self.repeat_decrease, low_open=True
        ))
        probe = check_number("outage_probe", self.outage_probe, low=0.0, high=1.0, low_open=True)
        put(self, "outage_probe", probe)
        for field in _DURATIONS:
            put(self, field, check_seconds(field, getattr(self, field), low_open=True))
        # The bucket holds burst seconds of the fill rate: beyond an hour the capacity could overflow.
        put(self, "burst", check_seconds("burst", self.burst, low_open=True, high=MAX_BURST))
        window = _seconds(self.measurement_window)
        if _seconds(self.reaction_time) > window:
            raise ValueError(
                f"reaction_time must be <= measurement_window ({window:g} s), got reaction_time="
                f"{self.reaction_time!r}: lower reaction_time or raise measurement_window"
            )
        for field in _MARGINS + _FAIRNESS:
            put(self, field, check_number(field, getattr(self, field), low=0.0))


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
    ``fill_rate`` / ``max_capacity`` for the limiter to apply to its token bucket; ``answers_backoff``
    then says whether the retry engine may skip its throttling backoff after that throttle.
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

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None: ...


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
        # botocore's bucket starts at max_rate 1: until the first throttle it fills at 1/s.
        self.fill_rate = max(1.0, config.min_fill_rate)
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


# --- the "asyncretry" profile


class SlidingCounter:
    """Counts events in fixed time slots over a trailing horizon, to give rates over recent spans.

    Args:
        width: the slot width, seconds.
        horizon: the longest span :meth:`rate` can look back over, seconds.
        start: the time the counter starts, seconds.
    """

    __slots__ = ("_counts", "_newest", "_size", "_width")

    def __init__(self, width: float, horizon: float, start: float) -> None:
        self._width = width
        self._size = math.ceil(horizon / width) + 1
        self._counts = [0] * self._size
        self._newest = math.floor(start / width)  # the index of the newest slot

    def _advance(self, index: int) -> None:
        shift = index - self._newest
        if shift <= 0:
            return
        counts = self._counts
        if shift >= self._size:
            counts[:] = [0] * self._size
        else:
            del counts[:shift]
            counts.extend([0] * shift)
        self._newest = index

    def add(self, now: float) -> None:
        """Count one event at ``now``."""
        index = math.floor(now / self._width)
        self._advance(index)
        offset = self._newest - index
        if offset < self._size:
            self._counts[-1 - offset] += 1

    def rate(self, now: float, span: float) -> float:
        """Events per second over about the last ``span`` seconds (whole slots; the current one partly)."""
        self._advance(math.floor(now / self._width))
        slots = max(1, min(self._size, round(span / self._width)))
        elapsed = min(max(now - self._newest * self._width, 0.0), self._width)
        covered = (slots - 1) * self._width + elapsed
        total = sum(self._counts[self._size - slots :])
        return total / covered if covered > 0 else total / self._width

    def __repr__(self) -> str:
        return f"SlidingCounter(width={self._width!r}, total={sum(self._counts)})"


# Clamp for the probe's exponent: 2**64 times any estimate is beyond every cap.
_MAX_DOUBLINGS = 64.0
# The fewest unserved responses in a row that can show an outage (rule 6).
_OUTAGE_EVIDENCE = 3
# Below this many times fair_count successes an estimate grows by fair_step and probes more slowly (rule 7):
# 5x helped a fleet's fairness a little but slowed one limiter at 30-50/s (the demo) after its capacity rose.
_FAIR_PROBE = 2.0
# The share of a window's successes at the estimate that counts as evidence in the first measurement after
# an outage (rule 7): the demo's one limiter, its callers held back by an open breaker, fell to 79-82%.
_PREDICTED_EVIDENCE = 0.5
# So few successes before the first throttle are luck, not capacity (rule 7's fair start).
_LUCKY_START = 3
# The memory of a fleet's event rate (rule 9), in measurement windows: 5 s by default, a few events of a fleet
# client (about 0.7 a second in the HTTP benchmark); 3 and 8 s gave about the same fairness in virtual time.
_EVENT_MEMORY = 5.0
# The fewest recent events (the start-up's counts as one) that set a fleet client's rate (rule 9).
_FLEET_EVENTS = 2.0
# Rule 9's rate is this times the geometric mean of the sawtooth's mean at the client's event rate and at one
# event per measurement window. Calibrated in virtual time on the HTTP benchmark's fleet (50 clients, 200/s,
# seeds 0-63): 1.0 gave 12.7% throttled and Jain 0.939 on average, 1.1 13.8% and 0.950, 1.2 15.1% and 0.955.
_FLEET_GAIN = 1.1


class AsyncretryRateController:
    """The ``"asyncretry"`` profile: measure the server's capacity, hold just below it, probe now and then.

    AWS's CUBIC limiter estimates the capacity from its own *send* rate and cuts it by 0.7 on *every*
    throttle. So the first throttle, which arrives before any send rate was measured, drops the rate
    to the 0.5/s floor (about 14 s to recover), and at high rates the several throttles that one
    overshoot brings back (the requests already in flight) cut it again and again (40% of a
    1,000/s server). This controller follows other rules:

    1. **Free until the first throttle**, like AWS; the served (successful) rate is measured all along.
       The first throttles (the answers to one round trip arrive together, in any order) start the
       rate at ``repeat_decrease`` times what was served so far, not at the floor.
    2. **One decrease per congestion event**, as TCP reduces once per round trip: a throttle of a request
       sent before the last decrease (``sent_at``) is an echo of the event already handled. Without
       send times, each request is assumed sent ``measurement_window / 10`` before its answer.
    3. **Measure, do not guess.** A throttle means the server's token bucket was empty when the request
       arrived. Between two throttled requests the server admitted exactly its capacity times the time
       between them (less what it wasted while its bucket was full), so at each new event the
       capacity is the successes between the last throttle at least ``reaction_time`` earlier and this
       one, over the time between their sends. If the server lately served clearly more than that
       (``growth_margin``), the capacity grew meanwhile and the served rate is used instead.
       The rate restarts at ``utilization`` (95%) of the capacity: close enough to lose nothing, and
       the gap refills the server's burst so that the next probe is cheap.
    4. **Recover, then probe.** The rate climbs back to the capacity along a concave cubic curve in
       ``recovery_time`` (``quick_recovery_time`` when the estimate changed: then it needs checking
       soon; in between, continuously, as the estimate moved and as it has held for ``settle_time``),
       then probes above it, doubling every ``probe_doubling_time``: a capacity that grew is found
       within seconds (AWS's cubic curve takes about 20 s to follow a step from 50 to 200/s), and one
       that did not costs about one throttle per probe. A measurement from few successes (one client
       of a fleet) is only known to about ``2 / n``: that much change still counts as confirming.
    5. **Cut again only if the decrease was not enough**: a second fresh throttle within
       ``reaction_time`` of a decrease (the capacity fell) cuts the rate to the share of fresh
       responses that succeeded, between ``min_repeat_decrease`` and ``repeat_decrease``. One throttle
       alone is tolerated: right after a decrease the server's bucket is still empty.
    6. **Outages are not capacity.** When nothing at all was served for ``measurement_window`` and
       enough answers came back meanwhile to tell (at least 3, and half a window's worth at the current
       rate: a client back from a long backoff has sent too little), the rate drops to
       ``outage_probe`` (1%) of the capacity measured before, and the first success restores 95% of
       that capacity at once, instead of climbing from the floor. A failed attempt (``failed=True``:
       a 503, a connection error) is neither a throttle nor a success: it never raises the rate.
    7. **Fleets.** With one limiter per client, each client measures its own share. A client throttled
       before any success starts from a share of what it sent (not the floor); a client that sent far
       less than its estimate allowed between two throttles (asleep in a backoff) keeps its estimate
       rather than reading its idleness as capacity; and the limiter draws a random token phase when
       it is enabled, so that clients enabled by the same event do not send in step. The throttles of
       a fleet come in episodes the whole fleet shares, each client throttled about once per episode
       whatever its rate, and rules 3-4 are the same at every scale (restart at a fraction of the own
       measurement, grow by a factor per second): they keep whatever shares the clients start from, and
       the luck of a probe that was not throttled spreads them further (Chiu and Jain: only an
       increase common to all clients pulls shares together). So an estimate counted from few
       successes is treated as what it is, mostly noise:

       * a capacity measurement resting on fewer than ``fair_count`` (12) successes (``n``: those
         counted between the two throttles, or in the last ``measurement_window`` if more, since a
         measurement soon after a decrease spans little time whatever the rate; the first measurement
         after an outage also counts half of what the estimate predicted for a window, since its
         window held the outage, and callers held back by an open breaker) does not set the rate:
         the rate is cut to ``repeat_decrease`` of the fill rate and held for ``recovery_time`` (a
         multiplicative decrease, once per event as in rule 2);
       * while ``n`` < ``2 * fair_count``, the rate grows by ``fair_step`` (1) requests per second
         per second since the decrease, on top of the recovery and the probe: the same absolute step
         for every client of the fleet, as TCP's one segment per round trip, and what evens the
         shares out. The probe doubles more slowly, every ``probe_doubling_time * 2 * fair_count /
         n``, so that a client the server happened to spare does not run away with the capacity;
       * a client with fewer than 3 successes before its first throttle (served in the first round
         trip while most of the fleet was throttled) starts from the same share of what it sent as
         a throttled client, not from its lucky served rate.

       One limiter serving all the traffic rests its measurements on more successes (at least 30 in
       the simulator's shared scenarios and in the demo's 30/s stretch, hundreds once settled), so
       these rules leave it alone, except a limiter whose server admits only a few requests per
       second, for which additive increase is the right rule too; at 200-1,000 requests per second a
       step of 1 per second would be negligible anyway.

    8. **The start answers the first round trip's throttles**: a throttle this profile took as part of
       its start-up (rule 1: the throttle that enabled it, and the echoes of the same round trip) needs
       no throttling backoff from the retry engine on top (:attr:`answers_backoff`,
       :meth:`~asyncretry.AdaptiveRateLimiter.backoff_after_throttle`): the start already set the rate,
       and from then on the bucket paces every attempt, so the retry waits only for its token. With
       the backoff, the 40 clients of a fleet of 50 throttled in the first round trip slept about half
       a second each (full jitter over 1 s) while the server had capacity to spare: all of the HTTP
       benchmark's shortfall. Later throttles keep the engine's backoff (except a fleet client's under
       rule 9): without rule 9, a fleet's jittered sleeps shed the load of the clients just throttled
       (without them, in virtual time: 17.2-17.9% of the sends throttled instead of 14.7-15.8%, Jain
       0.74-0.91 instead of 0.88-0.94). A server-directed delay (``Retry-After``) is always honoured.
       The ``"aws"`` profile keeps the SDKs' backoff, and ``RedisAdaptiveRateLimiter`` (one limiter
       for a fleet) the engine's.
    9. **A fleet's event rate sets a fleet client's rate.** Behind one saturated server the throttles come
       in episodes the whole fleet shares, and each client is throttled about once per episode whatever its
       rate (virtual-time traces of the HTTP benchmark's fleet, 4 seeds: 4-13 throttles per client in 10 s,
       7.1-7.4 on average with a standard deviation of 1.2-1.5, whether it had 8 successes or 96): the rate
       of a client's congestion events (fresh throttles, rule 2) is the one figure all clients measure
       alike, where its share of throttled answers is not (the same traces: 20-53% for the five clients with
       the fewest successes, 6-21% for the five with the most). So a client whose last two measurements each
       rested on fewer than ``2 * fair_count`` successes (rule 7's criterion, met twice: not one limiter
       back from a long backoff), once it has counted two recent events (the start-up counting as one), sets
       its rate from ``lambda``, its events per second, each event's weight decaying over ``5 *
       measurement_window``. Let ``x(l) = fair_step * (1 + repeat_decrease) / (2 * (1 - repeat_decrease) *
       l)`` be the mean rate of rule 7's sawtooth (grow by ``fair_step`` per second, cut to
       ``repeat_decrease`` at each event) at ``l`` events a second; the rate is ``1.1 * sqrt(x(lambda) *
       x(1 / measurement_window))``, the same for every client whatever its start or its luck. The geometric
       mean with a fixed reference answers a count of a few events (about 3 in the memory) with half its
       noise: a client spared by a few episodes gains the square root of its luck, not all of it (with
       ``x(lambda)`` alone, Jain's index in virtual time averaged 0.929 with 3 seeds in 128 under 0.90; with
       the geometric mean 0.950 and none, and 0.9 points fewer throttles; the factor 1.1 sets how much the
       fleet leans on the server: 1.0 gave 12.7% throttled and Jain 0.939, 1.2 15.1% and 0.955). The rate
       keeps following ``lambda`` (it grows as the events age) instead of the recovery and the probe, and
       such a client's throttles need no throttling backoff from the engine (:attr:`answers_backoff`): the
       rate answers them, and the random length of the sleeps (3-4 s of every 10 asleep, a second's spread
       between clients) was much of the unfairness left. The fleet's load regulates itself: more episodes
       lower every client's rate. In the HTTP benchmark (50 clients, R = 200/s, 10 s) Jain's index rose from
       0.85-0.95 (12 runs) to 0.88-0.96 (57 runs, under 0.90 in 2) with ``x(lambda)``, and to 0.92-0.97 (40
       runs) with the geometric mean and the limiter's new phase at each cut, with 12.8-14.1% of the sends
       throttled. One limiter serving all the traffic, or a client whose measurements rest on ``2 *
       fair_count`` successes or more, is left alone; ``fair_count=0`` or ``fair_step=0`` disables the
       rule.

    The bucket holds ``burst`` seconds of the fill rate (AWS's holds a whole second), so a pause does
    not end in a burst the server would throttle.

    Args:
        config: the constants (the ``"asyncretry"`` ones and the shared ones).
        start: the limiter's start time, seconds.
    """

    __slots__ = (
        "_answered",
        "_before_outage",
        "_burst",
        "_config",
        "_counted",
        "_decreased_at",
        "_doubling",
        "_echo_guard",
        "_event_at",
        "_events",
        "_events_at",
        "_events_from",
        "_evidence",
        "_first_response",
        "_fleet",
        "_fresh_successes",
        "_fresh_throttles",
        "_good",
        "_horizon",
        "_last_good",
        "_marks",
        "_now",
        "_outage",
        "_reaction",
        "_recovery",
        "_responses",
        "_restart_fraction",
        "_resumed",
        "_served",
        "_stable",
        "_start",
        "_starting",
        "_unserved",
        "_width",
        "_window",
        "enabled",
        "fill_rate",
        "last_max_rate",
        "max_capacity",
    )

    def __init__(self, config: AdaptiveLimiterConfig, start: float) -> None:
        self._config = config
        # The durations as plain floats, read on every update.
        window = self._window = _seconds(config.measurement_window)
        self._reaction = _seconds(config.reaction_time)
        self._doubling = _seconds(config.probe_doubling_time)
        self._burst = _seconds(config.burst)
        self._width = window / 20
        self._good = SlidingCounter(self._width, window, start)
        self._responses = SlidingCounter(self._width, window, start)
        self._echo_guard = window / 10
        # A reference throttle must reach back over a whole recovery and probe.
        self._horizon = 4 * max(_seconds(config.recovery_time), window)
        # (send time, successes before it) of recent throttles, one per slot at most.
        self._marks: deque[tuple[float, int, int]] = deque()
        self._answered = 0
        self._served = 0
        self._start = start
        self._now = start
        self._first_response = math.nan
        self._decreased_at = -math.inf
        self._event_at = -math.inf
        self._fresh_successes = 0
        self._fresh_throttles = 0
        self._starting = False
        self._outage = False
        self._before_outage = 0.0
        self._recovery = _seconds(config.quick_recovery_time)
        self._restart_fraction = config.utilization
        self._last_good = start
        self._unserved = 0
        self._counted = 0.0
        self._evidence = 0.0
        self._events = 0.0
        self._events_at = self._events_from = start
        self._fleet = False
        self._resumed = False
        self._stable = start
        self.enabled = False
        self.fill_rate = config.min_fill_rate
        self.max_capacity = config.min_capacity
        self.last_max_rate = 0.0

    @property
    def measured_rate(self) -> float:
        """Responses per second over the last ``measurement_window``."""
        return self._responses.rate(self._now, self._window)

    @property
    def last_throttle_time(self) -> float:
        """When the rate was last decreased (the start time before any throttle)."""
        return self._decreased_at if self.enabled else self._start

    @property
    def answers_backoff(self) -> bool:
        """Whether the throttle just fed needs no throttling backoff from the retry engine: one of the
        start-up's throttles (the first round trip's), which the start of the rate already answered (rule
        8), or one of a fleet client whose rate its events set (rule 9)."""
        return self._starting or self._fleet

    @property
    def in_outage(self) -> bool:
        """Whether nothing was served for a whole window: the rate is probing for the end of an outage."""
        return self._outage

    def update(self, now: float, throttled: bool, sent_at: float | None = None, failed: bool = False) -> None:
        """Feed one response received at ``now`` to a request sent at ``sent_at`` (``None``: unknown).

        ``failed``: the attempt failed for another reason (a 503, a connection error): not a success.
        """
        self._now = now
        if self._first_response != self._first_response:  # NaN: the first response
            self._first_response = now
        self._responses.add(now)
        self._answered += 1
        # Without send times, assume each request went out a little before its answer came back.
        sent = sent_at if sent_at is not None else now - self._echo_guard
        if throttled:
            self._unserved += 1
            self._throttle(now, sent)
        elif failed:
            # Neither a throttle nor a success: it says nothing of the capacity, only of an outage.
            self._unserved += 1
            if self.enabled and not self._outage and self._no_service(now):
                self._enter_outage(now)
        else:
            self._success(now, sent > self._decreased_at)

    def _success(self, now: float, fresh: bool) -> None:
        self._good.add(now)
        self._served += 1
        self._last_good = now
        self._unserved = 0
        if not self.enabled:
            return
        if self._starting and not fresh:
            self._start_up(now)  # more answers of the first round trip: a better start
            return
        if fresh:
            self._fresh_successes += 1
        if self._outage:
            self._outage = False
            config = self._config
            self._restart(now, self._before_outage, config.utilization, config.quick_recovery_time)
            self._resumed = True
        else:
            self._grow(now)

    def _throttle(self, now: float, sent: float) -> None:
        config = self._config
        fresh = sent > self._decreased_at
        self._mark(sent)
        if not self.enabled or (self._starting and not fresh):
            self._start_up(now)
            return
        if not fresh:
            return  # an echo of the event already handled
        self._starting = False
        self._events = self._recent_events(now) + 1.0
        self._events_at = now
        new_episode = now - self._event_at > self._window
        self._event_at = now
        if self._no_service(now):
            self._enter_outage(now)
            return
        if sent - self._decreased_at < self._reaction:
            self._fresh_throttles += 1
            if self._fresh_throttles < 2:
                return  # right after a decrease the server's bucket is still empty: bad luck, maybe
            served = self._fresh_successes / (self._fresh_successes + self._fresh_throttles)
            cut = min(config.repeat_decrease, max(served, config.min_repeat_decrease))
            self._restart(now, self.fill_rate, cut, config.quick_recovery_time)
            return
        few = _FAIR_PROBE * config.fair_count
        was_few = self._evidence < few
        capacity = self._measure(now, sent)
        if capacity <= 0.0:
            # Nothing served since the reference, but too little sent to call it an outage (a client
            # back from a long backoff): a plain decrease.
            self._restart(now, self.fill_rate, config.repeat_decrease, config.quick_recovery_time)
            return
        if new_episode:
            self._before_outage = capacity
        # A fleet client: few successes behind this measurement and the one before (not one limiter back
        # from a long sleep), and enough recent events to tell their rate.
        self._fleet = config.fair_step > 0.0 and was_few and self._evidence < few and self._events >= _FLEET_EVENTS
        rate = self._fleet_rate(now)
        if rate > 0.0:
            self._restart(now, rate, 1.0, config.recovery_time)
            return
        if self._evidence < config.fair_count:
            # Too few successes to measure anything (one client of a fleet): a plain multiplicative
            # decrease of the rate, held, so that the additive fair step evens the shares out (rule 7).
            self._restart(now, config.repeat_decrease * self.fill_rate, 1.0, config.recovery_time)
            return
        self._restart(now, capacity, config.utilization, self._recovery_after(capacity))

    # --- the rules

    def _recent_events(self, now: float) -> float:
        """The congestion events counted so far, each weighing less as it ages (``_EVENT_MEMORY`` windows)."""
        return self._events * math.exp((self._events_at - now) / (_EVENT_MEMORY * self._window))

    def _fleet_rate(self, now: float) -> float:
        """The rate a fleet client's events set (rule 9); 0 when this is not a fleet client."""
        if not self._fleet:
            return 0.0
        config = self._config
        memory = _EVENT_MEMORY * self._window
        # The span the decayed count covers: events per second over it are the fleet's event rate.
        span = memory * -math.expm1((self._events_from - now) / memory)
        events_per_window = self._recent_events(now) / max(span, self._width) * self._window
        beta = config.repeat_decrease
        # The sawtooth's mean rate at one event per window; at the client's own event rate it is this over
        # events_per_window. Their geometric mean answers a count of a few events with half its noise.
        per_window = config.fair_step * (1.0 + beta) * self._window / (2.0 * (1.0 - beta))
        return _FLEET_GAIN * per_window / math.sqrt(events_per_window)

    def _no_service(self, now: float) -> bool:
        """Whether this is an outage (rule 6): nothing served for a whole window, and enough sent
        meanwhile to tell (a client that slept through the window, in a backoff, has not)."""
        if now - self._last_good < self._window:
            return False
        return self._unserved >= max(_OUTAGE_EVIDENCE, 0.5 * self.fill_rate * self._window)

    def _recovery_after(self, capacity: float) -> float:
        """The recovery time after a measurement: up to ``recovery_time`` when it confirms the previous
        one, shortening continuously to ``quick_recovery_time`` as it departs from it by half to all of
        ``stable_change`` (a hard threshold turned measurement noise into a coin toss between 2.5 s and
        0.5 s); and only as the estimate has held for ``settle_time`` (a capacity that changes every few
        seconds is probed every few seconds)."""
        config = self._config
        quick = _seconds(config.quick_recovery_time)
        previous = self.last_max_rate
        if previous <= 0.0:
            return quick
        change = abs(capacity - previous) / previous
        # A count of n successes is only known to about 1/sqrt(n): a client that serves few requests
        # (one of a fleet) must not read its counting noise as a changed capacity.
        tolerance = max(config.stable_change, 2.0 / max(self._counted, 1.0))
        # Full hold up to half the tolerance, the quick one beyond it, linear in between.
        weight = min(1.0, max(0.0, 2.0 - 2.0 * change / tolerance)) if tolerance > 0.0 else float(change == 0.0)
        # How long the estimate has held, shrunk as much as this measurement moved it.
        self._stable = self._now - weight * (self._now - self._stable)
        settled = min(1.0, (self._now - self._stable) / _seconds(config.settle_time))
        return quick + (_seconds(config.recovery_time) - quick) * weight * settled

    def _start_up(self, now: float) -> None:
        """The first throttles: start from what was served so far (rule 1)."""
        config = self._config
        covered = min(self._window, max(now - self._first_response, self._echo_guard))
        served = self._good.rate(now, covered)
        counted = float(self._served)
        sent_share = config.min_repeat_decrease * self._responses.rate(now, covered)
        if served <= 0.0:
            # Throttled before any success (one client of a fleet that started together): start from
            # a share of what was sent, not at the floor with nothing measured to grow from.
            served = sent_share
        elif self._served < _LUCKY_START and config.fair_count > 0:
            # A success or two (one client of a fleet, served in the first round trip while most were
            # throttled) is luck, not capacity: no more than the share a throttled client starts from.
            served, counted = min(served, sent_share), 0.0
        self._evidence = max(self._evidence, counted)
        served = max(served, self._before_outage)
        if not self.enabled:
            self._events, self._events_at, self._events_from = 1.0, now, now  # the start-up: one event
        decreased_at = self._decreased_at if self.enabled else now
        self.enabled = True
        self._starting = True
        self._before_outage = served
        self._restart(now, served, config.repeat_decrease, config.quick_recovery_time)
        self._decreased_at = decreased_at  # echoes of the same round trip do not move the event

    def _measure(self, now: float, sent: float) -> float:
        """The server's capacity, measured at a new congestion event (rule 3)."""
        config = self._config
        reaction = self._reaction
        capacity = -1.0
        counted = 0.0
        for mark_sent, mark_served, mark_answered in reversed(self._marks):
            if mark_sent <= sent - reaction:
                # The server's bucket was empty at both throttles: what it admitted in between is its rate.
                counted = self._served - mark_served
                capacity = counted / (sent - mark_sent)
                answered = self._answered - mark_answered
                if answered < 0.5 * self.last_max_rate * (sent - mark_sent):
                    # This client sent far less than its estimate allowed (it slept in a backoff, or had
                    # little to send): what it got is its demand, not the server's capacity.
                    capacity = max(capacity, self.last_max_rate)
                break
        span = min(self._window, now - self._decreased_at)
        served = self._good.rate(now, span)
        if capacity < 0.0 or served > (1.0 + config.growth_margin) * capacity:
            # No reference, or one from before the capacity grew (the server's bucket overflowed
            # while we sent less than it allowed): what it served lately measures it better.
            capacity = served
            counted = served * span
        probe_start = self._decreased_at + self._recovery
        if sent - probe_start >= self._width and now - probe_start <= self._window:
            # A small server burst cannot hide a capacity above the estimate from the probe.
            probed = self._good.rate(now, now - probe_start)
            capacity = max(capacity, min(probed, (1.0 + config.probe_lift) * capacity))
        self._counted = counted
        # What a fleet's rules (rule 7) go by: the successes behind this measurement, or those of the
        # last window if more (a measurement soon after a decrease spans little time, whatever the rate);
        # right after an outage, whose window held the outage, also half of what the estimate predicted.
        window = self._window
        predicted = _PREDICTED_EVIDENCE * self.last_max_rate * window if self._resumed else 0.0
        self._resumed = False
        self._evidence = max(counted, self._good.rate(now, window) * window, predicted)
        return min(capacity, self.fill_rate)

    def _restart(self, now: float, capacity: float, fraction: float, recovery: float | timedelta) -> None:
        """Decrease to ``fraction`` of ``capacity`` and recover towards it (rules 3-5)."""
        self.last_max_rate = capacity
        self._decreased_at = now
        self._fresh_successes = self._fresh_throttles = 0
        self._restart_fraction = fraction
        self._recovery = _seconds(recovery)
        self._set(fraction * capacity)

    def _enter_outage(self, now: float) -> None:
        """Nothing served: probe slowly, remembering the capacity from before (rule 6)."""
        self._outage = True
        self._fleet = False
        self._decreased_at = now
        self._set(self._config.outage_probe * self._before_outage)

    def _grow(self, now: float) -> None:
        """Concave recovery to the capacity, then an exponential probe above it (rule 4)."""
        config = self._config
        rate = self._fleet_rate(now)
        if rate > 0.0:
            self._set(rate)  # a fleet client: its events set the rate (rule 9)
            return
        capacity = max(self.last_max_rate, config.min_fill_rate)
        elapsed = now - self._decreased_at
        recovery = self._recovery
        doubling = self._doubling
        step = 0.0
        few = _FAIR_PROBE * config.fair_count
        if self._evidence < few:
            # An estimate from few successes (one client of a fleet): an additive step the whole fleet
            # shares evens the shares out, and a slower probe keeps lucky clients from running away.
            step = config.fair_step * elapsed
            doubling *= few / max(self._evidence, 1.0)
        if elapsed < recovery:
            self._set(capacity * (1.0 - (1.0 - self._restart_fraction) * (1.0 - elapsed / recovery) ** 3) + step)
            return
        doublings = min((elapsed - recovery) / doubling, _MAX_DOUBLINGS)
        sending = self._responses.rate(now, self._reaction)
        # Never beyond max_rate_growth times what was really sent (or the capacity, for a client that
        # sends so slowly that a short span of responses cannot measure it).
        self._set(min(capacity * 2.0**doublings + step, config.max_rate_growth * max(sending, capacity)))

    def _set(self, rate: float) -> None:
        config = self._config
        rate = max(rate, config.min_fill_rate)
        self.fill_rate = rate
        self.max_capacity = max(rate * self._burst, config.min_capacity)

    def _mark(self, sent: float) -> None:
        marks = self._marks
        if marks and sent - marks[-1][0] < self._width:
            marks[-1] = (sent, self._served, self._answered)  # one reference per slot is enough
        else:
            marks.append((sent, self._served, self._answered))
        while marks[0][0] < sent - self._horizon:
            marks.popleft()

    def __repr__(self) -> str:
        state = "outage" if self._outage else "enabled" if self.enabled else "disabled"
        return (
            f"AsyncretryRateController({state}, fill_rate={self.fill_rate!r}, "
            f"capacity={self.last_max_rate!r}, measured_rate={self.measured_rate!r})"
        )


# --- the registry

_CONTROLLERS: dict[str, Callable[[AdaptiveLimiterConfig, float], RateController]] = {
    "asyncretry": AsyncretryRateController,
    "aws": AwsRateController,
}


def new_rate_controller(config: AdaptiveLimiterConfig, start: float) -> RateController:
    """The rate controller of ``config.profile``, starting at time ``start`` (seconds)."""
    return _CONTROLLERS[config.profile](config, start)


def _seconds(value: float | timedelta) -> float:
    # The config normalizes durations to floats in __post_init__; this only narrows the type.
    return value.total_seconds() if isinstance(value, timedelta) else value
