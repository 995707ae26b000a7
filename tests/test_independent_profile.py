"""The ``"independent"`` profile: the default profile's controller for a limiter per client of a fleet.

It runs the default profile's rules without ``repeat_cut`` and the fleet rules, plus ``share_recovery``
(a client throttled below its estimate recovers and probes more slowly the larger its share) and
``pace_without_backoff`` (once enabled, the bucket paces the client instead of the engine's backoff).
The controller is pure and told the time, so most tests drive it with explicit times; the last ones
drive an AdaptiveRateLimiter on the event loop's virtual clock, on asyncio and trio.
"""

from __future__ import annotations

import copy

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter, FixedBackoff, NoBackoff, Retrier, RetryPolicy
from asyncretry._primitives._adaptive import INDEPENDENT_RULES, RULES, SHARE_RULES, AsyncretryRateController
from asyncretry._primitives._adaptive_rules import share_stretch
from asyncretry._primitives._rate_controller import new_rate_controller

LATENCY = 0.02
CONFIG = AdaptiveLimiterConfig(profile="independent")
LEFT_OUT = {"repeat_cut", "few_successes", "fleet_event_rate", "fleet_climb"}


def _without(rule: str) -> frozenset[str]:
    return frozenset(INDEPENDENT_RULES) - {rule}


def _serve(control: AsyncretryRateController, start: float, seconds: float, most: float = 1e4) -> float:
    """Feed successes at the controller's fill rate (at most ``most`` a second) for ``seconds`` from
    ``start``; return the end time."""
    now = start
    while now < start + seconds:
        now += 1.0 / min(control.fill_rate, most)
        control.update(now + LATENCY, False, now)
    return now


def _started(rules: frozenset[str], *, rate: float = 512.0) -> AsyncretryRateController:
    """A controller that served ``rate`` per second for 1 s, then saw its first throttle (sent at 1.0)."""
    control = AsyncretryRateController(CONFIG, 0.0, rules=rules)
    for k in range(round(rate)):
        control.update(k / rate + LATENCY, False, k / rate)
    control.update(1.0 + LATENCY, True, 1.0)
    return control


def _after_an_event(rules: frozenset[str]) -> tuple[AsyncretryRateController, float]:
    """A controller past its start-up: back at its estimate, probing above it and throttled there (a restart
    below a measured capacity). Returns it and the time of that throttle's answer."""
    control = _started(rules)
    now = _serve(control, 1.0 + LATENCY, 2.0)
    assert control.fill_rate > control.last_max_rate
    control.update(now + LATENCY, True, now)
    return control, now + LATENCY


def _throttled_below_the_estimate(control: AsyncretryRateController, start: float) -> float:
    """Serve 0.3 s from ``start`` (past reaction_time, still climbing back to the estimate), then feed a
    throttle; return its send time."""
    now = _serve(control, start, 0.3)
    control.update(now + LATENCY, True, now)
    return now


def _time_to_double(control: AsyncretryRateController) -> float:
    """Seconds from the last decrease until the rate reaches twice the estimate, fed a success every 5 ms."""
    estimate, now = control.last_max_rate, control.last_throttle_time
    for _ in range(20_000):  # bounded: 100 s
        if control.fill_rate >= 2 * estimate:
            return now - control.last_throttle_time
        now += 0.005
        control.update(now + LATENCY, False, now)
    raise AssertionError("the rate never reached twice the estimate")


def test_the_profile_runs_the_default_rules_without_repeat_cut_and_the_fleet_rules_and_with_the_share_rules() -> None:
    """The profile's controller is the default profile's, with repeat_cut and its fleet rules left out and
    SHARE_RULES on; the default profile applies no rule of SHARE_RULES."""
    control = new_rate_controller(CONFIG, 0.0)
    assert isinstance(control, AsyncretryRateController)
    assert control.rules == frozenset(INDEPENDENT_RULES) == (frozenset(RULES) - LEFT_OUT) | set(SHARE_RULES)
    default = new_rate_controller(AdaptiveLimiterConfig(), 0.0)
    assert isinstance(default, AsyncretryRateController)
    assert default.rules == frozenset(RULES)
    assert not default.rules & set(SHARE_RULES)
    for rule in SHARE_RULES:
        assert AsyncretryRateController(CONFIG, 0.0, rules=_without(rule)).rules == _without(rule)


