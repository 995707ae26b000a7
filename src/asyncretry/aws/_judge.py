"""What one SDK attempt's outcome is, from what botocore's ``needs-retry`` event gives a handler.

The one rule shared by the async and the sync handler: an exception botocore caught (a connection
error, a timeout ...) is judged as it is; an error response (HTTP status >= 300) is judged as the
``ClientError`` the client would raise for it (its code, its status, ``x-amz-retry-after``), by the
policy's classifier; a DynamoDB success whose body does not match its ``x-amz-crc32`` header is a
transient failure, as botocore's standard mode retries it.
"""

from __future__ import annotations

from binascii import crc32
from collections.abc import Mapping
from typing import Any

__all__ = ["CRC32_HEADER", "crc32_mismatch", "response_error"]

CRC32_HEADER = "x-amz-crc32"
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
