"""How every HTTP integration judges an outcome: statuses, error codes, idempotency, sending a request again.

:class:`HttpRules` holds the options and the rules that need no HTTP client: each integration's
classifier (``asyncretry.httpx.HttpClassifier``, ``asyncretry.aiohttp.HttpClassifier``) is this class
with what only its client knows: which exceptions are connection errors and timeouts
(:meth:`HttpRules.error_outcome`), and which of them mean the request never left
(:meth:`HttpRules.never_sent`).

What a request may be retried after depends on whether it may have reached the server: after an
error that sent nothing, any request may be sent again; after anything else (a read error, a
timeout, any response) only an idempotent one (GET, HEAD, PUT, DELETE, OPTIONS, TRACE, any request
with an ``Idempotency-Key`` header, or an explicit opt-in); and a body that cannot be sent again
exactly never is.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import AWS_THROTTLING_CODES, AWS_TRANSIENT_CODES, Outcome, OutcomeKind
from ._body import MAX_CODE_LENGTH, code_in_body
from ._quota_headers import QUOTA_HEADERS, announced_quota
from ._retry_after import DELAY_HEADERS, server_delay

__all__ = [
    "IDEMPOTENT_METHODS",
    "MAX_ERROR_BODY",
    "HttpRules",
    "RequestLike",
    "certificate_failure",
    "error_code_of_response",
    "read_headers",
]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
# The members as plain module names: an ``OutcomeKind.X`` lookup on the hot path is an attribute search.
_SUCCESS, _TRANSIENT, _THROTTLING, _NOT_RETRYABLE = (
    OutcomeKind.SUCCESS, OutcomeKind.TRANSIENT, OutcomeKind.THROTTLING, OutcomeKind.NOT_RETRYABLE
)

MAX_ERROR_BODY = 16 * 1024 * 1024
"""The largest ``max_error_body`` accepted (bytes)."""

ResponsePredicate = Callable[[Any], "OutcomeKind | bool | str | None"]


class RequestLike(Protocol):
    """What the rules read of a request: its method and whether a header is present (any client's)."""

    @property
    def method(self) -> str: ...

    @property
    def headers(self) -> Container[str]: ...


# ------------------------------------------------------------------------------- headers and codes
_READ = frozenset({
    b"x-amzn-errortype", b"content-length", b"content-type", b"content-encoding",
    *(name.encode("ascii") for name in DELAY_HEADERS), *(name.encode("ascii") for name in QUOTA_HEADERS),
})


def read_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The response headers that classification reads, in one pass over the raw ``(name, value)`` pairs.

    Names are lower-case; repeated headers are joined with ``", "`` (as httpx's ``Headers.get`` does);
    values are decoded as UTF-8, else Latin-1, so that any bytes give a string.
    """
    found: dict[str, str] = {}
    for key, value in raw:
        name = key.lower()
        if name in _READ:
            text = name.decode("ascii")
            try:
                decoded = value.decode("utf-8")
            except UnicodeDecodeError:
                decoded = value.decode("latin-1")
            found[text] = f"{found[text]}, {decoded}" if text in found else decoded
    return found


def _normalise_code(code: str) -> str:
    # "ThrottlingException:http://internal.amazon.com/" (header) and
    # "com.amazonaws.dynamodb.v20120810#ThrottlingException" (JSON __type) both mean ThrottlingException.
    code = code.split(":", 1)[0]
    return code.rsplit("#", 1)[-1].strip()


def error_code_of_response(headers: Mapping[str, str], body: bytes | None) -> str | None:
    """The AWS-style error code of a response: ``x-amzn-ErrorType``, JSON ``__type``/``code``, XML ``<Code>``.

    Whatever the headers and body hold (any bytes, any declared charset, any nesting), the answer is
    a code or ``None``, never an exception. A namespace (``aws.dynamodb#``) and a suffix after
    ``:`` are dropped; a code longer than 128 characters is not a code.

    Args:
        headers: the response headers (a case-insensitive mapping, or one with lower-case names).
        body: the decoded body, or ``None`` when it was not read.
    """
    header = headers.get("x-amzn-errortype")
    if header:
        return _code(header.split(",", 1)[0])  # repeated headers arrive joined with ", "
    if not body:
        return None
    code = code_in_body(body, headers.get("content-type", ""))
    return _code(code) if code is not None else None


def _code(raw: str) -> str | None:
    code = _normalise_code(raw)
    return code if 0 < len(code) <= MAX_CODE_LENGTH and code.isprintable() else None


def certificate_failure(error: BaseException) -> bool:
    """Whether ``error`` is, or was caused by, a failed TLS certificate verification (never retried)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


# ------------------------------------------------------------------------------------- the rules
@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRules:
    """How the HTTP integrations judge outcomes: the options and rules of every client's ``HttpClassifier``.

    The options are documented on ``asyncretry.httpx.HttpClassifier`` (users construct a client's
    classifier, never this class).
    """

    transient_statuses: frozenset[int] = frozenset({500, 502, 503, 504, 408})
    throttling_statuses: frozenset[int] = frozenset({429, 509})
    throttling_codes: frozenset[str] = AWS_THROTTLING_CODES
    transient_codes: frozenset[str] = AWS_TRANSIENT_CODES
    read_error_bodies: bool = True
    max_error_body: int = 65_536
    retry_if_response: ResponsePredicate | None = None
    idempotent_methods: frozenset[str] = IDEMPOTENT_METHODS
    idempotency_header: str = "Idempotency-Key"
    retry_non_idempotent: bool = False
    _codes: bool = field(init=False, repr=False, default=False)
    _judged: frozenset[int] = field(init=False, repr=False, default=frozenset())

    def __post_init__(self) -> None:
        s = object.__setattr__
        for name in ("transient_statuses", "throttling_statuses"):
            statuses = _collection(name, getattr(self, name), "status codes", "frozenset({503})")
            s(self, name, frozenset(_status(name, status) for status in statuses))
        for name in ("throttling_codes", "transient_codes"):
            codes = _collection(name, getattr(self, name), "error codes", "frozenset({'SlowDown'})")
            s(self, name, frozenset(_error_code(name, code) for code in codes))
        methods = _collection("idempotent_methods", self.idempotent_methods, "HTTP methods", "frozenset({'GET'})")
        s(self, "idempotent_methods", frozenset(_token("idempotent_methods", m, "an HTTP method").upper()
                                                for m in methods))
        _token("idempotency_header", self.idempotency_header, "a header name")
        for name in ("read_error_bodies", "retry_non_idempotent"):
            if type(getattr(self, name)) is not bool:
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        _integer("max_error_body", self.max_error_body, 0, MAX_ERROR_BODY, " (bytes)")
        if self.retry_if_response is not None and not callable(self.retry_if_response):
            raise TypeError(f"retry_if_response must be callable or None, got {self.retry_if_response!r}")
        s(self, "_codes", bool(self.throttling_codes or self.transient_codes))
        # The statuses below 400 that need judging, settled once (the classifier is frozen): all of them
        # when a predicate looks at every response, else those listed as retryable.
        s(self, "_judged", frozenset(range(400)) if self.retry_if_response is not None
          else frozenset(s for s in self.transient_statuses | self.throttling_statuses if s < 400))

    def plain_success(self, status: int) -> bool:
        """Whether a response with this status is a success with nothing to judge: below 400, not listed
        as retryable, and no ``retry_if_response`` predicate to ask. The one place this is decided."""
        return status < 400 and status not in self._judged

    # ---------------------------------------------------------------------------- requests
    def is_idempotent(self, request: RequestLike, opt_in: bool | None = None) -> bool:
        """Whether ``request`` may be sent again after it may have reached the server."""
        if opt_in is not None:
            return opt_in
        return (
            self.retry_non_idempotent
            or request.method in self.idempotent_methods
            or self.idempotency_header in request.headers
        )

    # -------------------------------------------------------------------------- exceptions
    def error_outcome(self, error: Exception) -> Outcome | None:
        """What a client's exception says of the attempt, or ``None`` if it is not a transport error of
        the client (each client's classifier answers for its own exceptions)."""
        return None

    def never_sent(self, error: Exception | None) -> bool:
        """Whether ``error`` means the request never left (no connection was made): then any request may
        be sent again. Each client's classifier names its own such errors."""
        return False

    def classify_error(self, error: Exception, *, idempotent: bool, replayable: bool) -> Outcome | None:
        """The outcome of a client's exception, or ``None`` if it is not a transport error of the client.

        The error's own kind (:meth:`error_outcome`), then the rule on sending the request again
        (:meth:`may_resend`).
        """
        outcome = self.error_outcome(error)
        if outcome is None:
            return None
        return self.may_resend(outcome, idempotent=idempotent, replayable=replayable)

    def may_resend(self, outcome: Outcome, *, idempotent: bool, replayable: bool) -> Outcome:
        """The one rule on sending a request again, for every failed attempt (timeouts included).

        A retryable outcome stays retryable only if the body can be sent again exactly and either the
        request never left (a connection that was never made) or it is idempotent; otherwise it becomes
        final, its reason saying why.
        """
        if not outcome.kind.retryable:
            return outcome
        if not replayable:
            why = "the request body cannot be replayed"
        elif idempotent or self.never_sent(outcome.error):
            return outcome
        elif outcome.error is not None:
            why = "may have reached the server; not idempotent"
        else:
            why = "not idempotent"
        # A quota announced spent stays spent, whether or not this request may go again.
        return Outcome(OutcomeKind.NOT_RETRYABLE, f"{outcome.reason} ({why})", outcome.error, outcome.result,
                       spent_quota=outcome.spent_quota, announced_pace=outcome.announced_pace)

    # --------------------------------------------------------------------------- responses
    def kind_of_status(
        self, status: int, code: str | None, response: object, *, quota_spent: bool = False
    ) -> tuple[OutcomeKind, str]:
        """The kind and reason of a response with this status and error code (``response`` is what the
        ``retry_if_response`` predicate is given). ``quota_spent``: the response announced that none of
        the server's quota is left; a 403 that says so is a throttle (GitHub answers a spent quota so)."""
        if self.retry_if_response is not None:
            verdict = self.retry_if_response(response)
            if verdict is not None:
                return _verdict_kind(verdict, status)
        reason = f"HTTP {status}" + (f" {code}" if code else "")
        if code is not None:
            if code in self.throttling_codes:
                return _THROTTLING, reason
            if code in self.transient_codes:
                return _TRANSIENT, reason
        if status in self.throttling_statuses:
            return _THROTTLING, reason
        if status == 403 and quota_spent:
            return _THROTTLING, f"{reason} (quota spent)"
        if status in self.transient_statuses:
            return _TRANSIENT, reason
        if status >= 400:
            return _NOT_RETRYABLE, reason
        return _SUCCESS, f"{reason} (quota spent)" if quota_spent else reason

    def response_outcome(
        self, status: int, response: object, headers: Mapping[str, str], body: bytes | None,
        wall_clock: Callable[[], float],
    ) -> Outcome:
        """What a response says of its attempt: its kind from status and error code, the delay the server
        asks (``Retry-After`` in all its forms) when it is retried, the reset of a quota it announced
        spent (:func:`~._quota_headers.announced_quota`; the engine waits for it when no delay was asked),
        and the pace of one whose window is too short to wait for (:attr:`~._quota_headers.AnnouncedQuota.pace`).

        Args:
            status: the response's status code.
            response: the response (the outcome's result, and what ``retry_if_response`` is given).
            headers: its headers (:func:`read_headers`, or a case-insensitive mapping).
            body: its decoded error body when it was read, else ``None``.
            wall_clock: the wall-clock time in seconds since the epoch (for HTTP-dates).
        """
        code = error_code_of_response(headers, body) if status >= 400 else None
        announced = announced_quota(headers, wall_clock)
        spent = announced if announced is not None and announced.spent else None
        pace = None if announced is None else announced.pace
        kind, reason = self.kind_of_status(status, code, response, quota_spent=spent is not None)
        if kind.retryable:
            delay = server_delay(headers, wall_clock)
            if delay is not None:
                return Outcome(kind, reason, result=response, server_delay=delay[0], server_delay_is_hint=delay[1],
                               spent_quota=spent, announced_pace=pace)
        return Outcome(kind, reason, result=response, spent_quota=spent, announced_pace=pace)

    def wants_error_body(self, status: int, headers: Mapping[str, str]) -> bool:
        """Whether the body of a response with this status and headers should be read for an error code."""
        if not (self.read_error_bodies and self._codes) or status < 400:
            return False
        if "x-amzn-errortype" in headers:
            return False
        length = headers.get("content-length")
        if length is not None:
            length = length.strip(" \t")
            # ASCII digits only (int() would also take Arabic-Indic digits or "1_0"), and never int() of 5,000 digits
            if not (length.isascii() and length.isdigit()) or len(length) > 18:
                return False
            size = int(length)
            if size == 0 or size > self.max_error_body:
                return False  # nothing to read, or more than we read
        content_type = headers.get("content-type", "")
        return "json" in content_type or "xml" in content_type or not content_type


# --------------------------------------------------------------------------------- validation
# RFC 9110 section 5.6.2: methods and header names are tokens.
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _collection(name: str, value: object, what: str, example: str) -> Collection[object]:
    """``value`` if it is a finite collection (not a string, not a one-shot iterator); else TypeError."""
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be a collection of {what} such as {example}, got the string {value!r}")
    if not isinstance(value, Collection):
        raise TypeError(
            f"{name} must be a collection of {what} (a set, frozenset, list or tuple) such as {example}, "
            f"got {value!r} ({type(value).__name__})"
        )
    return value


def _token(name: str, value: object, what: str) -> str:
    """``value`` if it is an RFC 9110 token (method or header name); else TypeError or ValueError."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {what} (a str), got {value!r} ({type(value).__name__})")
    if not value or not _TCHAR.issuperset(value):
        raise ValueError(
            f"{name} must be {what}: a non-empty RFC 9110 token of ASCII letters, digits and "
            f"!#$%&'*+-.^_`|~, got {value!r}"
        )
    return value


def _error_code(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must hold error codes (str), got {value!r} ({type(value).__name__})")
    if not 0 < len(value) <= MAX_CODE_LENGTH:
        raise ValueError(f"{name} must hold error codes of 1 to {MAX_CODE_LENGTH} characters, got {value!r}")
    return value


def _integer(name: str, value: object, low: int, high: int, unit: str = "") -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``; else TypeError or ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer{unit}, got {value!r} ({type(value).__name__})")
    if not low <= value <= high:
        # repr() of a 5,000-digit integer raises ValueError of its own: describe such a number instead
        shown = repr(value) if value.bit_length() <= 64 else (
            f"{'a negative' if value < 0 else 'an'} integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        )
        raise ValueError(f"{name} must be an integer >= {low} and <= {high}{unit}, got {shown}")
    return value


def _status(name: str, value: object) -> int:
    return _integer(f"{name}[...]", value, 100, 599)


def _verdict_kind(verdict: OutcomeKind | bool | str, status: int) -> tuple[OutcomeKind, str]:
    if isinstance(verdict, OutcomeKind):
        return verdict, f"HTTP {status} ({verdict})"
    if verdict is True:
        return OutcomeKind.TRANSIENT, f"HTTP {status} (retry_if_response)"
    if verdict is False:
        kind = OutcomeKind.SUCCESS if status < 400 else OutcomeKind.NOT_RETRYABLE
        return kind, f"HTTP {status}"
    if isinstance(verdict, str):
        return OutcomeKind.TRANSIENT, verdict
    raise TypeError(f"retry_if_response must return None, a bool, a string or an OutcomeKind, got {verdict!r}")
