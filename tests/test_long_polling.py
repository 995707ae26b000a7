"""RetryPolicy.long_polling: the flag of AWS's long-polling rule, validated at construction.

What the engine does with it is pinned by the SDKs' cases in ``tests/test_conformance.py``
(``test_long_polling_cases``, data in ``tests/data/long_polling_cases.json``).
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncretry import RetryPolicy, RetryQuotaConfig


def test_long_polling_is_off_by_default() -> None:
    """A policy is not long-polling unless told so."""
    assert RetryPolicy().long_polling is False
    assert RetryPolicy.aws_standard("2026").long_polling is False


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy.aws_standard("2026", long_polling=True),
        RetryPolicy.aws_standard(long_polling=True),
        RetryPolicy.aws_adaptive("2026", long_polling=True),
        RetryPolicy(long_polling=True, quota=RetryQuotaConfig.profile("2026")),
    ],
    ids=["standard-2026", "standard-2020", "adaptive-2026", "own-quota"],
)
def test_long_polling_is_accepted_with_a_retry_quota(policy: RetryPolicy) -> None:
    """Standard and adaptive policies with a quota take the flag and keep it."""
    assert policy.long_polling is True
    assert policy.quota_config is not None


@pytest.mark.parametrize(
    "changes", [{"mode": "legacy", "quota": False}, {"quota": False}], ids=["legacy", "no-quota"]
)
def test_long_polling_without_a_quota_is_refused(changes: dict[str, Any]) -> None:
    """Without a retry quota the rule could never apply: a ValueError says so instead of ignoring the flag."""
    with pytest.raises(ValueError, match=r"long_polling=True needs a retry quota .* has none"):
        RetryPolicy(long_polling=True, **changes)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_long_polling_must_be_a_bool(value: object) -> None:
    """A non-bool long_polling is a TypeError naming the field and the value."""
    with pytest.raises(TypeError, match=f"long_polling must be a bool, got {value!r}"):
        RetryPolicy(long_polling=value)  # type: ignore[arg-type]


def test_replace_keeps_and_changes_long_polling() -> None:
    """replace() carries the flag over and validates a new value."""
    policy = RetryPolicy.aws_standard("2026", long_polling=True)
    assert policy.replace(max_attempts=5).long_polling is True
    assert policy.replace(long_polling=False).long_polling is False
    with pytest.raises(ValueError, match="long_polling=True needs a retry quota"):
        policy.replace(quota=False)
