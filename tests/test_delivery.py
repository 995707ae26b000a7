"""The SNS delivery policy: four phases, ordered backoff curves, SNS's limits and JSON shape (SPEC 3.1)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from asyncretry._primitives._backoff import Backoff
from asyncretry._primitives._delivery import BackoffFunction, DeliveryPolicy
from asyncretry.testing import SequenceRandom

SEED_JSON: dict[str, Any] = {
    "healthyRetryPolicy": {
        "minDelayTarget": 1,
        "maxDelayTarget": 60,
        "numRetries": 50,
        "numNoDelayRetries": 3,
        "numMinDelayRetries": 2,
        "numMaxDelayRetries": 35,
        "backoffFunction": "exponential",
    },
    "throttlePolicy": {"maxReceivesPerSecond": 10},
    "requestPolicy": {"headerContentType": "application/json"},
}
"""The HTTP/S delivery policy of the SNS documentation (seed 004)."""

FUNCTIONS: list[BackoffFunction] = ["linear", "arithmetic", "geometric", "exponential"]


def _seed_policy(**changes: Any) -> DeliveryPolicy:
    fields: dict[str, Any] = {
        "min_delay_target": 1,
        "max_delay_target": 60,
        "num_retries": 50,
        "num_no_delay_retries": 3,
        "num_min_delay_retries": 2,
        "num_max_delay_retries": 35,
        "backoff_function": "exponential",
        "max_receives_per_second": 10,
        "header_content_type": "application/json",
    }
    fields.update(changes)
    return DeliveryPolicy(**fields)


def _curve(function: BackoffFunction, low: float = 5.0, high: float = 260.0, k: int = 10) -> list[float]:
    policy = DeliveryPolicy(
        min_delay_target=low, max_delay_target=high, num_retries=k, backoff_function=function, jitter=False,
        protocol="sqs",
    )
    return policy.schedule(k)


# -- the four phases -----------------------------------------------------------------------------------------


def test_seed_policy_runs_three_immediate_two_minimum_ten_backoff_and_thirty_five_maximum_retries() -> None:
    """The documented policy: 3 retries at once, 2 at 1 s, 10 rising from 1 to 60 s, then 35 at 60 s."""
    policy = _seed_policy(jitter=False)
    delays = policy.schedule(100)
    assert len(delays) == policy.max_retries == 50
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:5] == [1.0, 1.0]
    backoff = delays[5:15]
    assert backoff[0] == 1.0
    assert backoff[-1] == 60.0
    assert backoff == sorted(backoff)
    assert delays[15:] == [60.0] * 35
    assert policy.num_backoff_retries == 10


def test_phase_names_each_retry() -> None:
    """phase(n) says which phase retry n belongs to, and 'exhausted' past num_retries."""
    policy = _seed_policy()
    phases = [policy.phase(n) for n in range(1, 52)]
    assert phases == (
        ["immediate"] * 3 + ["pre-backoff"] * 2 + ["backoff"] * 10 + ["post-backoff"] * 35 + ["exhausted"]
    )


def test_past_the_last_retry_the_delay_stays_at_the_maximum() -> None:
    """delay() past num_retries keeps max_delay_target; max_retries tells the caller to stop."""
    policy = _seed_policy(jitter=False)
    assert policy.delay(51, 0.5) == policy.delay(1000, 0.5) == 60.0
    assert policy.bounds(51) == (60.0, 60.0)


def test_defaults_are_snss_http_defaults() -> None:
    """DeliveryPolicy() is SNS's HTTP/S default: 3 retries 20 s apart, linear, no throttle, jitter on."""
    policy = DeliveryPolicy()
    assert policy.max_retries == 3
    assert policy.schedule(10) == [20.0, 20.0, 20.0]
    assert (policy.backoff_function, policy.max_receives_per_second, policy.jitter) == ("linear", None, True)
    assert isinstance(policy, Backoff)


def test_a_single_backoff_retry_waits_the_minimum() -> None:
    """A backoff phase of one retry uses min_delay_target (it is the first backoff retry)."""
    policy = DeliveryPolicy(min_delay_target=5, max_delay_target=50, num_retries=2, num_max_delay_retries=1,
                            jitter=False)
    assert policy.schedule(2) == [5.0, 50.0]
    assert policy.phase(1) == "backoff"


