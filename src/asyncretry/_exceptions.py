"""The exceptions asyncretry raises itself.

A call that made an attempt ends with that attempt's *real* outcome (a service error, a connection
error, re-raised as itself; or its result), whatever stopped the retries, with the attempt history
attached (see :func:`asyncretry.history_of`, whose ``gave_up`` says why). The classes below are what
asyncretry decides on the client side: refusals of a call before its first attempt, and the
primitives' own answers when used directly::

    AsyncRetryError
    ├── RetryCapacityExceeded   the retry quota cannot pay (a first-attempt cost, or the quota used directly)
    │   └── RetryBudgetExceeded the retry budget allows no retry right now
    ├── CircuitOpenError        the circuit breaker is open: the call was rejected without an attempt
    ├── RateLimitTimeout        a token bucket or rate limiter would make the call wait too long
    ├── RetriesExhausted        attempts ran out on a *result* judged retryable (no exception to re-raise)
    ├── AttemptTimeout          one attempt ran past its per-attempt timeout (also a TimeoutError)
    ├── PollFailed              a poll returned a final status other than success
    ├── BackendUnavailable      a shared-state backend (Redis) cannot be reached and fails closed
    └── ConfigurationError      a setting read from the environment or a config file is invalid
                                (also a ValueError)

Bad arguments to constructors raise plain :class:`ValueError` / :class:`TypeError`.
"""

from __future__ import annotations

__all__ = [
    "AsyncRetryError",
    "AttemptTimeout",
    "BackendUnavailable",
    "CircuitOpenError",
    "ConfigurationError",
    "PollFailed",
    "RateLimitTimeout",
    "RetriesExhausted",
    "RetryBudgetExceeded",
    "RetryCapacityExceeded",
]


class AsyncRetryError(Exception):
    """Base class of every exception asyncretry raises itself."""


class RetryCapacityExceeded(AsyncRetryError):
    """The retry quota has fewer tokens than an attempt would cost; the attempt was not made.

    This is standard mode's "circuit-breaker behaviour": during an outage, retries stop once the quota
    is spent, and come back as successes refill it. A call whose retry is refused ends with its own last
    error (its history says ``gave_up="quota"``); this error is raised by the quota used directly, and
    for a call whose first attempt has a cost (``initial_try_cost``) the quota cannot pay.

    Attributes:
        available: tokens left in the quota when the retry was refused.
        cost: tokens the retry would have cost.
        name: the quota's name (its scope).
    """

    def __init__(self, *, available: float, cost: float, name: str = "quota") -> None:
        self.available = available
        self.cost = cost
        self.name = name
        super().__init__(
            f"retry capacity exceeded in {name!r}: a retry costs {cost:g} tokens but only "
            f"{available:g} are left; retries resume as calls succeed again"
        )


class RetryBudgetExceeded(RetryCapacityExceeded):
    """The retry budget allows no retry right now (retries already make up their share of recent requests).

    A :class:`RetryCapacityExceeded`, so that handlers of an empty quota see it too. A call whose retry
    the budget refuses ends with its own last error (its history says ``gave_up="budget"``).

    Attributes:
        available: retries the budget still allowed (less than one).
        name: the budget's name (its scope).
    """

    def __init__(self, *, available: float, name: str = "budget") -> None:
        AsyncRetryError.__init__(
            self,
            f"retry budget exceeded in {name!r}: retries already make up their allowed share of recent "
            f"requests ({available:g} left); retries resume as new requests come in",
        )
        self.available = available
        self.cost = 1.0
        self.name = name


class CircuitOpenError(AsyncRetryError):
    """The circuit breaker is open (or half-open with all probes taken); the call was not attempted.

    Attributes:
        name: the breaker's name.
        state: ``"open"``, ``"half_open"`` or ``"isolated"``.
        retry_after: seconds until the breaker admits a probe again (``inf`` when manually isolated).
    """

    def __init__(self, *, name: str, state: str, retry_after: float) -> None:
        self.name = name
        self.state = state
        self.retry_after = retry_after
        when = (
            "until it is reset by hand" if retry_after == float("inf")
            else f"for another {retry_after:.3g} s"
        )
        super().__init__(f"circuit {name!r} is {state.replace('_', '-')}: calls are rejected {when}")


class RateLimitTimeout(AsyncRetryError):
    """Waiting for a rate-limit token would take longer than the caller allows.

    Attributes:
        name: the bucket's or limiter's name.
        wait: the wait that was needed (seconds, an estimate when refused up front; ``inf`` when the call's
            time ran out while it waited for its caller's turn, see :meth:`asyncretry.Retrier.attempts`).
        timeout: the most the caller allowed (seconds).
    """

    def __init__(self, *, name: str, wait: float, timeout: float) -> None:
        self.name = name
        self.wait = wait
        self.timeout = timeout
        super().__init__(
            f"rate limit {name!r}: a token would take {wait:.3g} s but the call allows at most "
            f"{timeout:.3g} s; lower the load, raise the rate, or allow a longer wait"
        )


class RetriesExhausted(AsyncRetryError):
    """The call gave up on a *result* judged retryable (for example a poll that still says NOT_READY).

    Attributes:
        last_result: the result of the final attempt.
        why: what stopped the retries (``"max_attempts"``, ``"deadline"``, ``"quota"``, ...).
    """

    def __init__(self, message: str, *, last_result: object, why: str) -> None:
        self.last_result = last_result
        self.why = why
        super().__init__(message)


class AttemptTimeout(AsyncRetryError, TimeoutError):
    """One attempt ran longer than the per-attempt timeout (retried with the timeout cost)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"attempt timed out after {timeout:.3g} s")


class PollFailed(AsyncRetryError):
    """A poll reached a final state other than success (AWS polling guidance: stop with the error).

    Attributes:
        result: what the last poll returned.
        status: the status the ``status`` function gave it.
    """

    def __init__(self, *, result: object, status: str) -> None:
        self.result = result
        self.status = status
        super().__init__(f"polling stopped: status {status!r} is neither success nor a reason to poll again")


class BackendUnavailable(AsyncRetryError):
    """A shared-state backend (Redis) could not be reached and the policy says to fail closed."""


class ConfigurationError(AsyncRetryError, ValueError):
    """A setting read from the environment or a shared config file is invalid; names its source."""
