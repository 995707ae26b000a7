"""`AsyncRetryTransport`: every request of an httpx client made resilient.

Written once for both I/O modes: the async transport is the source, and ``tools/generate.py`` writes the
sync one from it. It wraps another transport (default: httpx's own, built from the options
given) and drives each request through the retry engine, as one loop over its public integration API:
``Retrier.attempts()`` starts the call, ``start()`` begins each attempt (waiting for what it needs),
``async with attempt`` judges and settles it. A 503 then a 200::

    transport                                   engine
    ---------                                   ------
    retrier.attempts(judge=plan.judge)    ->    the call (its first attempt admitted at once when
                                                nothing can make it wait)
    attempts.start(); send; 503           ->    leaving `async with attempt`: judged (may it be sent
                                                again?), the limiter and breaker told: RETRY after d s
    attempts.start()                      ->    sleeps d, admitted: attempt 2 (the 503 is closed now)
    send; 200; leave `async with attempt` ->    a success: the quota refunded, the call DONE
    return the 200 with its RetryInfo

Every rule (classification, the quota, the delay, giving up, whether it may be resent) has one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from ... import (
    AsyncRetryError,
    Attempt,
    Attempts,
    Clock,
    Outcome,
    OutcomeKind,
    RandomSource,
    Retrier,
    RetrierStatistics,
    RetryPolicy,
)
from ..._http._rules import read_headers
from ..._http._setup import build_retrier, check_options, checked_classifier, error_body_budget
from .._classify import HttpClassifier
from .._errors import as_httpx_error
from .._modes import async_sender, check_async_policy, send_hedged
from .._peek import peek_async
from .._plan import Plan, plan_request
from .._report import EXTENSION, RetryInfo, scope_by_origin
from .._streams import discard

__all__ = ["AsyncRetryTransport"]

_SUCCESS = OutcomeKind.SUCCESS

ScopeKey = Callable[[httpx.Request], str]


class _Base:
    """What every transport has: configuration, the per-request plan, judging responses."""

    def __init__(
        self,
        *,
        policy: RetryPolicy | None,
        retrier: Retrier | None,
        classifier: HttpClassifier | None,
        scope_key: ScopeKey | None,
        clock: Clock | None,
        rng: RandomSource | None,
        wall_clock: Callable[[], float] | None,
        max_scopes: int,
        scope_idle_timeout: float,
        name: str,
        read_body: bool,
        error_body_timeout: float,
    ) -> None:
        self.read_body, self.error_body_timeout = check_options(
            read_body=read_body, error_body_timeout=error_body_timeout, scope_key=scope_key, wall_clock=wall_clock,
        )
        self.retrier = build_retrier(
            policy=policy, retrier=retrier, clock=clock, rng=rng, name=name, max_scopes=max_scopes,
            scope_idle_timeout=scope_idle_timeout,
        )
        self.classifier = checked_classifier(classifier, HttpClassifier, "an HttpClassifier")
        self._scope_key = scope_key if scope_key is not None else scope_by_origin
        self._wall_clock = wall_clock if wall_clock is not None else time.time
        self._single: RetryPolicy | None = None

    @property
    def policy(self) -> RetryPolicy:
        return self.retrier.policy

    def statistics(self) -> RetrierStatistics:
        """The retrier's statistics: counters and a snapshot of every scope."""
        return self.retrier.statistics()

    def _plan(self, request: httpx.Request, scope: str | None = None) -> Plan:
        """What the transport settles for ``request`` before sending it (``scope``: its scope, when known)."""
        return plan_request(
            request, classifier=self.classifier, read_body=self.read_body, policy=self.policy, once=self._once,
            scope=scope, scope_key=self._scope_key,
        )

    def _once(self) -> RetryPolicy:
        """The transport's policy with one attempt (made once, for ``{"retry": False}``)."""
        if self._single is None:
            self._single = self.policy.replace(max_attempts=1)
        return self._single

    def _in_memory(self, response: httpx.Response) -> bytes | None:
        """The (decoded) body of a response that is already read, as mock transports give them;
        ``None`` when it is longer than ``max_error_body``.

        Raises:
            httpx.ResponseNotRead: the body is still a stream.
        """
        content = response.content
        return content if len(content) <= self.classifier.max_error_body else None

    def _judge(
        self, attempt: Attempt, response: httpx.Response, body: bytes | None, headers: Mapping[str, str]
    ) -> Outcome:
        """Mark the attempt with what a response that needs judging says of it (its kind from status and
        error code, the delay the server asks, a quota it announces spent); returns that outcome."""
        outcome = self.classifier.response_outcome(response.status_code, response, headers, body, self._wall_clock)
        # A success tells the limiter only that it was served, unless it announced the quota spent or its pace.
        if outcome.kind is not _SUCCESS or outcome.spent_quota is not None or outcome.announced_pace is not None:
            attempt.classify_result(outcome)
        return outcome