def test_delay_targets_accept_timedelta() -> None:
    """Delay targets may be given as timedelta and are stored as float seconds."""
    policy = DeliveryPolicy(min_delay_target=timedelta(seconds=2), max_delay_target=timedelta(minutes=1))
    assert (policy.min_delay_target, policy.max_delay_target) == (2.0, 60.0)


# -- presets -------------------------------------------------------------------------------------------------


def test_aws_managed_endpoint_policy_retries_100015_times_over_more_than_23_days() -> None:
    """SNS's policy for SQS, Lambda and Firehose: 3 at once, 2 at 1 s, 10 from 1 to 20 s, 100000 at 20 s."""
    policy = DeliveryPolicy.aws_managed_endpoints()
    assert policy.max_retries == 100_015
    assert (policy.num_no_delay_retries, policy.num_min_delay_retries, policy.num_backoff_retries,
            policy.num_max_delay_retries) == (3, 2, 10, 100_000)
    assert (policy.min_delay_target, policy.max_delay_target) == (1.0, 20.0)
    assert policy.backoff_function == "exponential"
    assert policy.total_delay() > 23 * 86_400
    assert policy.phase(100_015) == "post-backoff"
    assert policy.phase(100_016) == "exhausted"


def test_customer_managed_endpoint_policy_retries_50_times_over_more_than_6_hours() -> None:
    """SNS's policy for SMTP, SMS and mobile push: 2 at 10 s, 10 from 10 to 600 s, 38 at 600 s."""
    policy = DeliveryPolicy.customer_managed_endpoints()
    delays = DeliveryPolicy.customer_managed_endpoints().schedule(100)
    assert len(delays) == policy.max_retries == 50
    assert delays[:2] == [10.0, 10.0]
    assert delays[2] == 10.0
    assert delays[11:] == [600.0] * 39
    assert policy.total_delay() > 6 * 3600


@pytest.mark.parametrize(
    "preset", [DeliveryPolicy.aws_managed_endpoints, DeliveryPolicy.customer_managed_endpoints]
)
def test_snss_own_policies_exceed_the_http_limits(preset: Any) -> None:
    """SNS's own policies cannot be used as HTTP/S policies: they break the retry-count or time limit."""
    with pytest.raises(ValueError, match=r"num_retries must be an integer >= 0 and <= 100|3600 s"):
        preset(protocol="https")


# -- the backoff curves --------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_curve_starts_at_min_ends_at_max_and_never_falls(function: BackoffFunction) -> None:
    """On the SNS chart's example (10 retries, 5 to 260 s) each curve starts at 5 s, ends at 260 s, rises."""
    delays = _curve(function)
    assert delays[0] == 5.0
    assert delays[-1] == 260.0
    assert all(a < b for a, b in itertools.pairwise(delays))


def test_on_the_sns_chart_example_exponential_is_highest_linear_lowest() -> None:
    """At every interior retry: linear < arithmetic, geometric < exponential (exponential nears the max
    fastest, as the SNS chart describes)."""
    linear, arithmetic, geometric, exponential = (_curve(f) for f in FUNCTIONS)
    for i in range(1, 9):
        assert linear[i] < arithmetic[i] < exponential[i]
        assert linear[i] < geometric[i] < exponential[i]


def test_linear_steps_are_equal() -> None:
    """Linear backoff moves from 5 to 260 s in 9 equal steps of 28.33 s."""
    assert _curve("linear") == pytest.approx([5 + 255 * i / 9 for i in range(10)])


def test_curve_formulas_at_the_middle_of_a_three_retry_phase() -> None:
    """Pinning our closed forms: halfway through, the gap left to the max is 1/2 (linear), 1/4 (arithmetic),
    1/5 (geometric: (R**0.5 - R) / (1 - R) with R = 1/16) and 1/16 (exponential: (1/2)**2 * R**0.5)."""
    middles = [_curve(f, low=10.0, high=90.0, k=3)[1] for f in FUNCTIONS]
    assert middles == pytest.approx([50.0, 70.0, 74.0, 85.0])


