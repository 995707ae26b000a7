"""The Classifier decides what kind of outcome an attempt had, in a fixed order of rules."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import (
    AWS_THROTTLING_CODES,
    AWS_TRANSIENT_CODES,
    AsyncRetryError,
    AttemptTimeout,
    CircuitOpenError,
    Classifier,
    ConfigurationError,
    OutcomeKind,
    RateLimitTimeout,
    RetriesExhausted,
    RetryCapacityExceeded,
    error_code_of,
)

T = OutcomeKind
DEFAULT = Classifier()


def kind_of(error: Exception, classifier: Classifier = DEFAULT) -> OutcomeKind:
    return classifier.classify_error(error).kind


def named(name: str, base: type[Exception] = Exception, **attributes: Any) -> Exception:
    """An instance of a fresh exception class called ``name`` carrying ``attributes``."""
    error: Exception = type(name, (base,), {})("boom")
    for key, value in attributes.items():
        setattr(error, key, value)
    return error


class ServiceError(Exception):
    """A service error carrying a code the way SDK errors do."""

    def __init__(self, code: str | None = None, **attributes: Any) -> None:
        super().__init__(code)
        if code is not None:
            self.code = code
        for key, value in attributes.items():
            setattr(self, key, value)


class BotoStyleError(Exception):
    """An error shaped like botocore's ClientError: the code sits in response["Error"]["Code"]."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": 400}}


# -- rule 1: never


def test_never_types_are_not_retryable_whatever_else_says_so() -> None:
    """A type in `never` is not retryable even if retry_if, metadata and its code say retry."""
    classifier = Classifier(never=(ConnectionResetError,), retry_if=lambda e: T.THROTTLING)
    error = ConnectionResetError()
    error.is_throttling = True  # type: ignore[attr-defined]
    assert kind_of(error, classifier) is T.NOT_RETRYABLE
    assert kind_of(ConnectionRefusedError(), classifier) is T.THROTTLING


def test_never_matches_subclasses() -> None:
    """`never` uses isinstance: subclasses of a listed type are covered too."""
    classifier = Classifier(never=(OSError,))
    assert kind_of(TimeoutError(), classifier) is T.NOT_RETRYABLE


# -- rule 2: retry_if, then asyncretry's own errors


@pytest.mark.parametrize(
    ("verdict", "error", "expected"),
    [
        (T.THROTTLING, ValueError(), T.THROTTLING),
        (T.TIMEOUT, ValueError(), T.TIMEOUT),
        (T.CONNECTION, ValueError(), T.CONNECTION),
        (T.NOT_RETRYABLE, ConnectionResetError(), T.NOT_RETRYABLE),
        (True, ValueError(), T.TRANSIENT),
        (True, TimeoutError(), T.TIMEOUT),
        (True, ConnectionResetError(), T.CONNECTION),
        (False, ConnectionResetError(), T.NOT_RETRYABLE),
        (False, ServiceError("ThrottlingException"), T.NOT_RETRYABLE),
        (None, ConnectionResetError(), T.CONNECTION),
        (None, ValueError(), T.NOT_RETRYABLE),
    ],
)
def test_retry_if_verdicts(
    verdict: OutcomeKind | bool | None, error: Exception, expected: OutcomeKind
) -> None:
    """retry_if returns a kind (used as is), True (retry, kind from the error), False or None (pass on)."""
    classifier = Classifier(retry_if=lambda e: verdict)
    assert kind_of(error, classifier) is expected


def test_retry_if_sees_the_exception() -> None:
    """The predicate gets the very exception the attempt raised."""
    seen: list[Exception] = []
    classifier = Classifier(retry_if=lambda e: seen.append(e))
    error = KeyError("k")
    classifier.classify_error(error)
    assert seen == [error]


@pytest.mark.parametrize("verdict", ["transient", 1, 0, [], "yes"])
def test_a_bad_retry_if_return_value_is_a_type_error(verdict: object) -> None:
    """retry_if must return None, a bool or an OutcomeKind; anything else raises TypeError naming it."""
    classifier = Classifier(retry_if=lambda e: verdict)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match=r"retry_if must return None, a bool or an OutcomeKind, got"):
        classifier.classify_error(ValueError())


