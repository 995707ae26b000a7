"""Classification of httpx outcomes: exceptions, status codes, AWS error codes, idempotency, bodies.

What a request may be retried after depends on whether it may have reached the server:

* ``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``, ``ProxyError``: nothing was sent, any method
  may be retried;
* read/write errors and timeouts, protocol errors, and every response: the request may have reached
  the server, so only idempotent requests are retried (GET, HEAD, PUT, DELETE, OPTIONS, TRACE, or any
  request with an ``Idempotency-Key`` header, or an explicit opt-in).

A request whose body cannot be replayed exactly (a one-shot generator or async iterator) is never
sent twice.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from .. import AWS_THROTTLING_CODES, AWS_TRANSIENT_CODES, Outcome, OutcomeKind
from ._body import MAX_CODE_LENGTH, code_in_body

__all__ = ["HttpClassifier", "error_code_of_response"]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
# The members as plain module names: on CPython 3.11 each ``OutcomeKind.X`` lookup costs about 50 ns.
_SUCCESS, _TRANSIENT, _THROTTLING, _NOT_RETRYABLE = (
    OutcomeKind.SUCCESS, OutcomeKind.TRANSIENT, OutcomeKind.THROTTLING, OutcomeKind.NOT_RETRYABLE
)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError)

ResponsePredicate = Callable[[httpx.Response], "OutcomeKind | bool | str | None"]


def _normalise_code(code: str) -> str:
    # "ThrottlingException:http://internal.amazon.com/" (header) and
    # "com.amazonaws.dynamodb.v20120810#ThrottlingException" (JSON __type) both mean ThrottlingException.
    code = code.split(":", 1)[0]
    return code.rsplit("#", 1)[-1].strip()


_READ = frozenset({
    b"x-amzn-errortype", b"content-length", b"content-type", b"content-encoding",
    b"retry-after", b"retry-after-ms", b"x-amz-retry-after",
})


def headers_read(headers: httpx.Headers) -> dict[str, str]:
    """The response headers that classification reads, in one pass, as ``headers.get`` gives them.

    Each ``httpx.Headers`` lookup walks every header and works out the encoding again (about a
    microsecond); judging one error response takes up to eight of them. Names are lower-case;
    repeated headers are joined with ``", "``, as ``Headers.get`` does.
    """
    found: dict[str, str] = {}
    for key, value in headers.raw:
        name = key.lower()
        if name in _READ:
            text = name.decode("ascii")
            try:
                decoded = value.decode("utf-8")
            except UnicodeDecodeError:
                decoded = value.decode("latin-1")
            found[text] = f"{found[text]}, {decoded}" if text in found else decoded
    return found


def error_code_of_response(headers: Mapping[str, str], body: bytes | None) -> str | None:
    """The AWS-style error code of a response: ``x-amzn-ErrorType``, JSON ``__type``/``code``, XML ``<Code>``.

    Whatever the headers and body hold (any bytes, any declared charset, any nesting), the answer is
    a code or ``None``, never an exception. A namespace (``aws.dynamodb#``) and a suffix after
    ``:`` are dropped; a code longer than 128 characters is not a code.

    Args:
        headers: the response headers (``httpx.Headers``, or a mapping with lower-case names).
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


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpClassifier:
    """How the transports judge HTTP outcomes.

    Args:
        transient_statuses: status codes retried as transient (default 500, 502, 503, 504, 408).
        throttling_statuses: status codes retried as throttling (default 429, 509).
        throttling_codes: AWS-style error codes meaning throttling, found in the ``x-amzn-ErrorType``
            header or a JSON/XML error body (default: AWS's; a 4xx or 5xx with one is throttling).
        transient_codes: error codes meaning a transient failure (default: AWS's).
        read_error_bodies: whether small JSON/XML error bodies (status >= 400) are read to find an
            error code. The bytes are kept and handed on, so streaming callers see the whole body.
        max_error_body: the largest error body read for that (bytes, default 65,536).
        retry_if_response: a predicate over responses that decides first: an :class:`OutcomeKind`,
            ``True``/a reason string (transient), ``False`` (not retried), or ``None`` (use the rules).
        idempotent_methods: methods retried even after they may have reached the server.
        idempotency_header: a header that makes any request idempotent (default ``Idempotency-Key``).
        retry_non_idempotent: retry every method as if idempotent (default ``False``).
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
        _check_body_limit(self.max_error_body)
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
    def is_idempotent(self, request: httpx.Request, opt_in: bool | None = None) -> bool:
        """Whether ``request`` may be sent again after it may have reached the server."""
        if opt_in is not None:
            return opt_in
        return (
            self.retry_non_idempotent
            or request.method in self.idempotent_methods
            or self.idempotency_header in request.headers
        )

    # -------------------------------------------------------------------------- exceptions
    def classify_error(self, error: Exception, *, idempotent: bool, replayable: bool) -> Outcome | None:
        """The outcome of an httpx exception, or ``None`` if it is not an httpx transport error.

        The error's own kind (:meth:`error_outcome`), then the rule on sending the request again
        (:meth:`may_resend`).
        """
        outcome = self.error_outcome(error)
        if outcome is None:
            return None
        return self.may_resend(outcome, idempotent=idempotent, replayable=replayable)

    def error_outcome(self, error: Exception) -> Outcome | None:
        """What an httpx exception says of the attempt, before asking whether the request may be sent again."""
        name = type(error).__name__
        if isinstance(error, httpx.TimeoutException):
            kind = OutcomeKind.TIMEOUT
        elif isinstance(error, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)):
            kind = OutcomeKind.CONNECTION
        elif isinstance(error, httpx.TransportError):
            return Outcome(OutcomeKind.NOT_RETRYABLE, name, error)  # local protocol errors, bad URLs ...
        else:
            return None
        if _certificate_failure(error):
            return Outcome(OutcomeKind.NOT_RETRYABLE, f"{name} (certificate verification failed)", error)
        return Outcome(kind, name, error)

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
        elif idempotent or isinstance(outcome.error, _NOT_SENT):
            return outcome
        elif outcome.error is not None:
            why = "may have reached the server; not idempotent"
        else:
            why = "not idempotent"
        return Outcome(OutcomeKind.NOT_RETRYABLE, f"{outcome.reason} ({why})", outcome.error, outcome.result)

    # --------------------------------------------------------------------------- responses
    def status_kind(self, response: httpx.Response, code: str | None) -> tuple[OutcomeKind, str]:
        """The kind and reason of a response, from its status and error code."""
        status = response.status_code
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
        if status in self.transient_statuses:
            return _TRANSIENT, reason
        if status >= 400:
            return _NOT_RETRYABLE, reason
        return _SUCCESS, reason

    def wants_body(self, response: httpx.Response, headers: Mapping[str, str] | None = None) -> bool:
        """Whether the error body should be read for an error code.

        ``headers``: the response's headers when already at hand (:func:`headers_read`).
        """
        if not (self.read_error_bodies and self._codes) or response.status_code < 400:
            return False
        if headers is None:
            headers = response.headers
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


MAX_ERROR_BODY = 16 * 1024 * 1024
"""The largest ``max_error_body`` accepted (bytes)."""

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


def _check_body_limit(value: object) -> None:
    _integer("max_error_body", value, 0, MAX_ERROR_BODY, " (bytes)")


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


def _certificate_failure(error: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


# ------------------------------------------------------------------------------- request bodies
@dataclass(slots=True)
class Replay:
    """How a request body is sent again: ``ok`` says whether it can be; ``rewind`` restores a file."""

    ok: bool
    rewind: Callable[[], None] | None = None


def body_replay(request: httpx.Request) -> Replay:
    """Whether (and how) ``request``'s body can be sent again exactly."""
    stream: Any = request.stream
    if isinstance(stream, httpx.ByteStream):
        return Replay(True)
    inner = getattr(stream, "_stream", None)
    if inner is not None and hasattr(inner, "read") and hasattr(inner, "seek"):
        if inspect.iscoroutinefunction(inner.seek) or inspect.iscoroutinefunction(inner.tell):
            # An async file (anyio.open_file, trio.open_file): rewind the file it wraps, whose
            # tell() and seek() answer at once; an async file-like object without one is not replayed.
            inner = getattr(inner, "wrapped", None)
            if inner is None or inspect.iscoroutinefunction(getattr(inner, "seek", None)):
                return Replay(False)
        try:
            if not inner.seekable():
                return Replay(False)
            position = inner.tell()
        except (OSError, ValueError, AttributeError):
            return Replay(False)
        if type(position) is not int:
            return Replay(False)  # not a position we know how to return to
        return Replay(True, lambda: inner.seek(position))
    fields = getattr(stream, "fields", None)
    if fields is not None:  # multipart: httpx rewinds seekable file fields itself
        for item in fields:
            file = getattr(item, "file", None)
            if file is not None and not (hasattr(file, "seek") and _seekable(file)):
                return Replay(False)
        return Replay(True)
    return Replay(False)


def _seekable(file: Any) -> bool:
    try:
        return bool(file.seekable())
    except (OSError, ValueError, AttributeError):
        return False


class PrefixedStream(httpx.AsyncByteStream, httpx.SyncByteStream):
    """The bytes already read (to find an error code), then the rest of the original stream."""

    def __init__(self, prefix: bytes, rest: Any) -> None:
        self._prefix = prefix
        self._rest = rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._prefix:
            yield self._prefix
        if self._rest is not None:
            async for chunk in self._rest:
                yield chunk

    def __iter__(self) -> Iterator[bytes]:
        if self._prefix:
            yield self._prefix
        if self._rest is not None:
            yield from self._rest

    @property
    def in_memory(self) -> bool:
        """Whether the whole body is held here (closing it is then instant, with nothing to release)."""
        return self._rest is None

    async def aclose(self) -> None:
        if self._rest is not None:
            await self._rest.aclose()

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()
