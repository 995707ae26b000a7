"""RetryPolicy is a frozen, validated description of retries: profiles, presets and replace()."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from asyncretry import (
    QLDB_RETRYABLE_CODES,
    AdaptiveLimiterConfig,
    CircuitBreakerConfig,
    Classifier,
    DeliveryPolicy,
    ExponentialBackoff,
    FixedBackoff,
    GiveUpInfo,
    LinearBackoff,
    OutcomeKind,
    RetryPolicy,
    RetryQuotaConfig,
)

# -- defaults and profiles


def test_the_default_policy_is_aws_standard_mode_2020() -> None:
    """RetryPolicy() is standard mode, 3 attempts, botocore's backoff and the 2020 quota, no limiter."""
    policy = RetryPolicy()
    assert (policy.mode, policy.profile, policy.max_attempts) == ("standard", "2020", 3)
    assert policy.backoff == ExponentialBackoff.aws_standard()
    assert policy.throttling_backoff == ExponentialBackoff.aws_standard()
    assert policy.quota_config == RetryQuotaConfig.profile("2020")
    assert policy.limiter_config is None
    assert policy.breaker is None
    assert policy.rate_limit is None
    assert policy.honour_amz_retry_after is False
    assert policy.honour_server_delay is True
    assert policy.max_server_delay == 60.0
    assert (policy.deadline, policy.attempt_timeout) == (None, None)


def test_profile_2020_costs_5_per_retry_and_10_per_timeout() -> None:
    """The 2020 profile: retry 5, timeout 10, throttling 5, success +1, 500 tokens."""
    quota = RetryPolicy(profile="2020").quota_config
    assert quota is not None
    assert (quota.retry_cost, quota.timeout_retry_cost, quota.throttling_retry_cost) == (5, 10, 5)
    assert (quota.initial_try_success_increment, quota.max_capacity) == (1, 500)


def test_profile_2026_uses_the_updated_costs_bases_and_amz_retry_after() -> None:
    """The 2026 profile: non-throttling retries 14, throttling 5, bases 0.05 s / 1 s, x-amz hint honoured."""
    policy = RetryPolicy(profile="2026")
    quota = policy.quota_config
    assert quota is not None
    assert (quota.retry_cost, quota.timeout_retry_cost, quota.throttling_retry_cost) == (14, 14, 5)
    assert quota.initial_try_success_increment == 1
    assert policy.backoff == ExponentialBackoff.aws_transient()
    assert policy.throttling_backoff == ExponentialBackoff.aws_throttling()
    assert policy.backoff is not None
    assert policy.throttling_backoff is not None
    assert policy.backoff.delay(1, 0.999) < 0.05 <= policy.throttling_backoff.delay(1, 0.999)
    assert policy.honour_amz_retry_after is True


def test_honour_amz_retry_after_can_be_set_against_the_profile() -> None:
    """An explicit honour_amz_retry_after wins over the profile's default, both ways."""
    assert RetryPolicy(profile="2020", honour_amz_retry_after=True).honour_amz_retry_after is True
    assert RetryPolicy(profile="2026", honour_amz_retry_after=False).honour_amz_retry_after is False


def test_throttling_backoff_defaults_to_backoff_in_2020() -> None:
    """With profile 2020, a custom backoff also spaces throttling retries unless told otherwise."""
    backoff = FixedBackoff(0.3)
    assert RetryPolicy(backoff=backoff).throttling_backoff is backoff
    other = LinearBackoff()
    assert RetryPolicy(backoff=backoff, throttling_backoff=other).throttling_backoff is other


def test_adaptive_mode_gets_the_default_limiter_config() -> None:
    """Adaptive mode without a limiter uses AdaptiveLimiterConfig(); an explicit one is kept."""
    assert RetryPolicy(mode="adaptive").limiter_config == AdaptiveLimiterConfig()
    custom = AdaptiveLimiterConfig(beta=0.5)
    assert RetryPolicy(mode="adaptive", limiter=custom).limiter_config is custom


def test_quota_can_be_switched_off_or_configured() -> None:
    """quota=False leaves no quota; a RetryQuotaConfig is used as given."""
    assert RetryPolicy(quota=False).quota_config is None
    config = RetryQuotaConfig(max_capacity=10)
    assert RetryPolicy(quota=config).quota_config is config
    assert RetryPolicy(mode="adaptive", quota=config).quota_config is config