def test_arithmetic_steps_shrink_by_a_constant_amount_and_geometric_by_a_constant_ratio() -> None:
    """The names hold: arithmetic steps form an arithmetic progression, geometric steps a geometric one."""
    arithmetic, geometric = _curve("arithmetic"), _curve("geometric")
    a_steps = [b - a for a, b in itertools.pairwise(arithmetic)]
    g_steps = [b - a for a, b in itertools.pairwise(geometric)]
    a_diffs = [b - a for a, b in itertools.pairwise(a_steps)]
    g_ratios = [b / a for a, b in itertools.pairwise(g_steps)]
    assert a_diffs == pytest.approx([a_diffs[0]] * len(a_diffs))
    assert a_diffs[0] < 0
    assert g_ratios == pytest.approx([(1 / 16) ** (1 / 9)] * len(g_ratios))


@given(
    low=st.floats(1.0, 3600.0),
    span=st.floats(0.0, 1.0),
    k=st.integers(2, 300),
)
def test_curves_are_ordered_monotone_and_hit_both_targets(low: float, span: float, k: int) -> None:
    """For any targets and phase length: each curve runs from min to max without falling, and at every
    retry linear <= arithmetic, geometric <= exponential."""
    high = low + span * (3600.0 - low)
    curves = {f: _curve(f, low=low, high=high, k=k) for f in FUNCTIONS}
    tolerance = 1e-9 * high
    for delays in curves.values():
        assert delays[0] == low
        assert delays[-1] == high
        assert all(b >= a for a, b in itertools.pairwise(delays))
        assert all(low <= d <= high for d in delays)
    for i in range(k):
        assert curves["linear"][i] <= curves["arithmetic"][i] + tolerance
        assert curves["linear"][i] <= curves["geometric"][i] + tolerance
        assert curves["arithmetic"][i] <= curves["exponential"][i] + tolerance
        assert curves["geometric"][i] <= curves["exponential"][i] + tolerance


# -- jitter --------------------------------------------------------------------------------------------------


def test_jitter_lowers_a_delay_by_at_most_ten_percent() -> None:
    """With jitter, delay = nominal * (1 - 0.1 * u): u = 0 keeps the nominal delay, u -> 1 takes 10% off."""
    policy = _seed_policy()
    assert policy.delay(4, 0.0) == 1.0
    assert policy.delay(4, 0.5) == pytest.approx(0.95)
    assert policy.delay(20, 1.0) == pytest.approx(54.0)
    assert policy.bounds(20) == pytest.approx((54.0, 60.0))
    assert policy.delay(1, 0.7) == 0.0


def test_without_jitter_u_is_ignored() -> None:
    """jitter=False gives the nominal delay for every u."""
    policy = _seed_policy(jitter=False)
    assert {policy.delay(20, u) for u in (0.0, 0.3, 0.99)} == {60.0}
    assert policy.bounds(4) == (1.0, 1.0)


def test_schedule_with_rng_draws_jittered_delays() -> None:
    """schedule(n, rng) applies one u per retry; without rng it lists the nominal delays."""
    policy = DeliveryPolicy()
    assert policy.schedule(3, SequenceRandom([0.0, 0.5, 0.99])) == pytest.approx([20.0, 19.0, 18.02])
    assert policy.schedule(3) == [20.0, 20.0, 20.0]


@st.composite
def _policies(draw: st.DrawFn) -> DeliveryPolicy:
    low = draw(st.floats(1.0, 3600.0))
    high = draw(st.floats(low, 3600.0))
    counts = draw(st.lists(st.integers(0, 30), min_size=4, max_size=4))
    return DeliveryPolicy(
        min_delay_target=low,
        max_delay_target=high,
        num_retries=sum(counts),
        num_no_delay_retries=counts[0],
        num_min_delay_retries=counts[1],
        num_max_delay_retries=counts[3],
        backoff_function=draw(st.sampled_from(FUNCTIONS)),
        jitter=draw(st.booleans()),
        protocol="sqs",
    )


