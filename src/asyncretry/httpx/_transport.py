"""`AsyncRetryTransport` and `RetryTransport`: every request of an httpx client made resilient.

Both wrap another transport (default: httpx's own) and send each request through the retry engine:
classification, quota-bounded retries, jittered backoff honouring ``Retry-After``, the adaptive rate
limiter (adaptive mode), a fixed per-scope rate limit and circuit breaking. State is kept per scope,
by default the request's origin.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import httpx

from .._engine._classify import Outcome
from .._engine._history import RetryHistory
from .._engine._policy import RetryPolicy
from .._engine._retrier import Attempt, Attempts, FirstSuccess, Retrier, RetrierStatistics, SyncAttempts, _Call, _Scope
from .._primitives._clock import Clock, RandomSource
from .._primitives._kinds import OutcomeKind
from ._classify import HttpClassifier, PrefixedStream, Replay, body_replay, error_code_of_response, headers_read
from ._retry_after import server_delay

__all__ = ["EXTENSION", "AsyncRetryTransport", "RetryInfo", "RetryTransport", "scope_by_origin"]

EXTENSION = "asyncretry"
"""The key of asyncretry's entry in ``request.extensions`` (overrides) and ``response.extensions`` (report)."""

_SUCCESS = Outcome(OutcomeKind.SUCCESS, "ok")
_OVERRIDE_KEYS = frozenset({"retry", "policy", "scope", "idempotent", "read_body"})

ScopeKey = Callable[[httpx.Request], str]


_ORIGINS: dict[tuple[str, str, int | None], str] = {}


def scope_by_origin(request: httpx.Request) -> str:
    """The default scope of a request: its origin, ``scheme://host:port``."""
    url = request.url
    # httpx keeps the parsed, normalised parts (lower-case scheme and host, port or None) in one tuple;
    # reading them there costs a tenth of the public properties. Any other httpx: the properties.
    parts = getattr(url, "_uri_reference", None)
    key = (parts.scheme, parts.host, parts.port) if parts is not None else (url.scheme, url.host, url.port)
    origin = _ORIGINS.get(key)
    if origin is None:
        port = url.port or (443 if url.scheme == "https" else 80)
        origin = f"{url.scheme}://{url.host}:{port}"
        if len(_ORIGINS) >= 4096:  # a bounded cache: origins are few, but never let it grow without end
            _ORIGINS.clear()
        _ORIGINS[key] = origin
    return origin


class RetryInfo:
    """What the transport reports in ``response.extensions["asyncretry"]``.

    Attributes:
        attempts: attempts made (1 when the first one was final).
        total_delay: seconds slept between attempts.
        scope: the scope the request belonged to.
        gave_up: why retrying stopped on this (failed) response, or ``None``.
        history: the full record of the attempts (built when first read).
    """

    __slots__ = ("_call", "_history")

    def __init__(self, call: _Call | FirstSuccess) -> None:
        # Made for every response, so it only keeps the finished call and reads it when asked.
        self._call = call
        self._history: RetryHistory | None = None

    @property
    def attempts(self) -> int:
        return self._call.number

    @property
    def total_delay(self) -> float:
        return self._call.total_delay

    @property
    def scope(self) -> str:
        return self._call._scope.key

    @property
    def gave_up(self) -> str | None:
        return self._call.gave_up

    @property
    def history(self) -> RetryHistory:
        if self._history is None:
            self._history = self._call.history()
        return self._history

    def __repr__(self) -> str:
        return (
            f"RetryInfo(attempts={self.attempts}, total_delay={self.total_delay:.3f}, scope={self.scope!r}, "
            f"gave_up={self.gave_up!r})"
        )


_REPLAYABLE = Replay(True)


class _Plan:
    """What the transport settled for one request before sending it.

    Made for every request, so the fields start as class attributes and whether the request is
    idempotent is only worked out when an outcome is retryable.
    """

    request: httpx.Request
    scope: str
    classifier: HttpClassifier
    replay: Replay
    read_body: bool
    policy: RetryPolicy | None = None
    idempotent_opt: bool | None = None
    _idempotent: bool | None = None

    @property
    def idempotent(self) -> bool:
        if self._idempotent is None:
            self._idempotent = self.classifier.is_idempotent(self.request, self.idempotent_opt)
        return self._idempotent


