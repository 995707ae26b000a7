"""`AsyncRetryTransport` and `RetryTransport`: every request of an httpx client made resilient.

Both wrap another transport (default: httpx's own, built from the options given) and drive each request
through the retry engine, as one loop over its public integration API: ``Retrier.attempts()`` starts
the call, ``start()`` begins each attempt (waiting for what it needs), ``async with attempt`` judges and
settles it. A 503 then a 200::

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
from typing import Any, TypeVar

import httpx

from .. import (
    AsyncRetryError,
    Attempt,
    Attempts,
    Clock,
    HedgingConfig,
    Outcome,
    OutcomeKind,
    RandomSource,
    Retrier,
    RetrierStatistics,
    RetryPolicy,
    SyncAttempts,
)
from .._validate import check_bool, check_seconds
from ._classify import HttpClassifier, Replay, body_replay, error_code_of_response, headers_read
from ._errors import as_httpx_error
from ._peek import peek_async, peek_sync
from ._report import EXTENSION, RetryInfo, describe, retry_info, scope_by_origin
from ._retry_after import server_delay
from ._streams import discard

__all__ = [
    "EXTENSION", "AsyncRetryTransport", "RetryInfo", "RetryTransport", "describe", "retry_info", "scope_by_origin",
]

_SUCCESS = OutcomeKind.SUCCESS
_OVERRIDE_KEYS = frozenset({"retry", "policy", "scope", "idempotent", "read_body", "hedge"})

ScopeKey = Callable[[httpx.Request], str]


_REPLAYABLE = Replay(True)
_SYNC_HEDGING = (
    "hedging sends attempts concurrently, which the synchronous RetryTransport cannot do: use AsyncRetryTransport, "
    "or a policy without hedging"
)


class _Plan:
    """What the transport settled for one request before sending it, and its one judge.

    Made for every request, so the fields start as class attributes, and whether the request is
    idempotent is only worked out when an outcome is retryable.
    """

    request: httpx.Request
    scope: str
    classifier: HttpClassifier
    replay: Replay
    read_body: bool
    policy: RetryPolicy | None = None
    idempotent_opt: bool | None = None
    hedging: HedgingConfig | None = None

    def judge(self, outcome: Outcome) -> Outcome:
        """Whether this request may be sent again after a failed attempt (the engine asks on every path)."""
        if not outcome.kind.retryable:
            return outcome
        return self.classifier.may_resend(
            outcome,
            idempotent=self.classifier.is_idempotent(self.request, self.idempotent_opt),
            replayable=self.replay.ok,
        )

    def label(self) -> str:
        return describe(self.request)

    def hedge(self, policy: RetryPolicy, asked: object) -> HedgingConfig | None:
        """The hedging of this request: ``asked`` (the ``"hedge"`` override: a config, True, False or None
        when not given), else the policy's; only for an idempotent request with a body of bytes.

        Raises:
            ValueError: hedging was asked for a request that cannot be hedged, or ``True`` without a config.
            TypeError: the override is not a bool or a :class:`HedgingConfig`.
        """
        if asked is False:
            return None
        if asked is None or asked is True:
            config = policy.hedging
            if config is None:
                if asked is True:
                    raise ValueError(
                        f"request.extensions[{EXTENSION!r}]['hedge'] is True but the policy has no hedging; "
                        "give a HedgingConfig instead, or a policy with hedging=HedgingConfig(...)"
                    )
                return None
        elif isinstance(asked, HedgingConfig):
            config = asked
        else:
            raise TypeError(f"the 'hedge' override must be True, False or a HedgingConfig, got {asked!r}")
        # Two attempts at once: the request must be safe to run twice, its body sendable twice at once.
        why = None
        if type(self.request.stream) is not httpx.ByteStream:
            why = "its body is a stream or a file, which cannot be sent twice at once"
        elif not self.classifier.is_idempotent(self.request, self.idempotent_opt):
            why = "it is not idempotent (add an Idempotency-Key header, or {'idempotent': True})"
        if why is None:
            return config
        if asked is None:
            return None  # the policy hedges what it may; this request, like a retry of it, is not sent twice
        raise ValueError(f"{describe(self.request)} cannot be hedged: {why}")

    def rewind(self) -> None:
        """Put a file body back where the first attempt started sending it."""
        if self.replay.rewind is not None:
            self.replay.rewind()


class _Base:
    """What the async and sync transports share: configuration, the per-request plan, judging responses."""

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
        self.read_body = check_bool("read_body", read_body)
        self.error_body_timeout = check_seconds("error_body_timeout", error_body_timeout)
        for what, value in (("scope_key", scope_key), ("wall_clock", wall_clock)):
            if value is not None and not callable(value):
                raise TypeError(f"{what} must be callable, got {value!r}")
        if retrier is not None:
            if policy is not None or clock is not None or rng is not None:
                raise TypeError("pass either retrier or policy/clock/rng, not both")
            if not isinstance(retrier, Retrier):
                raise TypeError(f"retrier must be a Retrier, got {retrier!r}")
            self.retrier = retrier
        else:
            self.retrier = Retrier(
                policy, name=name, clock=clock, rng=rng, max_scopes=max_scopes, scope_idle_timeout=scope_idle_timeout,
            )
        self.classifier = classifier if classifier is not None else HttpClassifier()
        if not isinstance(self.classifier, HttpClassifier):
            raise TypeError(f"classifier must be an HttpClassifier, got {classifier!r}")
        self._scope_key = scope_key if scope_key is not None else scope_by_origin
        self._wall_clock = wall_clock if wall_clock is not None else time.time
        self._single: RetryPolicy | None = None

    @property
    def policy(self) -> RetryPolicy:
        return self.retrier.policy

    def statistics(self) -> RetrierStatistics:
        """The retrier's statistics: counters and a snapshot of every scope."""
        return self.retrier.statistics()

    def _plan(self, request: httpx.Request, scope: str | None = None) -> _Plan:
        """What the transport settles for ``request`` before sending it (``scope``: its scope, when known)."""
        plan = _Plan()
        plan.request = request
        plan.classifier = self.classifier
        plan.read_body = self.read_body
        # A body of bytes (every request without a body too) is sent again as it is; anything else is
        # looked at now, before the first send moves a file's position.
        plan.replay = _REPLAYABLE if type(request.stream) is httpx.ByteStream else body_replay(request)
        overrides = request.extensions.get(EXTENSION)
        if overrides is not None:
            if not isinstance(overrides, Mapping):
                raise TypeError(f"request.extensions[{EXTENSION!r}] must be a mapping, got {overrides!r}")
            unknown = set(overrides) - _OVERRIDE_KEYS
            if unknown:
                raise ValueError(
                    f"request.extensions[{EXTENSION!r}] has unknown keys {sorted(unknown)}; "
                    f"allowed: {sorted(_OVERRIDE_KEYS)}"
                )
            if "policy" in overrides:
                policy = overrides["policy"]
                if not isinstance(policy, RetryPolicy):
                    raise TypeError(f"the 'policy' override must be a RetryPolicy, got {policy!r}")
                plan.policy = policy
            if overrides.get("retry", True) is False:
                if self._single is None:
                    self._single = self.policy.replace(max_attempts=1)
                plan.policy = self._single
            scope = overrides.get("scope", scope)
            plan.idempotent_opt = overrides.get("idempotent")
            plan.read_body = bool(overrides.get("read_body", plan.read_body))
            plan.hedging = plan.hedge(plan.policy or self.policy, overrides.get("hedge"))
        elif self.policy.hedging is not None:
            plan.hedging = plan.hedge(self.policy, None)
        plan.scope = scope if scope is not None else self._scope_key(request)
        return plan

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
        error code, the delay the server asks); returns that outcome."""
        status = response.status_code
        code = error_code_of_response(headers, body) if status >= 400 else None
        kind, reason = self.classifier.status_kind(response, code)
        if kind is _SUCCESS:
            return Outcome(kind, reason, result=response)
        delay = server_delay(headers, self._wall_clock) if kind.retryable else None
        if delay is None:
            outcome = Outcome(kind, reason, result=response)
        else:
            outcome = Outcome(kind, reason, result=response, server_delay=delay[0], server_delay_is_hint=delay[1])
        attempt.classify_result(outcome)
        return outcome


def _answered(response: httpx.Response | None, attempts: Attempts | SyncAttempts) -> httpx.Response:
    """The response a call ended with, carrying its :class:`RetryInfo`."""
    assert response is not None
    response.extensions[EXTENSION] = RetryInfo(attempts)
    return response


def _refused(error: BaseException, request: httpx.Request) -> AsyncRetryError:
    """What asyncretry itself refused ``request`` with, as an httpx error too; anything else (the request's
    own error, a cancellation) is raised again as it is."""
    if not isinstance(error, AsyncRetryError):
        raise error
    return as_httpx_error(error, request)


T = TypeVar("T", httpx.AsyncBaseTransport, httpx.BaseTransport)


def _inner(transport: T | None, options: dict[str, Any], kind: type[T], build: Callable[..., T], what: str) -> T:
    """The transport that really sends: the one given (of the right kind), or one built from httpx's options."""
    if transport is None:
        return build(**options)
    if options:
        raise TypeError(f"pass either transport or the options of the transport to build ({sorted(options)}), not both")
    if not isinstance(transport, kind):
        raise TypeError(f"transport must be an httpx.{kind.__name__} ({what}), got {transport!r}")
    return transport


