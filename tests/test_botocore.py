"""Errors from boto3, botocore and aiobotocore calls are classified as botocore's standard retry mode does.

The verdicts are checked against botocore's own standard-mode checkers (``botocore.retries.standard``)
on the same errors, so the two cannot drift apart, and driven through the engine in virtual time.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import anyio.lowlevel
import pytest
from botocore import exceptions as boto
from botocore.awsrequest import AWSResponse
from botocore.retries import standard

from asyncretry import (
    AWS_THROTTLING_CODES,
    AWS_TRANSIENT_CODES,
    AWS_TRANSIENT_STATUSES,
    Classifier,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    botocore_classifier,
    history_of,
)
from asyncretry.testing import VirtualClock

T = OutcomeKind
DEFAULT = Classifier()


def client_error(
    status: int, code: str | None = None, headers: dict[str, str] | None = None, operation: str = "GetItem"
) -> boto.ClientError:
    """A ClientError exactly as botocore builds it from a parsed error response."""
    response: dict[str, Any] = {
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}, "RetryAttempts": 0},
    }
    if code is not None:
        response["Error"] = {"Code": code, "Message": "m"}
    return boto.ClientError(response, operation)


CONNECTION_ERRORS: list[Exception] = [
    boto.EndpointConnectionError(endpoint_url="https://dynamodb.local"),
    boto.ConnectionClosedError(endpoint_url="https://dynamodb.local"),
    boto.ProxyConnectionError(proxy_url="http://proxy.local"),
    boto.SSLError(endpoint_url="https://dynamodb.local", error="EOF occurred in violation of protocol"),
    boto.HTTPClientError(error="connection pool is closed"),
    boto.ResponseStreamingError(error="incomplete read"),
    boto.ConnectionError(error="refused"),
]
TIMEOUT_ERRORS: list[Exception] = [
    boto.ReadTimeoutError(endpoint_url="https://dynamodb.local"),
    boto.ConnectTimeoutError(endpoint_url="https://dynamodb.local"),
]
NOT_RETRIED: list[Exception] = [
    boto.NoCredentialsError(),
    boto.ParamValidationError(report="Missing required parameter"),
    boto.NoRegionError(),
]


def _botocore_context(error: Exception) -> standard.RetryContext:
    operation = SimpleNamespace(error_shapes=[], service_model=SimpleNamespace(service_name="sts"))
    if isinstance(error, boto.ClientError):
        metadata = error.response["ResponseMetadata"]
        http = AWSResponse("https://x.local/", metadata["HTTPStatusCode"], metadata["HTTPHeaders"], None)
        return standard.RetryContext(
            attempt_number=1, operation_model=operation, http_response=http,
            parsed_response=dict(error.response), request_context={},
        )
    return standard.RetryContext(attempt_number=1, operation_model=operation, caught_exception=error,
                                 request_context={})


def botocore_verdict(error: Exception) -> OutcomeKind:
    """What botocore's standard mode does with ``error``: retried as throttling, timeout or other, or not."""
    context = _botocore_context(error)
    if not standard.StandardRetryConditions(max_attempts=3).is_retryable(context):
        return T.NOT_RETRYABLE
    if standard.ThrottlingErrorDetector(standard.RetryEventAdapter()).is_throttling_error_from_context(context):
        return T.THROTTLING
    if isinstance(error, (boto.ConnectTimeoutError, boto.ReadTimeoutError)):
        return T.TIMEOUT  # botocore's 2020 quota charges these the timeout cost
    return T.CONNECTION if isinstance(error, boto.BotoCoreError) else T.TRANSIENT


def _cases() -> list[Any]:
    statuses = [400, 403, 404, 408, 409, 413, 429, 500, 501, 502, 503, 504, 509]
    cases: list[Any] = [pytest.param(client_error(s), id=f"HTTP {s}") for s in statuses]
    cases += [pytest.param(client_error(s, "SomethingElse"), id=f"HTTP {s} SomethingElse") for s in statuses]
    for code in sorted(AWS_THROTTLING_CODES | AWS_TRANSIENT_CODES):
        cases += [pytest.param(client_error(s, code), id=f"HTTP {s} {code}") for s in (400, 503)]
    cases += [pytest.param(e, id=type(e).__name__) for e in CONNECTION_ERRORS + TIMEOUT_ERRORS + NOT_RETRIED]
    return cases


