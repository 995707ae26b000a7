"""Classification of httpx outcomes: exceptions, status codes, AWS error codes, idempotency, bodies.

The rules themselves (statuses, error codes, idempotency, when a request may be sent again) are the
ones every asyncretry HTTP integration shares (the aiohttp middleware's too); this module adds
what only httpx knows. What a request may be retried after depends on whether it may have
reached the server:

* ``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``, ``ProxyError``: nothing was sent, any method
  may be retried;
* read/write errors and timeouts, protocol errors, and every response: the request may have reached
  the server, so only idempotent requests are retried (GET, HEAD, PUT, DELETE, OPTIONS, TRACE, or any
  request with an ``Idempotency-Key`` header, or an explicit opt-in).

A request whose body cannot be replayed exactly (a one-shot generator or async iterator) is never
sent twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .. import Outcome, OutcomeKind
from .._http._replay import Replay, replay_of
from .._http._rules import HttpRules, certificate_failure, error_code_of_response, read_headers

__all__ = ["HttpClassifier", "error_code_of_response"]

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError)


def headers_read(headers: httpx.Headers) -> dict[str, str]:
    """The response headers that classification reads, in one pass, as ``headers.get`` gives them.

    Each ``httpx.Headers`` lookup walks every header and works out the encoding again (about a
    microsecond); judging one error response takes up to eight of them. Names are lower-case;
    repeated headers are joined with ``", "``, as ``Headers.get`` does.
    """
    return read_headers(headers.raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpClassifier(HttpRules):
    """How the httpx transports judge HTTP outcomes.

    Args:
        transient_statuses: status codes retried as transient (default 500, 502, 503, 504, 408).
        throttling_statuses: status codes retried as throttling (default 429, 509).
        throttling_codes: AWS-style error codes meaning throttling, found in the ``x-amzn-ErrorType``
            header or a JSON/XML error body (default: AWS's; a 4xx or 5xx with one is throttling).
        transient_codes: error codes meaning a transient failure (default: AWS's).
        read_error_bodies: whether small JSON/XML error bodies (status >= 400) are read to find an
            error code. The bytes are kept and handed on, so streaming callers see the whole body.
        max_error_body: the largest error body read for that (bytes, default 65,536).
        retry_if_response: a predicate over responses (``httpx.Response``) that decides first: an
            :class:`OutcomeKind`, ``True``/a reason string (transient), ``False`` (not retried), or
            ``None`` (use the rules).
        idempotent_methods: methods retried even after they may have reached the server.
        idempotency_header: a header that makes any request idempotent (default ``Idempotency-Key``).
        retry_non_idempotent: retry every method as if idempotent (default ``False``).
    """

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
        if certificate_failure(error):
            return Outcome(OutcomeKind.NOT_RETRYABLE, f"{name} (certificate verification failed)", error)
        return Outcome(kind, name, error)

    def never_sent(self, error: Exception | None) -> bool:
        """Whether ``error`` means the request never left: ``ConnectError``, ``ConnectTimeout``,
        ``PoolTimeout``, ``ProxyError``."""
        return isinstance(error, _NOT_SENT)

    def status_kind(self, response: httpx.Response, code: str | None) -> tuple[OutcomeKind, str]:
        """The kind and reason of a response, from its status and error code."""
        return self.kind_of_status(response.status_code, code, response)

    def wants_body(self, response: httpx.Response, headers: Mapping[str, str] | None = None) -> bool:
        """Whether the error body should be read for an error code.

        ``headers``: the response's headers when already at hand (:func:`headers_read`).
        """
        return self.wants_error_body(response.status_code, headers if headers is not None else response.headers)


# ------------------------------------------------------------------------------- request bodies
def body_replay(request: httpx.Request) -> Replay:
    """Whether (and how) ``request``'s body can be sent again exactly (see :func:`replay_of`)."""
    return replay_of(request.stream, in_memory=type(request.stream) is httpx.ByteStream)


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
