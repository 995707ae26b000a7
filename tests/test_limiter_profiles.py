"""The "asyncretry" limiter profile (the default): its rules, its bounds, and that it beats "aws".

The "aws" profile's conformance with the SDKs lives in tests/test_limiter.py and tests/test_cubic.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import (
    DEFAULT_CLOCK,
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    NoBackoff,
    Retrier,
    RetryPolicy,
)
from asyncretry._primitives._adaptive import RULES, AsyncretryRateController
from asyncretry._primitives._cubic import AwsRateController
from asyncretry._primitives._meters import RoundTrip, SlidingCounter
from asyncretry._primitives._rate_controller import new_rate_controller
from asyncretry._simulation import Scenario, run_simulation
from asyncretry.testing import VirtualClock, fixed_random
from fleet_schedule import fleet_sends, then_served

LATENCY = 0.02


def _served_then_throttled(
    config: AdaptiveLimiterConfig, *, rtt: float = LATENCY, rules: Iterable[str] = RULES
) -> AsyncretryRateController:
    """A controller that served 100/s for 1 s, then saw its first throttle (sent at 1.0, answered at 1.02;
    every answer ``rtt`` after its send)."""
    control = AsyncretryRateController(config, 0.0, rules=rules)
    for k in range(100):
        control.update(k / 100 + rtt, False, k / 100)
    control.update(1.0 + rtt, True, 1.0)
    return control


def _measured(
    config: AdaptiveLimiterConfig, *, rtt: float = LATENCY, rules: Iterable[str] = RULES
) -> AsyncretryRateController:
    """After the first throttle: 97 successes sent from 1.03 to 1.99, then a throttle sent at 2.0."""
    control = _served_then_throttled(config, rtt=rtt, rules=rules)
    for k in range(3, 100):
        sent = 1.0 + k / 100
        control.update(sent + rtt, False, sent)
    control.update(2.0 + rtt, True, 2.0)
    return control


# --- the profiles and their wiring


def test_default_profile_is_asyncretry_and_aws_stays_selectable() -> None:
    """AdaptiveLimiterConfig() picks the "asyncretry" controller; profile="aws" still picks the SDKs' one."""
    assert AdaptiveLimiterConfig().profile == "asyncretry"
    assert isinstance(new_rate_controller(AdaptiveLimiterConfig(), 0.0), AsyncretryRateController)
    assert isinstance(new_rate_controller(AdaptiveLimiterConfig(profile="aws"), 0.0), AwsRateController)
    limiter = AdaptiveRateLimiter(clock=VirtualClock(), name="api")
    assert repr(limiter) == (
        "<AdaptiveRateLimiter 'api' disabled fill_rate=0.5/s max_capacity=1 measured_rate=0/s "
        "profile='asyncretry'>"
    )


def test_aws_preset_keeps_the_aws_profile_and_plain_adaptive_mode_gets_the_default() -> None:
    """RetryPolicy.aws_adaptive() uses the exact AWS limiter unless told otherwise; "adaptive" the default."""
    assert RetryPolicy.aws_adaptive().limiter_config == AdaptiveLimiterConfig(profile="aws")
    assert RetryPolicy.aws_adaptive("2026").limiter_config == AdaptiveLimiterConfig(profile="aws")
    assert RetryPolicy(mode="adaptive").limiter_config == AdaptiveLimiterConfig()
    custom = AdaptiveLimiterConfig(utilization=0.9)
    assert RetryPolicy.aws_adaptive(limiter=custom).limiter_config is custom


def test_one_name_one_behaviour_for_adaptive_mode() -> None:
    """RetryPolicy.adaptive() is RetryPolicy(mode="adaptive") (asyncretry's limiter); aws_adaptive() the SDKs'."""
    assert RetryPolicy.adaptive() == RetryPolicy(mode="adaptive")
    assert RetryPolicy.adaptive("2026") == RetryPolicy(mode="adaptive", profile="2026")
    assert RetryPolicy.adaptive().limiter_config == AdaptiveLimiterConfig(profile="asyncretry")
    assert RetryPolicy.aws_adaptive() == RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(profile="aws"))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("utilization", 1.0, r"utilization must be > 0 and < 1, got 1.0"),
        ("utilization", 0, r"utilization must be > 0 and < 1, got 0"),
        ("repeat_decrease", 1.5, r"repeat_decrease must be > 0 and < 1, got 1.5"),
        ("min_repeat_decrease", 0.8, r"min_repeat_decrease must be > 0 and <= 0.7, got 0.8"),
        ("reaction_time", 2.0, r"reaction_time must be <= measurement_window \(1 s\), got reaction_time=2.0"),
        ("reaction_time", 0, r"reaction_time must be > 0, got 0"),
        ("measurement_window", 0, r"measurement_window must be > 0, got 0"),
        ("recovery_time", -1, r"recovery_time must be > 0, got -1"),
        ("quick_recovery_time", 0, r"quick_recovery_time must be > 0, got 0"),
        ("probe_doubling_time", timedelta(0), r"probe_doubling_time must be > 0, got 0"),
        ("burst", 0, r"burst must be > 0, got 0"),
        ("stable_change", -0.1, r"stable_change must be >= 0, got -0.1"),
        ("growth_margin", math.nan, r"growth_margin must be a finite number"),
        ("probe_lift", -1, r"probe_lift must be >= 0, got -1"),
        ("probe_rtts", -2, r"probe_rtts must be >= 0, got -2"),
        ("probe_rtts", math.inf, r"probe_rtts must be a finite number \(>= 0\), got inf"),
        ("outage_probe", 0, r"outage_probe must be > 0 and <= 1, got 0"),
        ("outage_probe", 1.5, r"outage_probe must be > 0 and <= 1, got 1.5"),
        ("settle_time", 0, r"settle_time must be > 0"),
        ("fair_step", -0.5, r"fair_step must be >= 0, got -0.5"),
        ("fair_step", math.inf, r"fair_step must be a finite number \(>= 0\), got inf"),
        ("fair_count", -1, r"fair_count must be >= 0, got -1"),
        ("fair_count", math.nan, r"fair_count must be a finite number \(>= 0\), got nan"),
    ],
)
def test_config_rejects_bad_values_naming_the_parameter(field: str, value: Any, message: str) -> None:
    """Every bad "asyncretry" setting fails at construction with a message naming it, its value, its range."""
    with pytest.raises(ValueError, match=message):
        AdaptiveLimiterConfig(**{field: value})


