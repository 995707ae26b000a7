"""The adaptive limiter's rules in Python and in Lua agree: one table of cases drives both.

The Redis limiter scripts take their clock as the first argument, so the same event sequences, at the
same times, go through the in-process controllers and through the scripts on a real server:

* the ``"aws"`` profile: :class:`AwsRateController` and the ``LIMITER`` script, every event;
* the ``"asyncretry"`` profile: the formulas both sides call by the same name (``_adaptive_rules`` and
  the script's ``DEFAULT_RULES``), case by case, and :class:`AsyncretryRateController` with the rules the
  fleet-wide script shares (``start_up``, ``one_decrease_per_event``, ``repeat_cut``, the recovery and the
  probe) against ``LIMITER_ASYNCRETRY`` over sequences that stay within them. The capacity measurement
  differs by design (one client's send times against a fleet's counts), and the per-client rules
  (``outage``, ``few_successes``, ``fleet_event_rate``, ``fleet_climb``, ``rtt_probe``) have no fleet-wide
  counterpart.

The last tests change one rule on one side and check that the comparison then fails.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from asyncretry import AdaptiveLimiterConfig
from asyncretry._primitives import _adaptive, _adaptive_rules
from asyncretry._primitives._adaptive import AsyncretryRateController
from asyncretry._primitives._cubic import AwsRateController
from asyncretry._primitives._limiter_config import as_seconds
from asyncretry.redis._limiter_scripts import DEFAULT_RULES, LIMITER, LIMITER_ASYNCRETRY, script_rule
from asyncretry.redis._values import fmt
from conftest_redis import RedisServer

pytestmark = [pytest.mark.redis]

T0 = 1000.0
LATENCY = 0.02
SHARED_RULES = ("start_up", "one_decrease_per_event", "repeat_cut")

# --- the formulas, case by case

RULE_CASES: dict[str, list[dict[str, float]]] = {
    "start_rate": [
        {"served": 40.0, "answered": 90.0, "min_repeat_decrease": 0.25},
        {"served": 0.0, "answered": 90.0, "min_repeat_decrease": 0.25},
        {"served": 0.0, "answered": 0.0, "min_repeat_decrease": 0.5},
    ],
    "repeat_cut": [
        {"successes": 0, "throttles": 2, "repeat_decrease": 0.7, "min_repeat_decrease": 0.25},
        {"successes": 5, "throttles": 5, "repeat_decrease": 0.7, "min_repeat_decrease": 0.25},
        {"successes": 30, "throttles": 2, "repeat_decrease": 0.7, "min_repeat_decrease": 0.25},
        {"successes": 0, "throttles": 0, "repeat_decrease": 0.6, "min_repeat_decrease": 0.3},
    ],
    "hold_after": [
        {"previous": 0.0, "capacity": 90.0, "counted": 50, "held": 3.0},
        {"previous": 100.0, "capacity": 101.0, "counted": 500, "held": 3.0},
        {"previous": 100.0, "capacity": 104.0, "counted": 500, "held": 30.0},
        {"previous": 100.0, "capacity": 150.0, "counted": 500, "held": 30.0},
        {"previous": 10.0, "capacity": 12.0, "counted": 8, "held": 5.0},
    ],
    "grown_rate": [
        {"capacity": 100.0, "fraction": 0.95, "elapsed": 0.0, "hold": 2.5, "step": 0.0, "sending": 95.0},
        {"capacity": 100.0, "fraction": 0.7, "elapsed": 1.3, "hold": 2.5, "step": 0.0, "sending": 95.0},
        {"capacity": 100.0, "fraction": 0.7, "elapsed": 2.7, "hold": 2.5, "step": 0.0, "sending": 95.0},
        {"capacity": 100.0, "fraction": 0.7, "elapsed": 3.1, "hold": 2.5, "step": 0.0, "sending": 95.0},
        {"capacity": 100.0, "fraction": 0.7, "elapsed": 9.0, "hold": 0.5, "step": 0.0, "sending": 60.0},
        {"capacity": 3.0, "fraction": 0.7, "elapsed": 0.4, "hold": 2.5, "step": 0.4, "sending": 2.0},
        {"capacity": 3.0, "fraction": 1.0, "elapsed": 1e4, "hold": 2.5, "step": 0.0, "sending": 2.0},
    ],
}
# The Lua functions take positional arguments, in the Python signature's order; config values by default.
_CONFIG = AdaptiveLimiterConfig()
_DEFAULTS = {
    "stable_change": _CONFIG.stable_change,
    "quick": as_seconds(_CONFIG.quick_recovery_time),
    "slow": as_seconds(_CONFIG.recovery_time),
    "settle": as_seconds(_CONFIG.settle_time),
    "doubling": as_seconds(_CONFIG.probe_doubling_time),
    "max_rate_growth": _CONFIG.max_rate_growth,
}
_ORDER = {
    "start_rate": ("served", "answered", "min_repeat_decrease"),
    "repeat_cut": ("successes", "throttles", "repeat_decrease", "min_repeat_decrease"),
    "hold_after": ("previous", "capacity", "counted", "held", "stable_change", "quick", "slow", "settle"),
    "grown_rate": ("capacity", "fraction", "elapsed", "hold", "doubling", "step", "sending", "max_rate_growth"),
}


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A synchronous client of the session's Redis server."""
    made = redis.Redis.from_url(redis_server.url)
    yield made
    made.close()