class _Base:
    """What the async and sync transports share: configuration, scopes, the per-request plan."""

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
    ) -> None:
        self.read_body = read_body
        if retrier is not None:
            if policy is not None or clock is not None or rng is not None:
                raise TypeError("pass either retrier or policy/clock/rng, not both")
            self.retrier = retrier
        else:
            self.retrier = Retrier(
                policy, name=name, clock=clock, rng=rng, max_scopes=max_scopes,
                scope_idle_timeout=scope_idle_timeout,
            )
        self.classifier = classifier if classifier is not None else HttpClassifier()
        if not isinstance(self.classifier, HttpClassifier):
            raise TypeError(f"classifier must be an HttpClassifier, got {classifier!r}")
        self._scope_key = scope_key if scope_key is not None else scope_by_origin
        self._wall_clock = wall_clock if wall_clock is not None else time.time
        self._single: RetryPolicy | None = None
        # classifier.plain_success(status) for statuses below 400, settled once (the classifier is frozen)
        judged = self.classifier.retry_if_response is not None
        self._not_plain = frozenset(range(400)) if judged else (
            self.classifier.transient_statuses | self.classifier.throttling_statuses
        )

    @property
    def policy(self) -> RetryPolicy:
        return self.retrier.policy

    def statistics(self) -> RetrierStatistics:
        """The retrier's statistics: counters and a snapshot of every scope."""
        return self.retrier.statistics()

    def _plan(self, request: httpx.Request) -> _Plan:
        plan = _Plan()
        plan.request = request
        plan.classifier = self.classifier
        plan.read_body = self.read_body
        # A body of bytes (every request without a body too) is sent again as it is; anything else is
        # looked at now, before the first send moves a file's position.
        plan.replay = _REPLAYABLE if type(request.stream) is httpx.ByteStream else body_replay(request)
        overrides = request.extensions.get(EXTENSION)
        scope: str | None = None
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
            scope = overrides.get("scope")
            plan.idempotent_opt = overrides.get("idempotent")
            plan.read_body = bool(overrides.get("read_body", plan.read_body))
        plan.scope = scope if scope is not None else self._scope_key(request)
        return plan

    def _resume(self, request: httpx.Request, scope: _Scope, started: float) -> tuple[_Plan, Attempts, Attempt]:
        """The plan and the call of a request whose first attempt began on the quick path."""
        attempts, attempt = Attempts._resume(self.retrier, scope, started)
        return self._plan(request), attempts, attempt

    def _error_outcome(self, error: Exception, plan: _Plan) -> Outcome | None:
        return self.classifier.classify_error(error, idempotent=plan.idempotent, replayable=plan.replay.ok)

    def _response_outcome(
        self, response: httpx.Response, plan: _Plan, body: bytes | None, headers: Mapping[str, str]
    ) -> Outcome:
        status = response.status_code
        if status < 400 and status not in self._not_plain:
            return _SUCCESS  # the hot path: no reason string, no header parsing
        code = error_code_of_response(headers, body) if status >= 400 else None
        kind, reason = self.classifier.status_kind(response, code)
        if kind.retryable:
            if not plan.replay.ok:
                return Outcome(OutcomeKind.NOT_RETRYABLE, f"{reason} (the request body cannot be replayed)",
                               result=response)
            if not plan.idempotent:
                return Outcome(OutcomeKind.NOT_RETRYABLE, f"{reason} (not idempotent)", result=response)
            delay = server_delay(headers, self._wall_clock)
            if delay is not None:
                return Outcome(kind, reason, result=response, server_delay=delay[0], server_delay_is_hint=delay[1])
        return Outcome(kind, reason, result=response)

    @staticmethod
    def _mark(attempt: Attempt, outcome: Outcome) -> None:
        if outcome.kind is not OutcomeKind.SUCCESS:
            attempt.classify_result(outcome)

    @staticmethod
    def _report(response: httpx.Response, call: _Call) -> httpx.Response:
        # Each response has its own extensions dict (httpx and httpcore make one per response).
        response.extensions[EXTENSION] = RetryInfo(call)
        return response

    def _in_memory(self, response: httpx.Response) -> bytes | None:
        """The (decoded) body of a response that is already read, as mock transports give them;
        ``None`` when it is longer than ``max_error_body``.

        Raises:
            httpx.ResponseNotRead: the body is still a stream.
        """
        content = response.content
        return content if len(content) <= self.classifier.max_error_body else None

    @staticmethod
    def _peeked(response: httpx.Response, raw: bytes, rest: _Remaining | None) -> tuple[httpx.Response, bytes | None]:
        """The response with the bytes read from it put back in front of its stream, and the decoded body."""
        response.stream = PrefixedStream(raw, rest)
        return response, (None if rest is not None else _decoded(response.headers, raw))