class AsyncRetryTransport(_Base, httpx.AsyncBaseTransport):
    """An httpx transport that retries, rate-limits and circuit-breaks every request.

    ``httpx.AsyncClient(transport=AsyncRetryTransport())`` gives every request AWS standard-mode
    retries; pass a :class:`RetryPolicy` for more (adaptive mode, a breaker, a deadline ...).

    httpx ignores a client's transport options (``verify``, ``cert``, ``http2``, ``limits``, ``proxy``
    ...) when a custom transport is given: pass them here instead, and they configure the
    ``httpx.AsyncHTTPTransport`` built underneath.

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
    ``{"hedge": False}``. A policy with ``hedging`` hedges every idempotent request with a body of bytes (see
    :class:`~asyncretry.HedgingConfig`). Every response carries a :class:`RetryInfo` (:func:`retry_info`).

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
        self._transport = _inner(
            transport, transport_options, httpx.AsyncBaseTransport, httpx.AsyncHTTPTransport, "an async transport"
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        plan = self._plan(request)
        attempts = self.retrier.attempts(scope=plan.scope, policy=plan.policy, judge=plan.judge, label=plan.label)
        if plan.hedging is not None:
            return await self._hedged(request, plan, attempts, plan.hedging)
        # A retried response is kept until the next attempt begins: if the call is refused that attempt
        # (an empty quota, an open breaker ...), it ends with that response, its last real outcome.
        response: httpx.Response | None = None
        try:
            while (attempt := await attempts.start()) is not None:
                if attempt.number > 1:
                    await discard(response)
                    plan.rewind()
                response = None
                async with attempt:
                    response = await self._send(attempt, request, plan, attempts)
                if attempts.done:
                    break
        except BaseException as error:
            await discard(response)
            refused = _refused(error, request)
        else:
            return _answered(response, attempts)
        raise refused  # also an httpx.HTTPError; raised here, outside the handler of the original

    async def _hedged(
        self, request: httpx.Request, plan: _Plan, attempts: Attempts, config: HedgingConfig
    ) -> httpx.Response:
        """The request with hedges: the same sends, raced; every losing or failed response is closed."""
        try:
            response = await attempts.hedged(
                config, lambda attempt: self._send(attempt, request, plan, attempts), discard
            )
        except AsyncRetryError as error:
            refused = as_httpx_error(error, request)
        else:
            return _answered(response, attempts)
        raise refused

    async def _send(self, attempt: Attempt, request: httpx.Request, plan: _Plan, attempts: Attempts) -> httpx.Response:
        """One attempt: send, judge the response (marking the attempt), classify any error, re-raise it."""
        response = None
        try:
            response = await self._transport.handle_async_request(request)
            if self.classifier.plain_success(response.status_code) and not plan.read_body:
                return response  # a plain success: nothing to read, nothing to mark
            headers = headers_read(response.headers)
            body = None
            if self.classifier.wants_body(response, headers):
                try:
                    body = self._in_memory(response)
                except httpx.ResponseNotRead:  # still a stream (a real connection): read its start
                    response, body = await self._peek_body(response, attempts)
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

    async def _peek_body(self, response: httpx.Response, attempts: Attempts) -> tuple[httpx.Response, bytes | None]:
        """Read up to ``max_error_body`` bytes of an error body within ``error_body_timeout``, kept for the caller."""
        budget = self.error_body_timeout
        remaining = attempts.remaining(self.retrier.clock.now())
        if remaining is not None:
            budget = min(budget, remaining / 2)  # never past the deadline: leave time to judge and answer
        return await peek_async(response, self.classifier.max_error_body, budget)

    @property
    def inner(self) -> httpx.AsyncBaseTransport:
        """The transport that really sends (the one given, or the one built from the options)."""
        return self._transport

    async def aclose(self) -> None:
        await self._transport.aclose()

    def __repr__(self) -> str:
        return f"<AsyncRetryTransport {self.retrier!r} over {type(self._transport).__name__}>"


class RetryTransport(_Base, httpx.BaseTransport):
    """The synchronous twin of :class:`AsyncRetryTransport`, for ``httpx.Client``.

    The same engine decisions (:meth:`Retrier.sync_attempts`); waits block the calling thread. Safe to
    share between threads: decisions on shared state are taken under a lock. A policy with
    ``attempt_timeout`` is refused (use httpx's own timeouts in sync code) and so is an async
    ``on_give_up`` hook. An error body is read within httpx's own read timeout.

    Args: as :class:`AsyncRetryTransport` (``transport`` defaults to ``httpx.HTTPTransport(**transport_options)``).
    """

    def __init__(
        self,
        transport: httpx.BaseTransport | None = None,
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
        if self.policy.attempt_timeout is not None:
            raise ValueError(
                "attempt_timeout cannot be enforced in synchronous code; set httpx timeouts instead "
                f"(got attempt_timeout={self.policy.attempt_timeout})"
            )
        if self.policy.on_give_up_is_async:
            raise ValueError("on_give_up must be a plain function for the synchronous RetryTransport")
        if self.policy.hedging is not None:
            raise ValueError(_SYNC_HEDGING)
        self._transport = _inner(
            transport, transport_options, httpx.BaseTransport, httpx.HTTPTransport, "a sync transport"
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        plan = self._plan(request)
        if plan.hedging is not None:
            raise ValueError(_SYNC_HEDGING)
        attempts = self.retrier.sync_attempts(scope=plan.scope, policy=plan.policy, judge=plan.judge, label=plan.label)
        response: httpx.Response | None = None  # kept until the next attempt begins, as in the async transport
        try:
            while (attempt := attempts.start()) is not None:
                if attempt.number > 1:
                    if response is not None:
                        response.close()
                    plan.rewind()
                response = None
                with attempt:
                    response = self._send(attempt, request, plan)
                if attempts.done:
                    break
        except BaseException as error:
            if response is not None:
                response.close()
            refused = _refused(error, request)
        else:
            return _answered(response, attempts)
        raise refused

    def _send(self, attempt: Attempt, request: httpx.Request, plan: _Plan) -> httpx.Response:
        response = None
        try:
            response = self._transport.handle_request(request)
            if self.classifier.plain_success(response.status_code) and not plan.read_body:
                return response
            headers = headers_read(response.headers)
            body = None
            if self.classifier.wants_body(response, headers):
                try:
                    body = self._in_memory(response)
                except httpx.ResponseNotRead:
                    response, body = self._peek_body(response)
            outcome = self._judge(attempt, response, body, headers)
            if plan.read_body and outcome.kind is _SUCCESS:
                response.read()
        except Exception as error:
            if response is not None:
                response.close()
            classified = self.classifier.error_outcome(error)
            if classified is not None:
                attempt.classify_error(classified)
            raise
        return response

    def _peek_body(self, response: httpx.Response) -> tuple[httpx.Response, bytes | None]:
        """As the async transport's, within httpx's own read timeout (a blocking read has no budget of its own)."""
        return peek_sync(response, self.classifier.max_error_body)

    @property
    def inner(self) -> httpx.BaseTransport:
        """The transport that really sends (the one given, or the one built from the options)."""
        return self._transport

    def close(self) -> None:
        self._transport.close()

    def __repr__(self) -> str:
        return f"<RetryTransport {self.retrier!r} over {type(self._transport).__name__}>"

