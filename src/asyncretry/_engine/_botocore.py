"""botocore's standard retry mode, for the errors that boto3, botocore and aiobotocore calls raise.

Nothing here imports botocore: an exception can only be one of botocore's once ``botocore.exceptions``
has been imported by whoever raised it, so the module is looked up in :data:`sys.modules`, and a
``ClientError``'s response is read by its documented shape (``error.response["Error"]["Code"]``,
``["ResponseMetadata"]["HTTPStatusCode"]`` and ``["ResponseMetadata"]["HTTPHeaders"]``).

The rules are botocore's standard mode (``botocore/retries/standard.py``):

* a response error is throttling if its code is a throttling code, transient if its code is a
  transient code or its HTTP status is 500, 502, 503 or 504; codes modelled as retryable in the
  service's model count too (:func:`botocore_classifier`);
* ``ConnectTimeoutError`` and ``ReadTimeoutError`` are timeouts (the 2020 profile charges them the
  timeout cost); every other ``botocore.exceptions.ConnectionError`` or ``HTTPClientError``
  (``EndpointConnectionError``, ``ConnectionClosedError``, ``ProxyConnectionError``, ``SSLError``,
  ``ResponseStreamingError`` ...) is a connection error;
* ``x-amz-retry-after`` (integer milliseconds) is a hint the 2026 profile clamps to the backoff.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._primitives._kinds import OutcomeKind

if TYPE_CHECKING:
    from ._classify import Classifier

__all__ = [
    "AWS_TRANSIENT_STATUSES",
    "amz_retry_after_of",
    "botocore_classifier",
    "botocore_error_kind",
    "response_metadata",
    "status_of",
]

AWS_TRANSIENT_STATUSES: frozenset[int] = frozenset({500, 502, 503, 504})
"""The HTTP statuses botocore's standard mode retries as transient whatever the error code."""


def response_metadata(error: BaseException) -> Mapping[str, Any] | None:
    """``error.response["ResponseMetadata"]`` of a botocore-style error response, if it has one."""
    response = getattr(error, "response", None)
    if not isinstance(response, Mapping):
        return None
    metadata = response.get("ResponseMetadata")
    return metadata if isinstance(metadata, Mapping) else None


def status_of(metadata: Mapping[str, Any]) -> int | None:
    """The HTTP status in a response's metadata (``["HTTPStatusCode"]``), if it is an integer."""
    status = metadata.get("HTTPStatusCode")
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def amz_retry_after_of(metadata: Mapping[str, Any] | None) -> float | None:
    """``x-amz-retry-after`` in a response's metadata (``["HTTPHeaders"]``), in seconds; ``None`` if absent
    or invalid.

    The header holds integer milliseconds; anything else (negative, fractional, garbage) is ignored,
    as botocore does. botocore gives header names in lower case.
    """
    if metadata is None:
        return None
    headers = metadata.get("HTTPHeaders")
    if not isinstance(headers, Mapping):
        return None
    value = headers.get("x-amz-retry-after")
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return None
    return int(text) / 1000.0


def botocore_error_kind(error: BaseException) -> OutcomeKind | None:
    """The kind of one of botocore's own (non-response) errors: a timeout, a connection error, or ``None``.

    ``None`` also for every exception when botocore has not been imported.
    """
    exceptions = sys.modules.get("botocore.exceptions")
    if exceptions is None or not isinstance(error, exceptions.BotoCoreError):
        return None
    if isinstance(error, (exceptions.ConnectTimeoutError, exceptions.ReadTimeoutError)):
        return OutcomeKind.TIMEOUT
    if isinstance(error, (exceptions.ConnectionError, exceptions.HTTPClientError)):
        return OutcomeKind.CONNECTION
    return None


def _service_model(client: Any) -> Any:
    meta = getattr(client, "meta", None)
    model = getattr(meta, "service_model", None) if meta is not None else None
    model = client if model is None else model
    if not hasattr(model, "error_shapes"):
        raise TypeError(
            f"client must be a botocore/boto3/aiobotocore client or a botocore ServiceModel, got {client!r}"
        )
    return model


def botocore_classifier(client: Any, **changes: Any) -> Classifier:
    """A :class:`Classifier` that also knows the errors ``client``'s service model marks as retryable.

    botocore retries an error whose shape carries the ``retryable`` trait (``throttling: true`` makes it
    a throttling error), by its modelled code or its shape name; the default classifier knows only
    AWS's fixed code sets. Nothing is imported: the client is read through its public ``meta``.

    Args:
        client: a boto3, botocore or aiobotocore client, or its ``meta.service_model``.
        **changes: other :class:`Classifier` arguments; ``throttling_codes`` / ``transient_codes``
            given here replace the AWS sets, and the modelled codes are added to them.

    Raises:
        TypeError: ``client`` has no service model.
    """
    from ._classify import AWS_THROTTLING_CODES, AWS_TRANSIENT_CODES, Classifier  # _classify imports this module

    throttling = set(changes.pop("throttling_codes", AWS_THROTTLING_CODES))
    transient = set(changes.pop("transient_codes", AWS_TRANSIENT_CODES))
    for shape in _service_model(client).error_shapes:
        metadata = shape.metadata
        retryable = metadata.get("retryable")
        if retryable is None:
            continue
        code = (metadata.get("error") or {}).get("code") or shape.name
        (throttling if retryable.get("throttling") else transient).add(code)
    return Classifier(throttling_codes=frozenset(throttling), transient_codes=frozenset(transient), **changes)