@pytest.mark.parametrize(
    "error",
    [
        RetryCapacityExceeded(available=0, cost=5),
        CircuitOpenError(name="b", state="open", retry_after=3.0),
        RateLimitTimeout(name="r", wait=2.0, timeout=1.0),
        RetriesExhausted("gave up", last_result=None, why="max_attempts"),
        AttemptTimeout(1.0),
        ConfigurationError("bad"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_asyncretrys_own_errors_are_not_retryable(error: AsyncRetryError) -> None:
    """An inner retrier that gave up, an open breaker, a refused rate limit: retrying multiplies attempts."""
    assert kind_of(error) is T.NOT_RETRYABLE


def test_asyncretrys_own_errors_lose_to_retry_if() -> None:
    """retry_if is consulted before the own-error rule, so a user can still retry them on purpose."""
    classifier = Classifier(retry_if=lambda e: isinstance(e, CircuitOpenError) or None)
    assert kind_of(CircuitOpenError(name="b", state="open", retry_after=1), classifier) is T.TRANSIENT


def test_an_attempt_timeout_is_not_retried_as_a_builtin_timeout() -> None:
    """AttemptTimeout is a TimeoutError, but as asyncretry's own error it is not retried by the classifier."""
    assert isinstance(AttemptTimeout(1.0), TimeoutError)
    assert kind_of(AttemptTimeout(1.0)) is T.NOT_RETRYABLE


# -- rule 3: error metadata


def test_is_throttling_metadata_makes_a_throttling_outcome() -> None:
    """An exception with is_throttling=True is throttling, whatever its type."""
    outcome = DEFAULT.classify_error(named("Weird", is_throttling=True))
    assert outcome.kind is T.THROTTLING
    assert outcome.reason == "Weird (is_throttling)"


def test_is_retryable_false_wins_over_codes_and_types() -> None:
    """is_retryable=False is final: even a throttling code or a connection error type is not retried."""
    assert kind_of(ServiceError("ThrottlingException", is_retryable=False)) is T.NOT_RETRYABLE
    error = ConnectionResetError()
    error.is_retryable = False  # type: ignore[attr-defined]
    assert kind_of(error) is T.NOT_RETRYABLE


def test_is_retryable_true_retries_an_unknown_error() -> None:
    """is_retryable=True makes an otherwise unknown error transient (or its built-in network kind)."""
    outcome = DEFAULT.classify_error(named("Flaky", is_retryable=True))
    assert (outcome.kind, outcome.reason) == (T.TRANSIENT, "Flaky (is_retryable)")
    timeout = TimeoutError()
    timeout.is_retryable = True  # type: ignore[attr-defined]
    assert kind_of(timeout) is T.TIMEOUT


def test_a_code_refines_is_retryable_true() -> None:
    """is_retryable=True with a throttling code is throttling: the code says how to retry."""
    assert kind_of(ServiceError("SlowDown", is_retryable=True)) is T.THROTTLING


def test_metadata_must_be_a_real_bool() -> None:
    """Only True/False count as metadata: a truthy string is ignored."""
    assert kind_of(named("Weird", is_throttling="yes", is_retryable="no")) is T.NOT_RETRYABLE


# -- rule 4: service error codes


@pytest.mark.parametrize("code", sorted(AWS_THROTTLING_CODES))
def test_every_aws_throttling_code_is_throttling(code: str) -> None:
    """Each of SPEC 4's throttling codes, from a `code` attribute, is a throttling outcome named by it."""
    outcome = DEFAULT.classify_error(ServiceError(code))
    assert (outcome.kind, outcome.reason) == (T.THROTTLING, code)


@pytest.mark.parametrize("code", sorted(AWS_TRANSIENT_CODES - AWS_THROTTLING_CODES))
def test_every_aws_transient_code_is_transient(code: str) -> None:
    """Each of SPEC 4's transient codes (not also throttling) is a transient outcome."""
    assert kind_of(ServiceError(code)) is T.TRANSIENT


def test_the_aws_code_sets_match_the_spec() -> None:
    """The code sets hold exactly the SPEC's 14 throttling and 4 transient codes."""
    assert len(AWS_THROTTLING_CODES) == 14
    transient = {
        "RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete", "IDPCommunicationError"
    }
    assert transient == AWS_TRANSIENT_CODES


def test_a_code_in_both_sets_counts_as_throttling() -> None:
    """PriorRequestNotComplete is listed as throttling and as transient: throttling wins."""
    assert "PriorRequestNotComplete" in AWS_THROTTLING_CODES & AWS_TRANSIENT_CODES
    assert kind_of(ServiceError("PriorRequestNotComplete")) is T.THROTTLING
    both = Classifier(throttling_codes=frozenset({"Busy"}), transient_codes=frozenset({"Busy"}))
    assert kind_of(ServiceError("Busy"), both) is T.THROTTLING


def test_codes_are_read_from_error_code_code_and_botocore_responses() -> None:
    """error_code, code, and botocore's response["Error"]["Code"] all carry a service code."""
    assert kind_of(named("E", error_code="ThrottlingException")) is T.THROTTLING
    assert kind_of(named("E", code="RequestTimeout")) is T.TRANSIENT
    assert kind_of(BotoStyleError("ProvisionedThroughputExceededException")) is T.THROTTLING
    assert kind_of(BotoStyleError("AccessDeniedException")) is T.NOT_RETRYABLE


def test_error_code_of_prefers_error_code_then_code_then_the_response() -> None:
    """error_code_of() reads error_code first, then code, then the botocore response; ignores non-strings."""
    assert error_code_of(named("E", error_code="A", code="B")) == "A"
    assert error_code_of(named("E", error_code="", code="B")) == "B"
    assert error_code_of(named("E", code=503)) is None
    assert error_code_of(BotoStyleError("SlowDown")) == "SlowDown"
    assert error_code_of(named("E", response={"Error": "oops"})) is None
    assert error_code_of(named("E", response={"Error": {"Code": 5}})) is None
    assert error_code_of(named("E", response="not a dict")) is None
    assert error_code_of(ValueError()) is None


def test_an_integer_code_attribute_is_not_a_service_code() -> None:
    """A numeric `code` (an HTTP status, an errno) is not looked up in the code sets."""
    assert kind_of(named("HTTPError", code=429)) is T.NOT_RETRYABLE


def test_the_class_name_counts_as_a_code() -> None:
    """An exception class named like an AWS code is classified by its name (modelled SDK exceptions)."""
    outcome = DEFAULT.classify_error(named("ThrottlingException"))
    assert (outcome.kind, outcome.reason) == (T.THROTTLING, "ThrottlingException")
    assert kind_of(named("RequestTimeoutException")) is T.TRANSIENT
    assert kind_of(named("ValidationException")) is T.NOT_RETRYABLE


def test_the_carried_code_is_looked_up_before_the_class_name() -> None:
    """A generic ClientError-like class is classified by the code it carries, not its own name."""
    assert kind_of(named("ThrottlingException", code="RequestTimeout")) is T.TRANSIENT


def test_custom_code_sets_replace_the_aws_ones() -> None:
    """throttling_codes / transient_codes replace the AWS defaults; empty sets disable the rule."""
    custom = Classifier(throttling_codes=frozenset({"Busy"}), transient_codes=frozenset({"Hiccup"}))
    assert kind_of(ServiceError("Busy"), custom) is T.THROTTLING
    assert kind_of(ServiceError("Hiccup"), custom) is T.TRANSIENT
    assert kind_of(ServiceError("ThrottlingException"), custom) is T.NOT_RETRYABLE
    none = Classifier(throttling_codes=frozenset(), transient_codes=frozenset())
    assert kind_of(named("ThrottlingException"), none) is T.NOT_RETRYABLE


def test_codes_win_over_listed_types() -> None:
    """A listed transient type that carries a throttling code is throttling (rule 4 before rule 5)."""
    classifier = Classifier(transient=(ServiceError,))
    assert kind_of(ServiceError("SlowDown"), classifier) is T.THROTTLING
    assert kind_of(ServiceError("NoSuchKey"), classifier) is T.TRANSIENT


# -- rule 5: listed types


class Throttled(Exception):
    pass


class Slow(Exception):
    pass


class Blip(Exception):
    pass


def test_listed_types_have_their_kinds() -> None:
    """Types listed as throttling, timeout or transient are classified so, subclasses included."""
    classifier = Classifier(throttling=(Throttled,), timeout=(Slow,), transient=(Blip,))
    assert kind_of(Throttled(), classifier) is T.THROTTLING
    assert kind_of(Slow(), classifier) is T.TIMEOUT
    assert kind_of(Blip(), classifier) is T.TRANSIENT
    assert kind_of(type("SubBlip", (Blip,), {})(), classifier) is T.TRANSIENT
    assert kind_of(ValueError(), classifier) is T.NOT_RETRYABLE


def test_throttling_is_checked_before_timeout_and_transient() -> None:
    """A type listed under several kinds takes the first of throttling, timeout, transient."""
    classifier = Classifier(throttling=(Blip,), timeout=(Blip,), transient=(Blip,))
    assert kind_of(Blip(), classifier) is T.THROTTLING
    classifier = Classifier(timeout=(Blip,), transient=(Blip,))
    assert kind_of(Blip(), classifier) is T.TIMEOUT


def test_listed_types_win_over_the_builtin_network_rules() -> None:
    """Listing a built-in network error under another kind changes its kind."""
    classifier = Classifier(throttling=(ConnectionRefusedError,))
    assert kind_of(ConnectionRefusedError(), classifier) is T.THROTTLING


def test_a_single_type_is_accepted_in_place_of_a_tuple() -> None:
    """transient=SomeError is understood as (SomeError,)."""
    classifier = Classifier(transient=Blip)  # type: ignore[arg-type]
    assert classifier.transient == (Blip,)
    assert kind_of(Blip(), classifier) is T.TRANSIENT


# -- rule 6: built-in network errors


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectionResetError(), T.CONNECTION),
        (ConnectionRefusedError(), T.CONNECTION),
        (ConnectionAbortedError(), T.CONNECTION),
        (BrokenPipeError(), T.CONNECTION),
        (ConnectionError(), T.CONNECTION),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), T.CONNECTION),
        (socket.herror(1, "Unknown host"), T.CONNECTION),
        (TimeoutError(), T.TIMEOUT),
        (ssl.SSLError(1, "decryption failed"), T.CONNECTION),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), T.CONNECTION),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), T.NOT_RETRYABLE),
        (FileNotFoundError(2, "No such file"), T.NOT_RETRYABLE),
        (PermissionError(13, "Permission denied"), T.NOT_RETRYABLE),
        (OSError(5, "I/O error"), T.NOT_RETRYABLE),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_builtin_network_errors(error: Exception, expected: OutcomeKind) -> None:
    """No response received (reset, refused, DNS, TLS) is a connection error; a certificate failure is not."""
    outcome = DEFAULT.classify_error(error)
    assert outcome.kind is expected
    assert outcome.reason == type(error).__name__
    assert outcome.error is error


