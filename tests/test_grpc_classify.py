"""The gRPC classifier on its own: the status table, pushback parsing, idempotency and the resend rule."""

from __future__ import annotations

import grpc
import pytest
from grpc import aio

from asyncretry import OutcomeKind
from asyncretry.grpc import PUSHBACK_KEY, GrpcClassifier, pushback_of

DEFAULT = GrpcClassifier()


def rpc_error(code: grpc.StatusCode, details: str = "scripted", *trailing: tuple[str, str | bytes]) -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(*trailing), details=details)


@pytest.mark.parametrize("code", list(grpc.StatusCode), ids=lambda code: code.name)
def test_the_default_status_table(code: grpc.StatusCode) -> None:
    """OK succeeds, UNAVAILABLE is transient, RESOURCE_EXHAUSTED is throttling, every other code is final."""
    expected = {
        grpc.StatusCode.OK: OutcomeKind.SUCCESS,
        grpc.StatusCode.UNAVAILABLE: OutcomeKind.TRANSIENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED: OutcomeKind.THROTTLING,
    }.get(code, OutcomeKind.NOT_RETRYABLE)
    assert DEFAULT.kind_of(code) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0.0), ("250", 0.25), (b"7", 0.007), (" 3 ", 0.003), ("-1", False), ("1.5", False), ("", False),
     ("soon", False), ("99999999999", 99999999.999)],
)
def test_pushback_values(value: str | bytes, expected: float | bool) -> None:
    """A non-negative integer is milliseconds; anything else (negative, fractional, empty, text) says "do not retry"."""
    assert pushback_of(rpc_error(grpc.StatusCode.UNAVAILABLE, "x", (PUSHBACK_KEY, value))) == expected


def test_no_pushback_is_none_and_a_pushback_sets_the_server_delay() -> None:
    """Without the key there is no pushback; with one, the outcome carries it as a delay to follow, not a hint."""
    assert pushback_of(rpc_error(grpc.StatusCode.UNAVAILABLE)) is None
    outcome = DEFAULT.outcome(rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "x", (PUSHBACK_KEY, "40")))
    assert (outcome.kind, outcome.server_delay, outcome.server_delay_is_hint) == (OutcomeKind.THROTTLING, 0.04, False)


def test_a_pushback_on_a_final_status_changes_nothing() -> None:
    """Pushback only counts for retryable statuses: INTERNAL with a pushback stays final, without a delay."""
    outcome = DEFAULT.outcome(rpc_error(grpc.StatusCode.INTERNAL, "x", (PUSHBACK_KEY, "10")))
    assert (outcome.kind, outcome.server_delay) == (OutcomeKind.NOT_RETRYABLE, None)


def test_idempotency_by_method_by_service_and_per_call() -> None:
    """Exact names and service wildcards mark methods not idempotent; a per-call override wins."""
    classifier = GrpcClassifier(non_idempotent={"/shop.Orders/Create", "/shop.Payments/*"})
    assert not classifier.is_idempotent("/shop.Orders/Create")
    assert classifier.is_idempotent("/shop.Orders/Get")
    assert not classifier.is_idempotent("/shop.Payments/Refund")
    assert classifier.is_idempotent("/shop.Payments/Refund", True)
    assert not GrpcClassifier(idempotent_by_default=False).is_idempotent("/shop.Orders/Get")


def test_only_a_connection_failure_or_a_pushback_proves_the_server_never_began() -> None:
    """UNAVAILABLE from a channel that could not connect, or any pushback, allow a non-idempotent retry;
    UNAVAILABLE from a server handler does not."""
    refused = rpc_error(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: refused")
    from_handler = rpc_error(grpc.StatusCode.UNAVAILABLE, "going away")
    pushed = rpc_error(grpc.StatusCode.UNAVAILABLE, "busy", (PUSHBACK_KEY, "5"))
    verdicts = [
        DEFAULT.may_resend(DEFAULT.outcome(error), idempotent=False, replayable=True).kind
        for error in (refused, from_handler, pushed)
    ]
    assert verdicts == [OutcomeKind.TRANSIENT, OutcomeKind.NOT_RETRYABLE, OutcomeKind.TRANSIENT]


def test_a_request_that_cannot_be_replayed_is_never_sent_again() -> None:
    """Even an idempotent call is final when its request stream cannot be sent again."""
    outcome = DEFAULT.may_resend(
        DEFAULT.outcome(rpc_error(grpc.StatusCode.UNAVAILABLE)), idempotent=True, replayable=False
    )
    assert outcome.kind is OutcomeKind.NOT_RETRYABLE
    assert "cannot be sent again" in outcome.reason
