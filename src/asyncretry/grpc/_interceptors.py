"""grpc.aio client interceptors that retry, hedge, rate-limit and circuit-break calls through the engine.

One :class:`RetryInterceptors` holds the retrier (quota, limiter, breaker, budget per scope) and gives
grpc.aio three interceptors over it: unary-unary, unary-stream and stream-unary. Each call is driven
through :meth:`Retrier.attempts` with a judge (:meth:`GrpcClassifier.may_resend`), so every rule of
the engine applies as it does to any other integration::

    interceptor                                       engine
    -----------                                       ------
    retrier.attempts(scope, judge, label)        ->   the call
    start()                                      ->   an attempt (after backoff, quota, limits, breaker)
    continuation(details + remaining timeout
      + grpc-previous-rpc-attempts); await it
    AioRpcError: attempt.classify_error(status,
      pushback); re-raised in `async with attempt` ->  judged (may it be sent again?), decided: RETRY or give up

The call's deadline (its ``timeout``) bounds the whole call: each attempt is sent with the time left,
and the engine sees the deadline as an enclosing cancel scope, so it never sleeps or waits into it.
While an attempt runs, gRPC itself enforces the deadline, so the caller gets gRPC's real
``DEADLINE_EXCEEDED`` with the history attached. (grpc.aio runs interceptors in a task of their own:
an anyio deadline around the caller's ``await`` cancels the call, but is not propagated as its timeout.)
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import grpc
from grpc import aio

from .. import Attempt, Attempts, HedgingConfig, OutcomeKind, RetryHistory, attach_history
from .._validate import check_instance, check_items, check_str
from ._options import current_options
from ._plan import ATTEMPTS_KEY, Planner, attempt_metadata

__all__ = ["ATTEMPTS_KEY", "CHANNEL_OPTIONS", "RetryInterceptors", "insecure_channel", "secure_channel"]

CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (("grpc.enable_retries", 0),)
"""Channel options for a channel whose calls asyncretry retries: gRPC's own retries off (exactly one layer
retries), which also lets ``grpc-previous-rpc-attempts`` through to the server."""

_TRIO = (
    "asyncretry.grpc runs on asyncio only: grpc.aio has no trio support. Run the gRPC client under asyncio "
    "(anyio.run(..., backend='asyncio')), or use asyncretry's httpx transport for HTTP APIs on trio"
)


def refuse_trio() -> None:
    """Raise a clear error when called from trio (grpc.aio needs an asyncio event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        trio = sys.modules.get("trio")
        if trio is None:
            return
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            return  # not in any event loop: building interceptors before starting one is fine
        raise RuntimeError(_TRIO) from None


def _attempt_details(details: aio.ClientCallDetails, number: int, deadline: float) -> aio.ClientCallDetails:
    """The call details of attempt ``number``: the time left before ``deadline`` (on the event loop's clock;
    ``inf``: none), and from the second attempt on, ``grpc-previous-rpc-attempts``."""
    timeout = details.timeout if deadline == math.inf else max(0.0, deadline - asyncio.get_running_loop().time())
    metadata = details.metadata
    if number > 1:
        metadata = aio.Metadata(*attempt_metadata(metadata, number))
    if timeout == details.timeout and metadata is details.metadata:
        return details
    return aio.ClientCallDetails(details.method, timeout, metadata, details.credentials, details.wait_for_ready)


class _Deadline:
    """A call's deadline: when (``at``, on the event loop's clock) and the cancel scope that enforces it."""

    __slots__ = ("at", "scope")

    def __init__(self, scope: anyio.CancelScope, at: float) -> None:
        self.scope = scope
        self.at = at


async def _deadline_error(attempts: Attempts) -> aio.AioRpcError:
    """gRPC's status for a call whose deadline passed while the engine waited for the next attempt, or while
    a hedged call's attempts ran (the deadline's scope cancelled them); the call gives up on it (``"deadline"``),
    so its history is attached."""
    error = aio.AioRpcError(
        grpc.StatusCode.DEADLINE_EXCEEDED, aio.Metadata(), aio.Metadata(), details="Deadline Exceeded"
    )
    if attempts.gave_up is None:
        await attempts.give_up(error, "deadline")
    else:  # the deadline cancelled the call's ending (its on_give_up hook): it gave up already
        attach_history(error, attempts.history())
    return error


def _failed_after_a_message(error: aio.AioRpcError, history: RetryHistory) -> None:
    """Attach to ``error`` (a response stream's, after it delivered a message) the call's history: its last
    attempt failed with it, and the call gave up on it (``"not_retryable"``: never sent again)."""
    *before, last = history.attempts
    failed = replace(
        last, kind=OutcomeKind.NOT_RETRYABLE, reason=f"{error.code().name} after a message", error=repr(error)
    )
    attach_history(error, replace(history, attempts=(*before, failed), gave_up="not_retryable"))


async def _rest(call: Any, first: Any, attempts: Attempts) -> AsyncIterator[Any]:
    """A response stream from its first message on (never retried once a message was delivered); a later
    failure reaches the caller with the call's history."""
    if first is aio.EOF:
        return
    yield first
    try:
        while (message := await call.read()) is not aio.EOF:
            yield message
    except aio.AioRpcError as error:
        _failed_after_a_message(error, attempts.history())
        raise


class RetryInterceptors(Planner):
    """Retries, hedging, rate limits and circuit breaking for a grpc.aio channel, as its interceptors::

        retry = RetryInterceptors(policy=RetryPolicy(max_attempts=5), target="orders:50051")
        channel = grpc.aio.insecure_channel("orders:50051", interceptors=retry, options=CHANNEL_OPTIONS)

    It is an iterable of three interceptors (unary-unary, unary-stream, stream-unary) that share one
    :class:`~asyncretry.Retrier`; stream-stream calls pass through untouched. A failed call raises the
    real ``grpc.aio.AioRpcError`` of its last attempt, with the history attached
    (:func:`asyncretry.history_of`).

    Args:
        policy: the retry policy (default ``RetryPolicy()``); its ``hedging`` hedges idempotent
            unary-unary calls.
        retrier: an existing :class:`~asyncretry.Retrier` to share quotas, limiters, breakers and budgets
            with other clients and integrations (instead of policy/clock/rng).
        classifier: how statuses, pushback and idempotency are judged (default :class:`GrpcClassifier`).
        target: the channel's target, for scopes and logs (``"host:port"``).
        scope_key: maps a full method name (``"/pkg.Service/Method"``) to its scope; default: the target
            and the method, so each method of each server has its own quota, limiter and breaker.
        clock: time source (default: the event loop's clock).
        rng: random source for jitter.
        name: a name for events and statistics.

    Raises:
        RuntimeError: made under trio (grpc.aio runs on asyncio only).
        TypeError: an argument has the wrong type, or both ``retrier`` and ``policy``/``clock``/``rng``.
    """

    def _ready(self) -> None:
        refuse_trio()
        self.unary_unary = _UnaryUnary(self)
        self.unary_stream = _UnaryStream(self)
        self.stream_unary = _StreamUnary(self)

    def __iter__(self) -> Iterator[aio.ClientInterceptor]:
        return iter((self.unary_unary, self.unary_stream, self.stream_unary))

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return f"<RetryInterceptors {self.retrier!r} target={self.target!r}>"

    # ------------------------------------------------------------------------------ a call
    def _begin(
        self, details: aio.ClientCallDetails, *, replayable: bool, hedgeable: bool
    ) -> tuple[Attempts, HedgingConfig | None]:
        """Open a call in the engine: its scope, policy, judge and hedging (``None``: not hedged)."""
        plan, scope, policy, hedging = self._plan(details.method, replayable=replayable, hedgeable=hedgeable)
        options = current_options()
        caller = options.caller if options is not None else None
        return self.retrier.attempts(scope=scope, policy=policy, judge=plan.judge, label=plan.describe,
                                     caller=caller), hedging

    async def _under_deadline(self, details: aio.ClientCallDetails, attempts: Attempts, run: Any) -> Any:
        """``await run(deadline)`` within the call's deadline (``None`` without a timeout)."""
        timeout = details.timeout
        if timeout is None:
            return await run(None)
        with anyio.CancelScope() as scope:
            return await run(_Deadline(scope, asyncio.get_running_loop().time() + max(0.0, timeout)))
        raise await _deadline_error(attempts)  # the deadline passed while the engine waited for the next attempt

    async def _rounds(self, attempts: Attempts, deadline: _Deadline | None, send: Any) -> Any:
        """The attempts of a call that is not hedged, one after the other, until the engine is done."""
        result = None
        while (attempt := await attempts.start()) is not None:
            async with attempt:
                result = await self._send(attempt, deadline, send)
            if attempts.done:
                break
        return result

    async def _send(self, attempt: Attempt, deadline: _Deadline | None, send: Any, lift: bool = True) -> Any:
        """One attempt: ``await send(number, deadline)``; a status error is marked for the engine.

        The engine sees the call's deadline (its cancel scope's) while it decides on a retry and waits
        for it, so it never sleeps into it. While an attempt runs, the scope's deadline is lifted and gRPC
        alone enforces it (it ends the call with its own ``DEADLINE_EXCEEDED``): grpc.aio turns a
        cancellation it sees into a plain ``CancelledError``, which no anyio scope would recognise as its
        own. Hedges (``lift=False``) run side by side under the deadline, which cancels them all.
        """
        if deadline is None:
            at, scope = math.inf, None
        else:
            at, scope = deadline.at, deadline.scope if lift else None
            if scope is not None and attempt.number > 1:
                scope.deadline = math.inf
        try:
            return await send(attempt.number, at)
        except Exception as error:
            if isinstance(error, aio.AioRpcError):
                attempt.classify_error(self.classifier.outcome(error))
            if scope is not None:
                scope.deadline = at  # the engine decides on a retry knowing the deadline
            raise

    async def _one_response(
        self, details: aio.ClientCallDetails, send: Any, *, replayable: bool, hedgeable: bool
    ) -> Any:
        """A call with one response: the successful attempt's call (already finished)."""
        attempts, hedging = self._begin(details, replayable=replayable, hedgeable=hedgeable)
        if hedging is None:
            return await self._under_deadline(details, attempts, partial(self._rounds, attempts, send=send))

        async def hedged(deadline: _Deadline | None) -> Any:
            if deadline is not None:
                deadline.scope.deadline = deadline.at
            return await attempts.hedged(hedging, lambda attempt: self._send(attempt, deadline, send, lift=False))

        return await self._under_deadline(details, attempts, hedged)

    async def intercept_unary_unary(self, continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
        """Intercept a unary-unary call: returns the successful attempt's call (already finished)."""
        send = _finished(continuation, details, request)
        return await self._one_response(details, send, replayable=True, hedgeable=True)

    async def intercept_stream_unary(self, continuation: Any, details: aio.ClientCallDetails, requests: Any) -> Any:
        """Intercept a stream-unary call: retried only when its requests are a list or a tuple (sent again
        whole); any other request iterator is consumed once, so the call is sent once."""
        replayable = isinstance(requests, Sequence) and not isinstance(requests, str | bytes)
        send = _finished(continuation, details, requests)
        return await self._one_response(details, send, replayable=replayable, hedgeable=False)

    async def intercept_unary_stream(self, continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
        """Intercept a unary-stream call: retried until its first message (or its end) arrives."""
        attempts, _ = self._begin(details, replayable=True, hedgeable=False)

        async def send(number: int, deadline: float) -> tuple[Any, Any]:
            call = await continuation(_attempt_details(details, number, deadline), request)
            return call, await call.read()  # a failure before the first message raises here

        call, first = await self._under_deadline(details, attempts, partial(self._rounds, attempts, send=send))
        return _rest(call, first, attempts)


def _finished(continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
    """Sends one attempt of a call with one response: ``await send(number, deadline)`` is its finished call."""

    async def send(number: int, deadline: float) -> Any:
        call = await continuation(_attempt_details(details, number, deadline), request)
        await call  # raises the attempt's AioRpcError
        return call

    return send


class _UnaryUnary(aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc has no type hints
    def __init__(self, core: RetryInterceptors) -> None:
        self.core = core

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self.core.intercept_unary_unary(continuation, client_call_details, request)


class _UnaryStream(aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, core: RetryInterceptors) -> None:
        self.core = core

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self.core.intercept_unary_stream(continuation, client_call_details, request)


class _StreamUnary(aio.StreamUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, core: RetryInterceptors) -> None:
        self.core = core

    async def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await self.core.intercept_stream_unary(continuation, client_call_details, request_iterator)


def insecure_channel(
    target: str, *, retry: RetryInterceptors | None = None, options: Sequence[tuple[str, Any]] = (), **kwargs: Any
) -> aio.Channel:
    """``grpc.aio.insecure_channel`` with asyncretry's interceptors (``retry``, default ``RetryInterceptors(target=
    target)``) and :data:`CHANNEL_OPTIONS` before ``options``; other keyword arguments go to grpc.aio.

    Raises:
        RuntimeError: called under trio (grpc.aio runs on asyncio only).
        TypeError, ValueError: ``target`` is not a non-empty string, ``retry`` not :class:`RetryInterceptors`,
            or ``options`` not a collection of ``(name, value)`` pairs.
    """
    retry, options = _channel_arguments(target, retry, options)
    return aio.insecure_channel(target, options=[*CHANNEL_OPTIONS, *options], interceptors=list(retry), **kwargs)


def secure_channel(
    target: str, credentials: grpc.ChannelCredentials, *, retry: RetryInterceptors | None = None,
    options: Sequence[tuple[str, Any]] = (), **kwargs: Any,
) -> aio.Channel:
    """``grpc.aio.secure_channel`` with asyncretry's interceptors, as :func:`insecure_channel`.

    Raises:
        TypeError, ValueError: as :func:`insecure_channel`, or ``credentials`` not ``grpc.ChannelCredentials``.
    """
    check_instance("credentials", credentials, grpc.ChannelCredentials)
    retry, options = _channel_arguments(target, retry, options)
    return aio.secure_channel(
        target, credentials, options=[*CHANNEL_OPTIONS, *options], interceptors=list(retry), **kwargs
    )


def _option(name: str, item: object) -> tuple[str, Any]:
    """One channel option: a ``(name, value)`` pair whose name is a string."""
    if not (isinstance(item, tuple) and len(item) == 2):
        raise TypeError(f"{name} must be a (name, value) pair such as ('grpc.enable_retries', 0), got {item!r}")
    check_str(f"{name}[0]", item[0])
    return item


def _channel_arguments(
    target: object, retry: object, options: object
) -> tuple[RetryInterceptors, tuple[tuple[str, Any], ...]]:
    """The checked ``retry`` (default: new interceptors for ``target``) and ``options`` of a new channel.

    Raises:
        TypeError, ValueError: an argument of the wrong type (named in the message).
        RuntimeError: called under trio.
    """
    address = check_str("target", target)
    if address == "":
        raise ValueError("target must be the server's address such as 'localhost:50051', got ''")
    pairs = check_items("options", options, _option, what="(name, value) pairs")
    if retry is None:
        retry = RetryInterceptors(target=address)
    refuse_trio()
    return check_instance("retry", retry, RetryInterceptors), pairs
