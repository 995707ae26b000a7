"""The ``"fair"`` profile's rules one at a time, its formulas, and the limiter driving it in virtual time.

The controller is pure and told the time, so most tests drive it with explicit times (no event loop); the
last ones drive an AdaptiveRateLimiter on the event loop's virtual clock, on asyncio and trio.
"""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter
from asyncretry._primitives._adaptive_rules import fair_decrease, fair_increase
from asyncretry._primitives._fair import FAIR_RULES, FAIR_THROTTLE_STEPS, FairRateController

LATENCY = 0.02
CONFIG = AdaptiveLimiterConfig(profile="fair")


def _without(rule: str) -> frozenset[str]:
    return frozenset(FAIR_RULES) - {rule}


def _served(rules: frozenset[str] = frozenset(FAIR_RULES), *, rate: float = 100.0) -> FairRateController:
    """A controller that served ``rate`` per second for 1 s, then saw its first throttle (sent at 1.0)."""
    control = FairRateController(CONFIG, 0.0, rules=rules)
    for k in range(round(rate)):
        control.update(k / rate + LATENCY, False, k / rate)
    control.update(1.0 + LATENCY, True, 1.0)
    return control


def _serve(control: FairRateController, start: float, seconds: float, rate: float) -> float:
    """Feed ``rate`` successes a second for ``seconds`` from ``start``; return the end time."""
    count = round(seconds * rate)
    for k in range(1, count + 1):
        control.update(start + k / rate + LATENCY, False, start + k / rate)
    return start + count / rate


def test_every_rule_is_switchable_and_the_steps_run_in_the_written_order() -> None:
    """Every rule can be left out alone, and the throttle's steps start, then drop echoes, then decrease."""
    for rule in FAIR_RULES:
        assert FairRateController(CONFIG, 0.0, rules=_without(rule)).rules == _without(rule)
    assert FAIR_THROTTLE_STEPS == ("start_from_served", "one_decrease_per_event", "decrease")


def test_an_unknown_rule_is_refused_by_name() -> None:
    """A rule name that does not exist is a clear error naming it and the valid names."""
    with pytest.raises(ValueError, match=r"rules must be names among start_from_served, .*; got 'outage'"):
        FairRateController(CONFIG, 0.0, rules=["outage"])


def test_the_fair_constants_are_validated_by_name() -> None:
    """A reference rate, floor or probe of 0, or an exponent outside [0, 1], is refused naming the field."""
    with pytest.raises(ValueError, match="fair_reference"):
        AdaptiveLimiterConfig(profile="fair", fair_reference=0.0)
    with pytest.raises(ValueError, match=r"fair_floor must be > 0, got 0\.0"):
        AdaptiveLimiterConfig(profile="fair", fair_floor=0.0)
    with pytest.raises(ValueError, match="fair_decrease"):
        AdaptiveLimiterConfig(profile="fair", fair_decrease=1.0)
    with pytest.raises(ValueError, match="fair_probe"):
        AdaptiveLimiterConfig(profile="fair", fair_probe=0.0)
    for exponent in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="fair_exponent"):
            AdaptiveLimiterConfig(profile="fair", fair_exponent=exponent)
    assert AdaptiveLimiterConfig(fair_probe=timedelta(seconds=3)).fair_probe == 3.0


def test_start_from_served_starts_at_utilization_of_the_served_rate_and_without_it_at_the_floor() -> None:
    """With the rule the first throttle starts at utilization x the served rate; without, it cuts the floor."""
    assert _served().fill_rate == pytest.approx(CONFIG.utilization * 100, rel=0.05)
    assert _served(_without("start_from_served")).fill_rate == pytest.approx(
        CONFIG.fair_decrease * CONFIG.min_fill_rate
    )


def test_the_rest_of_the_first_round_trip_raises_the_start_and_never_lowers_it() -> None:
    """Answers to requests sent before the start (the first round trip's) revise the start upwards only."""
    control = FairRateController(CONFIG, 0.0)
    control.update(0.1, True, 0.0)  # the first answer of a round trip of 16: a throttle
    first = control.fill_rate
    for _ in range(15):  # the rest of it: served
        control.update(0.1, False, 0.0)
    raised = control.fill_rate
    for _ in range(5):  # late echoes of it, throttled
        control.update(0.1, True, 0.0)
    assert first < raised == control.fill_rate


