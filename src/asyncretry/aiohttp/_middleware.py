"""`RetryMiddleware`: every request of an aiohttp ``ClientSession`` made resilient.

aiohttp calls a client middleware with the request and the handler that sends it; the handler may be
called again, which is how a retry is made. Each request is one call of the retry engine, through
its public integration API::

    async for attempt in retrier.attempts(scope=..., policy=..., judge=plan.judge, label=plan.label):
        async with attempt:
            response = await handler(request)      # judged: status, error code, Retry-After
        if attempts.done: break
        response.release()                          # a retried response goes back to the pool

The rules (classification, ``Retry-After``, idempotency and safe replay, per-request options) are the
ones the httpx transport follows, from the same sources; only what aiohttp alone knows (its
exceptions, its request bodies, its responses) is written here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp
import anyio
import sniffio
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse

from .. import (
    AsyncRetryError,
    Attempt,
    Attempts,
    Clock,
    Outcome,
    OutcomeKind,
    RandomSource,
    RequestOverrides,
    Retrier,
    RetrierStatistics,
    RetryPolicy,
    parse_overrides,
)
from .._http._report import RetryInfo
from .._http._rules import read_headers
from .._http._setup import build_retrier, check_options, checked_classifier, error_body_budget
from ._classify import HttpClassifier, body_replayable
from ._errors import as_aiohttp_error
from ._report import describe, report, scope_by_origin

__all__ = ["RetryMiddleware"]

_SUCCESS = OutcomeKind.SUCCESS
_OPTIONS = "RetryMiddleware.options(...)"
_NO_OVERRIDES = RequestOverrides()
_NO_HEDGING = (
    "the aiohttp middleware cannot hedge: a hedge sends one request twice at once, and an "
    "aiohttp.ClientRequest can only be sent once at a time; use a policy without hedging "
    "(asyncretry.httpx.AsyncRetryTransport hedges)"
)

ScopeKey = Callable[[ClientRequest], str]


def refuse_trio() -> None:
    """Raise a clear error when called under trio: aiohttp runs on asyncio only.

    Raises:
        RuntimeError: the running async library is not asyncio.
    """
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return  # made outside any event loop: aiohttp itself will run it on asyncio
    if library != "asyncio":
        raise RuntimeError(
            f"asyncretry.aiohttp runs on asyncio only (aiohttp is an asyncio library), not on {library}; "
            "under trio, use asyncretry.httpx (httpx runs on both)"
        )


class _Plan:
    """What the middleware settled for one request before sending it, and its one judge."""

    __slots__ = ("classifier", "idempotent", "request")

    def __init__(self, request: ClientRequest, classifier: HttpClassifier, idempotent: bool | None) -> None:
        self.request = request
        self.classifier = classifier
        self.idempotent = idempotent

    def judge(self, outcome: Outcome) -> Outcome:
        """Whether this request may be sent again after a failed attempt (the engine asks on every path)."""
        if not outcome.kind.retryable:
            return outcome
        return self.classifier.may_resend(
            outcome,
            idempotent=self.classifier.is_idempotent(self.request, self.idempotent),
            # Asked after the send: aiohttp marks a body it could not rewind (a stream, a file that cannot
            # seek) as consumed once sent, and a streamed upload is never replayable.
            replayable=body_replayable(self.request),
        )

    def label(self) -> str:
        return describe(self.request)


class RetryMiddleware:
    """An aiohttp client middleware that retries, rate-limits and circuit-breaks every request.

    ``aiohttp.ClientSession(middlewares=[RetryMiddleware()])`` gives every request AWS standard-mode
    retries: exponential backoff with jitter, the retry quota, ``Retry-After`` in all its forms (capped
    by the policy's ``max_server_delay``, never slept past a deadline), a breaker and a limiter per
    origin (``scope_key``). A request is sent again only if it is idempotent (or never left) and its
    body can be sent again; every response that is not handed to the caller is released.

    aiohttp runs on asyncio only, and so does this middleware (made under trio, it raises
    ``RuntimeError``). Hedging is not offered: an aiohttp request cannot be sent twice at once.

    Args:
        policy: the retry policy (default :class:`~asyncretry.RetryPolicy`).
        retrier: a :class:`~asyncretry.Retrier` to share (instead of ``policy``/``clock``/``rng``).
        classifier: how responses and errors are judged (:class:`HttpClassifier`).
        scope_key: the scope of a request (default: its origin, :func:`scope_by_origin`).
        clock, rng: injected time and randomness (tests).
        wall_clock: the wall-clock time for ``Retry-After`` HTTP-dates (default :func:`time.time`).
        max_scopes, scope_idle_timeout: bounds of the scope table (see :class:`~asyncretry.Retrier`).
        name: the retrier's name in events, logs and metrics (default ``"aiohttp"``).
        read_body: read every successful body inside the attempt, so that an error while reading it
            (a connection cut half-way) is retried like any other (default ``False``).
        error_body_timeout: the longest wait for an error body read to find an error code (seconds,
            default 0.25; never past the deadline). A body that does not come in time is a timeout.

    Raises:
        TypeError, ValueError: an option of the wrong type or out of range (named in the message), or a
            policy with hedging.
        RuntimeError: made under trio.
    """

    def __init__(
        self,
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
        name: str = "aiohttp",
        read_body: bool = False,
        error_body_timeout: float = 0.25,
    ) -> None:
        refuse_trio()
        self.read_body, self.error_body_timeout = check_options(
            read_body=read_body, error_body_timeout=error_body_timeout, scope_key=scope_key, wall_clock=wall_clock,
        )
        self.retrier = build_retrier(
            policy=policy, retrier=retrier, clock=clock, rng=rng, name=name, max_scopes=max_scopes,
            scope_idle_timeout=scope_idle_timeout,
        )
        if self.retrier.policy.hedging is not None:
            raise ValueError(_NO_HEDGING)
        self.classifier = checked_classifier(classifier, HttpClassifier, "an asyncretry.aiohttp.HttpClassifier")
        self._scope_key = scope_key if scope_key is not None else scope_by_origin
        self._wall_clock = wall_clock if wall_clock is not None else time.time
        self._single: RetryPolicy | None = None

    @property
    def policy(self) -> RetryPolicy:
        return self.retrier.policy

    def statistics(self) -> RetrierStatistics:
        """The retrier's statistics: counters and a snapshot of every scope."""
        return self.retrier.statistics()

    def options(self, **options: Any) -> _WithOptions:
        """This middleware with options for some requests only: ``session.get(url,
        middlewares=[retry.options(idempotent=True)])``. The retrier (quota, breaker, limiter) is shared.

        Args:
            retry: ``False`` makes one attempt only.
            policy: a :class:`~asyncretry.RetryPolicy` for these requests.
            scope: the scope of these requests (a str).
            idempotent: ``True``/``False``: whether these requests may be sent again after they may
                have reached the server (overrides method and ``Idempotency-Key``).
            read_body: read the body inside the attempt (see the class).
            hedge: only ``False`` (the middleware does not hedge).

        Raises:
            TypeError, ValueError: an unknown option or a value of the wrong type.
        """
        checked = parse_overrides(options, _OPTIONS)
        if checked.hedge not in (None, False):
            raise ValueError(f"{_OPTIONS}['hedge'] must be False or left out, got {checked.hedge!r}: {_NO_HEDGING}")
        if checked.policy is not None and checked.policy.hedging is not None:
            raise ValueError(f"{_OPTIONS}['policy'] has hedging: {_NO_HEDGING}")
        return _WithOptions(self, checked)

    async def __call__(self, request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        return await self.send(request, handler, _NO_OVERRIDES)

    async def send(
        self, request: ClientRequest, handler: ClientHandlerType, options: RequestOverrides
    ) -> ClientResponse:
        """Send ``request`` through ``handler`` with retries, with the per-request ``options``."""
        policy = options.policy
        if options.retry is False:  # one attempt, of the request's own policy if it has one
            if policy is not None:
                policy = policy.replace(max_attempts=1)
            else:
                if self._single is None:
                    self._single = self.policy.replace(max_attempts=1)
                policy = self._single
        read_body = self.read_body if options.read_body is None else options.read_body
        reads_quota = (policy or self.policy).holds_spent_quota  # a success is read for a spent quota too
        plan = _Plan(request, self.classifier, options.idempotent)
        scope = options.scope if options.scope is not None else self._scope_key(request)
        attempts = self.retrier.attempts(scope=scope, policy=policy, judge=plan.judge, label=plan.label,
                                         caller=options.caller)
        response: ClientResponse | None = None
        try:
            async for attempt in attempts:
                response = None
                async with attempt:
                    response = await self._attempt(attempt, request, handler, read_body, reads_quota, attempts)
                if attempts.done:
                    break
                if response is not None:
                    response.release()  # retried: its connection goes back to the pool (or is closed)
        except AsyncRetryError as error:
            refused = as_aiohttp_error(error)  # raised below, outside the handler: it keeps error's context
        else:
            assert response is not None
            report(response, RetryInfo(attempts))
            return response
        raise refused

    async def _attempt(
        self, attempt: Attempt, request: ClientRequest, handler: ClientHandlerType, read_body: bool,
        reads_quota: bool, attempts: Attempts,
    ) -> ClientResponse:
        """One attempt: send, judge the response (marking the attempt), classify any error, re-raise it.
        ``reads_quota``: a success is judged too, for the quota it may announce spent."""
        response = None
        try:
            response = await handler(request)
            status = response.status
            if self.classifier.plain_success(status) and not (read_body or reads_quota):
                return response  # a plain success: nothing to read, nothing to mark
            headers = read_headers(response.raw_headers)
            body = None
            if self._reads_body(status, headers):
                body = await self._error_body(response, attempts)
            outcome = self.classifier.response_outcome(status, response, headers, body, self._wall_clock)
            # A success tells the limiter only that it was served, unless it announced the quota spent or its pace.
            if outcome.kind is not _SUCCESS or outcome.spent_quota is not None or outcome.announced_pace is not None:
                attempt.classify_result(outcome)
            if outcome.kind is _SUCCESS and read_body:
                await response.read()
        except Exception as error:
            if response is not None:
                response.release()
            classified = self.classifier.error_outcome(error)
            if classified is not None:
                attempt.classify_error(classified)
            raise
        except BaseException:
            if response is not None:
                response.close()  # cancelled (our own attempt timeout too): never keep the connection
            raise
        return response

    def _reads_body(self, status: int, headers: dict[str, str]) -> bool:
        """Whether to read an error body for its code: the shared rule, for a body of a known length that
        aiohttp reads exactly as sent (not compressed), so that reading it holds at most ``max_error_body``."""
        return (
            "content-length" in headers
            and headers.get("content-encoding", "identity").strip(" \t").lower() == "identity"
            and self.classifier.wants_error_body(status, headers)
        )

    async def _error_body(self, response: ClientResponse, attempts: Attempts) -> bytes:
        """The error body, read within ``error_body_timeout`` (and never past the deadline); aiohttp
        keeps it, so the caller reads it too.

        Raises:
            aiohttp.SocketTimeoutError: the body did not come in time.
        """
        budget = error_body_budget(self.error_body_timeout, attempts.remaining(self.retrier.clock.now()))
        with anyio.move_on_after(budget):
            return await response.read()
        response.close()  # what came is lost with it: the caller never gets a silently short body
        raise aiohttp.SocketTimeoutError(f"the error body stalled: it did not come within {budget:g} s")

    def __repr__(self) -> str:
        return f"<RetryMiddleware {self.retrier!r}>"


class _WithOptions:
    """A :class:`RetryMiddleware` with per-request options (made by :meth:`RetryMiddleware.options`)."""

    __slots__ = ("middleware", "overrides")

    def __init__(self, middleware: RetryMiddleware, overrides: RequestOverrides) -> None:
        self.middleware = middleware
        self.overrides = overrides

    async def __call__(self, request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        return await self.middleware.send(request, handler, self.overrides)

    def __repr__(self) -> str:
        return f"<RetryMiddleware options {self.overrides!r} of {self.middleware!r}>"