def test_config_normalizes_durations_and_documents_its_defaults() -> None:
    """Durations accept timedelta and are stored as float seconds; the defaults are the documented ones."""
    config = AdaptiveLimiterConfig(recovery_time=timedelta(seconds=3), burst=timedelta(milliseconds=50))
    assert (config.recovery_time, config.burst) == (3.0, 0.05)
    assert type(config.recovery_time) is float
    with pytest.raises(TypeError, match=r"utilization must be a number"):
        AdaptiveLimiterConfig(utilization="0.9")  # type: ignore[arg-type]
    default = AdaptiveLimiterConfig()
    assert (default.utilization, default.repeat_decrease, default.min_repeat_decrease) == (0.95, 0.7, 0.25)
    assert (default.reaction_time, default.measurement_window) == (0.25, 1.0)
    assert (default.recovery_time, default.quick_recovery_time) == (2.5, 0.5)
    assert (default.probe_doubling_time, default.probe_rtts) == (0.5, 20.0)
    assert (default.stable_change, default.growth_margin, default.probe_lift) == (0.05, 0.1, 0.01)
    assert (default.burst, default.outage_probe) == (0.1, 0.01)
    assert default.settle_time == 10.0
    assert (default.fair_step, default.fair_count) == (1.0, 12.0)
    assert AdaptiveLimiterConfig(fair_step=0, fair_count=0) == AdaptiveLimiterConfig(fair_step=0.0, fair_count=0.0)


# --- the rules


@pytest.mark.parametrize("order", ["served first", "throttled first", "interleaved"])
def test_first_round_trip_starts_from_what_was_served_not_from_the_floor(order: str) -> None:
    """10 served and 40 throttled answers to the first round trip start the rate from the served rate.

    AWS's limiter has measured nothing 20 ms in and drops to its 0.5/s floor; ours starts from the
    served rate, whatever the order in which the answers arrive.
    """
    answers = {
        "served first": [False] * 10 + [True] * 40,
        "throttled first": [True] * 40 + [False] * 10,
        "interleaved": [True, False, True, True, True] * 10,
    }[order]
    clock = VirtualClock(0.0)
    ours = AdaptiveRateLimiter(clock=clock)
    aws = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile="aws"), clock=clock)
    clock.advance(LATENCY)
    for throttled in answers:
        ours.update(throttled, sent_at=0.0)
        aws.update(throttled, sent_at=0.0)
    assert ours.enabled
    assert aws.enabled
    assert aws.fill_rate == 0.5
    # 10 served at once, counted over the slot they came in (0.05 s): 200/s, of which repeat_decrease (0.7)
    # is kept.
    assert ours.fill_rate == pytest.approx(0.7 * 10 / 0.05)
    assert ours.last_throttle_time == LATENCY


def test_first_throttle_after_steady_traffic_starts_from_the_measured_rate() -> None:
    """A first throttle after 1 s of 100 served/s starts at repeat_decrease x 100/s."""
    control = _served_then_throttled(AdaptiveLimiterConfig())
    assert control.enabled
    assert control.last_max_rate == pytest.approx(100.0, rel=0.05)
    assert control.fill_rate == pytest.approx(0.7 * control.last_max_rate)


def test_echoes_of_a_handled_congestion_event_change_nothing() -> None:
    """Throttles of requests sent before the last decrease are ignored; a single fresh one is tolerated;
    a second fresh one within the reaction time cuts again."""
    control = _measured(AdaptiveLimiterConfig())
    rate = control.fill_rate
    for sent in (1.99, 2.0, 2.01):  # sent before the decrease at 2.02: already accounted for
        control.update(sent + LATENCY, True, sent)
    assert control.fill_rate == rate
    control.update(2.05, True, 2.03)  # fresh, but the server's bucket may still be empty: tolerated
    assert control.fill_rate == rate
    control.update(2.06, True, 2.04)  # the decrease was not enough
    # Nothing fresh was served: the deepest cut allowed, min_repeat_decrease.
    assert control.fill_rate == pytest.approx(0.25 * rate)
    assert control.last_throttle_time == 2.06


def test_a_repeated_cut_follows_the_share_of_fresh_answers_that_were_served() -> None:
    """Two fresh throttles and two fresh successes after a decrease cut the rate in half."""
    control = _measured(AdaptiveLimiterConfig())
    control.update(2.045, False, 2.025)
    control.update(2.05, True, 2.03)
    control.update(2.055, False, 2.035)
    rate = control.fill_rate
    control.update(2.06, True, 2.04)
    assert control.fill_rate == pytest.approx(0.5 * rate)


