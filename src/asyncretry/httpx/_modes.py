"""What the async and the sync transports do differently, as pairs of functions under two names.

The sync transport is generated from the async one (``tools/generate.py``), which names each pair so
that the generated code calls the function of its own mode: hedging (sent concurrently, so async only:
the sync transport refuses it), the options of a policy that a blocking transport cannot carry out, and the
transport a call's sends go through (an async send the call may cancel itself runs detached).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from .. import AsyncRetryError, Attempts, HedgingConfig, RetryPolicy, SyncAttempts
from ._detached import DetachedTransport
from ._errors import as_httpx_error
from ._plan import Plan
from ._streams import discard

if TYPE_CHECKING:
    from ._async._transport import AsyncRetryTransport
    from ._sync._transport import RetryTransport

__all__ = ["async_sender", "check_async_policy", "check_sync_policy", "refuse_hedging", "send_hedged", "sync_sender"]

SYNC_HEDGING = (
    "hedging sends attempts concurrently, which the synchronous RetryTransport cannot do: use AsyncRetryTransport, "
    "or a policy without hedging"
)


def check_async_policy(policy: RetryPolicy) -> None:
    """Nothing to refuse: the async transport carries out every option of a policy."""


def check_sync_policy(policy: RetryPolicy) -> None:
    """Refuse what a blocking transport cannot carry out.

    Raises:
        ValueError: the policy has an ``attempt_timeout``, an async ``on_give_up`` hook, or hedging.
    """
    if policy.attempt_timeout is not None:
        raise ValueError(
            "attempt_timeout cannot be enforced in synchronous code; set httpx timeouts instead "
            f"(got attempt_timeout={policy.attempt_timeout})"
        )
    if policy.on_give_up_is_async:
        raise ValueError("on_give_up must be a plain function for the synchronous RetryTransport")
    if policy.hedging is not None:
        raise ValueError(SYNC_HEDGING)


def async_sender(inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
    """The transport through which a call sends when it may cancel a send itself (hedging, a ``deadline``, an
    ``attempt_timeout``): ``inner`` sending each request in a task of its own if it is httpcore's pool (see
    ``_detached``: cancelled while it waits for a connection, a send loses that connection for good), ``inner``
    itself otherwise."""
    return DetachedTransport(inner) if isinstance(inner, httpx.AsyncHTTPTransport) else inner


def sync_sender(inner: httpx.BaseTransport) -> httpx.BaseTransport:
    """The transport through which a sync call sends when it has a ``deadline``: ``inner`` (a blocking send
    is never cancelled)."""
    return inner


async def send_hedged(
    transport: AsyncRetryTransport, request: httpx.Request, plan: Plan, config: HedgingConfig
) -> tuple[httpx.Response, Attempts]:
    """The request with hedges: the same sends, raced; every losing or failed response is closed."""
    call = transport.retrier.attempts(scope=plan.scope, policy=plan.policy, judge=plan.judge, label=plan.label,
                                      caller=plan.caller)
    # Hedging cancels sends routinely: through httpcore's pool, each send runs detached, never cancelled while
    # it waits for a connection (see _detached: cancelled there, the pool loses the connection for good).
    sender = transport._cancellable
    try:
        response = await call.hedged(
            config, lambda attempt: transport._send(attempt, request, plan, call, sender), discard
        )
    except AsyncRetryError as error:
        refused = as_httpx_error(error, request)
    else:
        return response, call
    raise refused


def refuse_hedging(
    transport: RetryTransport, request: httpx.Request, plan: Plan, config: HedgingConfig
) -> tuple[httpx.Response, SyncAttempts]:
    """The sync transport's answer to a request that asks for hedging.

    Raises:
        ValueError: always (hedging sends attempts concurrently).
    """
    raise ValueError(SYNC_HEDGING)