def test_legacy_mode_has_no_quota_and_no_limiter() -> None:
    """mode='legacy' derives neither a quota nor a limiter, even with quota=True."""
    policy = RetryPolicy(mode="legacy")
    assert policy.quota_config is None
    assert policy.limiter_config is None


def test_durations_accept_timedelta_and_are_stored_as_seconds() -> None:
    """deadline, attempt_timeout and max_server_delay accept timedelta and become float seconds."""
    policy = RetryPolicy(
        deadline=timedelta(minutes=1), attempt_timeout=timedelta(milliseconds=250),
        max_server_delay=timedelta(seconds=30),
    )
    assert (policy.deadline, policy.attempt_timeout, policy.max_server_delay) == (60.0, 0.25, 30.0)
    durations = (policy.deadline, policy.attempt_timeout, policy.max_server_delay)
    assert all(isinstance(v, float) for v in durations)


def test_rate_limit_burst_defaults_to_at_least_one() -> None:
    """rate_limit_burst defaults to max(1, rate_limit)."""
    assert RetryPolicy(rate_limit=0.5).rate_limit_burst == 1.0
    assert RetryPolicy(rate_limit=20).rate_limit_burst == 20.0
    assert RetryPolicy(rate_limit=20, rate_limit_burst=3).rate_limit_burst == 3.0


def test_listeners_are_stored_as_a_tuple() -> None:
    """A list of listeners is frozen into a tuple so the policy stays immutable."""
    def listener(event: Any) -> None:
        pass

    policy = RetryPolicy(listeners=[listener])  # type: ignore[arg-type]
    assert policy.listeners == (listener,)


def test_a_policy_is_frozen_and_slotted() -> None:
    """Fields cannot be assigned after construction and there is no instance __dict__."""
    policy = RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 5  # type: ignore[misc]
    assert not hasattr(policy, "__dict__")


def test_the_constructor_is_keyword_only() -> None:
    """Positional arguments are refused, so a mode cannot be mistaken for a profile."""
    with pytest.raises(TypeError):
        RetryPolicy("standard")  # type: ignore[call-arg]


# -- validation: each bad value names its parameter


@pytest.mark.parametrize(
    ("fields", "error", "names"),
    [
        ({"mode": "fast"}, ValueError, "mode"),
        ({"profile": "2030"}, ValueError, "profile"),
        ({"max_attempts": 0}, ValueError, "max_attempts"),
        ({"max_attempts": -1}, ValueError, "max_attempts"),
        ({"max_attempts": 2.0}, TypeError, "max_attempts"),
        ({"max_attempts": True}, TypeError, "max_attempts"),
        ({"max_attempts": "3"}, TypeError, "max_attempts"),
        ({"backoff": 1.0}, TypeError, "backoff"),
        ({"throttling_backoff": "exp"}, TypeError, "throttling_backoff"),
        ({"quota": "yes"}, TypeError, "quota"),
        ({"quota": None}, TypeError, "quota"),
        ({"mode": "legacy", "quota": RetryQuotaConfig()}, ValueError, "quota"),
        ({"mode": "standard", "limiter": AdaptiveLimiterConfig()}, ValueError, "limiter"),
        ({"mode": "legacy", "limiter": AdaptiveLimiterConfig()}, ValueError, "limiter"),
        ({"breaker": {"failure_ratio": 0.5}}, TypeError, "breaker"),
        ({"rate_limit": 0}, ValueError, "rate_limit"),
        ({"rate_limit": -5}, ValueError, "rate_limit"),
        ({"rate_limit": float("nan")}, ValueError, "rate_limit"),
        ({"rate_limit": "10/s"}, TypeError, "rate_limit"),
        ({"rate_limit": 10, "rate_limit_burst": 0.5}, ValueError, "rate_limit_burst"),
        ({"rate_limit_burst": 5}, ValueError, "rate_limit_burst"),
        ({"classifier": lambda e: True}, TypeError, "classifier"),
        ({"deadline": 0}, ValueError, "deadline"),
        ({"deadline": -1}, ValueError, "deadline"),
        ({"deadline": float("inf")}, ValueError, "deadline"),
        ({"deadline": "10s"}, TypeError, "deadline"),
        ({"attempt_timeout": 0}, ValueError, "attempt_timeout"),
        ({"attempt_timeout": timedelta(seconds=-1)}, ValueError, "attempt_timeout"),
        ({"max_server_delay": -1}, ValueError, "max_server_delay"),
        ({"on_give_up": "dead-letter-queue"}, TypeError, "on_give_up"),
    ],
)
def test_bad_fields_are_refused_with_a_message_naming_them(
    fields: dict[str, Any], error: type[Exception], names: str
) -> None:
    """Every field is validated at construction; the error message names the offending parameter."""
    with pytest.raises(error, match=names):
        RetryPolicy(**fields)