def test_a_new_congestion_event_measures_the_capacity_between_throttles() -> None:
    """97 successes between two throttled sends 1 s apart measure 97/s; the rate restarts at 95% of it."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    assert control.last_max_rate == pytest.approx(97.0)
    assert control.fill_rate == pytest.approx(0.95 * 97.0)
    assert control.last_throttle_time == 2.0 + LATENCY


def test_a_capacity_that_grew_is_measured_by_what_was_served_lately() -> None:
    """If the server served more than 110% of the between-throttles figure lately, that figure is stale."""
    control = _served_then_throttled(AdaptiveLimiterConfig(probe_lift=0.0))
    for k in range(160):  # 1.5 s quiet at 20/s (the server's bucket overflows), then 0.5 s at 200/s
        sent = 1.03 + (k * 0.05 if k < 30 else 1.5 + (k - 30) / 260)
        control.update(sent + LATENCY, False, sent)
    control.update(2.5 + LATENCY, True, 2.5)
    # Between the throttles (1.0 and 2.5): 160 / 1.5 = 107/s; served in the last second: about 140/s.
    assert 1.3 * 160 / 1.5 < control.last_max_rate < 150


def _probing(**settings: Any) -> AdaptiveLimiterConfig:
    """A config whose recovery takes 2 s whatever the measurement and whose probe doubles every 0.5 s,
    never capped by the send rate."""
    return AdaptiveLimiterConfig(
        probe_lift=0.0,
        recovery_time=2.0,
        quick_recovery_time=2.0,
        probe_doubling_time=0.5,
        max_rate_growth=1e6,
        **settings,
    )


def test_the_rate_recovers_to_the_capacity_then_probes_above_it() -> None:
    """The rate climbs along a concave cubic to the capacity in recovery_time, then doubles every
    probe_doubling_time while nothing is throttled."""
    control = _measured(_probing())
    event = control.last_throttle_time
    capacity = control.last_max_rate
    rates = {}
    for elapsed in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        control.update(event + elapsed, False, event + elapsed - LATENCY)
        rates[elapsed] = control.fill_rate
    for elapsed in (0.5, 1.0, 1.5, 2.0):
        assert rates[elapsed] == pytest.approx(capacity * (1 - 0.05 * (1 - elapsed / 2.0) ** 3))
    assert rates[2.5] == pytest.approx(2 * capacity)
    assert rates[3.0] == pytest.approx(4 * capacity)


@pytest.mark.parametrize(
    ("rtt", "settings", "without", "doubling"),
    [
        (0.1, {}, (), 2.0),  # 20 round trips of 100 ms
        (0.1, {"probe_rtts": 10.0}, (), 1.0),
        (0.01, {}, (), 0.5),  # 20 x 10 ms is less than probe_doubling_time
        (0.1, {"probe_rtts": 0.0}, (), 0.5),
        (0.1, {}, ("rtt_probe",), 0.5),
    ],
)
def test_the_probe_doubles_no_faster_than_every_probe_rtts_round_trips(
    rtt: float, settings: dict[str, Any], without: tuple[str, ...], doubling: float
) -> None:
    """Once recovered, the rate doubles every probe_rtts smoothed round trips, or every
    probe_doubling_time if that is longer: with a long round trip the probe overshoots the capacity by
    little before its first throttle comes back. probe_rtts=0, or the rule left out, keeps
    probe_doubling_time whatever the round trip."""
    control = _measured(_probing(**settings), rtt=rtt, rules=[rule for rule in RULES if rule not in without])
    event = control.last_throttle_time
    capacity = control.last_max_rate
    rates = {}
    for elapsed in (2.0, 2.0 + doubling, 2.0 + 2 * doubling):
        control.update(event + elapsed, False, event + elapsed - rtt)
        rates[elapsed] = control.fill_rate
    assert rates[2.0] == pytest.approx(capacity)
    assert rates[2.0 + doubling] == pytest.approx(2 * capacity)
    assert rates[2.0 + 2 * doubling] == pytest.approx(4 * capacity)


def test_probing_never_runs_far_ahead_of_what_is_actually_sent() -> None:
    """The probe stops at max_rate_growth x the measured response rate, or x the capacity if more."""
    config = AdaptiveLimiterConfig(probe_lift=0.0, recovery_time=0.5, quick_recovery_time=0.5)
    control = _measured(config)
    event = control.last_throttle_time
    capacity = control.last_max_rate
    control.update(event + 10.0, False, event + 10.0 - LATENCY)  # one lonely answer: 4/s over 0.25 s
    assert control.fill_rate == pytest.approx(2.0 * capacity)
    for k in range(1, 101):  # 400 answers per second
        control.update(event + 10.0 + k / 400, False, event + 10.0 + k / 400 - LATENCY)
    assert control.fill_rate == pytest.approx(2.0 * control._responses.rate(event + 10.25, 0.25), rel=0.05)
    assert control.fill_rate > capacity


def _throttled_until_outage(control: AsyncretryRateController, start: float) -> list[float]:
    """Throttles sent every 0.1 s from ``start`` until the controller calls it an outage; their send times."""
    sent: list[float] = []
    while not control.in_outage:
        at = start + 0.1 * len(sent)
        assert at < start + 10.0, "never an outage"
        control.update(at + LATENCY, True, at)
        sent.append(at)
    return sent


def test_an_outage_probes_slowly_and_resumes_near_the_previous_capacity() -> None:
    """Nothing served: the rate drops to 1% of the capacity measured before; a success restores 95% of it."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    capacity = control.last_max_rate
    _throttled_until_outage(control, 2.3)
    during = (control.in_outage, control.fill_rate)
    control.update(4.0 + LATENCY, True, 4.0)
    still = (control.in_outage, control.fill_rate)
    control.update(6.0 + LATENCY, False, 6.0)
    after = (control.in_outage, control.fill_rate)
    assert during == still
    assert during[1] == pytest.approx(0.01 * capacity)
    assert not after[0]
    assert after[1] == pytest.approx(0.95 * capacity)


def test_an_outage_needs_a_second_without_success_and_several_failed_answers() -> None:
    """One throttle, or a few spread over a client's backoff, is no outage: it takes a whole window
    without a success and at least three unserved answers (more at a high rate)."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    last_success = 1.99 + LATENCY
    sent = _throttled_until_outage(control, 2.3)
    assert len(sent) >= 3
    assert sent[-1] + LATENCY - last_success >= 1.0


def test_a_client_back_from_a_long_backoff_is_not_in_an_outage() -> None:
    """A slow client throttled after sleeping over a second in its backoff keeps its rate (not the floor)."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    control.update(3.5 + LATENCY, True, 3.5)  # the first answer after 1.5 s of sleep
    assert not control.in_outage
    assert control.fill_rate >= 0.5 * control.last_max_rate > 10.0


def test_a_client_never_served_is_cut_by_its_throttles_not_parked_in_an_outage() -> None:
    """A client throttled from its first request on (one of a fleet that lost every race so far) has no
    capacity to remember: two seconds of throttles cut it as events do, down to min_fill_rate, and do not
    park it in an outage (which only a success ends, and where such a client could starve). A client served
    before is in an outage after the same run of throttles."""
    never = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    for k in range(20):
        never.update(k / 10 + LATENCY, True, k / 10)
    served = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    _throttled_until_outage(served, 2.3)
    assert served.in_outage
    assert not never.in_outage
    assert never.enabled
    assert never.fill_rate == AdaptiveLimiterConfig().min_fill_rate


