"""Classification: what kind of outcome one attempt had, and why.

Exceptions are classified in this order (the first rule that decides wins):

1. types listed in ``Classifier.never`` are not retryable;
2. the user's ``retry_if`` predicate (returns a kind, ``True``/``False``, or ``None`` to pass);
   then asyncretry's own errors (an inner retrier that gave up, an open breaker) are not retryable;
3. error metadata on the exception: ``is_throttling`` / ``is_retryable`` attributes (the Kotlin SDK's
   error metadata);
4. service error codes: ``error_code`` / ``code`` attributes, botocore's ``response["Error"]["Code"]``,
   or the exception's class name, looked up in ``throttling_codes`` and ``transient_codes``; then, as
   botocore's standard mode does, an error response (botocore's ``ClientError``) with HTTP status 500,
   502, 503 or 504 is transient, whatever its code. A botocore error response that is retried carries
   its ``x-amz-retry-after`` header as the outcome's server delay (a hint);
5. types listed in ``throttling`` / ``timeout`` / ``transient``;
6. network errors: :class:`TimeoutError` is a timeout, connection errors (refused, reset, DNS, TLS
   other than certificate verification) are connection errors; so are botocore's own
   (``ConnectTimeoutError`` / ``ReadTimeoutError`` are timeouts, ``EndpointConnectionError``,
   ``ConnectionClosedError`` and every other ``ConnectionError`` / ``HTTPClientError`` of botocore's
   are connection errors: see ``_botocore.py``, which never imports botocore);
7. anything else is not retryable.

Cancellation and every :class:`BaseException` that is not an :class:`Exception` never reach the
classifier: the engine lets them through untouched.
"""

from __future__ import annotations

import inspect
import socket
import ssl
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .._exceptions import AsyncRetryError
from .._http._quota_headers import AnnouncedQuota
from .._primitives._kinds import OutcomeKind
from .._validate import check_bool, check_items, check_str
from ._botocore import AWS_TRANSIENT_STATUSES, amz_retry_after_of, botocore_error_kind, response_metadata, status_of
from ._server_delay import server_directions_of

__all__ = [
    "AWS_THROTTLING_CODES",
    "AWS_TRANSIENT_CODES",
    "QLDB_RETRYABLE_CODES",
    "Classifier",
    "On",
    "Outcome",
    "classifier_on",
    "error_code_of",
]

AWS_THROTTLING_CODES: frozenset[str] = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
"""AWS error codes that mean "slow down" (SPEC section 4)."""

AWS_TRANSIENT_CODES: frozenset[str] = frozenset(
    {"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete", "IDPCommunicationError"}
)
"""AWS error codes of transient failures (SPEC section 4); a code in both sets counts as throttling."""

QLDB_RETRYABLE_CODES: frozenset[str] = frozenset(
    {
        "CapacityExceededException",
        "InvalidSessionException",
        "LimitExceededException",
        "OccConflictException",
        "RateExceededException",
    }
)
"""The QLDB driver's retryable exceptions, by name."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended.

    Attributes:
        kind: the classification.
        reason: a short human-readable why (``"ConnectionResetError"``, ``"HTTP 503"``, ``"NOT_READY"``).
        error: the exception the attempt raised, if any.
        result: the value the attempt produced, if any.
        server_delay: a delay the server asked for (seconds), if any.
        server_delay_is_hint: ``True`` for AWS's ``x-amz-retry-after``, which is clamped to
            ``[backoff, backoff + 5]``; ``False`` for ``Retry-After``, which is followed (capped).
        spent_quota: the quota the server announced with none left (``RateLimit: "default";r=0;t=30``,
            ``X-RateLimit-Remaining: 0`` ...: its ``reset``, that reset's ``rounding`` and the window),
            if it did, a success that took the last request included: a retry waits for the reset when
            no ``server_delay`` was asked, and where the policy ``holds_spent_quota`` the scope's limiter
            holds every caller until then.
        announced_pace: the most requests per second a quota the server announced admits, when its window
            is too short to wait for its reset (:attr:`AnnouncedQuota.pace
            <asyncretry.httpx.AnnouncedQuota.pace>`: ``q`` per ``w`` of a 1-s window announced in whole
            seconds), if it did: where the policy ``holds_spent_quota`` the scope's limiter sends no faster.
    """

    kind: OutcomeKind
    reason: str
    error: Exception | None = None
    result: Any = None
    server_delay: float | None = None
    server_delay_is_hint: bool = False
    spent_quota: AnnouncedQuota | None = None
    announced_pace: float | None = None


