"""The synchronous gRPC interceptors against a real synchronous ``grpc`` server on 127.0.0.1.

The server answers each call with the next status of its script (``None``: the request echoed), with
``grpc-retry-pushback-ms`` when the step says so; the tests assert on what it saw and what the caller got.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from asyncretry import FixedBackoff, HedgingConfig, OutcomeKind, RetryPolicy, history_of
from asyncretry.grpc import ATTEMPTS_KEY, CHANNEL_OPTIONS, PUSHBACK_KEY, GrpcClassifier, SyncRetryInterceptors
from asyncretry.grpc import intercept_channel as retrying

pytestmark = [pytest.mark.timeout(30)]

FAST = RetryPolicy(max_attempts=4, backoff=FixedBackoff(0.001), throttling_backoff=FixedBackoff(0.001))
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
WIRE_GRANULARITY = 0.02  # a timeout over 1 s goes in 10 ms steps, rounded up; the server adds its clock's error


class Server:
    """A synchronous server scripted per call; it records each call's previous attempts and time left."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.seen: list[tuple[str | None, float | None, list[bytes]]] = []
        self._lock = threading.Lock()

    def _step(self, context: grpc.ServicerContext, requests: list[bytes]) -> None:
        with self._lock:
            metadata = dict(context.invocation_metadata())
            self.seen.append((metadata.get(ATTEMPTS_KEY), context.time_remaining(), requests))
            step = self.script.pop(0) if self.script else None
        if isinstance(step, tuple):
            context.set_trailing_metadata(((PUSHBACK_KEY, step[1]),))
            step = step[0]
        if step is not None:
            context.abort(step, "scripted")

    def unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._step(context, [request])
        return request

    def upload(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        received = list(requests)
        self._step(context, received)
        return b",".join(received)


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    """A scripted synchronous server on a free port of 127.0.0.1, and its target."""
    app = Server()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(app.unary),
        "Upload": grpc.stream_unary_rpc_method_handler(app.upload),
    }
    running = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    running.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Test", handlers),))
    port = running.add_insecure_port("127.0.0.1:0")
    running.start()
    try:
        yield app, f"127.0.0.1:{port}"
    finally:
        running.stop(None).wait()


def channel(target: str, **options: Any) -> grpc.Channel:
    options.setdefault("policy", FAST)
    return retrying(grpc.insecure_channel(target, options=CHANNEL_OPTIONS), SyncRetryInterceptors(**options))


def test_a_transient_status_is_retried_with_the_time_left(server: tuple[Server, str]) -> None:
    """UNAVAILABLE twice, then the answer: three calls, the retries carrying grpc-previous-rpc-attempts,
    every attempt sent with at most the call's timeout, and each retry with the time left after the backoff.

    The server sees a deadline to gRPC's precision (over a second, a timeout is sent in steps of 10 ms, rounded
    up, and the server's clock adds its own error), so the bounds allow that much."""
    app, target = server
    app.script = [UNAVAILABLE, UNAVAILABLE]
    policy = FAST.replace(backoff=FixedBackoff(0.2))
    with channel(target, policy=policy) as ch:
        assert ch.unary_unary("/t.Test/Unary")(b"x", timeout=5.0) == b"x"
    assert [seen[0] for seen in app.seen] == [None, "1", "2"]
    left = [seen[1] for seen in app.seen]
    assert all(remaining is not None and remaining <= 5.0 + WIRE_GRANULARITY for remaining in left)
    assert left[1] is not None
    assert left[2] is not None
    assert left[2] <= left[1] - 0.2 + WIRE_GRANULARITY


def test_a_final_error_is_grpcs_own_with_the_history(server: tuple[Server, str]) -> None:
    """When the attempts run out the caller gets the last attempt's grpc.RpcError, history attached."""
    app, target = server
    app.script = [grpc.StatusCode.RESOURCE_EXHAUSTED] * 4
    with channel(target) as ch, pytest.raises(grpc.RpcError) as caught:
        ch.unary_unary("/t.Test/Unary")(b"x")
    history = history_of(caught.value)
    assert history is not None
    assert [a.kind for a in history.attempts] == [OutcomeKind.THROTTLING] * 4
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_pushback_is_followed_and_a_negative_one_stops(server: tuple[Server, str]) -> None:
    """A pushback of 5 ms is the retry's delay; a pushback of -1 sends the call once."""
    app, target = server
    app.script = [(UNAVAILABLE, "5"), (UNAVAILABLE, "-1")]
    with channel(target) as ch, pytest.raises(grpc.RpcError) as caught:
        ch.unary_unary("/t.Test/Unary")(b"x")
    history = history_of(caught.value)
    assert history is not None
    assert [(a.kind, a.delay_after) for a in history.attempts] == [
        (OutcomeKind.TRANSIENT, 0.005), (OutcomeKind.NOT_RETRYABLE, None),
    ]


def test_a_pushback_past_the_deadline_gives_up_at_once(server: tuple[Server, str]) -> None:
    """A retry the server asks for after the call's deadline is not waited for."""
    app, target = server
    app.script = [(UNAVAILABLE, "60000")]
    with channel(target) as ch, pytest.raises(grpc.RpcError) as caught:
        ch.unary_unary("/t.Test/Unary")(b"x", timeout=5.0)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "server_delay"
    assert len(app.seen) == 1


def test_requests_are_replayed_only_from_a_list_and_methods_not_idempotent_sent_once(
    server: tuple[Server, str],
) -> None:
    """A request list is sent again whole; a generator, or a method listed as not idempotent, once."""
    app, target = server
    with channel(target, classifier=GrpcClassifier(non_idempotent={"/t.Test/Unary"})) as ch:
        app.script = [UNAVAILABLE]
        assert ch.stream_unary("/t.Test/Upload")([b"a", b"b"]) == b"a,b"
        app.script = [UNAVAILABLE]
        with pytest.raises(grpc.RpcError):
            ch.stream_unary("/t.Test/Upload")(iter([b"a"]))
        app.script = [UNAVAILABLE]
        with pytest.raises(grpc.RpcError):
            ch.unary_unary("/t.Test/Unary")(b"x")
    assert [seen[2] for seen in app.seen] == [[b"a", b"b"], [b"a", b"b"], [b"a"], [b"x"]]


def test_hedging_is_refused() -> None:
    """Hedging needs concurrent attempts: a policy with hedging is refused when the interceptors are made."""
    with pytest.raises(ValueError, match="hedging"):
        SyncRetryInterceptors(policy=RetryPolicy(hedging=HedgingConfig(delay=0.1)))