def test_the_mode_error_lists_the_allowed_modes() -> None:
    """A bad mode's message lists standard, adaptive and legacy."""
    with pytest.raises(ValueError, match="'standard', 'adaptive', 'legacy', got 'fast'"):
        RetryPolicy(mode="fast")  # type: ignore[arg-type]


def test_max_attempts_of_one_is_allowed() -> None:
    """max_attempts=1 is valid: it disables retries."""
    assert RetryPolicy(max_attempts=1).max_attempts == 1


def test_zero_max_server_delay_is_allowed() -> None:
    """max_server_delay=0 is valid (server-directed delays are then cut to nothing)."""
    assert RetryPolicy(max_server_delay=0).max_server_delay == 0.0


# -- presets


def test_aws_standard_preset_selects_a_profile() -> None:
    """aws_standard() is standard mode with the chosen profile's costs and backoff."""
    for profile in ("2020", "2026"):
        policy = RetryPolicy.aws_standard(profile)
        assert policy == RetryPolicy(mode="standard", profile=profile)
        assert policy.quota_config == RetryQuotaConfig.profile(profile)
        assert policy.limiter_config is None
    assert RetryPolicy.aws_standard(max_attempts=7).max_attempts == 7


def test_aws_adaptive_preset_adds_the_limiter_in_both_profiles() -> None:
    """aws_adaptive() is adaptive mode with the exact AWS limiter profile and the chosen profile's quota."""
    for profile in ("2020", "2026"):
        policy = RetryPolicy.aws_adaptive(profile)
        assert policy.mode == "adaptive"
        assert policy.limiter_config == AdaptiveLimiterConfig(profile="aws")
        assert policy.quota_config == RetryQuotaConfig.profile(profile)
    assert RetryPolicy.aws_adaptive("2026").honour_amz_retry_after is True


def test_aws_legacy_preset_is_capped_exponential_backoff_without_quota() -> None:
    """aws_legacy(): legacy mode, 5 attempts, full-jitter exponential backoff, no quota, no limiter."""
    policy = RetryPolicy.aws_legacy()
    assert (policy.mode, policy.max_attempts) == ("legacy", 5)
    assert policy.quota_config is None
    assert policy.limiter_config is None
    assert isinstance(policy.backoff, ExponentialBackoff)
    assert policy.backoff.jitter == "full"
    assert policy.backoff.bounds(30) == (0.0, 20.0)
    assert RetryPolicy.aws_legacy(max_attempts=2).max_attempts == 2


def test_kotlin_preset_uses_the_smithy_kotlin_delays() -> None:
    """kotlin(): 3 attempts, delays from 10 ms x1.5 up to 20 s with full jitter, the default quota."""
    policy = RetryPolicy.kotlin()
    assert (policy.mode, policy.max_attempts) == ("standard", 3)
    assert policy.backoff == ExponentialBackoff.kotlin()
    assert policy.throttling_backoff == ExponentialBackoff.kotlin()
    assert policy.backoff is not None
    assert policy.backoff.delay(1, 0.0) == pytest.approx(0.01)
    assert policy.backoff.delay(2, 0.0) == pytest.approx(0.015)
    assert policy.backoff.bounds(100) == (0.0, 20.0)
    assert policy.quota_config == RetryQuotaConfig()


