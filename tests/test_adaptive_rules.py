"""The default profile's rules one at a time: each switched off alone changes exactly its own behaviour.

The controller is pure and told the time, so most tests drive it with explicit times (no event loop); the
last ones drive an AdaptiveRateLimiter on the event loop's virtual clock, on asyncio and trio.
"""

from __future__ import annotations

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter
from asyncretry._primitives._adaptive import RULES, THROTTLE_STEPS, AsyncretryRateController
from fleet_schedule import fleet_sends, then_served

LATENCY = 0.02
CONFIG = AdaptiveLimiterConfig()


def _without(rule: str) -> frozenset[str]:
    return frozenset(RULES) - {rule}


def _served(rules: frozenset[str] = frozenset(RULES), *, rate: float = 100.0) -> AsyncretryRateController:
    """A controller that served ``rate`` per second for 1 s, then saw its first throttle (sent at 1.0)."""
    control = AsyncretryRateController(CONFIG, 0.0, rules=rules)
    for k in range(round(rate)):
        control.update(k / rate + LATENCY, False, k / rate)
    control.update(1.0 + LATENCY, True, 1.0)
    return control


def test_every_rule_is_switchable_and_the_steps_name_the_rules_in_order() -> None:
    """Every rule of RULES is a step or acts inside one (the engine's backoff, the probe), and the
    throttle's steps run in the written order."""
    assert set(RULES) - set(THROTTLE_STEPS) == {"start_answers_backoff", "fleet_climb", "rtt_probe"}
    for rule in RULES:
        assert AsyncretryRateController(CONFIG, 0.0, rules=_without(rule)).rules == _without(rule)
    assert THROTTLE_STEPS.index("start_up") < THROTTLE_STEPS.index("outage") < THROTTLE_STEPS.index("measure")


def test_an_unknown_rule_is_refused_by_name() -> None:
    """A rule name that does not exist is a clear error naming it and the valid names."""
    with pytest.raises(ValueError, match=r"rules must be names among start_up, .*; got 'slow_start'"):
        AsyncretryRateController(CONFIG, 0.0, rules=["start_up", "slow_start"])


def test_start_up_starts_from_the_served_rate_and_without_it_from_the_floor() -> None:
    """With start_up the first throttle restarts at repeat_decrease x the served rate; without, at the floor."""
    assert _served().fill_rate == pytest.approx(CONFIG.repeat_decrease * 100, rel=0.05)
    assert _served(_without("start_up")).fill_rate == CONFIG.min_fill_rate


def test_one_decrease_per_event_ignores_echoes_and_without_it_each_throttle_counts() -> None:
    """Throttles of requests sent before the last decrease leave the rate alone only under the rule."""
    rates = []
    for rules in (frozenset(RULES), _without("one_decrease_per_event")):
        control = _served(rules)
        for k in range(1, 31):  # fresh successes, then a fresh throttle: a measured event at 1.62
            control.update(1.0 + LATENCY + k / 50, False, 1.0 + k / 50)
        control.update(1.62, True, 1.6)
        for k in range(1, 21):
            control.update(1.62 + k / 50, False, 1.6 + k / 50)
        before = control.fill_rate
        control.update(2.05, True, 1.5)  # two answers to requests sent before that decrease
        control.update(2.06, True, 1.51)
        rates.append(control.fill_rate / before)
    assert rates[0] == 1.0
    assert rates[1] < 1.0


def test_repeat_cut_cuts_on_a_second_fresh_throttle_right_after_a_decrease() -> None:
    """Two fresh throttles within reaction_time of a decrease cut the rate again; without the rule the
    second is measured as a new event instead, from a span too short to mean anything."""
    rates = []
    for rules in (frozenset(RULES), _without("repeat_cut")):
        control = _served(rules)
        control.update(1.1, True, 1.05)
        control.update(1.12, True, 1.06)
        rates.append(control.fill_rate)
    assert rates[0] == pytest.approx(CONFIG.min_repeat_decrease * CONFIG.repeat_decrease * 100, rel=0.05)
    assert rates[1] != pytest.approx(rates[0], rel=0.05)


def test_outage_probes_at_a_fraction_and_without_it_failures_leave_the_rate() -> None:
    """A second of nothing but failures drops the rate to outage_probe x capacity only under the rule."""
    outcomes = []
    for rules in (frozenset(RULES), _without("outage")):
        control = _served(rules)
        for k in range(1, 61):
            control.update(1.02 + k / 40, False, 1.0 + k / 40, failed=True)
        outcomes.append((control.in_outage, control.fill_rate))
    assert outcomes[0][0]
    assert outcomes[0][1] < 5.0
    assert not outcomes[1][0]
    assert outcomes[1][1] > 20.0


def test_start_answers_backoff_spares_the_start_ups_throttles_the_engines_backoff() -> None:
    """The first round trip's throttle needs no throttling backoff under the rule, and needs it without."""
    assert _served().answers_backoff
    assert not _served(_without("start_answers_backoff")).answers_backoff


