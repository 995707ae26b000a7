"""What one SDK attempt's outcome is, from what botocore's ``needs-retry`` event gives a handler.

The one rule shared by the async and the sync handler: an exception botocore caught (a connection
error, a timeout ...) is judged as it is; an error response (HTTP status >= 300) is judged as the
``ClientError`` the client would raise for it (its code, its status, ``x-amz-retry-after``), by the
policy's classifier; a DynamoDB success whose body does not match its ``x-amz-crc32`` header is a
transient failure, as botocore's standard mode retries it.
"""

from __future__ import annotations

from binascii import crc32
from collections.abc import Mapping, MutableMapping
from typing import Any

from asyncretry import RetryHistory, history_of

__all__ = ["CRC32_HEADER", "HISTORY_KEY", "crc32_mismatch", "keep_history", "response_error", "retry_history"]

CRC32_HEADER = "x-amz-crc32"
HISTORY_KEY = "AsyncRetryHistory"
"""Where a given-up call's :class:`RetryHistory` is kept in the SDK error's ``response["ResponseMetadata"]``."""
_CRC32_SERVICES = frozenset({"dynamodb"})


def response_error(response: tuple[Any, Mapping[str, Any]] | None, operation_name: str) -> Exception | None:
    """The ``ClientError`` an error response becomes (what the client raises for it), else ``None``.

    Args:
        response: ``(http_response, parsed)`` as botocore passes it, or ``None`` (no response).
        operation_name: the operation, for the error's message.
    """
    if response is None:
        return None
    http_response, parsed = response
    if http_response.status_code < 300:
        return None
    from botocore.exceptions import ClientError  # the SDK is imported by whoever made the client

    error: Exception = ClientError(dict(parsed), operation_name)
    return error


def crc32_mismatch(service_name: str, status: int, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a DynamoDB success's body does not match its ``x-amz-crc32`` header (botocore retries it).

    Args:
        service_name: the service's model name (``"dynamodb"``).
        status: the HTTP status; only a success (< 300) is checked.
        headers: the response headers (botocore's are case-insensitive).
        body: the raw body bytes.
    """
    if service_name not in _CRC32_SERVICES or status >= 300:
        return False
    expected = headers.get(CRC32_HEADER)
    if expected is None:
        return False
    try:
        return (crc32(body) & 0xFFFFFFFF) != int(expected)
    except ValueError:
        return True  # a header that is not a number cannot match: the body cannot be trusted


def keep_history(response: tuple[Any, Mapping[str, Any]] | None, error: Exception | None) -> None:
    """Keep the history the engine attached to ``error`` (the ``ClientError`` judged for ``response``) in the
    response's metadata, where the error the SDK then raises for the same response finds it."""
    if response is None or error is None:
        return
    history = history_of(error)
    metadata = response[1].get("ResponseMetadata")
    if history is not None and isinstance(metadata, MutableMapping):
        metadata[HISTORY_KEY] = history


def retry_history(error: BaseException) -> RetryHistory | None:
    """The attempt history of an SDK call that asyncretry retried and gave up on, or ``None``.

    An error the engine raised itself (``RetryCapacityExceeded`` ...) or re-raised (a connection error)
    carries it as :func:`asyncretry.history_of` reads it; a service error that the SDK raises once the
    attempts run out (a ``ClientError``) keeps it in ``error.response["ResponseMetadata"]["AsyncRetryHistory"]``.
    """
    history = history_of(error)
    if history is not None:
        return history
    response = getattr(error, "response", None)
    metadata = response.get("ResponseMetadata") if isinstance(response, Mapping) else None
    kept = metadata.get(HISTORY_KEY) if isinstance(metadata, Mapping) else None
    return kept if isinstance(kept, RetryHistory) else None