def test_qldb_preset_retries_its_five_exceptions_by_class_name() -> None:
    """qldb(): 4 retries with equal jitter from 10 ms to 5 s; exactly QLDB's five exceptions are retried."""
    policy = RetryPolicy.qldb()
    assert (policy.mode, policy.max_attempts, policy.quota_config) == ("legacy", 5, None)
    assert policy.backoff == ExponentialBackoff.qldb()
    assert policy.backoff is not None
    assert policy.backoff.bounds(1) == (0.01, 0.02)
    assert policy.backoff.bounds(10)[1] == 5.0
    names = [
        "CapacityExceededException", "InvalidSessionException", "LimitExceededException",
        "OccConflictException", "RateExceededException",
    ]
    assert frozenset(names) == QLDB_RETRYABLE_CODES
    for name in names:
        error = type(name, (Exception,), {})()
        assert policy.classifier.classify_error(error).kind is OutcomeKind.TRANSIENT, name
    for name in ("BadRequestException", "ThrottlingException"):
        error = type(name, (Exception,), {})()
        assert policy.classifier.classify_error(error).kind is OutcomeKind.NOT_RETRYABLE, name


def test_sns_preset_follows_the_delivery_policy() -> None:
    """sns(): one attempt plus num_retries, the delivery policy as backoff, its rate cap as rate_limit."""
    delivery = DeliveryPolicy(
        num_retries=6, num_no_delay_retries=1, num_min_delay_retries=1, num_max_delay_retries=1,
        min_delay_target=2, max_delay_target=30, backoff_function="exponential", max_receives_per_second=4,
        jitter=False,
    )
    policy = RetryPolicy.sns(delivery)
    assert (policy.mode, policy.max_attempts, policy.quota_config) == ("legacy", 7, None)
    assert policy.backoff is delivery
    assert policy.throttling_backoff is delivery
    assert (policy.rate_limit, policy.rate_limit_burst) == (4.0, 4.0)
    assert policy.backoff.delay(1, 0.5) == 0.0
    assert policy.backoff.delay(2, 0.5) == 2.0
    assert policy.backoff.delay(6, 0.5) == 30.0


def test_sns_preset_without_a_rate_cap_has_no_rate_limit() -> None:
    """An SNS policy without max_receives_per_second leaves rate_limit unset; fields can be overridden."""
    policy = RetryPolicy.sns(DeliveryPolicy(), max_attempts=2)
    assert policy.rate_limit is None
    assert policy.max_attempts == 2


def test_sns_preset_refuses_anything_but_a_delivery_policy() -> None:
    """sns() needs a DeliveryPolicy; a dict is refused with a TypeError naming 'delivery'."""
    with pytest.raises(TypeError, match="delivery must be a DeliveryPolicy"):
        RetryPolicy.sns({"numRetries": 3})


def test_polling_preset_follows_aws_polling_guidance() -> None:
    """polling(): 10 polls, waits of 2**retries * 100 ms (0.2, 0.4, 0.8 ...) capped at max_interval."""
    policy = RetryPolicy.polling()
    assert (policy.mode, policy.max_attempts, policy.quota_config) == ("legacy", 10, None)
    assert policy.backoff is not None
    assert policy.backoff.schedule(9) == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 20.0, 20.0])
    short = RetryPolicy.polling(max_interval=timedelta(seconds=1), max_attempts=3)
    assert short.max_attempts == 3
    assert short.backoff is not None
    assert short.backoff.schedule(4) == pytest.approx([0.2, 0.4, 0.8, 1.0])


def test_presets_validate_like_the_constructor() -> None:
    """A preset with a bad field raises the same error as the constructor."""
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy.kotlin(max_attempts=0)
    with pytest.raises(ValueError, match="max_interval"):
        RetryPolicy.polling(max_interval=0)


# -- replace()


def test_replace_returns_a_validated_copy() -> None:
    """replace() changes the given fields, keeps the rest, and validates again."""
    classifier = Classifier(transient=(KeyError,))
    policy = RetryPolicy(max_attempts=4, classifier=classifier, deadline=30)
    copy = policy.replace(max_attempts=6)
    assert copy.max_attempts == 6
    assert (copy.classifier, copy.deadline) == (classifier, 30.0)
    assert policy.max_attempts == 4
    with pytest.raises(ValueError, match="max_attempts"):
        policy.replace(max_attempts=0)


def test_replace_rederives_the_quota_and_limiter() -> None:
    """Derived settings follow the new fields: a new mode or profile brings its own quota and limiter."""
    policy = RetryPolicy().replace(mode="adaptive", profile="2026")
    assert policy.limiter_config == AdaptiveLimiterConfig()
    assert policy.quota_config == RetryQuotaConfig.profile("2026")
    assert RetryPolicy(mode="adaptive").replace(mode="standard").limiter_config is None