def test_an_outage_below_the_floor_probes_at_min_fill_rate() -> None:
    """1% of a small capacity would be below min_fill_rate: the outage probe never goes under it."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0, min_fill_rate=2.0))
    _throttled_until_outage(control, 2.3)
    assert control.fill_rate == 2.0


def test_failed_answers_never_raise_the_rate_and_a_run_of_them_is_an_outage() -> None:
    """A 503 (failed=True) is neither a throttle nor a success: the rate does not grow on it, and a
    second of nothing but failures is an outage that the first success ends near the capacity."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    capacity = control.last_max_rate
    rate = control.fill_rate
    at = 2.1
    while not control.in_outage:
        assert at < 12.0, "never an outage"
        control.update(at + LATENCY, False, at, failed=True)
        assert control.fill_rate <= rate
        at += 0.01
    assert at - 2.0 >= 1.0
    assert control.fill_rate == pytest.approx(0.01 * capacity)
    control.update(at + LATENCY, False, at)
    assert control.fill_rate == pytest.approx(0.95 * capacity)


def test_the_limiter_passes_failed_to_its_controller() -> None:
    """AdaptiveRateLimiter.update(failed=True) counts an answer that neither throttles nor grows the rate."""
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(), clock=clock)
    for _k in range(1, 51):
        clock.advance(0.01)
        limiter.update(False, sent_at=clock.now() - LATENCY)
    limiter.update(True, sent_at=clock.now() - LATENCY)
    rate = limiter.fill_rate
    for _ in range(50):
        clock.advance(0.01)
        limiter.update(False, sent_at=clock.now() - LATENCY, failed=True)
    assert limiter.fill_rate == rate
    assert limiter.statistics().throttles == 1


def test_a_client_throttled_before_any_success_starts_from_what_it_sent() -> None:
    """One client of a fleet may be throttled before it was served anything: it starts at a share of
    its own send rate, not at the 0.5/s floor with nothing to grow from."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    for k in range(20):  # the first round trip of 20 workers: all throttled, nothing served
        control.update(LATENCY + k / 10_000, True, 0.0)
    assert control.enabled
    assert control.fill_rate > 10 * control._config.min_fill_rate


def _fleet_client(config: AdaptiveLimiterConfig) -> AsyncretryRateController:
    """One client of a fleet: its first request throttled, then 3 requests served at 4/s, then a
    throttle of the request sent at 1.0 (answered at 1.02): a capacity measured from 3 successes."""
    control = AsyncretryRateController(config, 0.0)
    control.update(LATENCY, True, 0.0)
    for sent in (0.25, 0.5, 0.75):
        control.update(sent + LATENCY, False, sent)
    control.update(1.0 + LATENCY, True, 1.0)
    return control


def test_a_measurement_from_few_successes_cuts_the_fill_rate_instead_of_setting_it() -> None:
    """3 successes between two throttles say little about the capacity: the rate is cut to
    repeat_decrease of what it was and held there for recovery_time, growing only by fair_step."""
    config = AdaptiveLimiterConfig()
    before = AsyncretryRateController(config, 0.0)
    before.update(LATENCY, True, 0.0)
    for sent in (0.25, 0.5, 0.75):
        before.update(sent + LATENCY, False, sent)
    control = _fleet_client(config)
    cut = control.fill_rate
    assert cut == pytest.approx(0.7 * before.fill_rate)
    assert control.last_max_rate == pytest.approx(cut)
    event = control.last_throttle_time
    for elapsed in (0.5, 1.0, 2.0):  # the hold: no recovery curve, only the fair step
        control.update(event + elapsed, False, event + elapsed - LATENCY)
        assert control.fill_rate == pytest.approx(cut + 1.0 * elapsed)


def test_a_fleet_client_grows_by_the_same_absolute_step_whatever_its_rate() -> None:
    """Two fleet clients whose estimates differ 4x both grow by fair_step per second during the hold:
    the additive increase that pulls a fleet's shares together (Chiu and Jain)."""
    config = AdaptiveLimiterConfig(fair_step=0.5)
    gains = []
    for scale in (1.0, 4.0):
        control = _fleet_client(config)
        control.last_max_rate *= scale
        event = control.last_throttle_time
        control.update(event + 2.0, False, event + 2.0 - LATENCY)
        gains.append(control.fill_rate - control.last_max_rate)
    assert gains == pytest.approx([0.5 * 2.0, 0.5 * 2.0])


def test_a_fleet_client_probes_slowly_after_its_hold() -> None:
    """After the hold, an estimate from n = 3 successes doubles every probe_doubling_time x 24 / 3 (4 s),
    not every 0.5 s: a client the server happened to spare does not run away with the capacity."""
    config = AdaptiveLimiterConfig(max_rate_growth=1e6)
    control = _fleet_client(config)
    n = control._evidence  # the 3 successes, over the slots of the last window
    assert n == pytest.approx(3.0, rel=0.1)
    capacity = control.last_max_rate
    event = control.last_throttle_time
    control.update(event + 3.5, False, event + 3.5 - LATENCY)  # 1 s into the probe
    assert control.fill_rate == pytest.approx(capacity * 2 ** (1.0 / (0.5 * 24 / n)) + 1.0 * 3.5)


