"""asyncretry's errors as httpx users catch them: ``except httpx.HTTPError`` sees everything the transports raise.

A request that was sent ends with httpx's own error (or the response), whatever stopped its retries;
these classes are for what asyncretry decides itself: a request refused before it was sent, an attempt
cut short by its own time limit.

Each class is both the asyncretry error of the same name (``Error`` added where it has none;
``except asyncretry.CircuitOpenError`` still works, with its attributes and attempt history) and an
httpx transport error (its ``request`` is the request that failed)::

    httpx.HTTPError
    └── httpx.TransportError
        ├── RetryCapacityExceededError   (also asyncretry.RetryCapacityExceeded)
        │   └── RetryBudgetExceededError (also asyncretry.RetryBudgetExceeded)
        ├── CircuitOpenError             (also asyncretry.CircuitOpenError)
        ├── BackendUnavailableError      (also asyncretry.BackendUnavailable)
        └── httpx.TimeoutException
            ├── AttemptTimeoutError      (also asyncretry.AttemptTimeout)
            └── RateLimitTimeoutError    (also asyncretry.RateLimitTimeout)
"""

from __future__ import annotations

import httpx

from .._exceptions import (
    AsyncRetryError,
    AttemptTimeout,
    BackendUnavailable,
    RateLimitTimeout,
    RetryBudgetExceeded,
    RetryCapacityExceeded,
)
from .._exceptions import CircuitOpenError as _CircuitOpenError  # the class below has its name
from .._http._errors import twin_of

__all__ = [
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenError",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "as_httpx_error",
]


class RetryCapacityExceededError(RetryCapacityExceeded, httpx.TransportError):
    """The retry quota refused a retry of this request (an :class:`asyncretry.RetryCapacityExceeded`)."""


class RetryBudgetExceededError(RetryBudgetExceeded, RetryCapacityExceededError):
    """The retry budget refused a retry of this request (an :class:`asyncretry.RetryBudgetExceeded`)."""


class CircuitOpenError(_CircuitOpenError, httpx.TransportError):
    """The circuit breaker refused this request (an :class:`asyncretry.CircuitOpenError`)."""


class BackendUnavailableError(BackendUnavailable, httpx.TransportError):
    """The shared-state backend failed closed for this request (an :class:`asyncretry.BackendUnavailable`)."""


class AttemptTimeoutError(AttemptTimeout, httpx.TimeoutException):
    """An attempt of this request ran past its time limit (an :class:`asyncretry.AttemptTimeout`)."""


class RateLimitTimeoutError(RateLimitTimeout, httpx.TimeoutException):
    """A rate limit would have made this request wait too long (an :class:`asyncretry.RateLimitTimeout`)."""


_AS_HTTPX: dict[type[AsyncRetryError], type[AsyncRetryError]] = {
    RetryCapacityExceeded: RetryCapacityExceededError,
    RetryBudgetExceeded: RetryBudgetExceededError,
    _CircuitOpenError: CircuitOpenError,
    BackendUnavailable: BackendUnavailableError,
    AttemptTimeout: AttemptTimeoutError,
    RateLimitTimeout: RateLimitTimeoutError,
}


def as_httpx_error(error: AsyncRetryError, request: httpx.Request) -> AsyncRetryError:
    """The error as the class above that is also the matching httpx error, for ``request``.

    A new instance of that class (defined by inheriting from both, never by changing an object's class)
    with everything the error carries: its arguments and attributes, the attempt history, its notes,
    cause, context and traceback. An error of another class is returned as it is.
    """
    dual = _AS_HTTPX.get(type(error))
    if dual is None:
        return error  # already one of the classes above, or an error of another class
    twin = twin_of(error, dual)
    assert isinstance(twin, httpx.HTTPError)
    twin.request = request
    return twin