def _python_rule(name: str, case: dict[str, float]) -> list[float]:
    arguments = {**_DEFAULTS, **case}
    function: Callable[..., Any] = getattr(_adaptive_rules, name)
    first, *rest = _ORDER[name]
    result = function(arguments[first], **{key: arguments[key] for key in rest})
    return [float(x) for x in (result if isinstance(result, tuple) else (result,))]


def _lua_rule(client: redis.Redis, rules: str, name: str, case: dict[str, float]) -> list[float]:
    arguments = {**_DEFAULTS, **case}
    names = _ORDER[name]
    call = (
        "local function f(x) return string.format('%.17g', x) end\n" + rules
        + f"\nlocal out = {{{name}({', '.join(f'tonumber(ARGV[{i + 1}])' for i in range(len(names)))})}}\n"
        + "for i, x in ipairs(out) do out[i] = f(x) end\nreturn out"
    )
    reply = client.eval(call, 0, *(repr(float(arguments[key])) for key in names))
    return [float(x) for x in reply]


def _rule_mismatches(client: redis.Redis, rules: str = DEFAULT_RULES) -> list[str]:
    found = []
    for name, cases in RULE_CASES.items():
        for case in cases:
            python, lua = _python_rule(name, case), _lua_rule(client, rules, name, case)
            if python != pytest.approx(lua, rel=1e-12, abs=1e-12):
                found.append(f"{name}({case}): Python {python}, Lua {lua}")
    return found


# --- event sequences


@dataclass(frozen=True)
class Event:
    """One response: when it came back, when its request went out, and whether it was throttled."""

    at: float
    sent: float
    throttled: bool = False


def _run(at: float, rate: float, seconds: float, *, throttle_every: int = 0) -> list[Event]:
    """Responses at ``rate`` per second from ``at`` on, every ``throttle_every``-th one throttled."""
    count = round(rate * seconds)
    return [
        Event(T0 + at + i / rate, T0 + at + i / rate - LATENCY, throttle_every > 0 and i % throttle_every == 0)
        for i in range(1, count + 1)
    ]


def _one(at: float, sent: float) -> list[Event]:
    return [Event(T0 + at, T0 + sent, True)]


# Each sequence stays within the rules the fleet-wide script shares with the in-process controller.
SEQUENCES: dict[str, list[Event]] = {
    "start-up, echoes, recovery and probe": [
        *_run(0.0, 100.0, 1.0), *_one(1.0, 0.98), *_one(1.004, 0.985), *_one(1.008, 0.99), *_run(1.02, 80.0, 3.0),
    ],
    "throttled before any success": [*_one(0.02, 0.0), *_one(0.021, 0.001), *_run(0.05, 20.0, 2.0)],
    "a second fresh throttle cuts again": [
        *_run(0.0, 100.0, 1.0), *_one(1.0, 0.98), *_run(1.01, 50.0, 0.08), *_one(1.1, 1.08), *_one(1.12, 1.1),
        *_run(1.14, 60.0, 2.0), *_one(2.0, 1.05),
    ],
    "slow traffic": [*_run(0.0, 4.0, 2.0), *_one(2.1, 2.08), *_run(2.2, 2.0, 4.0)],
    "a start within the first window": [
        *_run(0.0, 150.0, 0.3), *_one(0.3, 0.29), *_one(0.302, 0.292), *_run(0.31, 90.0, 2.0),
    ],
}


def _aws_events() -> list[Event]:
    """A mixed sequence for the "aws" profile: every response counts, throttles at several rates."""
    return [*_run(0.0, 20.0, 1.0), *_run(1.0, 50.0, 2.0, throttle_every=17), *_run(3.0, 8.0, 3.0, throttle_every=5)]


def _eval(client: redis.Redis, source: str, key: str, now: float, args: Sequence[str | int]) -> list[float]:
    reply = client.eval(source, 1, key, repr(now), *args)
    return [float(x) for x in reply]