def test_a_measurement_soon_after_a_decrease_counts_the_last_window() -> None:
    """One limiter at 30/s measured 0.27 s after a cut counts only 8 successes between the throttles, but
    30 in the last second: not a fleet's client, so the measurement sets the rate (95% of it)."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(probe_lift=0.0), 0.0)
    for k in range(60):  # 2 s at 30/s, then the first throttle
        control.update(k / 30 + LATENCY, False, k / 30)
    control.update(2.0 + LATENCY, True, 2.0)
    for k in range(1, 9):  # 8 more successes, then a throttle 0.27 s after the first
        control.update(2.0 + k / 30 + LATENCY, False, 2.0 + k / 30)
    control.update(2.27 + LATENCY, True, 2.27)
    assert control._counted < 12 <= control._evidence
    assert control.fill_rate == pytest.approx(0.95 * control.last_max_rate)


def test_an_estimate_from_many_successes_gets_no_fair_step() -> None:
    """A limiter that serves all the traffic (97 successes per measurement here) recovers and probes
    exactly as without the fair step: the step is for estimates counted from few successes."""
    plain = _measured(AdaptiveLimiterConfig(probe_lift=0.0, fair_step=0.0))
    default = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    event = default.last_throttle_time
    for elapsed in (0.25, 0.5, 1.0, 2.0):
        for control in (plain, default):
            control.update(event + elapsed, False, event + elapsed - LATENCY)
        assert default.fill_rate == plain.fill_rate


def test_the_first_measurement_after_an_outage_is_not_a_fleets_noise() -> None:
    """A limiter with an estimate of 97/s, back from an outage, that sees 5 successes in the next second
    (its callers held back by an open breaker, say) is not one client of a fleet: its window held the
    outage, so half of what its estimate predicted counts as evidence and rule 3 applies."""
    control = _measured(AdaptiveLimiterConfig(probe_lift=0.0))
    estimate = control.last_max_rate
    sent = _throttled_until_outage(control, 2.1)
    resumed = sent[-1] + 0.1
    control.update(resumed + LATENCY, False, resumed)  # the outage is over: 95% of the estimate
    assert control.fill_rate == pytest.approx(0.95 * estimate)
    for k in range(1, 6):
        at = resumed + k / 5
        control.update(at + LATENCY, False, at)
    control.update(resumed + 1.3 + LATENCY, True, resumed + 1.3)
    assert control._evidence >= 0.5 * estimate
    assert control.fill_rate > 0.7 * 0.95 * estimate  # not rule 7's cut of the fill rate
    # Later measurements go by their own successes again.
    for k in range(1, 4):
        at = resumed + 1.3 + k / 3
        control.update(at + LATENCY, False, at)
    control.update(resumed + 2.7 + LATENCY, True, resumed + 2.7)
    assert control._evidence < 12


def test_fair_count_zero_turns_the_fleet_rules_off() -> None:
    """fair_count=0: a measurement from 3 successes sets the rate (95% of it), as without rule 7's fleet part."""
    control = _fleet_client(AdaptiveLimiterConfig(fair_count=0, probe_lift=0.0))
    stepless = _fleet_client(AdaptiveLimiterConfig(fair_count=0, probe_lift=0.0, fair_step=0.0))
    assert control.fill_rate == pytest.approx(0.95 * control.last_max_rate)
    event = control.last_throttle_time
    for elapsed in (0.5, 1.0, 3.0):  # recovery and probe as for any estimate: no step
        for each in (control, stepless):
            each.update(event + elapsed, False, event + elapsed - LATENCY)
        assert control.fill_rate == stepless.fill_rate


def test_one_lucky_success_in_the_first_round_trip_starts_like_a_throttled_client() -> None:
    """A fleet's client served once in the first round trip (while most were throttled) starts from the
    same share of what it sent as a client that was throttled, not from its lucky served rate."""
    lucky = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    lucky.update(LATENCY, False, 0.0)
    lucky.update(0.03, True, 0.01)
    unlucky = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    unlucky.update(LATENCY, True, 0.0)
    unlucky.update(0.03, True, 0.01)
    assert lucky.enabled
    assert lucky.fill_rate == pytest.approx(unlucky.fill_rate)
    # Without the fair start the lucky one would start from its served rate, 4x higher.
    served = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    for k in range(3):  # three successes are no longer luck
        served.update(LATENCY + k / 1000, False, k / 1000)
    served.update(0.03, True, 0.01)
    assert served.fill_rate > 3 * unlucky.fill_rate


def _hold_after(estimate: float, measured: float, *, counted: float, held_for: float) -> float:
    """The recovery time a controller picks when ``measured`` follows ``estimate``, which has held
    ``held_for`` seconds and was measured from ``counted`` successes."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    control.last_max_rate = estimate
    control._counted = counted
    control._now = held_for
    return control._recovery_after(measured)


def test_the_hold_after_an_event_shortens_gradually_as_the_estimate_moves() -> None:
    """The recovery time falls continuously from recovery_time (estimate confirmed) to
    quick_recovery_time (moved by stable_change or more): no coin toss at a threshold."""
    holds = [_hold_after(100.0, 100.0 + change / 10, counted=10_000, held_for=60.0) for change in range(80)]
    assert holds[0] == pytest.approx(2.5)
    assert holds[-1] == pytest.approx(0.5)
    assert all(later <= earlier for earlier, later in itertools.pairwise(holds))
    assert all(abs(later - earlier) < 0.2 for earlier, later in itertools.pairwise(holds))


def test_the_hold_grows_as_the_estimate_keeps_holding() -> None:
    """A confirmed estimate earns the full hold only once it has held for settle_time (10 s):
    a capacity that changes every few seconds is probed every few seconds."""
    holds = [_hold_after(100.0, 100.0, counted=10_000, held_for=t) for t in (0.0, 2.5, 5.0, 10.0, 60.0)]
    assert holds == pytest.approx([0.5, 1.0, 1.5, 2.5, 2.5])


def test_a_measurement_from_few_successes_is_not_read_as_a_change() -> None:
    """With only a handful of successes counted, a 10% difference is counting noise: the full hold applies."""
    assert _hold_after(4.0, 4.4, counted=8, held_for=60.0) == pytest.approx(2.5)
    assert _hold_after(4.0, 4.4, counted=1000, held_for=60.0) == pytest.approx(0.5)


def test_without_send_times_answers_soon_after_a_decrease_are_echoes() -> None:
    """With sent_at unknown, a request is taken as sent measurement_window / 10 before its answer."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    for k in range(100):
        control.update(k / 100 + LATENCY, False)
    control.update(1.02, True)
    rate = control.fill_rate
    control.update(1.05, True)  # "sent" at 0.95: an echo
    control.update(1.11, True)  # "sent" at 1.01: an echo
    assert control.fill_rate == rate
    control.update(1.15, True)  # "sent" at 1.05: fresh, tolerated once
    control.update(1.16, True)  # fresh again: cut
    assert control.fill_rate == pytest.approx(0.25 * rate)


def test_the_bucket_holds_burst_seconds_of_the_fill_rate() -> None:
    """Once enabled, the limiter's bucket holds burst (0.1 s) of the fill rate, at least min_capacity."""
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(clock=clock)
    for _ in range(100):
        clock.advance(0.01)
        limiter.update(False, sent_at=clock.now() - LATENCY)
    limiter.update(True, sent_at=clock.now() - LATENCY)
    assert limiter.fill_rate > 50
    assert limiter.max_capacity == pytest.approx(0.1 * limiter.fill_rate)
    assert limiter.statistics().available <= limiter.max_capacity


