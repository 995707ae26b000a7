"""asyncretry's errors as aiohttp users catch them: ``except aiohttp.ClientError`` sees all the middleware raises.

Each class is both the asyncretry error (``except asyncretry.CircuitOpenError`` still works, with its
attributes and attempt history) and an aiohttp client error::

    aiohttp.ClientError
    ├── RetryCapacityExceededError      (also asyncretry.RetryCapacityExceeded)
    │   └── RetryBudgetExceededError    (also asyncretry.RetryBudgetExceeded)
    ├── RateLimitTimeoutError           (also asyncretry.RateLimitTimeout)
    └── aiohttp.ClientConnectionError
        ├── CircuitOpenClientError      (also asyncretry.CircuitOpenError)
        ├── BackendUnavailableError     (also asyncretry.BackendUnavailable)
        └── aiohttp.ServerTimeoutError
            └── AttemptTimeoutError     (also asyncretry.AttemptTimeout)

Errors of the requests themselves (``ClientConnectorError``, ``ServerDisconnectedError`` ...) reach the
caller as aiohttp raised them, with the attempt history attached (:func:`asyncretry.history_of`).
"""

from __future__ import annotations

import aiohttp

from .. import (
    AsyncRetryError,
    AttemptTimeout,
    BackendUnavailable,
    CircuitOpenError,
    RateLimitTimeout,
    RetryBudgetExceeded,
    RetryCapacityExceeded,
)

__all__ = [
    "AttemptTimeoutError",
    "BackendUnavailableError",
    "CircuitOpenClientError",
    "RateLimitTimeoutError",
    "RetryBudgetExceededError",
    "RetryCapacityExceededError",
    "as_aiohttp_error",
]


class RetryCapacityExceededError(RetryCapacityExceeded, aiohttp.ClientError):
    """The retry quota refused a retry of this request (an :class:`asyncretry.RetryCapacityExceeded`)."""


class RetryBudgetExceededError(RetryBudgetExceeded, RetryCapacityExceededError):
    """The retry budget refused a retry of this request (an :class:`asyncretry.RetryBudgetExceeded`)."""


class RateLimitTimeoutError(RateLimitTimeout, aiohttp.ClientError):
    """A rate limit would have made this request wait too long (an :class:`asyncretry.RateLimitTimeout`)."""


class CircuitOpenClientError(CircuitOpenError, aiohttp.ClientConnectionError):
    """The circuit breaker refused this request (an :class:`asyncretry.CircuitOpenError`)."""


class BackendUnavailableError(BackendUnavailable, aiohttp.ClientConnectionError):
    """The shared-state backend failed closed for this request (an :class:`asyncretry.BackendUnavailable`)."""


class AttemptTimeoutError(AttemptTimeout, aiohttp.ServerTimeoutError):
    """An attempt of this request ran past its time limit (an :class:`asyncretry.AttemptTimeout`)."""


_AS_AIOHTTP: dict[type[AsyncRetryError], type[AsyncRetryError]] = {
    RetryCapacityExceeded: RetryCapacityExceededError,
    RetryBudgetExceeded: RetryBudgetExceededError,
    RateLimitTimeout: RateLimitTimeoutError,
    CircuitOpenError: CircuitOpenClientError,
    BackendUnavailable: BackendUnavailableError,
    AttemptTimeout: AttemptTimeoutError,
}


def as_aiohttp_error(error: AsyncRetryError) -> AsyncRetryError:
    """The same error object, now also the matching ``aiohttp.ClientError``.

    The object keeps its identity, attributes, cause and attempt history: only its class becomes the
    subclass above that is also an aiohttp error. An error of another class is returned as it is.
    """
    dual = _AS_AIOHTTP.get(type(error))
    if dual is not None:
        error.__class__ = dual
    return error