def test_network_errors_can_be_switched_off() -> None:
    """network_errors=False leaves built-in connection errors and timeouts unretried."""
    classifier = Classifier(network_errors=False)
    assert kind_of(ConnectionResetError(), classifier) is T.NOT_RETRYABLE
    assert kind_of(TimeoutError(), classifier) is T.NOT_RETRYABLE
    assert kind_of(ServiceError("SlowDown"), classifier) is T.THROTTLING


# -- rule 7: anything else


@pytest.mark.parametrize(
    "error", [ValueError("bad"), KeyError("k"), RuntimeError(), ZeroDivisionError(), NotImplementedError()]
)
def test_unknown_errors_are_not_retryable(error: Exception) -> None:
    """An error no rule recognises is not retried: retrying bugs and validation errors fixes nothing."""
    assert kind_of(error) is T.NOT_RETRYABLE


@given(st.text(min_size=1, max_size=30))
def test_an_unknown_code_is_never_retried(code: str) -> None:
    """A code outside both AWS sets, on an otherwise plain exception, is never retryable."""
    kind = kind_of(ServiceError(code))
    if code in AWS_THROTTLING_CODES:
        assert kind is T.THROTTLING
    elif code in AWS_TRANSIENT_CODES:
        assert kind is T.TRANSIENT
    else:
        assert kind is T.NOT_RETRYABLE