def test_one_decrease_per_event_ignores_echoes_and_without_it_each_throttle_cuts() -> None:
    """Throttles of requests sent before the last decrease leave the rate alone only under the rule."""
    rates = []
    for rules in (frozenset(FAIR_RULES), _without("one_decrease_per_event")):
        control = _served(rules)
        now = _serve(control, 1.0, 1.0, 50.0)
        control.update(now + LATENCY, True, now)  # a fresh throttle: one cut
        after_event = control.fill_rate
        for k in range(1, 6):  # echoes: sent before that cut
            control.update(now + LATENCY + k / 1000, True, now + k / 1000 - LATENCY)
        rates.append((after_event, control.fill_rate))
    (event, echoed), (event_without, echoed_without) = rates
    assert echoed == event
    assert echoed_without < event_without


def test_a_decrease_cuts_from_what_was_sent_when_less_than_the_rate() -> None:
    """A client sending less than its rate allows is cut to repeat_decrease of what it sends."""
    assert fair_decrease(100.0, 40.0, beta=0.7, floor=0.05) == pytest.approx(28.0)
    assert fair_decrease(100.0, 400.0, beta=0.7, floor=0.05) == pytest.approx(70.0)
    assert fair_decrease(0.06, 0.06, beta=0.7, floor=0.05) == 0.05


def test_the_increase_is_the_same_step_for_every_client_at_one_rate_and_grows_as_rate_to_the_exponent() -> None:
    """The additive step depends only on the rate and the time: fair_step at fair_reference, x2 at 4x it
    (fair_exponent 0.5), x4 with exponent 1, the same at every rate with exponent 0 (AIMD)."""
    assert fair_increase(16.0, 1.0, step=1.0, reference=16.0) == pytest.approx(17.0)
    assert fair_increase(64.0, 1.0, step=1.0, reference=16.0) == pytest.approx(66.0)
    assert fair_increase(64.0, 1.0, step=1.0, reference=16.0, exponent=1.0) == pytest.approx(68.0)
    assert fair_increase(64.0, 1.0, step=1.0, reference=16.0, exponent=0.0) == pytest.approx(65.0)
    assert fair_increase(64.0, 0.0, step=1.0, reference=16.0) == 64.0
    # Never lifted beyond the ceiling (max_rate_growth x what is sent); a rate above it is kept, not cut.
    assert fair_increase(16.0, 1.0, step=1.0, reference=16.0, ceiling=16.5) == 16.5
    assert fair_increase(16.0, 1.0, step=1.0, reference=16.0, ceiling=8.0) == 16.0
    control = _served(rate=64.0)
    start = control.fill_rate
    control.update(1.5, False, 1.5 - LATENCY)  # half a second after the cut at 1.02
    growth = (start / CONFIG.fair_reference) ** 0.5 * 2.0 ** ((1.5 - (1.0 + LATENCY)) / 2.0)
    expected = start + CONFIG.fair_step * growth * (1.5 - (1.0 + LATENCY))
    assert control.fill_rate == pytest.approx(expected)


def test_the_probe_doubles_the_step_every_fair_probe_seconds_alike_for_every_rate() -> None:
    """After a cut the step doubles every fair_probe seconds, whatever the client's rate, so a slow client
    catches up as fast (in doublings) as a fast one; without the rule the step stays."""
    gains = []
    for rules in (frozenset(FAIR_RULES), _without("probe")):
        control = _served(rules, rate=10.0)
        before = control.fill_rate
        _serve(control, 1.0, 8.0, 10.0)
        gains.append(control.fill_rate - before)
    assert gains[0] > 1.5 * gains[1] > 0.0
    assert fair_increase(16.0, 1.0, step=1.0, reference=16.0, probe=3.0) == pytest.approx(24.0)
    doublings = []
    unbounded = AdaptiveLimiterConfig(profile="fair", max_rate_growth=1e9)  # no ceiling from what was sent
    for rate in (4.0, 64.0):
        control = FairRateController(unbounded, 0.0)
        for k in range(round(rate)):
            control.update(k / rate + LATENCY, False, k / rate)
        control.update(1.0 + LATENCY, True, 1.0)
        cut_at, start = control.last_throttle_time, control.fill_rate
        control.update(cut_at + 4.0, False, cut_at + 4.0 - LATENCY)  # 4 s after the cut: 2 doublings
        step = (control.fill_rate - start) / 4.0
        doublings.append(step / (CONFIG.fair_step * (start / CONFIG.fair_reference) ** 0.5))
    assert doublings == pytest.approx([4.0, 4.0])


