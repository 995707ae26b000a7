"""The adaptive limiter's settings: one frozen config for every profile, validated on construction.

:class:`AdaptiveLimiterConfig` holds the ``"aws"`` profile's SDK constants, the ``"asyncretry"``,
``"independent"`` and ``"fair"`` profiles' constants and the shared ones; each controller reads only its own
and the shared ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from .._validate import check_bool, check_choice, check_number, check_seconds

__all__ = ["MAX_BURST", "PROFILES", "AdaptiveLimiterConfig", "as_seconds"]

PROFILES = ("asyncretry", "aws", "fair", "independent")
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
    "fair_probe",
)
_MARGINS = ("stable_change", "growth_margin", "probe_lift")
_FAIRNESS = ("fair_step", "fair_count")
_FAIR_PROFILE = ("fair_reference", "fair_floor")
_INDEPENDENT_PROFILE = ("share_reference",)
MAX_BURST = 3600.0
"""The longest ``burst`` (seconds of the fill rate the bucket holds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveLimiterConfig:
    """Settings of an :class:`~asyncretry.AdaptiveRateLimiter`: the profile and its constants.

    Each profile reads only its own constants and the shared ones; the others are ignored.

    Args:
        profile: the rate-control strategy. ``"asyncretry"`` (the default) measures the server's
            capacity and holds just below it
            (:class:`~asyncretry._primitives._adaptive.AsyncretryRateController`); ``"fair"`` is a
            binomial AIMD for fleets of independent clients whose shares are several requests a second
            or more (:class:`~asyncretry._primitives._fair.FairRateController`); ``"independent"`` is the
            default profile's controller for a limiter per client of a fleet: without ``repeat_cut`` and
            its fleet rules, pacing instead of the engine's backoff, and with a recovery and probe that
            take longer the larger the client's share (``INDEPENDENT_RULES`` in ``asyncretry._primitives._adaptive``);
            ``"aws"`` is the AWS SDKs' CUBIC limiter exactly
            (:class:`~asyncretry._primitives._cubic.AwsRateController`), as ``RetryPolicy.aws_adaptive()``
            uses it.

    Shared:
        min_fill_rate: the lowest fill rate, tokens per second (> 0); default 0.5.
        min_capacity: the lowest bucket capacity, tokens (>= 1, since every attempt takes one token);
            default 1.0.
        max_rate_growth: the rate never grows beyond this many times the measured send rate (> 0), so
            that a client that sends little does not build up an allowance it never tested; default 2.0.
        max_wait: how long :meth:`~asyncretry.AdaptiveRateLimiter.acquire` may wait for a token by
            default, seconds: 0 fails fast, ``None`` (the default) waits as long as needed.
        hold_spent_quota: when an answer announces the server's quota spent (``RateLimit``,
            ``X-RateLimit-*`` ...), the retry engine holds the limiter until the reset
            (:meth:`~asyncretry.AdaptiveRateLimiter.hold`): every task that shares it waits, then the
            waiters go out at the rate the limiter was served before. A reset in whole seconds is held
            at most twice the soonest it may come (``t=1`` holds nothing), so a 1-s window is not held
            into the next, unless the server says a window at least twice the reset's rounding. A quota
            said over a shorter window (``RateLimit-Policy``'s ``q`` per ``w``) paces the limiter instead
            (:meth:`~asyncretry.AdaptiveRateLimiter.pace`), from every answer that says it.
            ``False``: only the call that met the spent quota waits for the reset. Default ``None``:
            ``False`` with the SDK-exact ``"aws"`` profile (the SDKs do not hold), ``True`` with the others.

    ``"aws"`` profile (SPEC section 5):
        beta: the factor the rate is multiplied by on a throttle, in ``(0, 1)``; default 0.7.
        scale_constant: CUBIC's ``C``, how fast the rate grows back after a throttle (> 0); default 0.4.
        smoothing: the weight of the newest sample in the measured send rate, in ``(0, 1]``; default 0.8.
        measurement_bucket: the width of one send-rate measurement bucket, seconds (> 0); default 0.5.

    ``"asyncretry"`` profile (its rules and their reasons are in docs/adaptive-limiter.md):
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
        probe_rtts: the probe doubles no faster than every this many smoothed round trips (>= 0; 0
            turns it off), so that in the round trip a throttle takes to come back it grows by at most
            about ``ln 2 / probe_rtts`` (3.5% at 20) and overshoots the capacity by little; with round
            trips under ``probe_doubling_time / probe_rtts`` (25 ms by default) it changes nothing;
            default 20.
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
            every client, so that their shares converge (>= 0; 0 disables it and ``fleet_event_rate``). Once a
            fleet client has counted its congestion events, their rate sets its rate instead, from the
            mean of that sawtooth (``fleet_event_rate``), and the lowest rate its events leave it at climbs
            by the ``"fair"`` profile's step (``fleet_climb``, which also reads ``fair_reference``,
            ``fair_exponent`` and ``fair_probe``). Also the ``"fair"`` profile's step at ``fair_reference``.
            Default 1.0.
        fair_count: a capacity measurement resting on fewer than this many successes (those counted
            between the two throttles or in the last ``measurement_window``, whichever is more; the
            first one after an outage also counts half of what the estimate predicted for a window) is
            mostly noise: the rate is cut to ``repeat_decrease`` of the fill rate instead, held for
            ``recovery_time``, and grows by ``fair_step`` (``few_successes``); below ``2 * fair_count`` the probe
            doubles more slowly; after two such measurements in a row the event rate sets the rate
            (``fleet_event_rate``). >= 0; 0 disables this, ``fair_step``, ``fleet_event_rate`` and
            ``fleet_climb``. Default 12.
            Both concern a fleet with a limiter per client: ``RedisAdaptiveRateLimiter``, one limiter
            for the whole fleet, does not use them.

    ``"fair"`` profile (a binomial AIMD, :class:`~asyncretry._primitives._fair.FairRateController`; it
    also reads ``fair_step``, ``min_repeat_decrease``, ``utilization``, ``measurement_window`` and
    ``burst``, and not ``min_fill_rate``; the default profile's ``fleet_climb`` reads ``fair_reference``,
    ``fair_probe`` and ``fair_exponent`` too):
        fair_reference: the rate, requests per second (> 0), at which the additive step is ``fair_step``
            requests per second per second; the step grows as ``(rate / fair_reference) ** fair_exponent``.
            Default 64.
        fair_floor: the lowest rate, requests per second (> 0), low enough that many slow clients
            need not be throttled; default 0.05.
        fair_decrease: the fraction of the rate (or of the recent send rate, if lower) a congestion event
            keeps, in ``(0, 1)``; default 0.8.
        fair_probe: the additive step doubles every this many seconds since the last cut (> 0), the same
            for every client: one seldom throttled (below its share, or every client after the capacity
            rose) catches up. Default 2.
        fair_exponent: how the additive step grows with the rate, in ``[0, 1]``: ``fair_step * (rate /
            fair_reference) ** fair_exponent``. 0 is AIMD's constant step (the strongest pull towards
            equal shares, and the most throttles at small rates); towards 1 slow clients are throttled
            less and the shares converge more slowly. Default 0.5.

    ``"independent"`` profile (the ``"asyncretry"`` profile's constants, and):
        share_reference: the share, requests per second (> 0), at which a client that shares the server
            recovers and probes in ``recovery_time`` and ``probe_doubling_time`` (``share_recovery``);
            default 64.
        share_exponent: those times grow as ``(estimate / share_reference) ** share_exponent``, in
            ``[0, 1]``: 0 keeps the default profile's pace at every share, and the larger it is the faster
            the shares converge and the slower a large share probes. Default 1/3, as CUBIC's time back to its
            window grows with it.

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
    hold_spent_quota: bool | None = None
    utilization: float = 0.95
    repeat_decrease: float = 0.7
    min_repeat_decrease: float = 0.25
    reaction_time: float | timedelta = 0.25
    measurement_window: float | timedelta = 1.0
    recovery_time: float | timedelta = 2.5
    quick_recovery_time: float | timedelta = 0.5
    stable_change: float = 0.05
    probe_doubling_time: float | timedelta = 0.5
    probe_rtts: float = 20.0
    burst: float | timedelta = 0.1
    growth_margin: float = 0.1
    probe_lift: float = 0.01
    outage_probe: float = 0.01
    settle_time: float | timedelta = 10.0
    fair_step: float = 1.0
    fair_count: float = 12.0
    fair_reference: float = 64.0
    fair_floor: float = 0.05
    fair_probe: float | timedelta = 2.0
    fair_decrease: float = 0.8
    fair_exponent: float = 0.5
    share_reference: float = 64.0
    share_exponent: float = 1 / 3

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
        if self.hold_spent_quota is not None:
            check_bool("hold_spent_quota", self.hold_spent_quota)
        for field in ("utilization", "repeat_decrease", "fair_decrease"):
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
        window = as_seconds(self.measurement_window)
        if as_seconds(self.reaction_time) > window:
            raise ValueError(
                f"reaction_time must be <= measurement_window ({window:g} s), got reaction_time="
                f"{self.reaction_time!r}: lower reaction_time or raise measurement_window"
            )
        for field in (*_MARGINS, *_FAIRNESS, "probe_rtts"):
            put(self, field, check_number(field, getattr(self, field), low=0.0))
        for field in ("fair_exponent", "share_exponent"):
            put(self, field, check_number(field, getattr(self, field), low=0.0, high=1.0))
        for field in (*_FAIR_PROFILE, *_INDEPENDENT_PROFILE):
            put(self, field, check_number(field, getattr(self, field), low=0.0, low_open=True))

    @property
    def holds_spent_quota(self) -> bool:
        """Whether the retry engine holds the limiter on a quota announced spent: ``hold_spent_quota``, or
        when that is ``None``, the profile's choice (every profile holds but the SDK-exact ``"aws"``)."""
        return self.profile != "aws" if self.hold_spent_quota is None else self.hold_spent_quota

def as_seconds(value: float | timedelta) -> float:
    """A duration of the config as a float (the config normalizes them; this only narrows the type)."""
    return value.total_seconds() if isinstance(value, timedelta) else value
