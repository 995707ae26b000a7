"""asyncretry for httpx: one line makes every request of a client resilient.

    client = httpx.AsyncClient(transport=AsyncRetryTransport())

See :class:`AsyncRetryTransport` (and its sync twin :class:`RetryTransport`) for the options.
"""

from __future__ import annotations

from .._http._retry_after import server_delay as server_delay
from ._async._transport import AsyncRetryTransport as AsyncRetryTransport
from ._classify import HttpClassifier as HttpClassifier
from ._classify import error_code_of_response as error_code_of_response
from ._errors import AttemptTimeoutError as AttemptTimeoutError
from ._errors import BackendUnavailableError as BackendUnavailableError
from ._errors import CircuitOpenHTTPError as CircuitOpenHTTPError
from ._errors import RateLimitTimeoutError as RateLimitTimeoutError
from ._errors import RetryBudgetExceededError as RetryBudgetExceededError
from ._errors import RetryCapacityExceededError as RetryCapacityExceededError
from ._fetch import fetch as fetch
from ._report import EXTENSION as EXTENSION
from ._report import RetryInfo as RetryInfo
from ._report import describe as describe
from ._report import retry_info as retry_info
from ._report import scope_by_origin as scope_by_origin
from ._sync._transport import RetryTransport as RetryTransport

__all__ = [
    "EXTENSION",
    "AsyncRetryTransport",
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenHTTPError",
    "HttpClassifier",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "RetryInfo",
    "RetryTransport",
    "describe",
    "error_code_of_response",
    "fetch",
    "retry_info",
    "scope_by_origin",
    "server_delay",
]
