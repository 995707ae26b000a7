# Generated from src/asyncretry/httpx/_errors.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""asyncretry's errors as httpx2 users catch them: ``except httpx2.HTTPError`` sees everything the transports raise.

A request that was sent ends with httpx2's own error (or the response), whatever stopped its retries;
these classes are for what asyncretry decides itself: a request refused before it was sent, an attempt
cut short by its own time limit.

Each class is both the asyncretry error of the same name (``Error`` added where it has none;
``except asyncretry.CircuitOpenError`` still works, with its attributes and attempt history) and an
httpx2 transport error (its ``request`` is the request that failed)::

    httpx2.HTTPError
    └── httpx2.TransportError
        ├── RetryCapacityExceededError   (also asyncretry.RetryCapacityExceeded)
        │   └── RetryBudgetExceededError (also asyncretry.RetryBudgetExceeded)
        ├── CircuitOpenError             (also asyncretry.CircuitOpenError)
        ├── BackendUnavailableError      (also asyncretry.BackendUnavailable)
        └── httpx2.TimeoutException
            ├── AttemptTimeoutError      (also asyncretry.AttemptTimeout)
            └── RateLimitTimeoutError    (also asyncretry.RateLimitTimeout)
"""

from __future__ import annotations

import httpx2

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
    "as_httpx2_error",
]


class RetryCapacityExceededError(RetryCapacityExceeded, httpx2.TransportError):
    """The retry quota refused a retry of this request (an :class:`asyncretry.RetryCapacityExceeded`)."""


class RetryBudgetExceededError(RetryBudgetExceeded, RetryCapacityExceededError):
    """The retry budget refused a retry of this request (an :class:`asyncretry.RetryBudgetExceeded`)."""


class CircuitOpenError(_CircuitOpenError, httpx2.TransportError):
    """The circuit breaker refused this request (an :class:`asyncretry.CircuitOpenError`)."""


class BackendUnavailableError(BackendUnavailable, httpx2.TransportError):
    """The shared-state backend failed closed for this request (an :class:`asyncretry.BackendUnavailable`)."""


class AttemptTimeoutError(AttemptTimeout, httpx2.TimeoutException):
    """An attempt of this request ran past its time limit (an :class:`asyncretry.AttemptTimeout`)."""


class RateLimitTimeoutError(RateLimitTimeout, httpx2.TimeoutException):
    """A rate limit would have made this request wait too long (an :class:`asyncretry.RateLimitTimeout`)."""


_AS_HTTPX: dict[type[AsyncRetryError], type[AsyncRetryError]] = {
    RetryCapacityExceeded: RetryCapacityExceededError,
    RetryBudgetExceeded: RetryBudgetExceededError,
    _CircuitOpenError: CircuitOpenError,
    BackendUnavailable: BackendUnavailableError,
    AttemptTimeout: AttemptTimeoutError,
    RateLimitTimeout: RateLimitTimeoutError,
}


def as_httpx2_error(error: AsyncRetryError, request: httpx2.Request) -> AsyncRetryError:
    """The error as the class above that is also the matching httpx2 error, for ``request``.

    A new instance of that class (defined by inheriting from both, never by changing an object's class)
    with everything the error carries: its arguments and attributes, the attempt history, its notes,
    cause, context and traceback. An error of another class is returned as it is.
    """
    dual = _AS_HTTPX.get(type(error))
    if dual is None:
        return error  # already one of the classes above, or an error of another class
    twin = twin_of(error, dual)
    assert isinstance(twin, httpx2.HTTPError)
    twin.request = request
    return twin