def test_sliding_counter_counts_rates_over_recent_spans() -> None:
    """The counter gives events per second over the recent span, forgets the past, ignores older times."""
    counter = SlidingCounter(0.05, 1.0, 0.0)
    for k in range(100):
        counter.add(k / 100)
    assert counter.rate(1.0, 0.5) == pytest.approx(100.0, rel=0.05)
    assert counter.rate(10.0, 1.0) == 0.0
    counter.add(3.0)  # a time older than everything kept is not counted
    assert counter.rate(10.0, 1.0) == 0.0
    assert repr(counter) == "SlidingCounter(width=0.05, recent=0, total=101)"


def test_round_trip_averages_the_measured_round_trips() -> None:
    """Without a first value the first round trip sets the average, each later one moves it by its weight;
    an answer without a send time, or sent after it came back, measures nothing."""
    measured = RoundTrip(0.125)
    measured.add(1.1, 1.0)
    assert measured.value == pytest.approx(0.1)
    measured.add(2.5, 2.0)
    assert measured.value == pytest.approx(0.1 + 0.125 * 0.4)
    for now, sent_at in ((3.0, None), (3.0, 3.5)):
        measured.add(now, sent_at)
    assert measured.value == pytest.approx(0.15)
    seeded = RoundTrip(0.2, first=0.1)
    seeded.add(1.5, 1.0)
    assert seeded.value == pytest.approx(0.1 + 0.2 * 0.4)
    assert repr(seeded) == f"RoundTrip({seeded.value!r})"


@given(
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=2.0),
            st.booleans(),
            st.one_of(st.none(), st.floats(min_value=0.0, max_value=0.5)),
        ),
        min_size=1,
        max_size=80,
    ),
    min_fill=st.floats(min_value=0.01, max_value=10),
    min_capacity=st.floats(min_value=1, max_value=10),
)
def test_rates_stay_finite_and_within_bounds(
    steps: list[tuple[float, bool, float | None]], min_fill: float, min_capacity: float
) -> None:
    """Whatever the answers, the fill rate stays finite and >= min_fill_rate, and the bucket holds
    burst seconds of it (>= min_capacity)."""
    config = AdaptiveLimiterConfig(min_fill_rate=min_fill, min_capacity=min_capacity)
    clock = VirtualClock(0.0)
    limiter = AdaptiveRateLimiter(config, clock=clock)
    for gap, throttled, lag in steps:
        clock.advance(gap)
        limiter.update(throttled, sent_at=None if lag is None else clock.now() - lag)
        stats = limiter.statistics()
        assert math.isfinite(stats.fill_rate)
        assert stats.fill_rate >= min_fill
        assert stats.max_capacity == pytest.approx(max(0.1 * stats.fill_rate, min_capacity))
        assert 0.0 <= stats.available <= stats.max_capacity
        assert stats.measured_rate >= 0.0
        assert math.isfinite(stats.last_max_rate)
        assert stats.last_max_rate >= 0.0


# --- the engine passes send times


class _RecordingLimiter(AdaptiveRateLimiter):
    """Remembers what the engine feeds it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[bool, float | None, float]] = []

    def update(
        self, throttled: bool, *, reason: str = "throttling", sent_at: float | None = None, failed: bool = False
    ) -> None:
        self.seen.append((throttled, sent_at, DEFAULT_CLOCK.now()))
        super().update(throttled, reason=reason, sent_at=sent_at, failed=failed)


class _Throttled(Exception):
    is_throttling = True


@pytest.mark.anyio
async def test_the_engine_reports_when_each_attempt_was_sent() -> None:
    """In adaptive mode the retrier feeds the limiter each attempt's start time as sent_at."""
    limiter = _RecordingLimiter()
    retrier = Retrier(RetryPolicy(mode="adaptive", backoff=NoBackoff(), throttling_backoff=NoBackoff()),
                      limiter=limiter)
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.25)
        if calls == 1:
            raise _Throttled
        return "ok"

    start = DEFAULT_CLOCK.now()
    assert await retrier.call(flaky) == "ok"
    (first, sent_first, _), (second, sent_second, answered) = limiter.seen
    assert (first, second) == (True, False)
    assert sent_first == start
    # The retry waited for the limiter's token (enabled by the throttle) and was sent when it got it.
    assert sent_second is not None
    assert sent_second - start > 0.25
    assert limiter.statistics().waits == 1
    assert answered - sent_second == pytest.approx(0.25)


# --- the start-up answers its own throttles (rule 8)


def test_only_the_start_ups_throttles_answer_the_backoff() -> None:
    """The throttle that enabled the default profile, and the echoes of the same round trip, need no
    throttling backoff from the engine; the first fresh throttle after the start does, and the "aws"
    profile never skips it."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0)
    for k in range(5):
        control.update(k / 100 + LATENCY, False, k / 100)
    answers = [control.answers_backoff]  # no throttle yet
    for sent, throttled in (
        (0.05, True),  # enables the limiter (rule 1)
        (0.06, True),  # an echo: sent before the start's decrease
        (0.5, False),  # a fresh success changes nothing
        (1.0, True),  # a fresh throttle: the engine's backoff again
    ):
        control.update(sent + LATENCY, throttled, sent)
        answers.append(control.answers_backoff)
    assert answers == [False, True, True, True, False]
    aws = AwsRateController(AdaptiveLimiterConfig(profile="aws"), 0.0)
    aws.update(LATENCY, True)
    assert not aws.answers_backoff
    limiter = AdaptiveRateLimiter(clock=VirtualClock(0.0))
    limiter.update(True, sent_at=0.0)
    assert limiter.backoff_after_throttle(0.7) == 0.0


# --- a fleet's event rate sets a fleet client's rate (rule 9)


def _throttled_with_its_fleet(
    rate: float, config: AdaptiveLimiterConfig | None = None, every: float = 1.5
) -> AsyncretryRateController:
    """One client of a fleet after :func:`fleet_sends`, each answered ``LATENCY`` after its send."""
    control = AsyncretryRateController(config or AdaptiveLimiterConfig(), 0.0)
    sends, throttles = fleet_sends(rate, every)
    for sent in sends:
        control.update(sent + LATENCY, sent in throttles, sent)
    return control


def _mean_sawtooth_rate(events_per_second: float) -> float:
    """The mean rate of rule 7's sawtooth (step 1/s, cut to 0.7 at each event) at this event rate."""
    return 1.0 * 1.7 / (2 * 0.3 * events_per_second)


