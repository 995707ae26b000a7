"""Polling with AWS's guidance: poll again on NOT_READY or THROTTLED, stop on SUCCESS or anything else."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar, cast

from .._exceptions import PollFailed
from .._primitives._kinds import OutcomeKind
from .._validate import check_callable, check_instance, check_str
from ._policy import RetryPolicy
from ._retrier import DEFAULT_SCOPE, Retrier

__all__ = ["PollStatus", "poll"]

T = TypeVar("T")


class PollStatus(StrEnum):
    """What one poll found."""

    SUCCESS = "success"
    NOT_READY = "not_ready"
    THROTTLED = "throttled"
    FAILED = "failed"


async def poll(
    fn: Callable[[], Awaitable[T]],
    status: Callable[[T], PollStatus | str],
    *,
    retrier: Retrier | None = None,
    policy: RetryPolicy | None = None,
    scope: str = DEFAULT_SCOPE,
) -> T:
    """Call ``fn`` until ``status(result)`` says success, waiting more between polls each time.

    ``not_ready`` polls again after the backoff; ``throttled`` polls again as a throttling outcome
    (slower in adaptive mode); ``success`` returns the result; anything else raises
    :class:`PollFailed`. Exceptions raised by ``fn`` are classified and retried like any other call.

    Args:
        fn: the poll, an async callable without arguments.
        status: maps a result to a :class:`PollStatus` (or its string value).
        retrier: the retrier to use; default: a new one with ``policy``.
        policy: default :meth:`RetryPolicy.polling` (``2**retries * 100 ms``, capped at 20 s, 10 polls).
        scope: the scope of the calls.

    Raises:
        TypeError: an argument has the wrong type (the message names it).
        PollFailed: a poll returned a final status other than success.
        RetriesExhausted: the polls ran out (or the deadline came) while still not ready.
    """
    check_callable("fn", fn)
    check_callable("status", status)
    check_str("scope", scope)
    if policy is not None:
        check_instance("policy", policy, RetryPolicy)
    if retrier is None:
        retrier = Retrier(policy if policy is not None else RetryPolicy.polling(), name="poll")
    elif policy is not None:
        raise TypeError("pass either retrier or policy, not both")
    else:
        check_instance("retrier", retrier, Retrier)
    attempts = retrier.attempts(scope=scope)
    result: T | None = None
    failed: str | None = None
    async for attempt in attempts:
        async with attempt:
            result = await fn()
            found = status(result)
            state = found.value if isinstance(found, PollStatus) else str(found).lower()
            if state == PollStatus.NOT_READY:
                attempt.retry_result(result, reason="NOT_READY")
            elif state == PollStatus.THROTTLED:
                attempt.retry_result(result, reason="THROTTLED", kind=OutcomeKind.THROTTLING)
            elif state != PollStatus.SUCCESS:
                failed = state
                attempt.fail_result(result, reason=state.upper())
    if failed is not None:
        raise PollFailed(result=result, status=failed)
    if attempts.gave_up is not None:
        raise attempts.result_error()
    return cast(T, result)