@given(policy=_policies(), attempt=st.integers(1, 200), u=st.floats(0.0, 1.0))
def test_every_delay_is_within_its_bounds(policy: DeliveryPolicy, attempt: int, u: float) -> None:
    """Any delay lies within bounds(n), within [0, max_delay_target], and within [0.9, 1] x its phase's
    nominal delay; the immediate phase never waits."""
    delay = policy.delay(attempt, u)
    low, high = policy.bounds(attempt)
    assert isinstance(policy.max_delay_target, float)
    assert 0.0 <= low <= delay <= high <= policy.max_delay_target
    nominal = policy.nominal_delay(attempt)
    assert high == nominal
    assert delay >= 0.9 * nominal - 1e-9
    if policy.phase(attempt) == "immediate":
        assert delay == 0.0


@given(policy=_policies())
def test_the_total_delay_is_the_sum_of_the_nominal_schedule(policy: DeliveryPolicy) -> None:
    """total_delay() adds up every nominal delay, so it bounds any jittered schedule from above."""
    assert policy.total_delay() == pytest.approx(sum(policy.schedule(policy.max_retries)))
    assert sum(policy.schedule(policy.max_retries, SequenceRandom([0.3, 0.9]))) <= policy.total_delay() + 1e-6


# -- limits --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_delay_target": 0}, r"min_delay_target must be >= 1 and <= 3600, got 0"),
        ({"min_delay_target": 4000, "max_delay_target": 4000}, r"min_delay_target must be >= 1 and <= 3600"),
        ({"max_delay_target": 3601}, r"max_delay_target must be >= 1 and <= 3600, got 3601"),
        ({"min_delay_target": 30, "max_delay_target": 20},
         r"max_delay_target must be >= min_delay_target \(30 s\) and <= 3600, got 20"),
        ({"num_retries": 101}, r"num_retries must be an integer >= 0 and <= 100, got 101"),
        ({"num_retries": -1}, r"num_retries must be an integer >= 0"),
        ({"num_no_delay_retries": -1}, r"num_no_delay_retries must be an integer >= 0, got -1"),
        ({"num_min_delay_retries": 2, "num_max_delay_retries": 2},
         r"num_no_delay_retries \+ num_min_delay_retries \+ num_max_delay_retries \(4\) must be <= "
         r"num_retries \(3\)"),
        ({"backoff_function": "cubic"}, r"backoff_function must be one of 'arithmetic', .*got 'cubic'"),
        ({"max_receives_per_second": 0}, r"max_receives_per_second must be an integer >= 1, got 0"),
        ({"protocol": "ftp"}, r"protocol must be one of 'http', .*got 'ftp'"),
    ],
)
def test_out_of_range_settings_are_refused(changes: dict[str, Any], message: str) -> None:
    """Each of SNS's documented limits is checked, and the message names the parameter and the range."""
    with pytest.raises(ValueError, match=message):
        DeliveryPolicy(**changes)


def test_an_http_policy_longer_than_an_hour_is_refused_with_its_total() -> None:
    """The total time of all HTTP/S retries must stay within 3600 s; the error gives the computed total."""
    with pytest.raises(ValueError, match=r"total time of all retries is 9300 s, above SNS's limit of 3600 s"):
        DeliveryPolicy(min_delay_target=60, max_delay_target=600, num_retries=20, num_max_delay_retries=10)
    with pytest.raises(ValueError, match=r"num_max_delay_retries=6 x max_delay_target=600 s"):
        DeliveryPolicy(min_delay_target=600, max_delay_target=600, num_retries=7, num_max_delay_retries=6,
                       protocol="https")


def test_an_http_policy_of_exactly_an_hour_is_accepted() -> None:
    """3600 s of retries is within the limit; other protocols are not limited at all."""
    assert DeliveryPolicy(min_delay_target=600, max_delay_target=600, num_retries=6).total_delay() == 3600.0
    sqs = DeliveryPolicy(min_delay_target=600, max_delay_target=600, num_retries=500, protocol="sqs")
    assert sqs.max_retries == 500


def test_wrong_types_are_refused() -> None:
    """jitter must be a bool and counts must be integers."""
    with pytest.raises(TypeError, match="jitter must be a bool"):
        DeliveryPolicy(jitter="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_retries must be an integer"):
        DeliveryPolicy(num_retries=3.0)  # type: ignore[arg-type]