def _fleet_rate(events: list[float], start: float, now: float) -> float:
    """Rule 9's rate: 1.1 times the geometric mean of the sawtooth's mean at one event per second (the
    default measurement window) and at the event rate measured with each event's weight decaying over 5 s
    (the window's 5)."""
    weight = sum(math.exp((t - now) / 5.0) for t in events)
    events_per_second = weight / (5.0 * (1.0 - math.exp((start - now) / 5.0)))
    return 1.1 * math.sqrt(_mean_sawtooth_rate(1.0) * _mean_sawtooth_rate(events_per_second))


def test_a_fleets_event_rate_sets_the_same_rate_for_every_client() -> None:
    """Two clients of one fleet, at 2 and at 4 requests a second, throttled at the same times: both end at
    the rate their common event rate sets, whatever their own rates."""
    slow, fast = _throttled_with_its_fleet(2.0), _throttled_with_its_fleet(4.0)
    events = [0.1 + LATENCY + 1.5 * k for k in range(6)]  # the start-up's (the first) counts as one
    expected = _fleet_rate(events, events[0], events[-1])
    assert slow.fill_rate == pytest.approx(expected)
    assert fast.fill_rate == pytest.approx(expected)
    assert 3.0 < expected < 4.0


def test_a_fleet_clients_rate_is_cut_by_at_most_repeat_decrease_per_event() -> None:
    """Few successes also come from one limiter in front of a slow server, or from a client whose engine
    backoff kept it from sending. Where the events' rate would set less, each event cuts a client only to
    repeat_decrease of the rate it ran at (its fill rate, or what it was served if less): clients at 10 and
    12 requests a second glide down to the events' rate over several events instead of dropping to it at
    once, and then take it (without ``fleet_climb``, whose climb between the events the next tests
    specify)."""
    events = [0.1 + LATENCY + 1.5 * k for k in range(6)]
    by_events = _fleet_rate(events, events[0], events[-1])
    for rate in (10.0, 12.0):
        control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0, rules=set(RULES) - {"fleet_climb"})
        sends, throttles = fleet_sends(rate)
        cuts: list[tuple[float, float]] = []  # (the rate it ran at, the rate after the event)
        for sent in sends:
            now = sent + LATENCY
            served = sum(1 for s in sends if s not in throttles and now - 1.0 < s + LATENCY <= now)
            ran_at = min(control.fill_rate, served)
            control.update(now, sent in throttles, sent)
            if sent in throttles[1:]:
                cuts.append((ran_at, control.fill_rate))
        assert len([1 for _, after in cuts if after > 1.2 * by_events]) >= 2  # a glide, not a drop
        # (the served rate is counted in slots of a twentieth of the window: within 5%)
        assert all(after >= 0.95 * 0.7 * ran_at for ran_at, after in cuts)
        assert control.answers_backoff  # a fleet client under rule 9
        assert control.fill_rate == pytest.approx(by_events)


def _cut_then_served(rate: float, after: float, *, rules: Iterable[str] = RULES) -> list[tuple[float, float]]:
    """A client of a fleet at ``rate`` requests a second, cut by its fleet's events (:func:`fleet_sends`), then
    sending ``after`` requests a second for 4 s without a throttle: (time, fill rate) after each answer since
    the last event."""
    control = AsyncretryRateController(AdaptiveLimiterConfig(), 0.0, rules=rules)
    sends, throttles = fleet_sends(rate)
    for sent in sends:
        control.update(sent + LATENCY, sent in throttles, sent)
    assert control.answers_backoff  # a fleet client, under fleet_event_rate
    trace = [(throttles[-1] + LATENCY, control.fill_rate)]
    for sent in then_served(throttles[-1], after):
        control.update(sent + LATENCY, False, sent)
        trace.append((sent + LATENCY, control.fill_rate))
    return trace


def test_a_fleet_clients_lowest_rate_climbs_by_the_fair_profiles_step_between_events() -> None:
    """fleet_climb: after an event, the rate the event left a fleet client at climbs by the "fair" profile's
    additive step, fair_step x (rate / fair_reference) ** fair_exponent, doubling every fair_probe since the
    cut (1.0, 64/s, 0.5 and 2 s by default); the same for every client at the same rate, so the clients cut
    last climb back towards the others. Without the rule the client keeps the higher of the rate the last
    event left it at and the rate its events set (which rises only as they age)."""
    trace = _cut_then_served(12.0, 12.0)
    without = _cut_then_served(12.0, 12.0, rules=set(RULES) - {"fleet_climb"})
    expected = trace[0][1]  # the rate the last event set: above the events' rate, from the glide's bound
    for (before, _), (now, _) in itertools.pairwise(trace):
        expected += 1.0 * (expected / 64.0) ** 0.5 * 2.0 ** ((now - trace[0][0]) / 2.0) * (now - before)
    assert trace[-1][1] == pytest.approx(expected, rel=0.01)
    assert trace[-1][1] > 1.3 * trace[0][1]
    events = [0.1 + LATENCY + 1.5 * k for k in range(6)]
    assert without[-1][1] == pytest.approx(max(_fleet_rate(events, events[0], without[-1][0]), without[0][1]))
    assert trace[-1][1] > 1.1 * without[-1][1]


def test_a_fleet_clients_climb_stops_at_max_rate_growth_times_what_it_sends() -> None:
    """A fleet client that sends little after its cut (its demand fell) climbs no further than
    max_rate_growth (2) x its answers per second: an allowance it never tested is not capacity. Its rate stays
    the higher of the rate the last event left it at and the rate its events set."""
    trace = _cut_then_served(12.0, 1.0)
    events = [0.1 + LATENCY + 1.5 * k for k in range(6)]
    for now, rate in trace:
        assert rate == pytest.approx(max(_fleet_rate(events, events[0], now), trace[0][1]))


def test_a_fleet_clients_rate_answers_its_event_rate_with_half_its_noise() -> None:
    """Clients whose counts of events differ (a fleet's luck) get rates apart by the square root of the ratio
    of their event rates, not by the whole ratio: the rate is the geometric mean of the sawtooth's at that
    event rate and at one event per measurement window."""
    for every, count in ((1.0, 8), (2.0, 4)):
        events = [0.1 + LATENCY + every * k for k in range(count)]
        control = _throttled_with_its_fleet(4.0, every=every)
        assert control.fill_rate == pytest.approx(_fleet_rate(events, events[0], events[-1]))
    often = _throttled_with_its_fleet(4.0, every=1.0)
    seldom = _throttled_with_its_fleet(4.0, every=2.0)
    assert 1.0 < seldom.fill_rate / often.fill_rate < 1.6


