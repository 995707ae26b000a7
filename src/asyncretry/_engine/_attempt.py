"""The attempt handle: ``async with attempt:`` (``with attempt:`` in sync code) around one try of the work.

Its one job besides timing the attempt is to say what the attempt's outcome was
(:meth:`Attempt.judged`): the mark the work left (:meth:`Attempt.retry_result` ...), else the policy's
classifier, else a plain success; a per-attempt timeout is an outcome like any other; and every failed
outcome passes the call's judge (an integration's last word, such as "this request cannot be sent
again"). Every path, the timeout included, goes through that one function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from .._exceptions import AttemptTimeout
from .._primitives._kinds import OutcomeKind
from ._async._executor import settle
from ._call import DONE, RETRY
from ._classify import Outcome

if TYPE_CHECKING:
    from ._drivers import Attempts, SyncAttempts

__all__ = ["NOT_SET", "SUCCESS", "Attempt"]

NOT_SET: Any = object()
SUCCESS = Outcome(OutcomeKind.SUCCESS, "ok")
_SUCCESS = OutcomeKind.SUCCESS


class Attempt:
    """One attempt of a call; use it as ``async with attempt:`` (``with attempt:`` in sync code).

    Attributes:
        number: 1 for the first attempt.
        delay_before: the seconds slept before this attempt (0 for the first).
        result: set it to the attempt's result so that the policy's ``retry_if_result`` can judge it.
    """

    __slots__ = ("_attempts", "_cancel", "_marked", "_started", "delay_before", "number", "result")

    def __init__(
        self, attempts: Attempts | SyncAttempts, number: int = 1, delay_before: float = 0.0, started: float = -1.0
    ) -> None:
        self._attempts = attempts  # the driver of the call it belongs to
        self.number = number
        self.delay_before = delay_before
        self.result: Any = NOT_SET
        self._marked: Outcome | None = None
        self._cancel: anyio.CancelScope | None = None
        self._started = started  # read from the clock on entry when not already known

    @property
    def started(self) -> float:
        """When the attempt began, on the retrier's clock."""
        return self._started

    # -------------------------------------------------------------- what the work says of itself
    def retry_result(
        self,
        result: Any = None,
        *,
        reason: str = "result",
        kind: OutcomeKind = OutcomeKind.TRANSIENT,
        server_delay: float | None = None,
        server_delay_is_hint: bool = False,
    ) -> None:
        """Mark this attempt's result as a retryable failure (for example a poll that says NOT_READY).

        If the call then gives up, the iteration simply ends (the last result is the caller's); the
        :meth:`Retrier.call` form raises :class:`RetriesExhausted`.

        Args:
            result: the result being judged.
            reason: why it is retryable, for the history and events.
            kind: how to retry it (a retryable :class:`OutcomeKind`).
            server_delay: a delay the server asked for (seconds), if any.
            server_delay_is_hint: ``True`` for AWS's ``x-amz-retry-after`` (clamped to the backoff).
        """
        if not kind.retryable:
            raise ValueError(f"kind must be a retryable OutcomeKind, got {kind!r}")
        self._marked = Outcome(kind, reason, None, result, server_delay, server_delay_is_hint)

    def fail_result(self, result: Any = None, *, reason: str = "result") -> None:
        """Mark this attempt's result as a final, non-retryable failure (the call gives up)."""
        self._marked = Outcome(OutcomeKind.NOT_RETRYABLE, reason, None, result)

    def classify_result(self, outcome: Outcome) -> None:
        """Decide the classification of this attempt's result with an outcome made elsewhere.

        What :meth:`retry_result` and :meth:`fail_result` do, for integrations that build the
        :class:`Outcome` themselves (the httpx transports judge a response, its error code and its
        ``Retry-After`` in one go); ``outcome.error`` must be ``None``.
        """
        if outcome.error is not None:
            raise ValueError("outcome.error must be None for a result; use classify_error for an exception")
        self._marked = outcome

    def classify_error(self, outcome: Outcome) -> None:
        """Decide the classification of the exception this attempt is about to raise.

        Integrations that know more than the policy's classifier call this, then re-raise;
        ``outcome.error`` must be the exception raised.
        """
        if outcome.error is None:
            raise ValueError("outcome.error must be the exception the attempt raises")
        self._marked = outcome

    # ------------------------------------------------------------------------------ the judge
    def judged(self, error: Exception | None) -> Outcome:
        """The outcome of this attempt, which ended by raising ``error`` (``None``: it returned).

        The one place where an attempt's outcome is decided, whatever the way in.
        """
        marked = self._marked
        call = self._attempts._call
        if error is None:
            if marked is not None and marked.error is None:
                outcome = marked
            else:
                classifier = call.policy.classifier
                if classifier.retry_if_result is None or self.result is NOT_SET:
                    return SUCCESS  # a plain success: nothing else to ask
                outcome = classifier.classify_result(self.result)
        elif marked is not None and marked.error is error:
            outcome = marked
        else:
            outcome = call.policy.classifier.classify_error(error)
        judge = call.judge
        if judge is not None and outcome.kind is not _SUCCESS:
            outcome = judge(outcome)
        return outcome

    def timed_out(self, timeout: float) -> AttemptTimeout:
        """The error of an attempt that its own time limit (``timeout`` seconds) cut short, marked as a timeout."""
        error = AttemptTimeout(timeout)
        self._marked = Outcome(OutcomeKind.TIMEOUT, "attempt timeout", error)
        return error

    # --------------------------------------------------------------------- async with / with
    async def __aenter__(self) -> Attempt:
        driver = self._attempts
        if self._started < 0.0:
            self._started = driver._retrier.clock.now()
        call = driver._call
        if call.timed:
            timeout = call.attempt_timeout(self._started)
            if timeout is not None:
                self._cancel = anyio.CancelScope(deadline=anyio.current_time() + timeout)
                self._cancel.__enter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        driver: Attempts = self._attempts  # type: ignore[assignment]  # the async driver makes async attempts
        cancel = self._cancel
        if cancel is not None:
            self._cancel = None
            if cancel.__exit__(exc_type, exc, tb) and exc is not None:
                # Our own per-attempt deadline cancelled the work: a timeout, judged like any failure.
                exc = self.timed_out(driver._call.last_timeout)
                if not await driver.end(self, exc):
                    raise exc
                return True
        if exc is not None and not isinstance(exc, Exception):
            driver.abandon()  # cancellation, KeyboardInterrupt ...: never retried, never delayed
            return False
        # Settled here rather than through driver.end(): one coroutine less on every attempt.
        outcome = self.judged(exc)
        retrier = driver._retrier
        step = await settle(retrier, driver._call, self.number, self._started, outcome, exc, retrier.clock.now())
        return step == RETRY or (step != DONE and await driver._after(step))

    def __enter__(self) -> Attempt:
        if self._started < 0.0:
            self._started = self._attempts._retrier.clock.now()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        call: SyncAttempts = self._attempts  # type: ignore[assignment]  # the sync driver makes sync attempts
        if exc is not None and not isinstance(exc, Exception):
            call.abandon()
            return False
        assert exc is None or isinstance(exc, Exception)
        return call.end(self, exc)

    def __repr__(self) -> str:
        return f"<Attempt #{self.number} delay_before={self.delay_before:.3f}>"