def _answered(response: httpx.Response | None, call: Attempts) -> httpx.Response:
    """The response a call ended with, carrying its :class:`RetryInfo`."""
    assert response is not None
    response.extensions[EXTENSION] = RetryInfo(call)
    return response


def _refused(error: BaseException, request: httpx.Request) -> AsyncRetryError:
    """What asyncretry itself refused ``request`` with, as an httpx error too; anything else (the request's
    own error, a cancellation) is raised again as it is."""
    if not isinstance(error, AsyncRetryError):
        raise error
    return as_httpx_error(error, request)


def _inner(transport: httpx.AsyncBaseTransport | None, options: dict[str, Any]) -> httpx.AsyncBaseTransport:
    """The transport that really sends: the one given (of the right kind), or one built from httpx's options."""
    if transport is None:
        return httpx.AsyncHTTPTransport(**options)
    if options:
        raise TypeError(f"pass either transport or the options of the transport to build ({sorted(options)}), not both")
    if not isinstance(transport, httpx.AsyncBaseTransport):
        raise TypeError(f"transport must be an httpx.AsyncBaseTransport (an async transport), got {transport!r}")
    return transport


class AsyncRetryTransport(_Base, httpx.AsyncBaseTransport):
    """An httpx transport that retries, rate-limits and circuit-breaks every request.

    ``httpx.AsyncClient(transport=AsyncRetryTransport())`` gives every request AWS standard-mode
    retries; pass a :class:`RetryPolicy` for more (adaptive mode, a breaker, a deadline ...).

    httpx ignores a client's transport options (``verify``, ``cert``, ``http2``, ``limits``, ``proxy``
    ...) when a custom transport is given: pass them here instead, and they configure the
    ``httpx.AsyncHTTPTransport`` built underneath.

    The sync transport (``RetryTransport``, for ``httpx.Client``) takes the same arguments and makes the
    same engine decisions (:meth:`Retrier.sync_attempts`); its waits block the calling thread. It is safe
    to share between threads (decisions on shared state are taken under a lock). It refuses a policy with
    ``attempt_timeout`` (use httpx's own timeouts in sync code), with hedging, or with an async
    ``on_give_up`` hook, and reads an error body within httpx's own read timeout.

    Args:
        transport: the transport that really sends (default ``httpx.AsyncHTTPTransport(**transport_options)``).
        policy: the retry policy (default ``RetryPolicy()``).
        retrier: an existing :class:`Retrier` to share state with (instead of policy/clock/rng).
        classifier: how HTTP outcomes are judged (default :class:`HttpClassifier`).
        scope_key: maps a request to its scope (default :func:`scope_by_origin`); for AWS adaptive
            mode, use one scope per throttled resource (region + table, say).
        clock: time source (default: the event loop's clock).
        rng: random source for jitter.
        wall_clock: seconds since the epoch, for ``Retry-After`` HTTP-dates (default :func:`time.time`).
        max_scopes: the most scopes kept (default 10,000); idle ones are evicted first.
        scope_idle_timeout: seconds after which an idle scope may be evicted (default 600).
        name: a name for events and statistics.
        read_body: read every successful response's whole body inside the attempt, so that a body
            cut short is retried like any other failure (default ``False``: bodies stream to the caller).
        error_body_timeout: the longest wait for an error body, read for an error code (seconds,
            default 0.25, and at most half the time left before the call's deadline); when it runs out
            the response is judged by its status and headers alone (reading the rest of its body later
            raises ``httpx.ReadTimeout``).
        **transport_options: keyword arguments of ``httpx.AsyncHTTPTransport`` (``verify``, ``cert``,
            ``http2``, ``limits``, ``proxy``, ``uds``, ``local_address``, ``socket_options`` ...), for
            the transport built when ``transport`` is not given.

    Per-request overrides go in ``request.extensions["asyncretry"]``: ``{"retry": False}``,
    ``{"policy": RetryPolicy(...)}``, ``{"scope": "orders-table"}``, ``{"idempotent": True}``,
    ``{"read_body": True}``, ``{"hedge": True}`` (the policy's hedging), ``{"hedge": HedgingConfig(...)}`` or
    ``{"hedge": False}``; each value is checked before anything is sent (a ``TypeError`` naming the key for
    a value of another type, see :func:`asyncretry.parse_overrides`). A policy with ``hedging`` hedges every
    idempotent request with a body of bytes (see :class:`~asyncretry.HedgingConfig`). Every response carries
    a :class:`RetryInfo` (:func:`retry_info`).

    Everything the transport raises itself is an ``httpx.HTTPError`` (and still the asyncretry error:
    see :mod:`asyncretry.httpx`).
    """

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        policy: RetryPolicy | None = None,
        retrier: Retrier | None = None,
        classifier: HttpClassifier | None = None,
        scope_key: ScopeKey | None = None,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        wall_clock: Callable[[], float] | None = None,
        max_scopes: int = 10_000,
        scope_idle_timeout: float = 600.0,
        name: str = "httpx",
        read_body: bool = False,
        error_body_timeout: float = 0.25,
        **transport_options: Any,
    ) -> None:
        super().__init__(
            policy=policy, retrier=retrier, classifier=classifier, scope_key=scope_key, clock=clock, rng=rng,
            wall_clock=wall_clock, max_scopes=max_scopes, scope_idle_timeout=scope_idle_timeout, name=name,
            read_body=read_body, error_body_timeout=error_body_timeout,
        )
        check_async_policy(self.policy)
        self._transport = _inner(transport, transport_options)
        self._cancellable = async_sender(self._transport)  # for sends the call may cancel itself

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        plan = self._plan(request)
        if plan.hedging is not None:
            return _answered(*await send_hedged(self, request, plan, plan.hedging))
        call = self.retrier.attempts(scope=plan.scope, policy=plan.policy, judge=plan.judge, label=plan.label,
                                     caller=plan.caller)
        # A retried response is kept until the next attempt begins: if the call is refused that attempt
        # (an empty quota, an open breaker ...), it ends with that response, its last real outcome.
        response: httpx.Response | None = None
        sender = self._cancellable if plan.timed else self._transport
        try:
            while (attempt := await call.start()) is not None:
                if attempt.number > 1:
                    await discard(response)
                    plan.rewind()
                response = None
                async with attempt:
                    response = await self._send(attempt, request, plan, call, sender)
                if call.done:
                    break
        except BaseException as error:
            await discard(response)
            refused = _refused(error, request)
        else:
            return _answered(response, call)
        raise refused  # also an httpx.HTTPError; raised here, outside the handler of the original

    async def _send(
        self,
        attempt: Attempt,
        request: httpx.Request,
        plan: Plan,
        call: Attempts,
        transport: httpx.AsyncBaseTransport,
    ) -> httpx.Response:
        """One attempt through ``transport``: send, judge the response (marking the attempt), classify any
        error, re-raise it."""
        response = None
        try:
            response = await transport.handle_async_request(request)
            if self.classifier.plain_success(response.status_code) and not (plan.read_body or plan.reads_quota):
                return response  # a plain success: nothing to read, nothing to mark
            headers = read_headers(response.headers.raw)
            body = None
            if self.classifier.wants_error_body(response.status_code, headers):
                try:
                    body = self._in_memory(response)
                except httpx.ResponseNotRead:  # still a stream (a real connection): read its start
                    response, body = await self._peek_body(response, call)
            outcome = self._judge(attempt, response, body, headers)
            if plan.read_body and outcome.kind is _SUCCESS:
                await response.aread()
        except Exception as error:
            await discard(response)
            classified = self.classifier.error_outcome(error)
            if classified is not None:
                attempt.classify_error(classified)
            raise
        except BaseException:
            await discard(response)  # cancelled (our own attempt timeout too): never keep the connection
            raise
        return response

    async def _peek_body(self, response: httpx.Response, call: Attempts) -> tuple[httpx.Response, bytes | None]:
        """Read up to ``max_error_body`` bytes of an error body within ``error_body_timeout`` (a blocking read:
        within httpx's own read timeout), kept for the caller."""
        budget = error_body_budget(self.error_body_timeout, call.remaining(self.retrier.clock.now()))
        return await peek_async(response, self.classifier.max_error_body, budget)

    @property
    def inner(self) -> httpx.AsyncBaseTransport:
        """The transport that really sends (the one given, or the one built from the options)."""
        return self._transport

    async def aclose(self) -> None:
        await self._transport.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.retrier!r} over {type(self._transport).__name__}>"