def test_bad_call_arguments_are_refused() -> None:
    """attempt must be >= 1 and u within [0, 1]."""
    policy = DeliveryPolicy()
    with pytest.raises(ValueError, match=r"attempt must be an integer >= 1, got 0"):
        policy.delay(0, 0.5)
    with pytest.raises(ValueError, match=r"attempt must be an integer >= 1, got 0"):
        policy.phase(0)
    with pytest.raises(ValueError, match=r"u must be >= 0 and <= 1, got 2"):
        policy.delay(1, 2)


# -- the JSON form -------------------------------------------------------------------------------------------


def test_from_json_reads_the_documented_subscription_policy() -> None:
    """The SNS documentation's JSON (as a mapping or as text) gives the same policy as the constructor."""
    assert DeliveryPolicy.from_json(SEED_JSON) == _seed_policy()
    assert DeliveryPolicy.from_json(json.dumps(SEED_JSON)) == _seed_policy()


def test_from_json_reads_the_topic_form() -> None:
    """The topic-level form nests the same sections under http / default*."""
    topic = {
        "http": {
            "defaultHealthyRetryPolicy": SEED_JSON["healthyRetryPolicy"],
            "defaultThrottlePolicy": SEED_JSON["throttlePolicy"],
            "defaultRequestPolicy": SEED_JSON["requestPolicy"],
            "disableSubscriptionOverrides": False,
        }
    }
    assert DeliveryPolicy.from_json(topic) == _seed_policy()


def test_from_json_fills_missing_keys_with_snss_defaults() -> None:
    """Absent sections and keys take SNS's defaults; backoffFunction is read case-insensitively."""
    assert DeliveryPolicy.from_json({}) == DeliveryPolicy()
    retry = {"numRetries": 5, "backoffFunction": "GEOMETRIC"}
    policy = DeliveryPolicy.from_json({"healthyRetryPolicy": retry})
    assert (policy.num_retries, policy.backoff_function, policy.min_delay_target) == (5, "geometric", 20.0)


def test_from_json_refuses_unknown_keys_and_bad_shapes() -> None:
    """A misspelt key, a section that is not an object, or text that is not JSON is an error."""
    with pytest.raises(ValueError, match=r"unknown key\(s\) in healthyRetryPolicy: numRetry;"):
        DeliveryPolicy.from_json({"healthyRetryPolicy": {"numRetry": 3}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) in the delivery policy: retryPolicy"):
        DeliveryPolicy.from_json({"retryPolicy": {}})
    with pytest.raises(TypeError, match=r"throttlePolicy must be a JSON object"):
        DeliveryPolicy.from_json({"throttlePolicy": 10})
    with pytest.raises(ValueError, match=r"not valid JSON"):
        DeliveryPolicy.from_json("{healthyRetryPolicy")
    with pytest.raises(ValueError, match=r"num_retries must be an integer >= 0 and <= 100, got 500"):
        DeliveryPolicy.from_json({"healthyRetryPolicy": {"numRetries": 500}})


def test_from_json_applies_the_http_limits_only_to_http() -> None:
    """With a non-HTTP protocol, from_json accepts SNS's own long policies."""
    managed = DeliveryPolicy.aws_managed_endpoints()
    assert DeliveryPolicy.from_json(managed.to_json(), protocol="sqs") == managed


def test_to_json_writes_the_subscription_form() -> None:
    """to_json() writes SNS's camelCase keys, whole seconds as integers, and only the sections in use."""
    assert _seed_policy().to_json() == SEED_JSON
    assert DeliveryPolicy().to_json() == {
        "healthyRetryPolicy": {
            "minDelayTarget": 20, "maxDelayTarget": 20, "numRetries": 3, "numNoDelayRetries": 0,
            "numMinDelayRetries": 0, "numMaxDelayRetries": 0, "backoffFunction": "linear",
        }
    }


@given(policy=_policies(), rate=st.one_of(st.none(), st.integers(1, 1000)))
def test_to_json_and_from_json_round_trip(policy: DeliveryPolicy, rate: int | None) -> None:
    """from_json(to_json(p)) == p for any policy (jitter and protocol are not part of the JSON)."""
    assume(policy.jitter)
    policy = dataclasses.replace(policy, max_receives_per_second=rate)
    assert DeliveryPolicy.from_json(json.loads(json.dumps(policy.to_json())), protocol="sqs") == policy
