"""asyncretry's errors as aiohttp users catch them: ``except aiohttp.ClientError`` sees all the middleware raises.

Each class is both the asyncretry error of the same name (``except asyncretry.CircuitOpenError`` still
works, with its attributes and attempt history) and an aiohttp client error; a name that does not end in
``Error`` gains that suffix, as aiohttp's own do::

    aiohttp.ClientError
    ├── RetryCapacityExceededError      (also asyncretry.RetryCapacityExceeded)
    │   └── RetryBudgetExceededError    (also asyncretry.RetryBudgetExceeded)
    ├── RateLimitTimeoutError           (also asyncretry.RateLimitTimeout)
    └── aiohttp.ClientConnectionError
        ├── CircuitOpenError            (also asyncretry.CircuitOpenError)
        ├── BackendUnavailableError     (also asyncretry.BackendUnavailable)
        └── aiohttp.ServerTimeoutError
            └── AttemptTimeoutError     (also asyncretry.AttemptTimeout)

Errors of the requests themselves (``ClientConnectorError``, ``ServerDisconnectedError`` ...) reach the
caller as aiohttp raised them, with the attempt history attached (:func:`asyncretry.history_of`).
"""

from __future__ import annotations

import aiohttp

import asyncretry

from .._http._errors import twin_of

__all__ = [
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenError",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "as_aiohttp_error",
]


class RetryCapacityExceededError(asyncretry.RetryCapacityExceeded, aiohttp.ClientError):
    """The retry quota refused a retry of this request (an :class:`asyncretry.RetryCapacityExceeded`)."""


class RetryBudgetExceededError(asyncretry.RetryBudgetExceeded, RetryCapacityExceededError):
    """The retry budget refused a retry of this request (an :class:`asyncretry.RetryBudgetExceeded`)."""


class RateLimitTimeoutError(asyncretry.RateLimitTimeout, aiohttp.ClientError):
    """A rate limit would have made this request wait too long (an :class:`asyncretry.RateLimitTimeout`)."""


class CircuitOpenError(asyncretry.CircuitOpenError, aiohttp.ClientConnectionError):
    """The circuit breaker refused this request (an :class:`asyncretry.CircuitOpenError`)."""


class BackendUnavailableError(asyncretry.BackendUnavailable, aiohttp.ClientConnectionError):
    """The shared-state backend failed closed for this request (an :class:`asyncretry.BackendUnavailable`)."""


class AttemptTimeoutError(asyncretry.AttemptTimeout, aiohttp.ServerTimeoutError):
    """An attempt of this request ran past its time limit (an :class:`asyncretry.AttemptTimeout`)."""


_AS_AIOHTTP: dict[type[asyncretry.AsyncRetryError], type[asyncretry.AsyncRetryError]] = {
    asyncretry.RetryCapacityExceeded: RetryCapacityExceededError,
    asyncretry.RetryBudgetExceeded: RetryBudgetExceededError,
    asyncretry.RateLimitTimeout: RateLimitTimeoutError,
    asyncretry.CircuitOpenError: CircuitOpenError,
    asyncretry.BackendUnavailable: BackendUnavailableError,
    asyncretry.AttemptTimeout: AttemptTimeoutError,
}


def as_aiohttp_error(error: asyncretry.AsyncRetryError) -> asyncretry.AsyncRetryError:
    """The error as the class above that is also the matching ``aiohttp.ClientError``.

    A new instance of that class (defined by inheriting from both, never by changing an object's class)
    with everything the error carries: its arguments and attributes, the attempt history, its notes,
    cause, context and traceback. An error of another class is returned as it is.
    """
    dual = _AS_AIOHTTP.get(type(error))
    return error if dual is None else twin_of(error, dual)