def _aws_mismatches(client: redis.Redis, source: str = LIMITER.source) -> list[str]:
    config = AdaptiveLimiterConfig(profile="aws")
    python = AwsRateController(config, T0)
    head = [fmt(x) for x in (config.beta, config.scale_constant, config.smoothing,
                             as_seconds(config.measurement_bucket), config.min_fill_rate, config.min_capacity,
                             config.max_rate_growth)]
    key = f"parity:{uuid.uuid4().hex}"
    # The state starts at T0, as the controller.
    _eval(client, source, key, T0, [*head, 0, 0, 0, -1, 0, 60000, 0, 0, 0, 0, 0])
    found = []
    for event in _aws_events():
        python.update(event.at, event.throttled)
        served = 1 - int(event.throttled)
        reply = _eval(client, source, key, event.at,
                      [*head, 1, int(event.throttled), 0, -1, 0, 60000, 0, served, 0, 0, 0])
        lua = {"enabled": reply[2], "fill_rate": reply[3], "max_capacity": reply[4], "measured_rate": reply[6],
               "last_max_rate": reply[7], "last_throttle_time": reply[8]}
        for name, value in lua.items():
            if float(getattr(python, name)) != pytest.approx(value, rel=1e-9, abs=1e-9):
                found.append(f"at {event.at - T0:.3f} s: {name} Python {getattr(python, name)}, Lua {value}")
        found += _rule_mismatch(event, python.rule, reply)
    return found


def _rule_mismatch(event: Event, python: str | None, reply: list[float]) -> list[str]:
    """The rule that last set the rate, in Python and in the script's reply (an index into SCRIPT_RULES)."""
    lua = script_rule(int(reply[13]))
    return [] if python == lua else [f"at {event.at - T0:.3f} s: rule Python {python}, Lua {lua}"]


def _default_head(c: AdaptiveLimiterConfig) -> list[str]:
    """The default script's configuration arguments (1-15)."""
    return [fmt(x) for x in (
        c.utilization, c.repeat_decrease, c.min_repeat_decrease, as_seconds(c.reaction_time),
        as_seconds(c.measurement_window), as_seconds(c.recovery_time), as_seconds(c.quick_recovery_time),
        c.stable_change, as_seconds(c.settle_time), as_seconds(c.probe_doubling_time), as_seconds(c.burst),
        c.growth_margin, c.max_rate_growth, c.min_fill_rate, c.min_capacity,
    )]


def _fresh_pair(
    client: redis.Redis, source: str = LIMITER_ASYNCRETRY.source
) -> tuple[AsyncretryRateController, list[str], str]:
    """The default profile's controller and a fresh key of the script's state, both starting at T0 (an empty
    report then); with the script's configuration arguments."""
    config = AdaptiveLimiterConfig()
    head = _default_head(config)
    key = f"parity:{uuid.uuid4().hex}"
    _eval(client, source, key, T0, [*head, 0, 0, 0, -1, 0, 60000, 0, 0, 0, 0, 0])
    return AsyncretryRateController(config, T0, rules=SHARED_RULES), head, key


def _default_mismatches(client: redis.Redis, events: list[Event], source: str = LIMITER_ASYNCRETRY.source) -> list[str]:
    python, head, key = _fresh_pair(client, source)
    found = []
    for event in events:
        python.update(event.at, event.throttled, sent_at=event.sent)
        ok, sends = (0, [fmt(event.sent)]) if event.throttled else (1, [])
        # One answer per report: the oldest it reports came at its own time.
        reply = _eval(client, source, key, event.at, [*head, ok, 0, 0, -1, 0, 60000, 0, fmt(event.at), 0, 0, 0, *sends])
        lua = {"enabled": reply[2], "fill_rate": reply[3], "max_capacity": reply[4], "last_max_rate": reply[7]}
        for name, value in lua.items():
            if not math.isclose(float(getattr(python, name)), value, rel_tol=1e-9, abs_tol=1e-9):
                found.append(f"at {event.at - T0:.3f} s: {name} Python {getattr(python, name)}, Lua {value}")
        found += _rule_mismatch(event, python.rule, reply)
    return found


# --- the tests


def test_the_default_profiles_formulas_agree_case_by_case(client: redis.Redis) -> None:
    """Every case of every shared formula gives the same result in Python and in the script's Lua."""
    assert _rule_mismatches(client) == []


