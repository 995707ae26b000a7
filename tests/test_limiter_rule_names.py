"""Every change of an adaptive limiter's fill rate names the rule that set it.

``LimiterRateChanged.rule`` and ``statistics().rule`` tell an operator why the rate moved: the throttle's
step that decided, ``outage``, or the growth between events. The controllers are pure and told the time,
so the first tests drive them with explicit times; the last ones go through the limiter on the event
loop's virtual clock, on asyncio and trio. The Redis scripts name their rules the same way
(``tests/test_limiter_parity.py`` compares the names event by event, ``tests/test_redis_limiter.py``
reads them from a fleet).
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Iterable

import anyio
import pytest

from asyncretry import AdaptiveLimiterConfig, AdaptiveRateLimiter, Event, EventBus, LimiterRateChanged, LimiterRule
from asyncretry._primitives._adaptive import RULES, AsyncretryRateController
from asyncretry._primitives._cubic import AwsRateController
from asyncretry._primitives._fair import FairRateController
from asyncretry._primitives._rate_controller import RateController
from asyncretry.redis._limiter_scripts import SCRIPT_RULES
from fleet_schedule import fleet_sends, then_served

LATENCY = 0.02
CONFIG = AdaptiveLimiterConfig()

# (time answered, time sent, throttled, failed)
Response = tuple[float, float, bool, bool]


def _served(rate: float = 100.0) -> list[Response]:
    """``rate`` successes a second for 1 s, then the first throttle (sent at 1.0)."""
    successes = [(k / rate + LATENCY, k / rate, False, False) for k in range(round(rate))]
    return [*successes, (1.0 + LATENCY, 1.0, True, False)]


def _rules_in_turn(control: RateController, responses: Iterable[Response]) -> list[LimiterRule | None]:
    """The rules that changed the fill rate, in turn (a rule that moves it again is listed once)."""
    seen: list[LimiterRule | None] = []
    for at, sent, throttled, failed in responses:
        before = control.fill_rate
        control.update(at, throttled, sent, failed=failed)
        if control.fill_rate != before and (not seen or seen[-1] != control.rule):
            seen.append(control.rule)
    return seen


def _fleet_client(rate: float) -> list[Response]:
    """A client of a fleet sending ``rate`` a second, throttled with its fleet every 1.5 s, then served."""
    sends, throttles = fleet_sends(rate)
    sends += then_served(throttles[-1], rate)
    return [(sent + LATENCY, sent, sent in throttles, False) for sent in sends]


def test_the_names_are_the_rules_and_the_scripts_use_the_same() -> None:
    """Every name but the growth's and the other profiles' is a rule of the default profile, and the Redis
    scripts' names are among the controllers'."""
    names = set(typing.get_args(LimiterRule))
    growth = {"recovery", "probe"}
    others = {"start_from_served", "decrease", "increase", "cubic_throttle", "cubic_success"}
    assert names - growth - others <= set(RULES) | {"measure", "restart_below_capacity"}
    assert set(SCRIPT_RULES) <= names


def test_a_new_controller_names_no_rule() -> None:
    """Before any response set the rate, no rule did."""
    for control in (AsyncretryRateController(CONFIG, 0.0), FairRateController(CONFIG, 0.0)):
        assert control.rule is None
    assert AwsRateController(AdaptiveLimiterConfig(profile="aws"), 0.0).rule is None


def test_a_measured_event_follows_the_start_up_the_recovery_and_the_probe() -> None:
    """The first throttle starts the rate (start_up), the climb back is recovery, then the probe; the next
    fresh throttle a second and a half later restarts below the measured capacity."""
    later = [(1.0 + LATENCY + k / 100, 1.0 + k / 100, False, False) for k in range(1, 151)]
    responses = [*_served(), *later, (2.6, 2.55, True, False)]
    assert _rules_in_turn(AsyncretryRateController(CONFIG, 0.0), responses) == [
        "start_up", "recovery", "probe", "restart_below_capacity"
    ]


def test_a_second_fresh_throttle_right_after_a_decrease_is_a_repeat_cut_and_an_echo_changes_nothing() -> None:
    """Two fresh throttles within reaction_time of the start-up cut again (repeat_cut); a throttle sent
    before that decrease (an echo) leaves the rate and its rule as they were."""
    control = AsyncretryRateController(CONFIG, 0.0)
    assert _rules_in_turn(control, [*_served(), (1.1, 1.05, True, False), (1.12, 1.06, True, False)]) == [
        "start_up", "repeat_cut"
    ]
    rate = control.fill_rate
    control.update(1.13, True, 0.9)
    assert (control.fill_rate, control.rule) == (rate, "repeat_cut")


def test_throttles_with_nothing_served_since_the_reference_are_a_plain_decrease() -> None:
    """Without repeat_cut, a fresh throttle after the start-up with nothing served since is measured as no
    capacity at all: a plain decrease, named measure."""
    throttles = [(1.0 + LATENCY + k / 100, 1.0 + k / 100, True, False) for k in range(1, 30)]
    control = AsyncretryRateController(CONFIG, 0.0, rules=set(RULES) - {"repeat_cut"})
    assert _rules_in_turn(control, [*_served(), *throttles]) == ["start_up", "measure"]


def test_an_outage_and_its_end_are_named_outage() -> None:
    """A window of failures drops the rate (outage); the first success restores it, by the same rule."""
    failures = [(1.02 + k / 40, 1.0 + k / 40, False, True) for k in range(1, 61)]
    control = AsyncretryRateController(CONFIG, 0.0)
    assert _rules_in_turn(control, [*_served(), *failures]) == ["start_up", "outage"]
    low = control.fill_rate
    control.update(2.6, False, 2.58)
    assert control.fill_rate > 10 * low
    assert control.rule == "outage"


def test_a_fleet_client_names_its_fleet_rules() -> None:
    """A client of a fleet at 12/s is set by its events' rate (fleet_event_rate) and climbs between them
    (fleet_climb); without that rule, one at 4/s is cut by few_successes and recovers."""
    fleet = _rules_in_turn(AsyncretryRateController(CONFIG, 0.0), _fleet_client(12.0))
    assert fleet[:4] == ["start_up", "recovery", "probe", "restart_below_capacity"]
    assert fleet[-2:] == ["fleet_event_rate", "fleet_climb"]
    assert set(fleet[4:]) == {"recovery", "probe", "fleet_event_rate", "fleet_climb"}
    without = AsyncretryRateController(CONFIG, 0.0, rules=set(RULES) - {"fleet_event_rate"})
    slow = _rules_in_turn(without, _fleet_client(4.0))
    assert set(slow[3:]) == {"few_successes", "recovery", "probe"}
    assert slow.count("few_successes") == 5


def test_the_fair_and_aws_profiles_name_their_steps() -> None:
    """"fair": the start from the served rate, then the additive increase and the decrease at an event;
    "aws": CUBIC's success and throttle updates, as botocore applies them."""
    later = [(1.0 + LATENCY + k / 100, 1.0 + k / 100, False, False) for k in range(1, 151)]
    responses = [*_served(), *later, (2.6, 2.55, True, False)]
    assert _rules_in_turn(FairRateController(CONFIG, 0.0), responses) == ["start_from_served", "increase", "decrease"]
    aws = _rules_in_turn(AwsRateController(AdaptiveLimiterConfig(profile="aws"), 0.0), responses)
    assert aws[-2:] == ["cubic_success", "cubic_throttle"]
    assert set(aws) == {"cubic_success", "cubic_throttle"}


