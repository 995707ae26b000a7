"""What the transports settle for one request before sending it: its overrides, scope, hedging, and judge.

Both transports (async and sync) make every request's :class:`Plan` with :func:`plan_request`; the
overrides it carries are checked by :func:`asyncretry.parse_overrides` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from .. import HedgingConfig, Outcome, RetryPolicy, parse_overrides
from .._http._overrides import choose_hedging
from .._http._replay import REPLAYABLE, Replay, replay_of
from ._classify import HttpClassifier
from ._report import EXTENSION, describe

__all__ = ["WHERE", "Plan", "plan_request"]

WHERE = f"request.extensions[{EXTENSION!r}]"
"""How users write a request's overrides, for messages."""


class Plan:
    """What the transport settled for one request before sending it, and its one judge.

    Made for every request, so the fields start as class attributes, and whether the request is
    idempotent is only worked out when an outcome is retryable.
    """

    request: httpx.Request
    scope: str
    classifier: HttpClassifier
    replay: Replay
    read_body: bool
    reads_quota: bool  # a success is read for the quota it announces (the policy holds on spent quotas)
    timed: bool  # the call may cancel a send itself (its policy has a deadline or an attempt timeout)
    policy: RetryPolicy | None = None
    idempotent_opt: bool | None = None
    hedging: HedgingConfig | None = None
    caller: str | None = None

    def judge(self, outcome: Outcome) -> Outcome:
        """Whether this request may be sent again after a failed attempt (the engine asks on every path)."""
        if not outcome.kind.retryable:
            return outcome
        return self.classifier.may_resend(
            outcome,
            idempotent=self.classifier.is_idempotent(self.request, self.idempotent_opt),
            replayable=self.replay.ok,
        )

    def label(self) -> str:
        return describe(self.request)

    def hedge(self, policy: RetryPolicy, asked: bool | HedgingConfig | None) -> HedgingConfig | None:
        """The hedging of this request (see :func:`choose_hedging`): only for an idempotent request with a
        body of bytes.

        Raises:
            ValueError: hedging was asked for a request that cannot be hedged, or ``True`` without a config.
        """
        # Two attempts at once: the request must be safe to run twice, its body sendable twice at once.
        why = None
        if type(self.request.stream) is not httpx.ByteStream:
            why = "its body is a stream or a file, which cannot be sent twice at once"
        elif not self.classifier.is_idempotent(self.request, self.idempotent_opt):
            why = "it is not idempotent (add an Idempotency-Key header, or {'idempotent': True})"
        return choose_hedging(policy, asked, why, describe(self.request), WHERE)

    def rewind(self) -> None:
        """Put a file body back where the first attempt started sending it."""
        if self.replay.rewind is not None:
            self.replay.rewind()


def plan_request(
    request: httpx.Request,
    *,
    classifier: HttpClassifier,
    read_body: bool,
    policy: RetryPolicy,
    once: Callable[[], RetryPolicy],
    scope: str | None,
    scope_key: Callable[[httpx.Request], str],
) -> Plan:
    """The plan of ``request`` under a transport's settings.

    Args:
        request: the request about to be sent.
        classifier: the transport's classifier.
        read_body: the transport's ``read_body``.
        policy: the transport's policy.
        once: the transport's policy with one attempt (for ``{"retry": False}``).
        scope: the request's scope when already known, else ``None`` (``scope_key`` makes it).
        scope_key: the transport's request-to-scope function.

    Raises:
        TypeError, ValueError: the request's overrides are not valid (see :func:`parse_overrides`), or
            ask for hedging the request cannot have.
    """
    plan = Plan()
    plan.request = request
    plan.classifier = classifier
    plan.read_body = read_body
    # A body of bytes (every request without a body too) is sent again as it is; anything else is
    # looked at now, before the first send moves a file's position.
    in_memory = type(request.stream) is httpx.ByteStream
    plan.replay = REPLAYABLE if in_memory else replay_of(request.stream, in_memory=False)
    given = request.extensions.get(EXTENSION)
    if given is not None:
        overrides = parse_overrides(given, WHERE)
        plan.policy = overrides.policy
        if overrides.retry is False:  # one attempt, of the request's own policy if it has one
            plan.policy = once() if plan.policy is None else plan.policy.replace(max_attempts=1)
        if overrides.scope is not None:
            scope = overrides.scope
        plan.caller = overrides.caller
        plan.idempotent_opt = overrides.idempotent
        if overrides.read_body is not None:
            plan.read_body = overrides.read_body
        plan.hedging = plan.hedge(plan.policy or policy, overrides.hedge)
    elif policy.hedging is not None:
        plan.hedging = plan.hedge(policy, None)
    plan.scope = scope if scope is not None else scope_key(request)
    chosen = plan.policy or policy
    plan.reads_quota = chosen.holds_spent_quota
    plan.timed = chosen.timed
    return plan