def test_the_aws_profile_agrees_event_by_event(client: redis.Redis) -> None:
    """AwsRateController and the "aws" script reach the same state after every response of a sequence."""
    assert _aws_mismatches(client) == []


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_the_default_profile_agrees_event_by_event_on_the_shared_rules(client: redis.Redis, name: str) -> None:
    """The default controller with the fleet-wide script's rules and the script reach the same rate, capacity
    and estimate after every response."""
    assert _default_mismatches(client, SEQUENCES[name]) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("math.min(repeat_decrease, math.max(served, min_repeat_decrease))", "math.min(repeat_decrease, served)"),
        ("capacity * 2 ^ doublings + step", "capacity * 1.9 ^ doublings + step"),
        ("2 / math.max(counted, 1)", "1 / math.max(counted, 1)"),
        ("return min_repeat_decrease * answered", "return 0.5 * answered"),
    ],
)
def test_a_formula_changed_in_lua_alone_fails_the_comparison(client: redis.Redis, old: str, new: str) -> None:
    """Changing one formula in the script's Lua, and not in Python, makes the case table disagree."""
    assert old in DEFAULT_RULES
    assert _rule_mismatches(client, DEFAULT_RULES.replace(old, new)) != []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("v.tok = math.min(v.tok, v.cap)\nend", "v.tok = math.min(v.tok, v.cap)\nend\nv.fill = v.fill * 1.001"),
        ("apply(math.min(use * beta, growth * v.mr)", "apply(math.min(use * 0.75, growth * v.mr)"),
        ("growth * v.mr), 'cubic_success')", "growth * v.mr), 'cubic_throttle')"),
    ],
)
def test_a_rule_changed_in_the_aws_script_alone_fails_the_comparison(client: redis.Redis, old: str, new: str) -> None:
    """Changing the "aws" script's update, and not the controller's, makes the event table disagree."""
    assert old in LIMITER.source
    assert _aws_mismatches(client, LIMITER.source.replace(old, new)) != []


@pytest.mark.parametrize(
    ("old", "new", "sequence"),
    [
        ("if v.en == 0 then dec = now end", "dec = now", "start-up, echoes, recovery and probe"),
        ("if v.ft >= 2 then", "if v.ft >= 3 then", "a second fresh throttle cuts again"),
        ("  restart(base, repeat_dec, quick,", "  restart(base, util, quick,", "slow traffic"),
        ("if now - v.dec < v.rec then rule = 'recovery' end", "", "start-up, echoes, recovery and probe"),
        ("quick, 'repeat_cut')", "quick, 'measure')", "a second fresh throttle cuts again"),
        ("v.srv / so_far,", "v.srv / math.max(so_far - width, width),", "a start within the first window"),
        ("if so_far <= window then", "if so_far - width <= window then", "start-up, echoes, recovery and probe"),
    ],
)
def test_a_rule_changed_in_the_default_script_alone_fails_the_comparison(
    client: redis.Redis, old: str, new: str, sequence: str
) -> None:
    """Changing one of the default script's rules, and not the controller's, makes the event table disagree."""
    assert old in LIMITER_ASYNCRETRY.source
    assert _default_mismatches(client, SEQUENCES[sequence], LIMITER_ASYNCRETRY.source.replace(old, new)) != []


def test_a_fleet_that_reports_its_answers_in_batches_starts_where_one_client_seeing_them_does(
    client: redis.Redis,
) -> None:
    """The script is told, with each report, when its oldest answer came: answers gathered over 0.3 s and
    reported eight at a time start the fleet at the rate the controller starts at, seeing each as it came."""
    python, head, key = _fresh_pair(client)
    successes = _run(0.0, 150.0, 0.3)
    for event in successes:
        python.update(event.at, False, sent_at=event.sent)
    throttle = _one(0.3, 0.29)[0]
    python.update(throttle.at, True, sent_at=throttle.sent)
    assert python.rule == "start_up"
    for first in range(0, len(successes), 8):
        batch = successes[first : first + 8]
        _eval(client, LIMITER_ASYNCRETRY.source, key, batch[-1].at,
              [*head, len(batch), 0, 0, -1, 0, 60000, 0, fmt(batch[0].at), 0, 0, 0])
    reply = _eval(client, LIMITER_ASYNCRETRY.source, key, throttle.at,
                  [*head, 0, 0, 0, -1, 0, 60000, 0, fmt(throttle.at), 0, 0, 0, fmt(throttle.sent)])
    assert script_rule(int(reply[13])) == "start_up"
    assert reply[3] == pytest.approx(python.fill_rate, rel=1e-9)


def test_a_formula_changed_in_python_alone_fails_the_comparison(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changing the probe's formula in Python, and not in Lua, makes both tables disagree."""
    original = _adaptive_rules.grown_rate

    def slower(capacity: float, **kwargs: float) -> float:
        return original(capacity, **{**kwargs, "doubling": kwargs["doubling"] * 1.1})

    monkeypatch.setattr(_adaptive_rules, "grown_rate", slower)
    monkeypatch.setattr(_adaptive, "grown_rate", slower)
    assert _rule_mismatches(client) != []
    assert _default_mismatches(client, SEQUENCES["start-up, echoes, recovery and probe"]) != []