def test_a_second_throttle_right_after_a_decrease_is_measured_not_cut_to_the_fresh_successes() -> None:
    """Two fresh throttles within reaction_time of a decrease: the default profile's repeat_cut cuts the
    rate to min_repeat_decrease of it (no fresh answer succeeded), while this profile takes the first as a
    new event, decided like any other (here a plain repeat_decrease: nothing was served since the
    decrease), and the second as that event's echo."""
    rates = []
    for rules in (frozenset(RULES), frozenset(INDEPENDENT_RULES)):  # the two profiles' rules (test above)
        control = _started(rules, rate=100.0)
        decreased = control.fill_rate
        control.update(1.1, True, 1.05)  # fresh (sent after the decrease), within reaction_time
        control.update(1.12, True, 1.06)
        rates.append(control.fill_rate / decreased)
    default, independent = rates
    assert default == pytest.approx(CONFIG.min_repeat_decrease, rel=0.05)
    assert independent == pytest.approx(CONFIG.repeat_decrease, rel=0.05)


def test_share_settings_out_of_range_are_refused_by_name() -> None:
    """share_reference must be > 0 and share_exponent within [0, 1]; the message names the setting."""
    with pytest.raises(ValueError, match=r"share_reference must be > 0, got 0"):
        AdaptiveLimiterConfig(profile="independent", share_reference=0.0)
    for exponent in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"share_exponent must be .*>= 0 and <= 1"):
            AdaptiveLimiterConfig(profile="independent", share_exponent=exponent)
    with pytest.raises(TypeError, match="share_reference"):
        AdaptiveLimiterConfig(profile="independent", share_reference="64")  # type: ignore[arg-type]


def test_the_stretch_is_one_at_the_reference_and_grows_as_the_cube_root_of_the_share() -> None:
    """At share_reference the recovery and probe keep their times; 8 times the share takes twice as long."""
    assert share_stretch(64.0, reference=64.0, exponent=1 / 3) == pytest.approx(1.0)
    assert share_stretch(512.0, reference=64.0, exponent=1 / 3) == pytest.approx(2.0)
    assert share_stretch(8.0, reference=64.0, exponent=1 / 3) == pytest.approx(0.5)
    assert share_stretch(512.0, reference=64.0, exponent=0.0) == 1.0


def test_a_throttle_below_the_estimate_stretches_the_recovery_and_probe_and_without_the_rule_does_not() -> None:
    """A client throttled while still climbing back to its estimate shares the server: under share_recovery
    it takes (estimate / share_reference) ** share_exponent times as long to recover and double."""
    times, stretch = [], 0.0
    for rules in (frozenset(INDEPENDENT_RULES), _without("share_recovery")):
        control, now = _after_an_event(rules)
        assert control.fill_rate < control.last_max_rate  # climbing back from the cut
        _throttled_below_the_estimate(control, now)
        stretch = share_stretch(control.last_max_rate, reference=64.0, exponent=1 / 3)
        times.append(_time_to_double(control))
    assert stretch > 1.5
    assert times[0] / times[1] == pytest.approx(stretch, rel=0.02)


def test_the_first_event_after_the_start_up_is_not_taken_for_a_shared_server() -> None:
    """The start-up restarts at repeat_decrease of what was served, below that estimate, and the first round
    trip emptied the server's bucket: a throttle while climbing back from it is no sign of other clients, so
    the recovery and probe keep the default pace (the same throttle after a later event stretches them)."""
    times = []
    for rules in (frozenset(INDEPENDENT_RULES), _without("share_recovery")):
        control = _started(rules)
        assert control.fill_rate < control.last_max_rate  # climbing back from the start-up's cut
        _throttled_below_the_estimate(control, 1.0 + LATENCY)
        times.append(_time_to_double(control))
    assert times[0] == pytest.approx(times[1])


def test_one_limiter_throttled_only_above_its_estimate_keeps_the_default_pace() -> None:
    """Throttled only while probing above its estimate (one limiter for all the traffic), a client is not
    stretched: it recovers and probes as fast as without the rule."""
    times = []
    for rules in (frozenset(INDEPENDENT_RULES), _without("share_recovery")):
        control, _ = _after_an_event(rules)  # throttled while probing above its estimate
        times.append(_time_to_double(control))
    assert times[0] == pytest.approx(times[1])