def test_a_fleet_clients_throttles_need_no_backoff_and_the_rule_can_be_turned_off() -> None:
    """Under rule 9 a fleet client's throttles need no throttling backoff from the engine (its rate answers
    them); with fair_step=0 or fair_count=0 the client keeps rule 7's sawtooth and the engine's backoff."""
    for rate in (2.0, 10.0):
        assert _throttled_with_its_fleet(rate).answers_backoff
        for config in (AdaptiveLimiterConfig(fair_step=0.0), AdaptiveLimiterConfig(fair_count=0.0)):
            assert not _throttled_with_its_fleet(rate, config).answers_backoff
    # Without the rule the two clients' rates stay apart, each its own sawtooth or estimate.
    apart = [_throttled_with_its_fleet(rate, AdaptiveLimiterConfig(fair_step=0.0)).fill_rate for rate in (2.0, 10.0)]
    assert apart[1] > 1.5 * apart[0]


def test_one_limiter_with_many_successes_is_not_a_throttled_with_its_fleet() -> None:
    """A limiter whose measurements rest on dozens of successes (one limiter for all the traffic) keeps its
    measured capacity and the engine's backoff, throttled as often as a fleet client."""
    control = _throttled_with_its_fleet(60.0)
    assert not control.answers_backoff
    assert control.fill_rate > 40.0


async def _throttled_then_served(retrier: Retrier) -> tuple[float | None, float]:
    """One call whose first attempt is throttled and whose retry succeeds: the delay the engine planned
    after the throttle, and the time from the throttle's answer to the retry's send."""
    calls = 0
    sent: list[float] = []

    async def once_throttled() -> str:
        nonlocal calls
        calls += 1
        sent.append(DEFAULT_CLOCK.now())
        await anyio.sleep(LATENCY)
        if calls == 1:
            raise _Throttled
        return "ok"

    attempts = retrier.attempts()
    async for attempt in attempts:
        async with attempt:
            await once_throttled()
    first = attempts.history().attempts[0]
    return first.delay_after, sent[1] - (sent[0] + LATENCY)


@pytest.mark.anyio
async def test_the_start_ups_throttle_is_retried_without_the_throttling_backoff() -> None:
    """Default profile: the retry after the throttle that enabled the limiter waits only for its token
    (the backoff would have been 0.5 s); a later fresh throttle gets the policy's backoff, and the "aws"
    profile's first throttle too (rule 8)."""
    half = fixed_random(0.5)  # full jitter over the first cap of 1 s: 0.5 s

    def full_bucket() -> float:
        return 0.999  # the random phase of the limiter's first token: no wait for it

    limiter = AdaptiveRateLimiter(rng=full_bucket)
    retrier = Retrier(RetryPolicy(mode="adaptive"), rng=half, limiter=limiter)
    delay, waited = await _throttled_then_served(retrier)
    assert delay == 0.0
    assert waited < 0.01
    assert limiter.enabled
    delay, waited = await _throttled_then_served(retrier)  # a fresh throttle: no longer the start-up's
    assert delay == 0.5
    assert waited >= 0.5
    aws = Retrier(RetryPolicy.aws_adaptive(), rng=half)
    delay, waited = await _throttled_then_served(aws)
    assert delay == 0.5
    assert waited >= 0.5


# --- the simulation: the default profile beats "aws"


def test_a_fleet_of_independent_clients_shares_the_capacity_fairly() -> None:
    """50 clients with a limiter each against a server of 200/s (the HTTP benchmark's set-up in virtual
    time, 10 s): the fleet rules even the shares out; without them (fair_count=0) they spread.
    Over seeds 0-7 Jain's index is 0.909-0.954 with the fleet's event rate (rule 9), 0.879-0.929 before it."""
    scenario = Scenario(name="fleet", schedule=((0.0, 200.0),), duration=10.0)

    def fleet(config: AdaptiveLimiterConfig, seed: int = 0) -> Any:
        policy = RetryPolicy(mode="adaptive", limiter=config)
        return run_simulation(
            scenario, policy=policy, workers=50, latency=0.005, burst=0.05, layout="independent", seed=seed
        ).metrics

    seeds = [fleet(AdaptiveLimiterConfig(), seed).fairness for seed in range(1, 8)]
    assert min(seeds) >= 0.90
    assert sum(seeds) / len(seeds) >= 0.92
    fair = fleet(AdaptiveLimiterConfig())
    off = fleet(AdaptiveLimiterConfig(fair_count=0))
    # No backoff after the start-up's throttles (rule 8): with it, 40 of the 50 clients slept through the first
    # half second and the fleet served 0.973-0.994 of the capacity over 64 seeds (now 0.995-1.004).
    assert fair.goodput >= 0.99
    assert fair.fairness >= 0.90
    assert off.fairness < fair.fairness - 0.05
    # The target is <= 15%; over seeds this set-up throttles 14.4-15.1% (without: about 20%).
    assert fair.throttled <= 0.16
    assert off.throttled > fair.throttled + 0.03


def test_default_profile_beats_aws_in_a_short_simulation() -> None:
    """10 workers, a server of 100/s, 30 virtual seconds: ours serves about all of it from the first
    second; AWS's falls to its floor at the first throttle and needs over 10 s to come back."""
    scenario = Scenario(name="steady-30s", schedule=((0.0, 100.0),), duration=30.0)
    ours = run_simulation(scenario, policy=RetryPolicy(mode="adaptive"), workers=10).metrics
    aws = run_simulation(scenario, policy=RetryPolicy.aws_adaptive(), workers=10).metrics
    assert ours.goodput >= 0.97
    assert ours.goodput - aws.goodput >= 0.1
    # The 1% target is for 120 s runs; in 30 s the start-up's throttles weigh more (1.0-1.6% over seeds).
    assert ours.throttled <= 0.02
    assert ours.reconverge[0] <= 2.0 < 10.0 <= aws.reconverge[0]
    assert ours.fairness >= 0.95