# -- results


def test_results_are_successes_without_a_result_predicate() -> None:
    """Without retry_if_result every result is a success, carried in the outcome."""
    outcome = DEFAULT.classify_result({"state": "PENDING"})
    assert (outcome.kind, outcome.result, outcome.error) == (T.SUCCESS, {"state": "PENDING"}, None)


@pytest.mark.parametrize(
    ("verdict", "kind", "reason"),
    [
        (None, T.SUCCESS, "ok"),
        (False, T.SUCCESS, "ok"),
        (True, T.TRANSIENT, "result"),
        ("NOT_READY", T.TRANSIENT, "NOT_READY"),
        (T.THROTTLING, T.THROTTLING, "result (throttling)"),
        (T.TIMEOUT, T.TIMEOUT, "result (timeout)"),
        (T.NOT_RETRYABLE, T.NOT_RETRYABLE, "result (not_retryable)"),
    ],
)
def test_retry_if_result_verdicts(verdict: object, kind: OutcomeKind, reason: str) -> None:
    """retry_if_result: None/False success, True or a reason string transient, an OutcomeKind as is."""
    classifier = Classifier(retry_if_result=lambda r: verdict)  # type: ignore[arg-type,return-value]
    outcome = classifier.classify_result(42)
    assert (outcome.kind, outcome.reason, outcome.result) == (kind, reason, 42)


