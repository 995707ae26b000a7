"""Interceptors for the synchronous ``grpc`` API: unary-unary and stream-unary calls through the engine.

The same planning (:class:`~._plan.Planner`: scopes, idempotency, per-call options, the judge) and the
same classifier as the grpc.aio interceptors, driven by :meth:`Retrier.sync_attempts`; waits block the
calling thread. Hedging needs concurrent attempts and is refused; response streams pass through
untouched. The call's ``timeout`` becomes the call's deadline in the engine (a per-call policy), and
each attempt is sent with the time left.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from .._validate import check_instance
from ._plan import Planner, attempt_metadata

__all__ = ["SyncRetryInterceptors", "intercept_channel"]

_HEDGING = (
    "hedging sends attempts concurrently, which the synchronous interceptors cannot do: use "
    "asyncretry.grpc.RetryInterceptors with grpc.aio, or a policy without hedging"
)


class _Details(
    collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    ),
    grpc.ClientCallDetails,  # type: ignore[misc]  # grpc has no type hints
):
    """The call details of one attempt."""


def _attempt_details(details: Any, number: int, deadline: float) -> Any:
    """Attempt ``number``'s details: the time left before ``deadline`` (``time.monotonic``; ``inf``: none),
    and from the second attempt on, ``grpc-previous-rpc-attempts``."""
    timeout = details.timeout if deadline == float("inf") else max(0.0, deadline - time.monotonic())
    metadata = details.metadata
    if number > 1:
        metadata = tuple(attempt_metadata(metadata, number))
    if timeout == details.timeout and metadata is details.metadata:
        return details
    return _Details(
        details.method, timeout, metadata, details.credentials, getattr(details, "wait_for_ready", None),
        getattr(details, "compression", None),
    )


class SyncRetryInterceptors(Planner):
    """Retries, rate limits and circuit breaking for a synchronous ``grpc`` channel::

        retry = SyncRetryInterceptors(policy=RetryPolicy(max_attempts=5), target="orders:50051")
        channel = grpc.intercept_channel(grpc.insecure_channel("orders:50051", options=CHANNEL_OPTIONS), *retry)

    Unary-unary calls, and stream-unary calls whose requests are a list or a tuple, are retried as
    :class:`RetryInterceptors` retries them; a failed call raises the last attempt's ``grpc.RpcError``
    with the history attached. Safe to share between threads.

    Args: as :class:`RetryInterceptors`; a policy with ``hedging`` is refused.

    Raises:
        ValueError: the policy has hedging.
        TypeError: an argument has the wrong type, or both ``retrier`` and ``policy``/``clock``/``rng``.
    """

    def _ready(self) -> None:
        if self.policy.hedging is not None:
            raise ValueError(_HEDGING)
        self.unary_unary = _UnaryUnary(self)
        self.stream_unary = _StreamUnary(self)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.unary_unary, self.stream_unary))

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"<SyncRetryInterceptors {self.retrier!r} target={self.target!r}>"

    def one_response(
        self, continuation: Any, details: Any, request: Any, *, replayable: bool, stream: bool = False
    ) -> Any:
        """Run a call with one response to its end: the successful attempt's outcome (a ``grpc.Call``).

        Raises:
            grpc.RpcError: the last attempt's error, with the history attached.
            ValueError: the call asked for hedging.
        """
        plan, scope, policy, hedging = self._plan(details.method, replayable=replayable, hedgeable=False)
        if hedging is not None:
            raise ValueError(_HEDGING)
        deadline = float("inf")
        if details.timeout is not None:
            deadline = time.monotonic() + details.timeout
            policy = (policy or self.policy).replace(deadline=max(0.0, details.timeout))
        attempts = self.retrier.sync_attempts(scope=scope, policy=policy, judge=plan.judge, label=plan.describe)
        outcome = None
        for attempt in attempts:
            with attempt:
                sent = iter(request) if stream and replayable else request  # grpc reads requests with next()
                outcome = continuation(_attempt_details(details, attempt.number, deadline), sent)
                error = outcome.exception()  # waits for the call to end
                if error is not None:
                    if isinstance(error, grpc.RpcError) and callable(getattr(error, "code", None)):
                        attempt.classify_error(self.classifier.outcome(error))
                    raise error
            if attempts.done:
                break
        return outcome


class _UnaryUnary(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc has no type hints
    def __init__(self, core: SyncRetryInterceptors) -> None:
        self.core = core

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return self.core.one_response(continuation, client_call_details, request, replayable=True)


class _StreamUnary(grpc.StreamUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, core: SyncRetryInterceptors) -> None:
        self.core = core

    def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        replayable = isinstance(request_iterator, Sequence) and not isinstance(request_iterator, str | bytes)
        return self.core.one_response(
            continuation, client_call_details, request_iterator, replayable=replayable, stream=True
        )


def intercept_channel(channel: grpc.Channel, retry: SyncRetryInterceptors | None = None) -> grpc.Channel:
    """``grpc.intercept_channel(channel, *retry)``: a synchronous channel whose calls are retried (create the
    channel with ``CHANNEL_OPTIONS``, so that gRPC's own retries are off).

    Raises:
        TypeError: ``channel`` is not a ``grpc.Channel`` or ``retry`` not a :class:`SyncRetryInterceptors`.
    """
    check_instance("channel", channel, grpc.Channel)
    retry = check_instance("retry", retry, SyncRetryInterceptors) if retry is not None else SyncRetryInterceptors()
    return grpc.intercept_channel(channel, *retry)