class AsyncRetryTransport(_Base, httpx.AsyncBaseTransport):
    """An httpx transport that retries, rate-limits and circuit-breaks every request.

    ``httpx.AsyncClient(transport=AsyncRetryTransport())`` gives every request AWS standard-mode
    retries; pass a :class:`RetryPolicy` for more (adaptive mode, a breaker, a deadline ...).

    Args:
        transport: the transport that really sends (default ``httpx.AsyncHTTPTransport()``).
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

    Per-request overrides go in ``request.extensions["asyncretry"]``: ``{"retry": False}``,
    ``{"policy": RetryPolicy(...)}``, ``{"scope": "orders-table"}``, ``{"idempotent": True}``,
    ``{"read_body": True}``.
    Every response carries a :class:`RetryInfo` in ``response.extensions["asyncretry"]``.

    Errors raised while the caller reads the body happen after the transport returned, out of its
    reach; with ``read_body`` (or :func:`asyncretry.httpx.fetch`) the body is read inside the attempt
    and such errors are retried too.
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
    ) -> None:
        super().__init__(
            policy=policy, retrier=retrier, classifier=classifier, scope_key=scope_key, clock=clock, rng=rng,
            wall_clock=wall_clock, max_scopes=max_scopes, scope_idle_timeout=scope_idle_timeout, name=name,
            read_body=read_body,
        )
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        retrier = self.retrier
        scope = None
        if not self.read_body and EXTENSION not in request.extensions and type(request.stream) is httpx.ByteStream:
            # The common case (no overrides, a body of bytes): the first attempt starts before the call
            # object exists, and a plain success never makes one.
            started = retrier._clock.now()
            scope = retrier._quick_scope(self._scope_key(request), started)
        if scope is None:
            plan = self._plan(request)
            attempts = retrier.attempts(scope=plan.scope, policy=plan.policy)
        else:
            response = None
            attempt: Attempt | None = None
            try:
                response = await self._transport.handle_async_request(request)
                status = response.status_code
                if status < 400 and status not in self._not_plain:
                    done = retrier._quick_success(scope, started, retrier._clock.now())
                    response.extensions[EXTENSION] = RetryInfo(done)
                    return response
                # Anything else is for the engine to judge: now the call needs its object.
                plan, attempts, attempt = self._resume(request, scope, started)
                response = await self._judge(attempt, response, plan)
            except BaseException as error:
                if attempt is None:
                    plan, attempts, attempt = self._resume(request, scope, started)
                if isinstance(error, Exception):
                    await self._failed(attempt, error, plan, response)
                if not await attempt.__aexit__(type(error), error, error.__traceback__):
                    raise
            else:
                await attempt.__aexit__(None, None, None)
                if not attempts.retrying:  # the call is over (a success, or it gave up on this response)
                    return self._report(response, attempts)
                await response.aclose()  # a discarded response must not keep its connection
        async for attempt in attempts:
            if attempt.number > 1 and plan.replay.rewind is not None:
                plan.replay.rewind()
            async with attempt:
                response = None
                response = await self._send(attempt, request, plan)
            if not attempts.retrying:
                break  # the call is over: no need to ask the iterator (and catch its StopAsyncIteration)
            if response is not None:
                await response.aclose()  # a discarded response must not keep its connection
        assert response is not None
        return self._report(response, attempts)

    async def _send(self, attempt: Attempt, request: httpx.Request, plan: _Plan) -> httpx.Response:
        """One attempt: send, judge the response (marking the attempt), classify any error, re-raise it."""
        response = None
        try:
            response = await self._transport.handle_async_request(request)
            status = response.status_code
            if status < 400 and status not in self._not_plain and not plan.read_body:
                return response  # a plain success: nothing to read, nothing to mark
            return await self._judge(attempt, response, plan)
        except Exception as error:
            await self._failed(attempt, error, plan, response)
            raise

    async def _judge(self, attempt: Attempt, response: httpx.Response, plan: _Plan) -> httpx.Response:
        """Judge a response that is not a plain success: read an error code, mark the attempt."""
        body = None
        headers = headers_read(response.headers)
        if self.classifier.wants_body(response, headers):
            try:
                body = self._in_memory(response)
            except httpx.ResponseNotRead:  # still a stream (a real connection): read its start
                response, body = await self._peek_body(response)
        outcome = self._response_outcome(response, plan, body, headers)
        if plan.read_body and outcome.kind is OutcomeKind.SUCCESS:
            await response.aread()
        if outcome is not _SUCCESS:
            self._mark(attempt, outcome)
        return response

    async def _failed(self, attempt: Attempt, error: Exception, plan: _Plan, response: httpx.Response | None) -> None:
        """An attempt raised: free its response, and classify the error with what only we know."""
        if response is not None:
            await response.aclose()
        classified = self._error_outcome(error, plan)
        if classified is not None:
            attempt.classify_error(classified)

    async def _peek_body(self, response: httpx.Response) -> tuple[httpx.Response, bytes | None]:
        """Read up to ``max_error_body`` bytes of an error body, and keep them for the caller."""
        limit = self.classifier.max_error_body
        chunks: list[bytes] = []
        size = 0
        stream = response.stream
        iterator = stream.__aiter__()  # type: ignore[union-attr]
        finished = True
        try:
            async for chunk in iterator:
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    finished = False
                    break
        except Exception:
            await response.aclose()
            raise
        if finished:
            # Read to the end, the stream still holds its connection until it is closed: close it now,
            # the caller gets the bytes from memory (the response itself stays open for the caller).
            await stream.aclose()  # type: ignore[union-attr]
        return _Base._peeked(response, b"".join(chunks), None if finished else _Remaining(iterator, stream))

    async def aclose(self) -> None:
        await self._transport.aclose()

    def __repr__(self) -> str:
        return f"<AsyncRetryTransport {self.retrier!r} over {type(self._transport).__name__}>"


class _Remaining:
    """The rest of a partly read async stream (the iterator already started) and its closer."""

    def __init__(self, iterator: Any, stream: Any) -> None:
        self._iterator = iterator
        self._stream = stream

    async def __aiter__(self) -> Any:
        async for chunk in self._iterator:
            yield chunk

    def __iter__(self) -> Any:
        yield from self._iterator

    async def aclose(self) -> None:
        await self._stream.aclose()

    def close(self) -> None:
        self._stream.close()


def _decoded(headers: httpx.Headers, raw: bytes) -> bytes | None:
    """The error body decoded (gzip, deflate ...), or None when it cannot be."""
    if "content-encoding" not in headers:
        return raw
    probe = httpx.Response(200, headers=headers, content=raw)
    try:
        probe.read()
    except httpx.DecodingError:
        return None
    return probe.content


class RetryTransport(_Base, httpx.BaseTransport):
    """The synchronous twin of :class:`AsyncRetryTransport`, for ``httpx.Client``.

    The same engine decisions (:class:`asyncretry.SyncAttempts`); waits block the calling thread.
    Safe to share between threads: decisions on shared state are taken under a lock. A policy with
    ``attempt_timeout`` is refused (use httpx's own timeouts in sync code) and so is an async
    ``on_give_up`` hook.

    Args: as :class:`AsyncRetryTransport` (``transport`` defaults to ``httpx.HTTPTransport()``).
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
    ) -> None:
        super().__init__(
            policy=policy, retrier=retrier, classifier=classifier, scope_key=scope_key, clock=clock, rng=rng,
            wall_clock=wall_clock, max_scopes=max_scopes, scope_idle_timeout=scope_idle_timeout, name=name,
            read_body=read_body,
        )
        if self.policy.attempt_timeout is not None:
            raise ValueError(
                "attempt_timeout cannot be enforced in synchronous code; set httpx timeouts instead "
                f"(got attempt_timeout={self.policy.attempt_timeout})"
            )
        if self.policy.on_give_up_is_async:
            raise ValueError("on_give_up must be a plain function for the synchronous RetryTransport")
        self._transport = transport if transport is not None else httpx.HTTPTransport()
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        plan = self._plan(request)
        with self._lock:
            attempts = SyncAttempts(
                self.retrier, self.retrier._scope(plan.scope), plan.policy or self.policy, lock=self._lock
            )
        response: httpx.Response | None = None
        for attempt in attempts:
            if attempt.number > 1 and plan.replay.rewind is not None:
                plan.replay.rewind()
            with attempt:
                response = None
                try:
                    response = self._transport.handle_request(request)
                    status = response.status_code
                    if status < 400 and status not in self._not_plain:
                        outcome = _SUCCESS  # a plain success: no headers to read
                    else:
                        body = None
                        headers = headers_read(response.headers)
                        if self.classifier.wants_body(response, headers):
                            try:
                                body = self._in_memory(response)
                            except httpx.ResponseNotRead:
                                response, body = self._peek_body(response)
                        outcome = self._response_outcome(response, plan, body, headers)
                    if plan.read_body and outcome.kind is OutcomeKind.SUCCESS:
                        response.read()
                except Exception as error:
                    if response is not None:
                        response.close()
                    classified = self._error_outcome(error, plan)
                    if classified is not None:
                        attempt.classify_error(classified)
                    raise
                if outcome is not _SUCCESS:
                    self._mark(attempt, outcome)
            if attempts.retrying and response is not None:
                response.close()
        assert response is not None
        return self._report(response, attempts)

    def _peek_body(self, response: httpx.Response) -> tuple[httpx.Response, bytes | None]:
        limit = self.classifier.max_error_body
        chunks: list[bytes] = []
        size = 0
        stream = response.stream
        iterator = iter(cast(Iterable[bytes], stream))
        finished = True
        try:
            for chunk in iterator:
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    finished = False
                    break
        except Exception:
            response.close()
            raise
        if finished:
            stream.close()  # type: ignore[union-attr]  # as in the async transport: release the connection now
        return _Base._peeked(response, b"".join(chunks), None if finished else _Remaining(iterator, stream))

    def close(self) -> None:
        self._transport.close()

    def __repr__(self) -> str:
        return f"<RetryTransport {self.retrier!r} over {type(self._transport).__name__}>"
