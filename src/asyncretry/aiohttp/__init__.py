"""asyncretry for aiohttp: one middleware makes every request of a session resilient (asyncio only).

    session = aiohttp.ClientSession(middlewares=[RetryMiddleware()])

See :class:`RetryMiddleware` for the options, :func:`retry_info` for what it reports on each response.
"""

from __future__ import annotations

from .._deprecation import renamed_names as _renamed_names
from .._http._rules import error_code_of_response as error_code_of_response
from ._classify import HttpClassifier as HttpClassifier
from ._errors import AttemptTimeoutError as AttemptTimeoutError
from ._errors import BackendUnavailableError as BackendUnavailableError
from ._errors import CircuitOpenError as CircuitOpenError
from ._errors import RateLimitTimeoutError as RateLimitTimeoutError
from ._errors import RetryBudgetExceededError as RetryBudgetExceededError
from ._errors import RetryCapacityExceededError as RetryCapacityExceededError
from ._middleware import RetryMiddleware as RetryMiddleware
from ._report import RetryInfo as RetryInfo
from ._report import describe as describe
from ._report import retry_info as retry_info
from ._report import scope_by_origin as scope_by_origin

__all__ = [
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenError",
    "HttpClassifier",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "RetryInfo",
    "RetryMiddleware",
    "describe",
    "error_code_of_response",
    "retry_info",
    "scope_by_origin",
]

# Old names kept working for a while, with a DeprecationWarning.
__getattr__ = _renamed_names(__name__, globals(), {"CircuitOpenClientError": "CircuitOpenError"})