# -- the verdicts, against botocore's own checkers


@pytest.mark.parametrize("error", _cases())
def test_the_classifier_agrees_with_botocores_standard_mode(error: Exception) -> None:
    """Retried or not, and as throttling, timeout or other: the same verdict as botocore's standard mode."""
    assert DEFAULT.classify_error(error).kind is botocore_verdict(error)


def test_a_503_with_no_code_is_transient() -> None:
    """A ClientError with status 503 and no code (it used to fail at once) is a transient error."""
    outcome = DEFAULT.classify_error(client_error(503))
    assert (outcome.kind, outcome.reason) == (T.TRANSIENT, "ClientError (HTTP 503)")
    assert {500, 502, 503, 504} == AWS_TRANSIENT_STATUSES


@pytest.mark.parametrize("error", CONNECTION_ERRORS, ids=lambda e: type(e).__name__)
def test_botocores_connection_errors_are_connection_errors(error: Exception) -> None:
    """EndpointConnectionError, ConnectionClosedError and the like: no response, a connection error."""
    outcome = DEFAULT.classify_error(error)
    assert (outcome.kind, outcome.reason, outcome.error) == (T.CONNECTION, type(error).__name__, error)


@pytest.mark.parametrize("error", TIMEOUT_ERRORS, ids=lambda e: type(e).__name__)
def test_botocores_timeouts_are_timeouts(error: Exception) -> None:
    """ReadTimeoutError and ConnectTimeoutError are timeouts (the 2020 quota charges them 10)."""
    assert DEFAULT.classify_error(error).kind is T.TIMEOUT


def test_botocore_network_errors_follow_the_network_errors_switch() -> None:
    """network_errors=False leaves botocore's connection errors and timeouts unretried, as the built-in ones."""
    classifier = Classifier(network_errors=False)
    for error in CONNECTION_ERRORS + TIMEOUT_ERRORS:
        assert classifier.classify_error(error).kind is T.NOT_RETRYABLE


def test_listed_types_win_over_botocores_network_rules() -> None:
    """A botocore error listed by the user under another kind gets that kind."""
    classifier = Classifier(throttling=(boto.EndpointConnectionError,))
    assert classifier.classify_error(CONNECTION_ERRORS[0]).kind is T.THROTTLING


def test_retry_if_true_keeps_a_botocore_timeout_a_timeout() -> None:
    """retry_if returning True lets a botocore timeout keep its own kind (and its cost)."""
    classifier = Classifier(retry_if=lambda e: True)
    assert classifier.classify_error(TIMEOUT_ERRORS[0]).kind is T.TIMEOUT


# -- x-amz-retry-after


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1500", 1.5), ("0", 0.0), (" 250 ", 0.25), ("-5", None), ("1.5", None), ("soon", None), ("", None),
     ("\u0661\u0662", None)],
)
def test_x_amz_retry_after_is_read_from_the_response_metadata(value: str, expected: float | None) -> None:
    """The header's integer milliseconds become a hint in seconds; anything else is ignored."""
    outcome = DEFAULT.classify_error(client_error(503, headers={"x-amz-retry-after": value}))
    assert outcome.kind is T.TRANSIENT
    assert outcome.server_delay == expected
    assert outcome.server_delay_is_hint is (expected is not None)


def test_a_throttling_error_carries_its_x_amz_retry_after() -> None:
    """A ThrottlingException response with the header is throttling with the hint."""
    outcome = DEFAULT.classify_error(client_error(400, "ThrottlingException", {"x-amz-retry-after": "2000"}))
    assert (outcome.kind, outcome.server_delay, outcome.server_delay_is_hint) == (T.THROTTLING, 2.0, True)