def test_two_clients_cut_by_the_same_events_converge_to_equal_shares() -> None:
    """Synchronized congestion events and the common additive step bring unequal rates together."""
    low = _served(rate=10.0)
    high = _served(rate=40.0)
    now = 1.0
    for _ in range(40):  # bounded: 40 events of 2 s each
        for control in (low, high):
            _serve(control, now, 2.0, control.fill_rate)
        now += 2.0
        for control in (low, high):
            control.update(now + LATENCY, True, now)
    assert high.fill_rate / low.fill_rate < 2.0 < 40.0 / 10.0


def test_the_floor_is_fair_floor_below_the_aws_floor() -> None:
    """Cut after cut, the rate stops at fair_floor (below min_fill_rate), where many slow clients fit."""
    control = _served(rate=5.0)
    now = 1.0
    for _ in range(60):
        now += 0.5
        control.update(now + LATENCY, True, now)
    assert control.fill_rate == CONFIG.fair_floor < CONFIG.min_fill_rate


def test_failures_hold_the_rate_and_without_the_rule_grow_it() -> None:
    """A failure that is not a throttle neither grows nor cuts the rate under failures_hold."""
    rates = []
    for rules in (frozenset(FAIR_RULES), _without("failures_hold")):
        control = _served(rules)
        before = control.fill_rate
        for k in range(1, 21):
            control.update(1.0 + LATENCY + k / 20, False, 1.0 + k / 20, failed=True)
        rates.append(control.fill_rate / before)
    assert rates[0] == 1.0 < rates[1]


def test_the_round_trip_is_measured_from_send_times() -> None:
    """The controller averages the round trips it is told (answer time minus send time)."""
    assert _served().round_trip == pytest.approx(LATENCY)


# --- the same rules through the limiter, on the event loop's (virtual) clock, on asyncio and trio


async def _limiter(rules_off: str | None = None) -> AdaptiveRateLimiter:
    """A fair-profile limiter fed 50 successes a second for 1 s, then its first throttle."""
    limiter = AdaptiveRateLimiter(CONFIG, name="api")
    if rules_off is not None:
        limiter._control = FairRateController(CONFIG, anyio.current_time(), rules=_without(rules_off))
    for _ in range(50):
        await anyio.sleep(0.02)
        limiter.update(False, sent_at=anyio.current_time() - LATENCY)
    limiter.update(True, sent_at=anyio.current_time() - LATENCY)
    return limiter


@pytest.mark.anyio
async def test_the_limiter_paces_without_the_engines_backoff_and_without_the_rule_keeps_it() -> None:
    """Once the fair limiter paces, a throttle needs no engine backoff (pace_without_backoff)."""
    assert (await _limiter()).backoff_after_throttle(0.5) == 0.0
    assert (await _limiter("pace_without_backoff")).backoff_after_throttle(0.5) == 0.5


@pytest.mark.anyio
async def test_the_limiter_paces_attempts_at_the_fill_rate_after_the_first_throttle() -> None:
    """After the start, twenty acquisitions take about twenty intervals of the fill rate."""
    limiter = await _limiter()
    rate = limiter.fill_rate
    began = anyio.current_time()
    for _ in range(20):
        await limiter.acquire()
    took = anyio.current_time() - began
    assert 19 / rate <= took <= 21 / rate


def test_the_redis_shared_limiter_refuses_the_per_client_profile_by_name() -> None:
    """RedisAdaptiveRateLimiter runs only the profiles its scripts implement, and says so for "fair"."""
    from asyncretry.redis import RedisAdaptiveRateLimiter

    with pytest.raises(ValueError, match=r"config.profile must be one of 'asyncretry', 'aws' .* got 'fair'"):
        RedisAdaptiveRateLimiter("redis://127.0.0.1:1", CONFIG)
