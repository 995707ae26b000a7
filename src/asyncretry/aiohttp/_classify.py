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
    """How the aiohttp middleware judges HTTP outcomes.

    It takes the options of ``asyncretry.httpx.HttpClassifier`` (statuses, error codes, error bodies,
    idempotency), with the same defaults and checks; its ``retry_if_response`` predicate is given the
    ``aiohttp.ClientResponse``. Error bodies are read only when their length is known and they are not
    compressed (see the middleware).
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