def test_few_successes_adds_the_fair_step_to_a_slow_clients_recovery() -> None:
    """A client whose estimate rests on few successes grows by fair_step per second on top of its recovery;
    without the rule its recovery is the plain curve."""
    rates = []
    for rules in (_without("fleet_event_rate"), _without("fleet_event_rate") - {"few_successes"}):
        control = _served(rules, rate=5.0)
        control.update(1.3, False, 1.25)  # within the recovery after the start-up's restart
        rates.append(control.fill_rate)
    assert rates[0] > rates[1]


# --- the same rules through the limiter, on the event loop's (virtual) clock, on asyncio and trio


async def _limiter_served_then_throttled() -> AdaptiveRateLimiter:
    """A default-profile limiter fed 100 successes a second for 1 s, then its first throttle."""
    limiter = AdaptiveRateLimiter(name="api")
    for _ in range(100):
        await anyio.sleep(0.01)
        limiter.update(False, sent_at=anyio.current_time() - LATENCY)
    limiter.update(True, sent_at=anyio.current_time() - LATENCY)
    return limiter


@pytest.mark.anyio
async def test_the_limiter_answers_the_start_ups_backoff_but_not_a_measured_events() -> None:
    """The first throttle needs no engine backoff (start_answers_backoff); a later measured event of a
    limiter serving all the traffic keeps it."""
    limiter = await _limiter_served_then_throttled()
    assert limiter.backoff_after_throttle(0.5) == 0.0
    for _ in range(150):
        await anyio.sleep(0.01)
        limiter.update(False, sent_at=anyio.current_time() - LATENCY)
    limiter.update(True, sent_at=anyio.current_time() - LATENCY)
    assert limiter.backoff_after_throttle(0.5) == 0.5


@pytest.mark.anyio
async def test_the_limiter_probes_slowly_through_an_outage_and_restores_the_rate_after_it() -> None:
    """A window of nothing but failures drops the rate to a probe (outage); the first success after it
    restores most of the capacity from before at once."""
    limiter = await _limiter_served_then_throttled()
    before = limiter.fill_rate
    for _ in range(60):
        await anyio.sleep(0.025)
        limiter.update(False, sent_at=anyio.current_time() - LATENCY, failed=True)
    assert limiter.fill_rate < 0.1 * before
    await anyio.sleep(0.025)
    limiter.update(False, sent_at=anyio.current_time() - LATENCY)
    assert limiter.fill_rate > 0.5 * before


async def _fleet_client(rules: frozenset[str]) -> tuple[float, float]:
    """A limiter whose controller runs ``rules``, fed a client of a fleet sending 12 requests a second and
    throttled with its fleet every 1.5 s up to 7.6 s, then served for 4 s: its rate after the last event,
    and at the end."""
    start = anyio.current_time()
    sends, throttles = fleet_sends(12.0)
    sends += then_served(throttles[-1], 12.0)
    limiter = AdaptiveRateLimiter(name="api")
    limiter._control = AsyncretryRateController(CONFIG, start, rules=rules)
    after_event = 0.0
    for sent in sends:
        await anyio.sleep_until(start + sent + LATENCY)
        limiter.update(sent in throttles, sent_at=start + sent)
        if sent == throttles[-1]:
            after_event = limiter.fill_rate
    assert limiter.backoff_after_throttle(0.5) == 0.0  # a fleet client, under fleet_event_rate
    return after_event, limiter.fill_rate


@pytest.mark.anyio
async def test_fleet_climb_lifts_a_fleet_clients_rate_between_events_and_without_it_the_events_rate_rules() -> None:
    """Through the limiter: after its fleet's last event a client climbs from the rate the event left it at
    by the "fair" profile's step; without the rule its rate rises only as the events age (the events' rate,
    fleet_event_rate), and after 4 s it is more than a tenth lower."""
    with_rule = await _fleet_client(frozenset(RULES))
    without = await _fleet_client(_without("fleet_climb"))
    assert with_rule[1] > 1.5 * with_rule[0]
    assert with_rule[1] > 1.1 * without[1]


@pytest.mark.anyio
async def test_a_limiter_throttled_from_its_first_request_is_cut_not_put_in_an_outage() -> None:
    """outage: a limiter never served has no capacity to remember; two seconds of throttles cut it to the
    floor without an outage, while a limiter that served traffic first is in one after them."""
    never = AdaptiveRateLimiter(name="api")
    served = await _limiter_served_then_throttled()
    for _ in range(20):
        await anyio.sleep(0.1)
        for limiter in (never, served):
            limiter.update(True, sent_at=anyio.current_time() - LATENCY)
    never_control, served_control = never._control, served._control
    assert isinstance(never_control, AsyncretryRateController)
    assert isinstance(served_control, AsyncretryRateController)
    assert not never_control.in_outage
    assert served_control.in_outage
    assert never.fill_rate == CONFIG.min_fill_rate