ExceptionPredicate = Callable[[Exception], "OutcomeKind | bool | None"]
ResultPredicate = Callable[[Any], "OutcomeKind | bool | str | None"]

_NETWORK_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, socket.gaierror, socket.herror)


def error_code_of(error: BaseException) -> str | None:
    """The service error code an exception carries, if any.

    Looks at ``error_code`` and ``code`` string attributes and botocore's
    ``error.response["Error"]["Code"]``.
    """
    for attribute in ("error_code", "code"):
        value = _attribute(error, attribute)
        if isinstance(value, str) and value:
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        details = response.get("Error")
        if isinstance(details, dict):
            code = details.get("Code")
            if isinstance(code, str) and code:
                return code
    return None


def _attribute(error: BaseException, name: str) -> object:
    """``error.<name>``, or ``None``; a property is read without the DeprecationWarning it may give
    (aiohttp's ``ClientResponseError.code`` is a deprecated alias of its status)."""
    if not isinstance(inspect.getattr_static(error, name, None), property):
        return getattr(error, name, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return getattr(error, name, None)
        except Exception:  # a property that raises: no code
            return None


def _types(name: str, value: Iterable[type[BaseException]] | type[BaseException]) -> tuple[type[BaseException], ...]:
    items = (value,) if isinstance(value, type) else check_items(name, value, what="exception classes")
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"{name} must contain exception classes, got {item!r}")
        if not issubclass(item, Exception):
            raise ValueError(  # noqa: TRY004 -- the type is right, its value (a BaseException) is not allowed
                f"{name} may not contain {item.__name__}: only Exception subclasses can be retried "
                "(cancellation and other BaseExceptions are never retried)"
            )
    return items