def test_a_response_that_is_not_retried_carries_no_delay() -> None:
    """A 400 ValidationException with the header is not retryable and has no server delay."""
    outcome = DEFAULT.classify_error(client_error(400, "ValidationException", {"x-amz-retry-after": "2000"}))
    assert (outcome.kind, outcome.server_delay) == (T.NOT_RETRYABLE, None)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (None, T.NOT_RETRYABLE),
        ("text", T.NOT_RETRYABLE),
        ({"ResponseMetadata": "x"}, T.NOT_RETRYABLE),
        ({"ResponseMetadata": {"HTTPStatusCode": "503"}}, T.NOT_RETRYABLE),
        ({"ResponseMetadata": {"HTTPStatusCode": True}}, T.NOT_RETRYABLE),
        ({"ResponseMetadata": {"HTTPStatusCode": 503, "HTTPHeaders": ["x-amz-retry-after"]}}, T.TRANSIENT),
        ({"ResponseMetadata": {"HTTPStatusCode": 503, "HTTPHeaders": {"x-amz-retry-after": 5}}}, T.TRANSIENT),
    ],
)
def test_malformed_responses_are_ignored(response: object, expected: OutcomeKind) -> None:
    """A `response` attribute of the wrong shape neither crashes nor gives a delay; only a 503 is retried."""
    error = ValueError("x")
    error.response = response  # type: ignore[attr-defined]
    outcome = DEFAULT.classify_error(error)
    assert (outcome.kind, outcome.server_delay) == (expected, None)


# -- modelled retryable errors