def test_the_stretch_ends_once_no_throttle_came_below_the_estimate_for_four_recoveries() -> None:
    """share_recovery holds for 4 x max(recovery_time, measurement_window) after the last throttle that came
    below the estimate; a later event above the estimate restores the default pace."""
    stretched, later = [], []
    for rules in (frozenset(INDEPENDENT_RULES), _without("share_recovery")):
        control, now = _after_an_event(rules)
        now = _throttled_below_the_estimate(control, now)  # shared from here on
        stretched.append(_time_to_double(copy.deepcopy(control)))
        # Past the 10 s horizon, probing above the estimate (the server admits 10% more than it).
        now = _serve(control, now + LATENCY, 11.0, most=1.1 * control.last_max_rate)
        assert control.fill_rate > control.last_max_rate
        control.update(now + LATENCY, True, now)
        later.append(_time_to_double(control))
    assert stretched[0] > 1.5 * stretched[1]
    assert later[0] == pytest.approx(later[1])


# --- the profile through the limiter, on the event loop's (virtual) clock, on asyncio and trio


async def _limiter(config: AdaptiveLimiterConfig) -> AdaptiveRateLimiter:
    """A limiter fed 50 successes a second for 1 s, its first throttle, 1 s of successes, then a second one."""
    limiter = AdaptiveRateLimiter(config, name="api")
    for _ in range(2):
        for _success in range(50):
            await anyio.sleep(0.02)
            limiter.update(False, sent_at=anyio.current_time() - LATENCY)
        limiter.update(True, sent_at=anyio.current_time() - LATENCY)
        assert limiter.enabled
    return limiter


@pytest.mark.anyio
async def test_the_limiter_paces_every_throttle_without_the_engines_backoff_unlike_the_default() -> None:
    """Once enabled, a throttle of the independent profile needs no engine backoff (pace_without_backoff);
    the default profile asks for it after its start-up."""
    assert (await _limiter(CONFIG)).backoff_after_throttle(0.5) == 0.0
    assert (await _limiter(AdaptiveLimiterConfig())).backoff_after_throttle(0.5) == 0.5


@pytest.mark.anyio
async def test_the_limiter_paces_attempts_at_the_fill_rate() -> None:
    """After its throttles, twenty acquisitions take about twenty intervals of the fill rate."""
    limiter = await _limiter(CONFIG)
    rate = limiter.fill_rate
    began = anyio.current_time()
    for _ in range(20):
        await limiter.acquire()
    took = anyio.current_time() - began
    assert 19 / (2 * rate) <= took <= 21 / rate


class _Throttled(Exception):
    is_throttling = True


async def _three_throttles_then_ok(config: AdaptiveLimiterConfig) -> float:
    """Seconds one call takes through the engine when its first three attempts are throttled, with a
    throttling backoff of 5 s."""
    policy = RetryPolicy(
        mode="adaptive", limiter=config, max_attempts=4, backoff=NoBackoff(), throttling_backoff=FixedBackoff(5.0)
    )
    retrier = Retrier(policy)
    calls = 0

    async def throttled_three_times() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(LATENCY)
        if calls <= 3:
            raise _Throttled
        return "ok"

    began = anyio.current_time()
    assert await retrier.call(throttled_three_times) == "ok"
    return anyio.current_time() - began


@pytest.mark.anyio
async def test_the_engine_retries_throttles_at_the_limiters_pace_not_after_its_backoff() -> None:
    """Through the retry engine, the independent profile's retries wait only for the limiter's tokens; the
    default profile's wait the 5 s throttling backoff after each throttle but the start-up's."""
    independent = await _three_throttles_then_ok(CONFIG)
    default = await _three_throttles_then_ok(AdaptiveLimiterConfig())
    assert default >= 2 * 5.0
    assert independent < 5.0


def test_the_redis_shared_limiter_refuses_the_per_client_profile_by_name() -> None:
    """RedisAdaptiveRateLimiter is one limiter for a fleet: it refuses a profile for a limiter per client."""
    from asyncretry.redis import RedisAdaptiveRateLimiter

    with pytest.raises(ValueError, match=r"config.profile must be one of 'asyncretry', 'aws' .* 'independent'"):
        RedisAdaptiveRateLimiter("redis://127.0.0.1:1", CONFIG)