@pytest.mark.parametrize("verdict", [1, 0.5, [], b"retry"])
def test_a_bad_retry_if_result_return_value_is_a_type_error(verdict: object) -> None:
    """retry_if_result returning anything else raises TypeError naming retry_if_result."""
    classifier = Classifier(retry_if_result=lambda r: verdict)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="retry_if_result must return"):
        classifier.classify_result("x")


# -- configuration


def bad(field: str, value: object) -> dict[str, Any]:
    """Keyword arguments setting ``field`` to a value of the wrong kind (untyped, so mypy lets it through)."""
    return {field: value}


@pytest.mark.parametrize("field", ["transient", "throttling", "timeout", "never"])
def test_type_lists_must_hold_exception_classes(field: str) -> None:
    """A non-exception entry in a type list raises TypeError naming the list."""
    with pytest.raises(TypeError, match=f"{field} must contain exception classes"):
        Classifier(**bad(field, (ValueError, "KeyError")))
    with pytest.raises(TypeError, match=field):
        Classifier(**bad(field, (int,)))


@pytest.mark.parametrize("base", [KeyboardInterrupt, SystemExit, GeneratorExit, BaseException])
def test_base_exceptions_cannot_be_listed_as_retryable(base: type[BaseException]) -> None:
    """Cancellation and other BaseExceptions are never retried: listing one is a ValueError."""
    with pytest.raises(ValueError, match=f"transient may not contain {base.__name__}"):
        Classifier(transient=(base,))


@pytest.mark.parametrize("field", ["throttling_codes", "transient_codes"])
def test_a_code_set_given_as_a_string_is_refused(field: str) -> None:
    """A bare string (which would be a set of letters) is refused with a TypeError naming the field."""
    with pytest.raises(TypeError, match=f"{field} must be a collection of error codes"):
        Classifier(**bad(field, "ThrottlingException"))


def test_code_sets_are_frozen() -> None:
    """Codes given as a list or set are stored as a frozenset."""
    classifier = Classifier(throttling_codes=["A", "B"], transient_codes={"C"})  # type: ignore[arg-type]
    assert classifier.throttling_codes == frozenset({"A", "B"})
    assert isinstance(classifier.transient_codes, frozenset)


@pytest.mark.parametrize("field", ["retry_if", "retry_if_result"])
def test_predicates_must_be_callable(field: str) -> None:
    """A non-callable predicate raises TypeError naming it."""
    with pytest.raises(TypeError, match=f"{field} must be callable or None"):
        Classifier(**bad(field, True))


# -- rule 4, continued: botocore's transient statuses (tests/test_botocore.py has the full botocore rules)


def response_error(status: int, code: str | None = None, **attributes: Any) -> Exception:
    """An error carrying a botocore-shaped response (no botocore needed)."""
    response: dict[str, Any] = {"ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}}}
    if code is not None:
        response["Error"] = {"Code": code}
    return named("ClientError", response=response, **attributes)


@pytest.mark.parametrize(("status", "expected"), [(500, T.TRANSIENT), (502, T.TRANSIENT), (503, T.TRANSIENT),
                                                  (504, T.TRANSIENT), (501, T.NOT_RETRYABLE),
                                                  (429, T.NOT_RETRYABLE), (400, T.NOT_RETRYABLE)])
def test_a_response_status_of_500_502_503_504_is_transient(status: int, expected: OutcomeKind) -> None:
    """An error response with no known code is retried exactly for botocore's transient statuses."""
    assert kind_of(response_error(status, "SomethingElse")) is expected
    assert kind_of(response_error(status)) is expected


def test_a_throttling_code_wins_over_a_transient_status() -> None:
    """A 503 SlowDown is throttling: the code is read before the status."""
    outcome = DEFAULT.classify_error(response_error(503, "SlowDown"))
    assert (outcome.kind, outcome.reason) == (T.THROTTLING, "SlowDown")


def test_the_status_rule_comes_after_never_retry_if_and_metadata() -> None:
    """never, retry_if and is_retryable=False still decide a 503 response first."""
    assert kind_of(response_error(503, is_retryable=False)) is T.NOT_RETRYABLE
    error = response_error(503)
    assert kind_of(error, Classifier(never=(type(error),))) is T.NOT_RETRYABLE
    assert kind_of(error, Classifier(retry_if=lambda e: False)) is T.NOT_RETRYABLE


def test_the_status_rule_holds_with_empty_code_sets() -> None:
    """Empty code sets switch the code rule off, not botocore's status rule."""
    none = Classifier(throttling_codes=frozenset(), transient_codes=frozenset())
    assert kind_of(response_error(503, "ThrottlingException"), none) is T.TRANSIENT