def test_replace_with_a_new_profile_brings_the_whole_profile() -> None:
    """Defaults derived from the profile (backoff, throttling backoff, x-amz hint) follow a profile change."""
    assert RetryPolicy().replace(profile="2026") == RetryPolicy(profile="2026")
    assert RetryPolicy(profile="2026").replace(profile="2020") == RetryPolicy(profile="2020")


def test_replace_keeps_explicit_settings_across_a_profile_change() -> None:
    """Fields the user set stay as set when the profile changes."""
    backoff = FixedBackoff(2.0)
    policy = RetryPolicy(backoff=backoff, honour_amz_retry_after=False).replace(profile="2026")
    assert policy.backoff is backoff
    assert policy.throttling_backoff == ExponentialBackoff.aws_throttling()
    assert policy.honour_amz_retry_after is False


def test_replace_of_backoff_also_changes_the_defaulted_throttling_backoff() -> None:
    """When throttling_backoff was left to default to backoff, replacing backoff replaces both."""
    policy = RetryPolicy(backoff=FixedBackoff(1.0)).replace(backoff=FixedBackoff(2.0))
    assert policy.throttling_backoff == FixedBackoff(2.0)


def test_replace_refuses_derived_fields() -> None:
    """quota_config, limiter_config and on_give_up_is_async are derived and cannot be replaced."""
    with pytest.raises(TypeError, match="quota_config cannot be set"):
        RetryPolicy().replace(quota_config=RetryQuotaConfig())
    with pytest.raises(TypeError, match="limiter_config"):
        RetryPolicy().replace(limiter_config=AdaptiveLimiterConfig())
    with pytest.raises(TypeError, match="holds_spent_quota cannot be set"):
        RetryPolicy().replace(holds_spent_quota=True)


@pytest.mark.parametrize(
    ("policy", "holds"),
    [
        (RetryPolicy(), False),
        (RetryPolicy(mode="adaptive"), True),
        (RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(profile="independent")), True),
        (RetryPolicy(mode="adaptive", limiter=AdaptiveLimiterConfig(hold_spent_quota=False)), False),
        (RetryPolicy(mode="adaptive", honour_server_delay=False), False),
        (RetryPolicy.aws_adaptive(), False),
        (RetryPolicy.aws_adaptive().replace(limiter=AdaptiveLimiterConfig(profile="aws", hold_spent_quota=True)), True),
        (RetryPolicy(mode="adaptive").replace(mode="standard"), False),
    ],
    ids=["standard", "adaptive", "independent", "hold off", "server delays ignored", "aws", "aws asked", "replaced"],
)
def test_holds_spent_quota_is_derived_from_mode_limiter_and_server_delays(policy: RetryPolicy, holds: bool) -> None:
    """Adaptive mode, a limiter config that holds, and server delays honoured: all three, and kept by replace()."""
    assert policy.holds_spent_quota is holds


def test_an_on_give_up_hook_is_accepted_sync_or_async() -> None:
    """on_give_up takes a plain function or a coroutine function."""
    seen: list[GiveUpInfo] = []

    async def dead_letter(info: GiveUpInfo) -> None:
        seen.append(info)

    assert RetryPolicy(on_give_up=seen.append).on_give_up is not None
    assert RetryPolicy(on_give_up=dead_letter).on_give_up_is_async is True


def test_a_breaker_config_is_kept() -> None:
    """breaker takes a CircuitBreakerConfig as is."""
    config = CircuitBreakerConfig(consecutive_failures=3)
    assert RetryPolicy(breaker=config).breaker is config


def test_max_attempts_may_not_exceed_what_the_backoff_allows() -> None:
    """A backoff with max_retries bounds max_attempts (QLDB's 4 retries: at most 5 attempts)."""
    assert RetryPolicy.qldb(max_attempts=5).max_attempts == 5
    with pytest.raises(ValueError, match="max_attempts=6 needs 5 retries but backoff allows only 4"):
        RetryPolicy.qldb(max_attempts=6)
    with pytest.raises(ValueError, match="throttling_backoff allows only 1"):
        RetryPolicy(max_attempts=3, throttling_backoff=FixedBackoff(1, max_retries=1))
