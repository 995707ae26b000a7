"""The attempt history of one call, attached to the exception the caller finally sees."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .._primitives._kinds import OutcomeKind

__all__ = ["AttemptRecord", "RetryHistory", "attach_history", "hedged_records", "history_of"]

_ATTRIBUTE = "__asyncretry_history__"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a call.

    Attributes:
        number: 1 for the first attempt.
        started: when it started, on the retrier's clock (seconds).
        duration: how long it ran (seconds).
        kind: its classification.
        reason: why it was classified so (``"HTTP 503"``, ``"ConnectionResetError"``).
        delay_after: the delay before the next attempt (seconds), ``None`` for the last one.
        error: ``repr()`` of the exception it raised, if any (kept as text so that the history never
            keeps exceptions and their tracebacks alive).
        hedge: the attempt was a hedge, sent while an earlier attempt of the call was still running
            (:class:`~asyncretry.HedgingConfig`); an attempt that lost the race has kind ``CANCELLED``.
    """

    number: int
    started: float
    duration: float
    kind: OutcomeKind
    reason: str
    delay_after: float | None
    error: str | None
    hedge: bool = False


@dataclass(frozen=True, slots=True)
class RetryHistory:
    """Everything one call went through.

    Attributes:
        scope: the scope (resource) the call belonged to.
        attempts: one record per attempt, in order.
        elapsed: seconds from the start of the call to its end.
        gave_up: why the call gave up (``"max_attempts"``, ``"not_retryable"``, ``"quota"``,
            ``"deadline"``, ``"breaker"``, ``"rate_limit"``, ``"server_delay"``, ``"backend"`` for shared state
            on a server that could not be reached), or ``None`` if it succeeded.
    """

    scope: str
    attempts: tuple[AttemptRecord, ...]
    elapsed: float
    gave_up: str | None

    @property
    def retries(self) -> int:
        """Attempts after the first."""
        return max(0, len(self.attempts) - 1)

    @property
    def hedges(self) -> int:
        """Attempts sent as hedges (while an earlier attempt still ran)."""
        return sum(1 for a in self.attempts if a.hedge)

    @property
    def total_delay(self) -> float:
        """Seconds spent sleeping between attempts."""
        return sum(a.delay_after or 0.0 for a in self.attempts)

    def summary(self) -> str:
        """One line for logs and exception notes."""
        kinds = ", ".join(f"#{a.number} {a.reason}" for a in self.attempts)
        why = f"gave up ({self.gave_up})" if self.gave_up else "succeeded"
        return (
            f"asyncretry: {why} after {len(self.attempts)} attempt(s) in {self.elapsed:.3f} s "
            f"[{self.scope}]: {kinds}"
        )


def history_of(error: BaseException) -> RetryHistory | None:
    """The attempt history the retry engine attached to ``error`` when it gave up, or ``None``."""
    history = getattr(error, _ATTRIBUTE, None)
    return history if isinstance(history, RetryHistory) else None


def attach_history(error: BaseException, history: RetryHistory) -> None:
    """Attach ``history`` to ``error`` (readable with :func:`history_of`) and add a note with its summary.

    For integrations whose call fails after the retry engine is done with it (a response stream that fails
    after its first message, which is never retried): the caller gets the error with the call's history.
    """
    with contextlib.suppress(AttributeError, TypeError):  # __slots__ exceptions cannot carry it; the note can
        setattr(error, _ATTRIBUTE, history)
    error.add_note(history.summary())


def hedged_records(
    rows: list[tuple[int, float, float, OutcomeKind, str, str | None]], delays: tuple[float, ...] | list[float],
    hedges: tuple[()] | set[int], overlapped: tuple[()] | set[int],
) -> tuple[AttemptRecord, ...]:
    """A hedged call's records, by attempt number: the delays go to the attempts that ended a round of the
    call (an attempt that ended while another still ran has none after it)."""
    records: list[AttemptRecord] = []
    paced = 0
    for n, s, d, k, r, e in rows:
        delay = None
        if n not in overlapped:
            delay = delays[paced] if paced < len(delays) else None
            paced += 1
        records.append(AttemptRecord(
            number=n, started=s, duration=d, kind=k, reason=r, delay_after=delay, error=e, hedge=n in hedges,
        ))
    records.sort(key=lambda record: record.number)
    return tuple(records)
