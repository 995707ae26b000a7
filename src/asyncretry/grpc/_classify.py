"""Classification of gRPC outcomes: status codes, server pushback, and whether a call may be sent again.

The default status table (every code is configurable with :class:`GrpcClassifier`):

==========================  =================  =====================================================
status                      kind               why
==========================  =================  =====================================================
``OK``                      success
``UNAVAILABLE``             transient          the service is down for a moment (gRPC's own advice)
``RESOURCE_EXHAUSTED``      throttling         a quota or rate limit: slow down, then retry
every other code            not retryable      a client error, a server bug, or the call's own
                                               deadline (``DEADLINE_EXCEEDED``) or cancellation
==========================  =================  =====================================================

Server pushback (gRPC's retry design): a retryable status whose trailing metadata carries
``grpc-retry-pushback-ms`` is retried after that many milliseconds instead of the backoff; a negative
or malformed value means "do not retry", and the call ends with that status.

Whether a call may be sent again after a retryable failure: a call whose request is a stream that
cannot be replayed is sent once. A method that is not idempotent is sent again only when the failure
proves the server never began it: the server pushed back with a delay (it asks for the retry), or the
channel could not connect to any address (``UNAVAILABLE`` with gRPC's "failed to connect to all
addresses"). ``UNAVAILABLE`` alone proves nothing: a server handler may return it after doing the work.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import grpc

from .. import Outcome, OutcomeKind
from .._validate import check_bool, check_items

__all__ = ["PUSHBACK_KEY", "GrpcClassifier", "pushback_of"]

PUSHBACK_KEY = "grpc-retry-pushback-ms"
"""The trailing metadata key a server sets to push back on retries (milliseconds, gRPC's retry design)."""

_NOT_CONNECTED = "failed to connect to all addresses"
_DIGITS = re.compile(r"[0-9]+")
_SUCCESS, _TRANSIENT, _THROTTLING, _TIMEOUT, _NOT_RETRYABLE = (
    OutcomeKind.SUCCESS, OutcomeKind.TRANSIENT, OutcomeKind.THROTTLING, OutcomeKind.TIMEOUT,
    OutcomeKind.NOT_RETRYABLE,
)


def _codes(name: str, value: Iterable[grpc.StatusCode]) -> frozenset[grpc.StatusCode]:
    codes: frozenset[grpc.StatusCode] = frozenset(check_items(name, value, what="grpc.StatusCode members"))
    for code in codes:
        if not isinstance(code, grpc.StatusCode):
            raise TypeError(f"{name} must contain grpc.StatusCode members, got {code!r}")
        if code is grpc.StatusCode.OK:
            raise ValueError(f"{name} may not contain grpc.StatusCode.OK: it is the success status")
    return codes


def _methods(name: str, value: Iterable[str]) -> frozenset[str]:
    methods: frozenset[str] = frozenset(check_items(name, value, what="method names"))
    for method in methods:
        if not isinstance(method, str) or not re.fullmatch(r"/[^/\s]+/([^/\s]+|\*)", method):
            raise ValueError(
                f"{name} must contain full method names such as '/pkg.Service/Method' "
                f"(or '/pkg.Service/*' for every method of a service), got {method!r}"
            )
    return methods


def pushback_of(error: grpc.RpcError) -> float | bool | None:
    """The pushback a failed call's trailing metadata carries: seconds (>= 0), ``False`` when the server
    said "do not retry" (a negative or malformed value), ``None`` when there is none."""
    trailing = error.trailing_metadata()
    if not trailing:
        return None
    value = None
    for key, item in trailing:
        if key == PUSHBACK_KEY:
            value = item
    if value is None:
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    if _DIGITS.fullmatch(text.strip()) is None:
        return False  # negative or malformed: gRPC's retry design reads it as "do not retry"
    return int(text) / 1000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcClassifier:
    """How gRPC outcomes are judged: the status table, server pushback and idempotency.

    Args:
        transient: status codes retried as transient failures (default ``{UNAVAILABLE}``).
        throttling: status codes retried as throttling, which slows the adaptive limiter and costs the
            quota's throttling cost (default ``{RESOURCE_EXHAUSTED}``).
        timeout: status codes retried as timeouts (default none: ``DEADLINE_EXCEEDED`` is the call's
            own deadline, which no retry can beat).
        honour_pushback: follow ``grpc-retry-pushback-ms`` (default ``True``); when ``False`` it is ignored.
        non_idempotent: methods that must not run twice: full names (``"/pkg.Service/Method"``) or every
            method of a service (``"/pkg.Service/*"``). They are retried only after a failure that proves
            the server never began them.
        idempotent_by_default: whether a method not listed in ``non_idempotent`` is idempotent (default
            ``True``); with ``False``, only calls marked ``idempotent=True`` (:func:`call_options`) are
            retried after the request may have reached the server.

    Raises:
        TypeError: a code is not a ``grpc.StatusCode``, or a flag not a bool.
        ValueError: ``OK`` is listed, a code is in two sets, or a method name is malformed.
    """

    transient: Collection[grpc.StatusCode] = frozenset({grpc.StatusCode.UNAVAILABLE})
    throttling: Collection[grpc.StatusCode] = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED})
    timeout: Collection[grpc.StatusCode] = frozenset()
    honour_pushback: bool = True
    non_idempotent: Collection[str] = frozenset()
    idempotent_by_default: bool = True
    _kinds: dict[grpc.StatusCode, OutcomeKind] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s = object.__setattr__
        kinds: dict[grpc.StatusCode, OutcomeKind] = {}
        for name, kind in (("transient", _TRANSIENT), ("throttling", _THROTTLING), ("timeout", _TIMEOUT)):
            codes = _codes(name, getattr(self, name))
            s(self, name, codes)
            for code in codes:
                if code in kinds:
                    raise ValueError(f"{code} is listed twice (as {kinds[code]} and as {kind}): give it one kind")
                kinds[code] = kind
        s(self, "_kinds", kinds)
        s(self, "non_idempotent", _methods("non_idempotent", self.non_idempotent))
        check_bool("honour_pushback", self.honour_pushback)
        check_bool("idempotent_by_default", self.idempotent_by_default)

    def kind_of(self, code: grpc.StatusCode) -> OutcomeKind:
        """The kind of a status code (``OK`` is a success; a code in no set is not retryable)."""
        if code is grpc.StatusCode.OK:
            return _SUCCESS
        return self._kinds.get(code, _NOT_RETRYABLE)

    def outcome(self, error: grpc.RpcError) -> Outcome:
        """What a failed call's status and trailing metadata say of its attempt (``grpc.aio.AioRpcError``,
        or the synchronous API's ``grpc.RpcError``, which is also a ``grpc.Call``)."""
        code = error.code()
        kind = self.kind_of(code)
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        if not kind.retryable or not self.honour_pushback:
            return Outcome(kind, name, error)
        pushback = pushback_of(error)
        if pushback is None:
            return Outcome(kind, name, error)
        if pushback is False:
            return Outcome(_NOT_RETRYABLE, f"{name} ({PUSHBACK_KEY}: do not retry)", error)
        return Outcome(kind, f"{name} ({PUSHBACK_KEY})", error, server_delay=pushback)

    def is_idempotent(self, method: str, override: bool | None = None) -> bool:
        """Whether ``method`` may run twice: the per-call ``override`` if given, else the configuration."""
        if override is not None:
            return override
        listed = self.non_idempotent
        if listed and (method in listed or method[: method.rfind("/") + 1] + "*" in listed):
            return False
        return self.idempotent_by_default

    @staticmethod
    def never_began(outcome: Outcome) -> bool:
        """Whether a failed attempt proves the server never began the call (so any method may be sent again)."""
        error = outcome.error
        if not isinstance(error, grpc.RpcError) or not callable(getattr(error, "code", None)):
            return False
        if outcome.server_delay is not None:
            return True  # the server pushed back: it asks for the retry
        details = error.details() or ""
        return error.code() is grpc.StatusCode.UNAVAILABLE and details.startswith(_NOT_CONNECTED)

    def may_resend(self, outcome: Outcome, *, idempotent: bool, replayable: bool) -> Outcome:
        """The outcome, made final when the call cannot be sent again (a one-shot request stream, or a
        method that is not idempotent after a failure that does not prove the server never began it)."""
        if not outcome.kind.retryable:
            return outcome
        if not replayable:
            return Outcome(_NOT_RETRYABLE, f"{outcome.reason} (the request stream cannot be sent again)",
                           outcome.error, outcome.result)
        if idempotent or self.never_began(outcome):
            return outcome
        return Outcome(_NOT_RETRYABLE, f"{outcome.reason} (not idempotent: it may have reached the server)",
                       outcome.error, outcome.result)
