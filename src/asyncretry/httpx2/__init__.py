# Generated from src/asyncretry/httpx/__init__.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""asyncretry for httpx2: one line makes every request of a client resilient.

    client = httpx2.AsyncClient(transport=AsyncRetryTransport())

See :class:`AsyncRetryTransport` (and its sync twin :class:`RetryTransport`) for the options.
"""

from __future__ import annotations

from .._deprecation import renamed_names as _renamed_names
from .._http._quota_headers import AnnouncedQuota as AnnouncedQuota
from .._http._quota_headers import announced_quota as announced_quota
from .._http._retry_after import server_delay as server_delay
from ._async._transport import AsyncRetryTransport as AsyncRetryTransport
from ._classify import HttpClassifier as HttpClassifier
from ._classify import error_code_of_response as error_code_of_response
from ._errors import AttemptTimeoutError as AttemptTimeoutError
from ._errors import BackendUnavailableError as BackendUnavailableError
from ._errors import CircuitOpenError as CircuitOpenError
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
    "AnnouncedQuota",
    "AsyncRetryTransport",
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenError",
    "HttpClassifier",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "RetryInfo",
    "RetryTransport",
    "announced_quota",
    "describe",
    "error_code_of_response",
    "fetch",
    "retry_info",
    "scope_by_origin",
    "server_delay",
]

# Old names kept working for a while, with a DeprecationWarning.
__getattr__ = _renamed_names(__name__, globals(), {"CircuitOpenHTTPError": "CircuitOpenError"})