def _client(service: str) -> Any:
    import botocore.session

    session = botocore.session.get_session()
    return session.create_client(
        service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def test_botocore_classifier_adds_the_modelled_retryable_codes() -> None:
    """Access Analyzer models UnprocessableEntityException (422) as retryable: botocore retries it, so do we."""
    client = _client("accessanalyzer")
    error = client.exceptions.UnprocessableEntityException(
        {"Error": {"Code": "UnprocessableEntityException", "Message": "m"},
         "ResponseMetadata": {"HTTPStatusCode": 422, "HTTPHeaders": {}}}, "CreateAnalyzer",
    )
    assert DEFAULT.classify_error(error).kind is T.NOT_RETRYABLE
    classifier = botocore_classifier(client)
    assert classifier.classify_error(error).kind is T.TRANSIENT
    assert "ThrottlingException" in classifier.throttling_codes
    assert classifier.throttling_codes >= AWS_THROTTLING_CODES
    assert classifier.transient_codes >= AWS_TRANSIENT_CODES


def test_botocore_classifier_agrees_with_botocores_modelled_checker() -> None:
    """For every error shape of a service, the verdict equals botocore's ModeledRetryErrorDetector's."""
    client = _client("accessanalyzer")
    model = client.meta.service_model
    classifier = botocore_classifier(model, throttling_codes=frozenset(), transient_codes=frozenset())
    detector = standard.ModeledRetryErrorDetector()
    operation = model.operation_model("CreateAnalyzer")
    verdicts = set()
    for shape in operation.error_shapes:
        error = client_error(400, shape.name)
        context = standard.RetryContext(attempt_number=1, operation_model=operation,
                                        parsed_response=dict(error.response))
        expected = {None: T.NOT_RETRYABLE, detector.TRANSIENT_ERROR: T.TRANSIENT,
                    detector.THROTTLING_ERROR: T.THROTTLING}[detector.detect_error_type(context)]
        assert classifier.classify_error(error).kind is expected, shape.name
        verdicts.add(expected)
    assert verdicts == {T.NOT_RETRYABLE, T.TRANSIENT, T.THROTTLING}


def test_botocore_classifier_passes_other_arguments_on() -> None:
    """Other Classifier arguments are kept."""
    classifier = botocore_classifier(_client("accessanalyzer"), never=(KeyError,), network_errors=False)
    assert classifier.never == (KeyError,)
    assert classifier.network_errors is False


def test_botocore_classifier_refuses_what_is_not_a_client() -> None:
    """Something without a service model is a TypeError naming the argument."""
    with pytest.raises(TypeError, match="client must be a botocore/boto3/aiobotocore client"):
        botocore_classifier(object())


# -- botocore stays optional


def test_classifying_never_imports_botocore() -> None:
    """`import asyncretry` and classifying every kind of error leave botocore unimported."""
    code = (
        "import sys, asyncretry\n"
        "c = asyncretry.Classifier()\n"
        "for e in (ValueError(), ConnectionResetError(), TimeoutError(), OSError(5, 'x')):\n"
        "    c.classify_error(e)\n"
        "assert 'botocore' not in sys.modules, sorted(m for m in sys.modules if 'boto' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- through the engine (virtual time, both backends)


def _retrier(policy: RetryPolicy, clock: VirtualClock) -> Retrier:
    return Retrier(policy, clock=clock, rng=lambda: 1.0)


@pytest.mark.anyio
async def test_boto_errors_are_retried_with_botocores_costs_and_delays() -> None:
    """Throttling, a 503 with no code, a read timeout, then success: 2020 costs 5, 5, 10 and delays 1, 2, 4 s."""
    clock = VirtualClock()
    retrier = _retrier(RetryPolicy.aws_standard(max_attempts=4), clock)
    errors: list[Exception] = [client_error(400, "ThrottlingException"), client_error(503), TIMEOUT_ERRORS[0]]
    seen: list[float] = []

    async def get_item() -> str:
        await anyio.lowlevel.checkpoint()
        quota = retrier.statistics().scopes[0].quota
        assert quota is not None
        seen.append(quota.available)
        if errors:
            raise errors.pop(0)
        return "item"

    assert await retrier.call(get_item) == "item"
    assert seen == [500, 495, 490, 480]
    assert clock.sleeps == [1.0, 2.0, 4.0]
    quota = retrier.statistics().scopes[0].quota
    assert quota is not None
    assert quota.available == 490  # the last retry's 10 came back


@pytest.mark.anyio
async def test_the_2026_profile_honours_x_amz_retry_after_from_a_client_error() -> None:
    """A 503 carrying x-amz-retry-after: 1500 sleeps 1.5 s under the 2026 profile (clamped to [t, t + 5])."""
    clock = VirtualClock()
    retrier = _retrier(RetryPolicy.aws_standard("2026"), clock)
    errors: list[Exception] = [client_error(503, headers={"x-amz-retry-after": "1500"})]

    async def get_item() -> str:
        await anyio.lowlevel.checkpoint()
        if errors:
            raise errors.pop(0)
        return "item"

    assert await retrier.call(get_item) == "item"
    assert clock.sleeps == [1.5]


@pytest.mark.anyio
async def test_a_boto_error_that_is_not_retried_reaches_the_caller_at_once() -> None:
    """A 400 ValidationException is raised after one attempt, with its history attached."""
    clock = VirtualClock()
    retrier = _retrier(RetryPolicy.aws_standard(), clock)
    error = client_error(400, "ValidationException")

    async def get_item() -> str:
        await anyio.lowlevel.checkpoint()
        raise error

    with pytest.raises(boto.ClientError) as raised:
        await retrier.call(get_item)
    assert raised.value is error
    history = history_of(error)
    assert history is not None
    assert (len(history.attempts), history.gave_up) == (1, "not_retryable")
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_an_empty_quota_gives_up_on_boto_connection_errors() -> None:
    """Each EndpointConnectionError retry costs 5 of 500 tokens: after 100 paid retries the next is refused,
    and the call ends with the real EndpointConnectionError (why: quota)."""
    retrier = _retrier(RetryPolicy.aws_standard(max_attempts=2), VirtualClock())

    async def get_item() -> str:
        await anyio.lowlevel.checkpoint()
        raise boto.EndpointConnectionError(endpoint_url="https://dynamodb.local")

    for _ in range(100):
        with pytest.raises(boto.EndpointConnectionError):
            await retrier.call(get_item)
    quota = retrier.statistics().scopes[0].quota
    assert quota is not None
    assert quota.available == 0
    with pytest.raises(boto.EndpointConnectionError) as raised:
        await retrier.call(get_item)
    history = history_of(raised.value)
    assert history is not None
    assert (history.gave_up, len(history.attempts)) == ("quota", 1)
