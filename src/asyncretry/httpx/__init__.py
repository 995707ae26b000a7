"""asyncretry for httpx: one line makes every request of a client resilient.

    client = httpx.AsyncClient(transport=AsyncRetryTransport())

See :class:`AsyncRetryTransport` (and its sync twin :class:`RetryTransport`) for the options.
"""

from __future__ import annotations

from ._classify import HttpClassifier as HttpClassifier
from ._classify import error_code_of_response as error_code_of_response
from ._fetch import fetch as fetch
from ._retry_after import server_delay as server_delay
from ._transport import EXTENSION as EXTENSION
from ._transport import AsyncRetryTransport as AsyncRetryTransport
from ._transport import RetryInfo as RetryInfo
from ._transport import RetryTransport as RetryTransport
from ._transport import scope_by_origin as scope_by_origin

__all__ = [
    "EXTENSION",
    "AsyncRetryTransport",
    "HttpClassifier",
    "RetryInfo",
    "RetryTransport",
    "error_code_of_response",
    "fetch",
    "scope_by_origin",
    "server_delay",
]
