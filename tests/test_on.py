"""on= says what to retry on RetryPolicy, Retrier and retry() alike; names from other libraries get a hint."""

from __future__ import annotations

import re
from typing import Any

import pytest

from asyncretry import Classifier, NoBackoff, OutcomeKind, Retrier, RetryPolicy, retry


class Flaky:
    """Raises ``error`` the first ``failures`` times, then returns "ok"."""

    def __init__(self, error: Exception, failures: int = 1) -> None:
        self.error = error
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


@pytest.mark.parametrize("on", [ValueError, (KeyError, ValueError), lambda error: isinstance(error, ValueError)])
def test_on_works_on_the_policy_the_retrier_and_the_decorator(on: Any) -> None:
    """The same on= retries a ValueError (which the default classifier does not) in each of the three places."""
    policy = RetryPolicy(on=on, backoff=NoBackoff())
    assert Retrier(policy).sync_call(flaky := Flaky(ValueError("bad"))) == "ok"
    assert flaky.calls == 2
    assert Retrier(RetryPolicy(backoff=NoBackoff()), on=on).sync_call(flaky := Flaky(ValueError("bad"))) == "ok"
    assert flaky.calls == 2
    decorated = retry(on=on, backoff=NoBackoff())(flaky := Flaky(ValueError("bad")))
    assert decorated() == "ok"
    assert flaky.calls == 2


def test_on_retries_only_what_it_names() -> None:
    """An error on= does not name is not retried, whatever the default classifier would say."""
    with pytest.raises(ConnectionResetError):
        Retrier(on=ValueError).sync_call(flaky := Flaky(ConnectionResetError()))
    assert flaky.calls == 1


def test_the_default_classifier_does_not_retry_value_error() -> None:
    """Without on=, a ValueError is final (a bug, not a transient failure): one attempt."""
    with pytest.raises(ValueError, match="bad"):
        Retrier(RetryPolicy(backoff=NoBackoff())).sync_call(flaky := Flaky(ValueError("bad")))
    assert flaky.calls == 1


def test_a_retry_decorator_with_a_policy_takes_on_too() -> None:
    """retry(policy, on=...) applies on= to a policy that does not say what to retry."""
    decorated = retry(RetryPolicy(backoff=NoBackoff()), on=KeyError)(flaky := Flaky(KeyError("k")))
    assert decorated() == "ok"
    assert flaky.calls == 2


def test_on_and_a_classifier_together_are_refused() -> None:
    """on= and a classifier both say what to retry: a TypeError, on the policy and on the retrier."""
    with pytest.raises(TypeError, match="on= and classifier= both say what to retry"):
        RetryPolicy(on=KeyError, classifier=Classifier())
    with pytest.raises(TypeError, match="on= and the policy's classifier both say what to retry"):
        Retrier(RetryPolicy(classifier=Classifier(never=(KeyError,))), on=KeyError)
    with pytest.raises(TypeError, match="on must be an exception class"):
        RetryPolicy(on=42)  # type: ignore[arg-type]


def test_replace_with_on_says_anew_what_to_retry() -> None:
    """policy.replace(on=...) replaces what the policy retries; other fields stay."""
    policy = RetryPolicy(on=KeyError, max_attempts=5)
    changed = policy.replace(on=ValueError)
    assert changed.max_attempts == 5
    assert changed.classifier.classify_error(ValueError()).kind is OutcomeKind.TRANSIENT
    assert changed.classifier.classify_error(KeyError()).kind is OutcomeKind.NOT_RETRYABLE


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("attempts", "max_attempts="),  # stamina
        ("max_tries", "max_attempts="),  # backoff
        ("timeout", "deadline="),  # stamina
        ("wait_initial", "backoff=ExponentialBackoff(initial=...)"),  # stamina
        ("reraise", "the last error is always raised"),  # tenacity
        ("max_attemps", "max_attempts="),  # a typo
    ],
)
def test_names_from_other_libraries_get_a_hint(name: str, meant: str) -> None:
    """An argument RetryPolicy does not take is a TypeError naming the one meant, through retry() too."""
    arguments: dict[str, Any] = {name: 3}
    expected = re.escape(f"no argument '{name}' (did you mean ") + ".*" + re.escape(meant)
    with pytest.raises(TypeError, match=expected):
        RetryPolicy(**arguments)
    with pytest.raises(TypeError, match=expected):
        retry(on=ValueError, **arguments)


def test_replace_and_presets_give_the_hint_too() -> None:
    """replace() and the presets build the policy the same way, so the hint reaches them."""
    with pytest.raises(TypeError, match="did you mean max_attempts="):
        RetryPolicy().replace(attempts=3)
    with pytest.raises(TypeError, match="did you mean max_attempts="):
        RetryPolicy.aws_standard(attempts=3)