@dataclass(frozen=True, slots=True, kw_only=True)
class Classifier:
    """Decides the :class:`OutcomeKind` of an exception or a result.

    Args:
        transient: exception types to retry as transient errors.
        throttling: exception types to retry as throttling errors.
        timeout: exception types to retry as timeouts (retries cost the timeout cost).
        never: exception types never retried, whatever else matches.
        retry_if: a predicate over exceptions: return an :class:`OutcomeKind`, ``True`` (transient),
            ``False`` (not retryable) or ``None`` (let the other rules decide).
        retry_if_result: a predicate over results: return ``None``/``False`` for success, ``True`` or a
            reason string (transient) or an :class:`OutcomeKind`.
        throttling_codes: service error codes meaning throttling (default: AWS's).
        transient_codes: service error codes meaning a transient failure (default: AWS's).
        network_errors: whether built-in connection errors and :class:`TimeoutError` are retried
            (default ``True``).
        wall_clock: the wall-clock time in seconds since the epoch, for a ``Retry-After`` HTTP-date an
            exception carries (default :func:`time.time`).

    An exception classified as retryable may also ask for a delay before the retry: a ``retry_after``
    attribute (seconds, a :class:`~datetime.timedelta` or a ``Retry-After`` value), or the
    ``Retry-After`` of the response it carries (httpx's ``HTTPStatusError``, aiohttp's
    ``ClientResponseError``); the policy caps it (``max_server_delay``) and the deadline bounds it.
    """

    transient: tuple[type[BaseException], ...] = ()
    throttling: tuple[type[BaseException], ...] = ()
    timeout: tuple[type[BaseException], ...] = ()
    never: tuple[type[BaseException], ...] = ()
    retry_if: ExceptionPredicate | None = None
    retry_if_result: ResultPredicate | None = None
    throttling_codes: frozenset[str] = AWS_THROTTLING_CODES
    transient_codes: frozenset[str] = AWS_TRANSIENT_CODES
    network_errors: bool = True
    wall_clock: Callable[[], float] | None = None
    _has_codes: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        for name in ("transient", "throttling", "timeout", "never"):
            object.__setattr__(self, name, _types(name, getattr(self, name)))
        for name in ("throttling_codes", "transient_codes"):
            codes = check_items(name, getattr(self, name), check_str, what="error codes")
            object.__setattr__(self, name, frozenset(codes))
        for name in ("retry_if", "retry_if_result"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be callable or None, got {value!r}")
        check_bool("network_errors", self.network_errors)
        if self.wall_clock is not None and not callable(self.wall_clock):
            raise TypeError(f"wall_clock must be callable or None, got {self.wall_clock!r}")
        object.__setattr__(self, "_has_codes", bool(self.throttling_codes or self.transient_codes))

    def classify_error(self, error: Exception) -> Outcome:
        """Classify an exception raised by an attempt, with the delay it asks for when retryable and the
        reset of a quota it announces spent, or its pace (the response it carries says so in its headers)."""
        outcome = self._error_kind(error)
        if outcome.server_delay is not None:
            return outcome
        delay, quota = server_directions_of(error, self.wall_clock if self.wall_clock is not None else time.time)
        if quota is not None and (quota.spent or quota.pace is not None):
            outcome = replace(outcome, spent_quota=quota if quota.spent else None, announced_pace=quota.pace)
        if delay is None or not outcome.kind.retryable:
            return outcome
        return replace(outcome, server_delay=delay[0], server_delay_is_hint=delay[1])

    def _error_kind(self, error: Exception) -> Outcome:
        name = type(error).__name__
        if self.never and isinstance(error, self.never):
            return Outcome(OutcomeKind.NOT_RETRYABLE, name, error)
        if self.retry_if is not None:
            verdict = self.retry_if(error)
            if verdict is not None:
                return Outcome(self._kind_of(verdict, error), name, error)
        if isinstance(error, AsyncRetryError):
            # An inner retrier already gave up (or a limit refused the call): retrying it again
            # would multiply attempts, the very storm the quota exists to stop.
            return Outcome(OutcomeKind.NOT_RETRYABLE, name, error)
        throttling = getattr(error, "is_throttling", None)
        if throttling is True:
            return Outcome(OutcomeKind.THROTTLING, f"{name} (is_throttling)", error)
        retryable = getattr(error, "is_retryable", None)
        if retryable is False:
            return Outcome(OutcomeKind.NOT_RETRYABLE, f"{name} (is_retryable=False)", error)
        if self._has_codes:
            code = error_code_of(error)
            for candidate in (code, name):
                if candidate is None:
                    continue
                if candidate in self.throttling_codes:
                    return _response_outcome(OutcomeKind.THROTTLING, candidate, error)
                if candidate in self.transient_codes:
                    return _response_outcome(OutcomeKind.TRANSIENT, candidate, error)
        metadata = response_metadata(error)
        if metadata is not None:
            status = status_of(metadata)
            if status in AWS_TRANSIENT_STATUSES:
                return _response_outcome(OutcomeKind.TRANSIENT, f"{name} (HTTP {status})", error)
        if retryable is True:
            return Outcome(self._builtin_kind(error), f"{name} (is_retryable)", error)
        if self.throttling and isinstance(error, self.throttling):
            return Outcome(OutcomeKind.THROTTLING, name, error)
        if self.timeout and isinstance(error, self.timeout):
            return Outcome(OutcomeKind.TIMEOUT, name, error)
        if self.transient and isinstance(error, self.transient):
            return Outcome(OutcomeKind.TRANSIENT, name, error)
        if self.network_errors:
            kind = self._network_kind(error)
            if kind is not None:
                return Outcome(kind, name, error)
        return Outcome(OutcomeKind.NOT_RETRYABLE, name, error)

    def classify_result(self, result: Any) -> Outcome:
        """Classify a value returned by an attempt (success unless ``retry_if_result`` says otherwise)."""
        if self.retry_if_result is None:
            return Outcome(OutcomeKind.SUCCESS, "ok", result=result)
        verdict = self.retry_if_result(result)
        if verdict is None or verdict is False:
            return Outcome(OutcomeKind.SUCCESS, "ok", result=result)
        if verdict is True:
            return Outcome(OutcomeKind.TRANSIENT, "result", result=result)
        if isinstance(verdict, OutcomeKind):
            return Outcome(verdict, f"result ({verdict})", result=result)
        if isinstance(verdict, str):
            return Outcome(OutcomeKind.TRANSIENT, verdict, result=result)
        raise TypeError(
            f"retry_if_result must return None, a bool, a reason string or an OutcomeKind, got {verdict!r}"
        )

    def _kind_of(self, verdict: OutcomeKind | bool, error: Exception) -> OutcomeKind:
        if isinstance(verdict, OutcomeKind):
            # An exception still reaches the caller, so it can never count as a success.
            return OutcomeKind.NOT_RETRYABLE if verdict is OutcomeKind.SUCCESS else verdict
        if verdict is True:
            return self._builtin_kind(error)
        if verdict is False:
            return OutcomeKind.NOT_RETRYABLE
        raise TypeError(f"retry_if must return None, a bool or an OutcomeKind, got {verdict!r}")

    def _builtin_kind(self, error: Exception) -> OutcomeKind:
        return self._network_kind(error) or OutcomeKind.TRANSIENT

    @staticmethod
    def _network_kind(error: Exception) -> OutcomeKind | None:
        if isinstance(error, TimeoutError):
            return OutcomeKind.TIMEOUT
        if isinstance(error, _NETWORK_ERRORS):
            return OutcomeKind.CONNECTION
        if isinstance(error, ssl.SSLError) and not isinstance(error, ssl.SSLCertVerificationError):
            return OutcomeKind.CONNECTION
        return botocore_error_kind(error)


def _response_outcome(kind: OutcomeKind, reason: str, error: Exception) -> Outcome:
    """A retryable outcome for an error response, with the ``x-amz-retry-after`` it carries (if any)."""
    hint = amz_retry_after_of(response_metadata(error))
    if hint is None:
        return Outcome(kind, reason, error)
    return Outcome(kind, reason, error, server_delay=hint, server_delay_is_hint=True)


DEFAULT_CLASSIFIER = Classifier()


On = type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]
"""What ``on=`` takes: an exception class, a tuple of them, or a predicate over exceptions."""


def classifier_on(on: On) -> Classifier:
    """A classifier that retries exactly the exceptions ``on`` names (stamina's ``on=``), as transient failures.

    Raises:
        TypeError: ``on`` is neither an exception class, a tuple of them, nor a callable.
    """
    if isinstance(on, tuple) or (isinstance(on, type) and issubclass(on, BaseException)):
        types = on if isinstance(on, tuple) else (on,)
        if not types or not all(isinstance(t, type) and issubclass(t, Exception) for t in types):
            raise TypeError(f"on must be an exception class, a tuple of them or a predicate, got {on!r}")

        def by_type(error: Exception) -> OutcomeKind | bool:
            return isinstance(error, types)

        return Classifier(retry_if=by_type)
    if isinstance(on, type) or not callable(on):
        raise TypeError(f"on must be an exception class, a tuple of them or a predicate, got {on!r}")
    predicate = on

    def by_predicate(error: Exception) -> OutcomeKind | bool:
        return bool(predicate(error))

    return Classifier(retry_if=by_predicate)
