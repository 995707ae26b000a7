"""The start (``start_up``): where the default profile's rate begins at the first throttle.

A first throttle means the server's bucket had emptied: what the server served so far is its burst plus
its rate since. The start counts every answer so far over the time since the first answer plus one slot
of the served-rate counters (a twentieth of ``measurement_window``): the burst is taken as a slot's worth
of the rate, whether the answers came all at once or over a while, and wherever in a slot they fell. Past
a window since the first answer, the start is the served rate over the last window.

The controllers are pure and told the time; the last test goes through the limiter on the event loop's
virtual clock, on asyncio and trio. The Redis scripts apply the same start to a fleet's reports
(``tests/test_limiter_parity.py`` compares them event by event; ``tests/test_redis_fleet_virtual.py`` checks
that a report's answers count over the time they took to come).
"""

from __future__ import annotations

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter
from asyncretry._primitives._adaptive import AsyncretryRateController

CONFIG = AdaptiveLimiterConfig()
SLOT = 1.0 / 20  # a twentieth of the default measurement_window (1 s)
START = CONFIG.repeat_decrease  # the start keeps this share of the served rate


def _first_throttle(start: float, answers: list[float]) -> AsyncretryRateController:
    """A controller created at ``start`` that sees successes at ``answers``, then a throttle after the last."""
    control = AsyncretryRateController(CONFIG, start)
    for at in answers:
        control.update(at, False, at - 0.001)
    control.update(answers[-1], True, answers[-1] - 0.001)
    assert control.rule == "start_up"
    return control


def _burst_then_rate(at: float, rate: float, seconds: float) -> list[float]:
    """A server's answers: a burst of a slot's worth of ``rate`` at ``at``, then ``rate`` a second for ``seconds``."""
    burst = [at] * round(rate * SLOT)
    return burst + [at + k / rate for k in range(1, round(rate * seconds) + 1)]


@pytest.mark.parametrize("seconds", [0.0, 0.02, 0.1, 0.4, 0.9])
def test_a_servers_burst_and_rate_start_at_the_share_of_its_rate_however_long_it_served(seconds: float) -> None:
    """A server of 200/s whose bucket holds a slot of it (10 answers at once), then 200/s: the start is 0.7 x
    200/s whether the first throttle comes at once or 0.9 s later (counted in whole slots instead, these answers
    would give 189-208/s by when the throttle came)."""
    control = _first_throttle(10.0, _burst_then_rate(10.003, 200.0, seconds))
    assert control.fill_rate == pytest.approx(START * 200.0, rel=1e-9)


@pytest.mark.parametrize("phase", [0.0, 0.001, 0.01, 0.025, 0.049])
def test_the_start_does_not_depend_on_where_in_a_slot_the_first_answers_came(phase: float) -> None:
    """The same twelve answers over 11 ms start the rate at the same 0.7 x 12 / (0.011 s + a slot), however far
    into a slot of the counters they came (counted in whole slots instead, over 0.060-0.086 s by where they fell)."""
    begin = 100.0 + phase
    control = _first_throttle(100.0, [begin + 0.001 * k for k in range(12)])
    assert control.fill_rate == pytest.approx(START * 12 / (0.011 + SLOT), rel=1e-9)


def test_past_a_window_since_the_first_answer_the_start_is_the_served_rate_of_the_last_window() -> None:
    """One answer long ago, then 50/s for the last 1.5 s: the start is 0.7 x 50/s (the old answer is not
    counted, nor the 3 s between it and the others)."""
    answers = [1.0] + [4.0 + k / 50 for k in range(1, 76)]
    control = _first_throttle(0.0, answers)
    assert control.fill_rate == pytest.approx(START * 50.0, rel=0.03)


def test_a_client_throttled_before_any_success_starts_from_a_share_of_what_it_sent() -> None:
    """Nothing served: the start is min_repeat_decrease of the answers' rate, counted the same way (four answers
    in 3 ms: 4 / (0.003 s + a slot)), then 0.7 of it, not the floor."""
    control = AsyncretryRateController(CONFIG, 0.0)
    for k in range(4):
        control.update(0.02 + 0.001 * k, True, 0.0)
    assert control.fill_rate == pytest.approx(START * CONFIG.min_repeat_decrease * 4 / (0.003 + SLOT), rel=1e-9)


@pytest.mark.anyio
async def test_a_limiter_on_the_event_loops_clock_starts_at_the_share_of_the_servers_rate() -> None:
    """Through AdaptiveRateLimiter: a burst of 10 answers and 200/s for 0.3 s, then a throttle: 0.7 x 200/s."""
    limiter = AdaptiveRateLimiter()
    begin = anyio.current_time()
    for _ in range(10):
        limiter.update(False, sent_at=begin)
    for _ in range(60):
        await anyio.sleep(1 / 200)
        limiter.update(False, sent_at=anyio.current_time())
    limiter.update(True, sent_at=anyio.current_time())
    statistics = limiter.statistics()
    assert statistics.rule == "start_up"
    assert statistics.fill_rate == pytest.approx(START * 200.0, rel=1e-6)
