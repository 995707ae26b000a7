"""Backoff strategies: how long to wait before each retry.

Every strategy is a frozen, validated value object whose :meth:`~Backoff.delay` is a pure function of
the number of the attempt that failed, a random number ``u`` in ``[0, 1)`` that the caller draws from its
injected ``rng``, and (for decorrelated jitter) the previous delay. Keeping randomness outside makes every
delay reproducible in tests and lets one strategy be shared by any number of concurrent calls.

The named constructors of :class:`ExponentialBackoff` reproduce the reference SDKs exactly for the same
``u`` (delay after failed attempt ``n``, in seconds):

* ``aws_standard()``: ``u * min(2**(n-1), 20)``, botocore's standard mode (2020 profile, base 1 s).
* ``aws_transient()`` / ``aws_throttling()``: the 2026 profile, base 0.05 s / 1 s, otherwise the same.
* ``kotlin()``: ``min(0.01 * 1.5**(n-1), 20) * (1 - u)``, the smithy-kotlin default delay provider.
* ``qldb()``: ``t/2 + u*t/2`` with ``t = min(0.01 * 2**n, 5)`` and 4 retries, the QLDB drivers' default.
* ``aws_polling(max_interval=20)``: ``min(0.1 * 2**n, max_interval)``, AWS's polling guidance, no jitter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol, runtime_checkable

from .._validate import as_seconds, check_callable, check_choice, check_int, check_number, check_seconds
from ._clock import RandomSource

__all__ = [
    "Backoff",
    "DecorrelatedJitterBackoff",
    "ExponentialBackoff",
    "FixedBackoff",
    "LinearBackoff",
    "NoBackoff",
]

JitterMode = Literal["full", "reduce", "equal", "none"]
_JITTER_MODES: tuple[str, ...] = ("full", "reduce", "equal", "none")


@runtime_checkable
class Backoff(Protocol):
    """What the retry engine needs from a backoff strategy.

    ``attempt`` is always the 1-based number of the attempt that failed: the first retry waits
    ``delay(1, ...)``. ``u`` is a random number in ``[0, 1)`` (``1.0`` is accepted too) drawn by the
    caller. ``delay`` is pure (same inputs, same output), never negative and never above the strategy's
    cap, and always within ``bounds(attempt)``.
    """

    @property
    def max_retries(self) -> int | None:
        """How many retries the strategy schedules, or ``None`` when it has no limit of its own."""
        ...

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return the delay in seconds before the retry that follows failed attempt ``attempt``."""
        ...

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return the smallest and largest delay that ``delay(attempt, u, ...)`` can return, in seconds."""
        ...

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``, in seconds.

        Args:
            attempts: how many delays to return (>= 0); truncated to ``max_retries`` when that is set.
            rng: ``None`` (default) gives each attempt's upper bound, ``bounds(n)[1]`` (the cap before
                jitter lowers it), so the schedule is deterministic; a random source draws one ``u`` per
                attempt and passes each delay as ``previous`` to the next, as the engine does.
        """
        ...



def _check_attempt(attempt: int) -> int:
    if type(attempt) is int and attempt >= 1:  # every call of the engine: skip the general check
        return attempt
    return check_int("attempt", attempt, low=1)


def _check_u(u: float) -> float:
    if type(u) is float and 0.0 <= u <= 1.0:
        return u
    return check_number("u", u, low=0.0, high=1.0)


def _check_max_retries(value: int | None) -> None:
    if value is not None:
        check_int("max_retries", value, low=0)


def _grow(start: float, factor: float, steps: int, cap: float) -> float:
    """Return ``min(start * factor**steps, cap)`` for any ``steps >= 0`` without ever overflowing."""
    if steps <= 0 or factor == 1.0 or start >= cap:
        return min(start, cap)
    # Past this many steps the product is above cap * factor, so the answer is cap; deciding that from
    # logarithms avoids computing factor**steps, which raises OverflowError for large attempt numbers.
    if steps > math.log(cap / start) / math.log(factor) + 1.0:
        return cap
    try:
        return min(start * factor**steps, cap)
    except OverflowError:  # only reachable with extreme start/cap ratios near the float range
        return cap