# --- through the limiter, on the event loop's (virtual) clock, on asyncio and trio


def _recorder() -> tuple[EventBus, list[LimiterRateChanged]]:
    bus, seen = EventBus(), []

    def record(event: Event) -> None:
        if isinstance(event, LimiterRateChanged):
            seen.append(event)

    bus.subscribe(record)
    return bus, seen


@pytest.mark.anyio
@pytest.mark.parametrize("profile", ["asyncretry", "independent", "fair", "aws"])
async def test_each_rate_changed_event_names_its_rule_and_the_statistics_the_last(profile: str) -> None:
    """Each LimiterRateChanged carries the rule that set its new rate, and statistics() names the last one:
    a change after a throttle by one of the throttle's rules, a change after a success by growth's."""
    bus, seen = _recorder()
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile=profile), name="api", events=bus)
    assert limiter.statistics().rule is None
    start = anyio.current_time()
    for k in range(1, 301):  # 100 a second for 3 s, throttled at 1 s and at 2.5 s
        await anyio.sleep_until(start + k / 100 + LATENCY)
        limiter.update(k in (100, 250), sent_at=start + k / 100)
    after_throttles = {event.rule for event in seen if event.throttled}
    after_successes = {event.rule for event in seen if not event.throttled}
    throttles, successes = {
        "asyncretry": ({"start_up", "restart_below_capacity"}, {"recovery", "probe"}),
        "independent": ({"start_up", "restart_below_capacity"}, {"recovery", "probe"}),
        "fair": ({"start_from_served", "decrease"}, {"increase"}),
        "aws": ({"cubic_throttle"}, {"cubic_success"}),
    }[profile]
    assert after_throttles == throttles
    assert after_successes == successes
    assert limiter.statistics().rule == seen[-1].rule


@pytest.mark.parametrize(
    ("old", "new", "rule", "cut"),
    [
        (100.0, 60.0, "restart_below_capacity", True),
        (100.0, 3.0, "outage", True),
        (100.0, 70.0, "cubic_throttle", True),
        (100.0, 90.0, "probe", False),  # capped by twice what the client sent
        (100.0, 90.0, "cubic_success", False),
        (60.0, 100.0, "start_up", False),
        (60.0, 100.0, "outage", False),  # the end of an outage
    ],
)
def test_a_cut_is_a_rate_lowered_by_a_throttles_or_an_outages_rule(
    old: float, new: float, rule: LimiterRule, cut: bool
) -> None:
    """LimiterRateChanged.cut, which the OpenTelemetry counter of cuts counts and which is logged at INFO: growth
    lowered by its cap is none (DEBUG, as all growth)."""
    event = LimiterRateChanged(
        time=0.0, source="api", old_rate=old, new_rate=new, measured_rate=50.0, throttled=cut, enabled=True, rule=rule
    )
    assert event.cut is cut
    assert event.log_level == (logging.INFO if cut else logging.DEBUG)
