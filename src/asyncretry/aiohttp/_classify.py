"""Classification of aiohttp outcomes: its exceptions, and which request bodies can be sent again.

The rules (statuses, error codes, idempotency, when a request may be sent again) are the ones every
asyncretry HTTP integration shares; this module adds what only aiohttp knows:

* ``ClientConnectorError`` (refused, DNS, proxy) and ``ConnectionTimeoutError``: nothing was sent, any
  method may be retried;
* ``ServerDisconnectedError``, ``ClientOSError``, ``ClientPayloadError``, ``SocketTimeoutError`` ...:
  the request may have reached the server, so only idempotent requests are retried;
* a certificate that failed verification (``ClientConnectorCertificateError``, ``ServerFingerprintMismatch``)
  and local errors (``InvalidURL`` ...) are never retried.

A request body is sent again only if aiohttp can send it again exactly: bytes, strings, JSON, form
data and seekable files (aiohttp rewinds them), never a streamed upload (an async iterator, a
``StreamReader``) or a file that cannot seek.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import ClientRequest, payload

from .. import Outcome, OutcomeKind
from .._http._rules import HttpRules, certificate_failure

__all__ = ["HttpClassifier", "body_replayable"]

_NOT_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
_CERTIFICATE = (aiohttp.ClientConnectorCertificateError, aiohttp.ServerFingerprintMismatch)
_CONNECTION = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpClassifier(HttpRules):
    """How the aiohttp middleware judges HTTP outcomes: the same options as ``asyncretry.httpx.HttpClassifier``.

    Args:
        transient_statuses: status codes retried as transient (default 500, 502, 503, 504, 408).
        throttling_statuses: status codes retried as throttling (default 429, 509).
        throttling_codes: AWS-style error codes meaning throttling, found in the ``x-amzn-ErrorType``
            header or a JSON/XML error body (default: AWS's; a 4xx or 5xx with one is throttling).
        transient_codes: error codes meaning a transient failure (default: AWS's).
        read_error_bodies: whether small JSON/XML error bodies (status >= 400) are read to find an
            error code. aiohttp keeps the bytes read, so ``await response.read()`` still gives them.
        max_error_body: the largest error body read for that (bytes, default 65,536).
        retry_if_response: a predicate over responses (``aiohttp.ClientResponse``) that decides first:
            an :class:`OutcomeKind`, ``True``/a reason string (transient), ``False`` (not retried), or
            ``None`` (use the rules).
        idempotent_methods: methods retried even after they may have reached the server.
        idempotency_header: a header that makes any request idempotent (default ``Idempotency-Key``).
        retry_non_idempotent: retry every method as if idempotent (default ``False``).
    """

    def error_outcome(self, error: Exception) -> Outcome | None:
        """What an aiohttp exception says of the attempt, before asking whether the request may be sent again."""
        if not isinstance(error, aiohttp.ClientError):
            return None
        name = type(error).__name__
        if isinstance(error, _CERTIFICATE) or certificate_failure(error):
            return Outcome(OutcomeKind.NOT_RETRYABLE, f"{name} (certificate verification failed)", error)
        if isinstance(error, aiohttp.ServerTimeoutError):
            return Outcome(OutcomeKind.TIMEOUT, name, error)
        if isinstance(error, _CONNECTION):
            return Outcome(OutcomeKind.CONNECTION, name, error)
        return Outcome(OutcomeKind.NOT_RETRYABLE, name, error)  # bad URLs, redirects refused, ...

    def never_sent(self, error: Exception | None) -> bool:
        """Whether ``error`` means the request never left: ``ClientConnectorError`` (and its DNS, proxy and
        TLS kinds), ``ConnectionTimeoutError``."""
        return isinstance(error, _NOT_SENT)


def body_replayable(request: ClientRequest) -> bool:
    """Whether ``request``'s body can be sent again exactly (no body, bytes, a seekable file ...)."""
    body = request.body
    return not isinstance(body, payload.Payload) or _payload_replayable(body, 0)


def _payload_replayable(body: payload.Payload, depth: int) -> bool:
    if body.consumed:
        return False  # sent once and not rewound (a file that cannot seek, an iterator drained)
    if isinstance(body, payload.AsyncIterablePayload):
        return False  # a streamed upload: its iterator cannot be read twice
    if isinstance(body, payload.IOBasePayload):
        return True  # aiohttp seeks a file back to where it started, and marks it consumed where it cannot
    if isinstance(body, aiohttp.MultipartWriter):
        # A multipart nested deeper than any real form is not looked into: not replayed.
        return depth < 8 and all(_payload_replayable(part, depth + 1) for part, _, _ in body)
    return isinstance(body, payload.BytesPayload)  # bytes, strings, JSON; anything unknown is not replayed