def _schedule(strategy: Backoff, attempts: int, rng: RandomSource | None) -> list[float]:
    count = check_int("attempts", attempts, low=0)
    if rng is not None:
        check_callable("rng", rng)
    if strategy.max_retries is not None:
        count = min(count, strategy.max_retries)
    delays: list[float] = []
    previous: float | None = None
    for attempt in range(1, count + 1):
        delay = strategy.bounds(attempt)[1] if rng is None else strategy.delay(attempt, rng(), previous)
        delays.append(delay)
        previous = delay
    return delays


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialBackoff:
    """Capped exponential backoff with a choice of jitter.

    The cap for failed attempt ``n`` is ``cap = min(initial * multiplier**(n-1), max_delay)``; jitter then
    lowers it (the cap applies before jitter). With ``a = jitter_amount``:

    * ``"full"`` (default): ``cap * (1 - a) + a * u * cap``, uniform in ``[cap * (1 - a), cap)``. With
      ``a = 1`` this is exactly botocore's ``rand * cap`` for the same ``u``.
    * ``"reduce"``: ``cap * (1 - a * u)``, uniform in ``(cap * (1 - a), cap]``: smithy-kotlin's
      ``cap * (1 - U[0, jitter))``. Same distribution as ``"full"``, mirrored in ``u``.
    * ``"equal"``: ``cap / 2 + u * cap / 2`` (the QLDB drivers' equal jitter); ``jitter_amount`` unused.
    * ``"none"``: ``cap``; ``jitter_amount`` unused.

    ``jitter_amount`` says how much jitter may cut from the cap: 1.0 (full jitter, down to 0), 0.5 (at most
    half), 0 (none).

    Args:
        initial: the cap after the first failed attempt, in seconds (> 0, or a ``timedelta``). Default 1 s.
        multiplier: growth factor per attempt (>= 1). Default 2.
        max_delay: the largest cap, in seconds (>= ``initial``, or a ``timedelta``). Default 20 s.
        jitter: ``"full"``, ``"reduce"``, ``"equal"`` or ``"none"``. Default ``"full"``.
        jitter_amount: the fraction of the cap jitter may remove, in ``[0, 1]``; only for ``"full"`` and
            ``"reduce"``. Default 1.0.
        max_retries: how many retries this strategy allows (>= 0), or ``None`` (default) to leave the limit
            to the engine's ``max_attempts``.

    Raises:
        ValueError: a parameter is out of range (the message names it, the value and the allowed range).
        TypeError: a parameter has the wrong type.
    """

    initial: float | timedelta = 1.0
    multiplier: float = 2.0
    max_delay: float | timedelta = 20.0
    jitter: JitterMode = "full"
    jitter_amount: float = 1.0
    max_retries: int | None = None

    def __post_init__(self) -> None:
        initial = check_seconds("initial", self.initial, low_open=True)
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "multiplier", check_number("multiplier", self.multiplier, low=1.0))
        max_delay = check_seconds("max_delay", self.max_delay)
        if max_delay < initial:
            raise ValueError(f"max_delay must be >= initial ({initial:g} s), got {self.max_delay!r}")
        object.__setattr__(self, "max_delay", max_delay)
        check_choice("jitter", self.jitter, _JITTER_MODES)
        amount = check_number("jitter_amount", self.jitter_amount, low=0.0, high=1.0)
        if self.jitter in ("equal", "none") and amount != 1.0:
            raise ValueError(
                f"jitter_amount only applies to jitter='full' or 'reduce', got jitter_amount={amount!r} "
                f"with jitter={self.jitter!r}; leave jitter_amount at its default"
            )
        object.__setattr__(self, "jitter_amount", amount)
        _check_max_retries(self.max_retries)

    # -- named constructors for the reference behaviours ------------------------------------------------

    @classmethod
    def aws_standard(cls) -> ExponentialBackoff:
        """AWS standard retry mode, 2020 profile: ``u * min(2**(n-1), 20)`` s (botocore's form, base 1 s)."""
        return cls(initial=1.0, multiplier=2.0, max_delay=20.0, jitter="full")

    @classmethod
    def aws_transient(cls) -> ExponentialBackoff:
        """AWS 2026 profile for transient (non-throttling) errors: ``u * min(0.05 * 2**(n-1), 20)`` s."""
        return cls(initial=0.05, multiplier=2.0, max_delay=20.0, jitter="full")

    @classmethod
    def aws_throttling(cls) -> ExponentialBackoff:
        """AWS 2026 profile for throttling errors: ``u * min(2**(n-1), 20)`` s (the same curve as 2020)."""
        return cls(initial=1.0, multiplier=2.0, max_delay=20.0, jitter="full")

    @classmethod
    def kotlin(cls) -> ExponentialBackoff:
        """The smithy-kotlin default: ``min(0.01 * 1.5**(n-1), 20) * (1 - u)`` s (full jitter, Kotlin form).

        Kotlin truncates the delay to whole milliseconds before sleeping; this keeps the exact float.
        """
        return cls(initial=0.01, multiplier=1.5, max_delay=20.0, jitter="reduce", jitter_amount=1.0)

    @classmethod
    def qldb(cls) -> ExponentialBackoff:
        """The QLDB drivers' default: 4 retries, equal jitter over ``t = min(0.01 * 2**n, 5)`` s.

        As in the drivers (``base * 2**retry_attempt`` with a 1-based retry attempt), the first retry's
        ``t`` is 20 ms, so delays run from 10 ms (the smallest possible first delay) to 5 s.
        """
        return cls(initial=0.02, multiplier=2.0, max_delay=5.0, jitter="equal", max_retries=4)

    @classmethod
    def aws_polling(
        cls, *, max_interval: float | timedelta = 20.0, max_retries: int | None = None
    ) -> ExponentialBackoff:
        """AWS's polling guidance: wait ``2**retries * 100 ms`` capped at ``max_interval``, no jitter.

        ``retries`` counts the polls made so far, so after failed poll ``n`` the wait is ``0.1 * 2**n`` s
        (0.2, 0.4, 0.8, ...). The guidance's 100 ms wait before the very first poll is not a retry delay.

        Args:
            max_interval: the largest wait in seconds (> 0, or a ``timedelta``); below 0.2 s every wait is
                ``max_interval``. Default 20 s.
            max_retries: the guidance's ``MAX_RETRIES`` (>= 0), or ``None`` (default) for no own limit.

        Raises:
            ValueError: ``max_interval <= 0`` or ``max_retries < 0``.
        """
        cap = check_seconds("max_interval", max_interval, low_open=True)
        return cls(
            initial=min(0.2, cap), multiplier=2.0, max_delay=cap, jitter="none", max_retries=max_retries
        )

    # -- the Backoff protocol -----------------------------------------------------------------------------

    def cap(self, attempt: int) -> float:
        """Return the cap before jitter: ``min(initial * multiplier**(attempt-1), max_delay)`` seconds.

        Raises:
            ValueError: ``attempt < 1``.
        """
        return _grow(
            as_seconds(self.initial), self.multiplier, _check_attempt(attempt) - 1, as_seconds(self.max_delay)
        )

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return the delay in seconds after failed attempt ``attempt`` for random number ``u``.

        Args:
            attempt: the 1-based number of the attempt that failed.
            u: a random number in ``[0, 1)`` (1.0 accepted).
            previous: ignored (exponential backoff does not depend on the previous delay).

        Raises:
            ValueError: ``attempt < 1`` or ``u`` outside ``[0, 1]``.
        """
        cap = self.cap(attempt)
        u = _check_u(u)
        mode = self.jitter
        if mode == "full":
            a = self.jitter_amount
            low = cap * (1.0 - a)
            # a * u first: for a == 1 this is exactly botocore's u * cap.
            return min(cap, max(low, low + (a * u) * cap))
        if mode == "reduce":
            a = self.jitter_amount
            return min(cap, max(cap * (1.0 - a), cap * (1.0 - a * u)))
        if mode == "equal":
            return min(cap, cap / 2 + u * cap / 2)
        return cap

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(min, max)`` of the delay after failed attempt ``attempt``, in seconds."""
        cap = self.cap(attempt)
        if self.jitter in ("full", "reduce"):
            return (cap * (1.0 - self.jitter_amount), cap)
        if self.jitter == "equal":
            return (cap / 2, cap)
        return (cap, cap)

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``; see :meth:`Backoff.schedule`."""
        return _schedule(self, attempts, rng)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecorrelatedJitterBackoff:
    """Decorrelated jitter: ``min(max_delay, base + u * (3 * prev - base))``, each delay drawn from the last.

    ``prev`` is ``previous`` (the delay actually used before this one), or ``base`` before the first retry.
    ``prev`` is first clamped into what this strategy itself could have produced by then,
    ``[base, min(max_delay, base * 3**(attempt-1))]``, so that a long server-directed delay passed as
    ``previous`` does not inflate the sequence and :meth:`bounds` always holds:
    ``bounds(n) == (base, min(max_delay, base * 3**n))``.

    Args:
        base: the smallest delay in seconds (> 0, or a ``timedelta``). Default 1 s.
        max_delay: the largest delay in seconds (>= ``base``, or a ``timedelta``). Default 20 s.
        max_retries: how many retries this strategy allows (>= 0), or ``None`` (default) for no own limit.

    Raises:
        ValueError: a parameter is out of range.
        TypeError: a parameter has the wrong type.
    """

    base: float | timedelta = 1.0
    max_delay: float | timedelta = 20.0
    max_retries: int | None = None

    def __post_init__(self) -> None:
        base = check_seconds("base", self.base, low_open=True)
        object.__setattr__(self, "base", base)
        max_delay = check_seconds("max_delay", self.max_delay)
        if max_delay < base:
            raise ValueError(f"max_delay must be >= base ({base:g} s), got {self.max_delay!r}")
        object.__setattr__(self, "max_delay", max_delay)
        _check_max_retries(self.max_retries)

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return the delay in seconds after failed attempt ``attempt``.

        Args:
            attempt: the 1-based number of the attempt that failed.
            u: a random number in ``[0, 1)`` (1.0 accepted).
            previous: the previous delay actually used, in seconds (>= 0), or ``None`` before the first
                retry.

        Raises:
            ValueError: ``attempt < 1``, ``u`` outside ``[0, 1]`` or ``previous`` negative.
        """
        attempt = _check_attempt(attempt)
        u = _check_u(u)
        base = as_seconds(self.base)
        cap = as_seconds(self.max_delay)
        highest_prev = _grow(base, 3.0, attempt - 1, cap)
        prev = base if previous is None else check_number("previous", previous, low=0.0, allow_inf=True)
        prev = min(max(prev, base), highest_prev)
        return min(cap, max(base, base + u * (3.0 * prev - base)))

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(base, min(max_delay, base * 3**attempt))`` in seconds."""
        base = as_seconds(self.base)
        return (base, _grow(base, 3.0, _check_attempt(attempt), as_seconds(self.max_delay)))

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``; see :meth:`Backoff.schedule`."""
        return _schedule(self, attempts, rng)


