"""A fleet client's bound: the congestion events it counts set its rate, never below a floor that is cut at each
event and climbs between them.

The bound is pure and told the time, so these tests drive it with explicit times; the controller's tests
(test_limiter_profiles.py, test_adaptive_rules.py) show the same rules through a client's responses.
"""

from __future__ import annotations

import math

import pytest

from asyncretry import AdaptiveLimiterConfig
from asyncretry._primitives._adaptive_rules import fair_increase
from asyncretry._primitives._fleet_bound import FleetBound
from asyncretry._primitives._limiter_config import as_seconds

CONFIG = AdaptiveLimiterConfig()
WINDOW = 1.0
WIDTH = WINDOW / 20


def _bound(*, climbs: bool = True) -> FleetBound:
    return FleetBound(CONFIG, 0.0, window=WINDOW, width=WIDTH, climbs=climbs)


def test_a_client_not_in_a_fleet_gets_no_rate_from_its_bound() -> None:
    bound = _bound()
    bound.first_event(0.0)
    bound.count_event(1.0)
    assert not bound.active
    assert bound.rate(1.0) == 0.0


def test_events_weigh_less_as_they_age_over_five_windows() -> None:
    bound = _bound()
    bound.first_event(0.0)
    bound.count_event(2.0)
    assert bound.events == pytest.approx(math.exp(-2.0 / (5 * WINDOW)) + 1.0)
    assert bound.recent(7.0) == pytest.approx(bound.events * math.exp(-1.0))


def test_more_frequent_events_set_a_lower_rate() -> None:
    """The sawtooth's mean falls as the events come faster: the rate goes as 1/sqrt(events per window)."""
    rates = []
    for spacing in (2.0, 0.5):
        bound = _bound()
        bound.first_event(0.0)
        at = 0.0
        for _ in range(6):
            at += spacing
            bound.count_event(at)
        bound.cut(at, ran_at=0.0)  # a floor of 0: the events alone set the rate
        rates.append(bound.rate(at))
    slow, fast = rates
    assert fast < slow
    assert slow / fast == pytest.approx(2.0, rel=0.25)  # four times the events, half the rate


def test_the_rate_is_the_events_rate_or_the_floor_whichever_is_higher() -> None:
    bound = _bound()
    bound.first_event(0.0)
    bound.cut(0.0, ran_at=1.0)
    early = bound.rate(0.5)  # one event in half a second: a rate well above the floor of 0.7/s
    assert early > bound.floor
    for at in (0.6, 0.7, 0.8, 0.9):  # events so frequent that they alone would set a low rate
        bound.count_event(at)
    bound.cut(0.9, ran_at=40.0)
    assert bound.rate(0.9) == bound.floor == pytest.approx(CONFIG.repeat_decrease * 40.0)


def test_the_floor_climbs_by_the_fair_step_and_doubles_it_every_fair_probe_since_the_cut() -> None:
    bound = _bound()
    bound.first_event(0.0)
    bound.cut(0.0, ran_at=20.0)
    expected, before = CONFIG.repeat_decrease * 20.0, 0.0
    for now in (0.5, 1.0, 2.0, 4.0):
        bound.climb(now, since_cut=now, ceiling=math.inf)
        expected = fair_increase(
            expected, now - before, step=CONFIG.fair_step, reference=CONFIG.fair_reference,
            probe=now / as_seconds(CONFIG.fair_probe), exponent=CONFIG.fair_exponent,
        )
        before = now
        assert bound.floor == pytest.approx(expected)
    assert bound.floor > CONFIG.repeat_decrease * 20.0


def test_the_floor_never_climbs_past_the_ceiling() -> None:
    """The ceiling is max_rate_growth times what the client sends: an allowance it never tested is no capacity."""
    bound = _bound()
    bound.first_event(0.0)
    bound.cut(0.0, ran_at=20.0)
    bound.climb(30.0, since_cut=30.0, ceiling=16.0)
    assert bound.floor == pytest.approx(16.0)


def test_without_fleet_climb_the_floor_stays_where_the_cut_left_it() -> None:
    bound = _bound(climbs=False)
    bound.first_event(0.0)
    bound.cut(0.0, ran_at=20.0)
    bound.climb(10.0, since_cut=10.0, ceiling=math.inf)
    assert bound.floor == pytest.approx(CONFIG.repeat_decrease * 20.0)
