"""The start: where the rate begins at the first throttle, in the profiles that start from what was served.

A first throttle means the server's bucket had emptied: what the server served so far is its burst plus
its rate since. The default and ``"independent"`` profiles (``start_up``) and the ``"fair"`` profile
(``start_from_served``) count every answer so far over the time since the first answer plus one slot of
the served-rate counters (a twentieth of ``measurement_window``): the burst is taken as a slot's worth of
the rate, whether the answers came all at once or over a while, and wherever in a slot they fell. Past a
window since the first answer, the start is the served rate over the last window. The default profiles
keep ``repeat_decrease`` of it, the ``"fair"`` profile ``utilization``.

The controllers are pure and told the time; the last tests go through the limiter on the event loop's
virtual clock, on asyncio and trio. The Redis scripts apply the same start to a fleet's reports
(``tests/test_limiter_parity.py`` compares them event by event; ``tests/test_redis_fleet_virtual.py`` checks
that a report's answers count over the time they took to come).
"""

from __future__ import annotations

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter
from asyncretry._primitives._meters import SlidingCounter
from asyncretry._primitives._rate_controller import RateController, new_rate_controller

SLOT = 1.0 / 20  # a twentieth of the default measurement_window (1 s)
PROFILES = ["asyncretry", "independent", "fair"]
RULE = {"asyncretry": "start_up", "independent": "start_up", "fair": "start_from_served"}


def _share(profile: str) -> float:
    """The share of the served rate the profile starts at."""
    config = AdaptiveLimiterConfig(profile=profile)
    return config.utilization if profile == "fair" else config.repeat_decrease


def _controller(profile: str, start: float) -> RateController:
    return new_rate_controller(AdaptiveLimiterConfig(profile=profile), start)


def _first_throttle(profile: str, start: float, answers: list[float]) -> RateController:
    """A controller created at ``start`` that sees successes at ``answers``, then a throttle after the last."""
    control = _controller(profile, start)
    for at in answers:
        control.update(at, False, at - 0.001)
    control.update(answers[-1], True, answers[-1] - 0.001)
    assert control.rule == RULE[profile]
    return control


def _burst_then_rate(at: float, rate: float, seconds: float) -> list[float]:
    """A server's answers: a burst of a slot's worth of ``rate`` at ``at``, then ``rate`` a second for ``seconds``."""
    burst = [at] * round(rate * SLOT)
    return burst + [at + k / rate for k in range(1, round(rate * seconds) + 1)]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("seconds", [0.0, 0.02, 0.1, 0.4, 0.9])
def test_a_servers_burst_and_rate_start_at_the_share_of_its_rate_however_long_it_served(
    seconds: float, profile: str
) -> None:
    """A server of 200/s whose bucket holds a slot of it (10 answers at once), then 200/s: the start is 0.7 x
    200/s whether the first throttle comes at once or 0.9 s later (counted in whole slots instead, these answers
    would give 189-208/s by when the throttle came)."""
    control = _first_throttle(profile, 10.0, _burst_then_rate(10.003, 200.0, seconds))
    assert control.fill_rate == pytest.approx(_share(profile) * 200.0, rel=1e-9)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("phase", [0.0, 0.001, 0.01, 0.025, 0.049])
def test_the_start_does_not_depend_on_where_in_a_slot_the_first_answers_came(phase: float, profile: str) -> None:
    """The same twelve answers over 11 ms start the rate at the same 0.7 x 12 / (0.011 s + a slot), however far
    into a slot of the counters they came (counted in whole slots instead, over 0.060-0.086 s by where they fell)."""
    begin = 100.0 + phase
    control = _first_throttle(profile, 100.0, [begin + 0.001 * k for k in range(12)])
    assert control.fill_rate == pytest.approx(_share(profile) * 12 / (0.011 + SLOT), rel=1e-9)


@pytest.mark.parametrize("profile", PROFILES)
def test_past_a_window_since_the_first_answer_the_start_is_the_served_rate_of_the_last_window(profile: str) -> None:
    """One answer long ago, then 50/s for the last 1.5 s: the start is 0.7 x 50/s (the old answer is not
    counted, nor the 3 s between it and the others)."""
    answers = [1.0] + [4.0 + k / 50 for k in range(1, 76)]
    control = _first_throttle(profile, 0.0, answers)
    assert control.fill_rate == pytest.approx(_share(profile) * 50.0, rel=0.03)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_client_throttled_before_any_success_starts_from_a_share_of_what_it_sent(profile: str) -> None:
    """Nothing served: the start is min_repeat_decrease of the answers' rate, counted the same way (four answers
    in 3 ms: 4 / (0.003 s + a slot)), then the profile's share of it, not the floor."""
    control = _controller(profile, 0.0)
    for k in range(4):
        control.update(0.02 + 0.001 * k, True, 0.0)
    sent = AdaptiveLimiterConfig().min_repeat_decrease * 4 / (0.003 + SLOT)
    assert control.fill_rate == pytest.approx(_share(profile) * sent, rel=1e-9)


def test_the_counter_rates_every_event_so_far_over_the_time_since_the_first_plus_a_slot() -> None:
    """The counters' rule on its own: events at once get a slot's worth of time, events over a while their
    time plus a slot; past the span asked for, the rate over the last span (here 1 s at 20/s)."""
    counter = SlidingCounter(0.05, 1.0, 0.0)
    for _ in range(5):
        counter.add(0.3)
    assert counter.rate_so_far(0.3, 0.3, 1.0) == pytest.approx(5 / 0.05)
    for k in range(1, 21):
        counter.add(0.3 + k / 20)
    assert counter.rate_so_far(1.25, 0.3, 1.0) == pytest.approx(25 / (0.95 + 0.05))
    assert counter.rate_so_far(1.3, 0.3, 1.0) == counter.rate(1.3, 1.0) == pytest.approx(20.0, rel=0.06)
    assert counter.rate_so_far(5.0, 0.3, 1.0) == counter.rate(5.0, 1.0) == 0.0
    assert counter.total == 25


@pytest.mark.anyio
@pytest.mark.parametrize("profile", PROFILES)
async def test_a_limiter_on_the_event_loops_clock_starts_at_the_share_of_the_servers_rate(profile: str) -> None:
    """Through AdaptiveRateLimiter: a burst of 10 answers and 200/s for 0.3 s, then a throttle: the profile's
    share of 200/s."""
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile=profile))
    begin = anyio.current_time()
    for _ in range(10):
        limiter.update(False, sent_at=begin)
    for _ in range(60):
        await anyio.sleep(1 / 200)
        limiter.update(False, sent_at=anyio.current_time())
    limiter.update(True, sent_at=anyio.current_time())
    statistics = limiter.statistics()
    assert statistics.rule == RULE[profile]
    assert statistics.fill_rate == pytest.approx(_share(profile) * 200.0, rel=1e-6)