@dataclass(frozen=True, slots=True, init=False)
class FixedBackoff:
    """The same delay before every retry, no jitter.

    The delay is stored as :attr:`interval` (a field cannot share the name of the :meth:`delay` method).

    Args:
        delay: the delay in seconds (>= 0, or a ``timedelta``).
        max_retries: how many retries this strategy allows (>= 0), or ``None`` (default) for no own limit.

    Raises:
        ValueError: a parameter is out of range.
        TypeError: a parameter has the wrong type.
    """

    interval: float
    max_retries: int | None

    def __init__(self, delay: float | timedelta, *, max_retries: int | None = None) -> None:
        object.__setattr__(self, "interval", check_seconds("delay", delay))
        _check_max_retries(max_retries)
        object.__setattr__(self, "max_retries", max_retries)

    def __repr__(self) -> str:
        extra = "" if self.max_retries is None else f", max_retries={self.max_retries!r}"
        return f"FixedBackoff(delay={self.interval!r}{extra})"

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return the fixed delay in seconds (``u`` and ``previous`` are checked, then ignored)."""
        _check_attempt(attempt)
        _check_u(u)
        return self.interval

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(delay, delay)``."""
        _check_attempt(attempt)
        return (self.interval, self.interval)

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``; see :meth:`Backoff.schedule`."""
        return _schedule(self, attempts, rng)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearBackoff:
    """A delay that grows by a constant step: ``min(initial + increment * (n-1), max_delay)``, no jitter.

    Args:
        initial: the delay after the first failed attempt, in seconds (>= 0, or a ``timedelta``). Default 1 s.
        increment: added per further attempt, in seconds (>= 0, or a ``timedelta``). Default 1 s.
        max_delay: the largest delay in seconds (>= ``initial``, or a ``timedelta``). Default 20 s.
        max_retries: how many retries this strategy allows (>= 0), or ``None`` (default) for no own limit.

    Raises:
        ValueError: a parameter is out of range.
        TypeError: a parameter has the wrong type.
    """

    initial: float | timedelta = 1.0
    increment: float | timedelta = 1.0
    max_delay: float | timedelta = 20.0
    max_retries: int | None = None

    def __post_init__(self) -> None:
        initial = check_seconds("initial", self.initial)
        object.__setattr__(self, "initial", initial)
        object.__setattr__(self, "increment", check_seconds("increment", self.increment))
        max_delay = check_seconds("max_delay", self.max_delay)
        if max_delay < initial:
            raise ValueError(f"max_delay must be >= initial ({initial:g} s), got {self.max_delay!r}")
        object.__setattr__(self, "max_delay", max_delay)
        _check_max_retries(self.max_retries)

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return ``min(initial + increment * (attempt-1), max_delay)`` (``u``, ``previous`` ignored)."""
        _check_u(u)
        return self.bounds(attempt)[1]

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(d, d)`` where ``d`` is the delay after failed attempt ``attempt``."""
        steps = _check_attempt(attempt) - 1
        initial, increment, cap = as_seconds(self.initial), as_seconds(self.increment), as_seconds(self.max_delay)
        # Decide saturation before multiplying: float * int raises OverflowError for a huge attempt number.
        d = min(initial + increment * steps, cap) if increment == 0.0 or steps < (cap - initial) / increment else cap
        return (d, d)

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``; see :meth:`Backoff.schedule`."""
        return _schedule(self, attempts, rng)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoBackoff:
    """Retry at once: every delay is 0 (the engine skips ``sleep(0)`` but still checks for cancellation).

    Args:
        max_retries: how many retries this strategy allows (>= 0), or ``None`` (default) for no own limit.
    """

    max_retries: int | None = None

    def __post_init__(self) -> None:
        _check_max_retries(self.max_retries)

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return 0.0."""
        _check_attempt(attempt)
        _check_u(u)
        return 0.0

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(0.0, 0.0)``."""
        _check_attempt(attempt)
        return (0.0, 0.0)

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays after failed attempts ``1..attempts``; see :meth:`Backoff.schedule`."""
        return _schedule(self, attempts, rng)
