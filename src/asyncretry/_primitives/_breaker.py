"""A circuit breaker: stop calling a backend that keeps failing, then probe it before trusting it again.

The breaker is a synchronous state machine (it never awaits) driven by four calls around every attempt::

    probe = breaker.acquire()          # raises CircuitOpenError while the circuit is open; 0 or a probe's ticket
    try:
        result = await call()
    except Exception:
        breaker.record_failure(probe)
        raise
    except BaseException:              # cancelled: no outcome to judge the backend by
        breaker.release(probe)
        raise
    else:
        breaker.record_success(probe)

States and edges (every transition emits :class:`~asyncretry.BreakerStateChanged` after it happened)::

    closed ──trip──> open ──break elapsed──> half_open ──enough probes succeeded──> closed
                      ^                          │
                      └───enough probes failed───┘  (the break grows by break_duration_multiplier)

    any ──isolate()──> isolated          any ──reset()──> closed

The trip rule follows Polly v8's failure-ratio model over a sliding time window, optionally joined by a
consecutive-failures trigger (see :class:`CircuitBreakerConfig`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from .._breaker_state import BreakerState
from .._events import GLOBAL_EVENTS, BreakerStateChanged, EventBus
from .._exceptions import CircuitOpenError
from .._validate import as_seconds, check_clock, check_instance, check_int, check_number, check_seconds, check_str
from ._clock import DEFAULT_CLOCK, Clock

__all__ = ["BreakerState", "BreakerStatistics", "CircuitBreaker", "CircuitBreakerConfig"]

_WINDOW_BUCKETS = 10
"""The sampling window is a ring of this many time buckets: memory stays bounded, samples expire in steps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitBreakerConfig:
    """When a :class:`CircuitBreaker` trips, how long it stays open, and how it probes before closing.

    Two trip triggers exist and may be combined; the circuit opens on whichever fires first:

    * the failure ratio (Polly v8's model, on by default): once at least ``minimum_throughput`` outcomes
      were sampled in the last ``sampling_duration`` seconds and the share of failures among them is
      ``>= failure_ratio``. Set ``failure_ratio=None`` to turn it off.
    * consecutive failures (off by default): ``consecutive_failures`` failures in a row, however long
      they took. For a pure consecutive-failures breaker, set ``failure_ratio=None`` too.

    At least one trigger must be on.

    Args:
        failure_ratio: share of failed calls in the window that trips the circuit, in ``(0, 1]``;
            ``None`` disables the ratio trigger. Default 0.5.
        minimum_throughput: outcomes the window must hold before the ratio is judged (an integer
            >= 2). Default 10.
        sampling_duration: length of the sliding window in seconds (> 0, or a ``timedelta``). The window
            is a ring of 10 buckets of ``sampling_duration / 10``, so a sample counts for between 0.9 and
            1.0 times ``sampling_duration``. Default 30 s.
        consecutive_failures: trip after this many failures in a row (an integer >= 1); ``None``
            (the default) disables this trigger.
        break_duration: how long the circuit stays open after tripping, in seconds (> 0). Default 5 s.
        break_duration_multiplier: each time a half-open probe fails, the next break is this many times
            longer (>= 1; 1 keeps it fixed). Closing the circuit resets it. Default 1.
        max_break_duration: the longest a grown break may last, in seconds (>= ``break_duration``).
            Default 300 s.
        half_open_max_probes: calls admitted as probes while half-open (an integer >= 1). Default 1.
        half_open_successes_to_close: successful probes that close the circuit (an integer from 1 to
            ``half_open_max_probes``). Default 1.
        half_open_failures_to_reopen: failed probes that re-open the circuit (an integer from 1 to
            ``half_open_max_probes - half_open_successes_to_close + 1``, so that the admitted probes
            always decide). Default 1: any failed probe re-opens it. More than 1 keeps one unlucky probe
            (a backend's occasional transient error) from costing a whole break: with 3 probes, 2 to
            close and 2 to re-open, the probes' majority decides.

    Raises:
        ValueError: a value is out of range; the message names the parameter.
        TypeError: a value has the wrong type.
    """

    failure_ratio: float | None = 0.5
    minimum_throughput: int = 10
    sampling_duration: float | timedelta = 30.0
    consecutive_failures: int | None = None
    break_duration: float | timedelta = 5.0
    break_duration_multiplier: float = 1.0
    max_break_duration: float | timedelta = 300.0
    half_open_max_probes: int = 1
    half_open_successes_to_close: int = 1
    half_open_failures_to_reopen: int = 1

    def __post_init__(self) -> None:
        def store(field: str, value: object) -> None:
            object.__setattr__(self, field, value)

        if self.failure_ratio is not None:
            store("failure_ratio", check_number("failure_ratio", self.failure_ratio, low=0.0, low_open=True,
                                                high=1.0))
        check_int("minimum_throughput", self.minimum_throughput, low=2)
        store("sampling_duration", check_seconds("sampling_duration", self.sampling_duration, low_open=True))
        if self.consecutive_failures is not None:
            check_int("consecutive_failures", self.consecutive_failures, low=1)
        if self.failure_ratio is None and self.consecutive_failures is None:
            raise ValueError(
                "failure_ratio=None and consecutive_failures=None leave the breaker no way to trip; "
                "set failure_ratio (0 < r <= 1) or consecutive_failures (an integer >= 1)"
            )
        base = check_seconds("break_duration", self.break_duration, low_open=True)
        store("break_duration", base)
        store("break_duration_multiplier",
              check_number("break_duration_multiplier", self.break_duration_multiplier, low=1.0))
        store("max_break_duration", check_seconds("max_break_duration", self.max_break_duration, low=base))
        probes = check_int("half_open_max_probes", self.half_open_max_probes, low=1)
        to_close = check_int("half_open_successes_to_close", self.half_open_successes_to_close, low=1, high=probes)
        reopen = check_int("half_open_failures_to_reopen", self.half_open_failures_to_reopen, low=1)
        if reopen > probes - to_close + 1:
            raise ValueError(
                f"half_open_failures_to_reopen must be an integer from 1 to half_open_max_probes - "
                f"half_open_successes_to_close + 1 = {probes - to_close + 1} (else {probes} probes could end "
                f"neither closing nor re-opening the circuit), got {reopen}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerStatistics:
    """A snapshot of a :class:`CircuitBreaker`.

    Attributes:
        name: the breaker's name.
        state: the state at the time of the snapshot.
        failures: failed calls in the sampling window.
        successes: successful calls in the sampling window.
        failure_ratio: ``failures / (failures + successes)``; 0.0 for an empty window.
        consecutive_failures: failures in a row since the last success (closed state only).
        opened_at: when the current break began (clock seconds); ``None`` while closed.
        retry_after: seconds until a probe may be admitted: 0 while closed or with a free probe slot,
            ``inf`` while isolated; with every probe slot taken, the break that a failed probe would
            start (an estimate: a success closes the circuit sooner).
        break_duration: the break in force now (it grows while probes keep failing), seconds.
        probes_in_flight: probes admitted and not finished in the current half-open period.
        times_opened: how many times the circuit has opened (trips, re-opens and isolations).
        rejected: calls rejected with :class:`~asyncretry.CircuitOpenError` so far.
    """

    name: str
    state: BreakerState
    failures: int
    successes: int
    failure_ratio: float
    consecutive_failures: int
    opened_at: float | None
    retry_after: float
    break_duration: float
    probes_in_flight: int
    times_opened: int
    rejected: int


# The members as plain module names: on CPython 3.11 each ``BreakerState.X`` lookup costs about 50 ns,
# and the breaker reads its state on every attempt.
_CLOSED, _OPEN, _HALF_OPEN, _ISOLATED = (
    BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.ISOLATED
)


class _Window:
    """Success and failure counts over the last ``duration`` seconds, kept in a ring of time buckets."""

    __slots__ = ("_failures", "_head", "_successes", "_width", "failures", "successes")

    def __init__(self, duration: float) -> None:
        self._width = duration / _WINDOW_BUCKETS
        self._successes = [0] * _WINDOW_BUCKETS
        self._failures = [0] * _WINDOW_BUCKETS
        # The index of the newest bucket; None until the first sample, so that the clock is never read
        # before an event loop runs (its time base may differ from the one outside the loop).
        self._head: int | None = None
        self.successes = 0
        self.failures = 0

    def clear(self) -> None:
        self._successes = [0] * _WINDOW_BUCKETS
        self._failures = [0] * _WINDOW_BUCKETS
        self._head = None
        self.successes = self.failures = 0

    def advance(self, now: float) -> int:
        """Expire the buckets that fell out of the window at ``now``; return the current bucket's slot."""
        index = math.floor(now / self._width)
        head = self._head
        if head is None or index < head or index - head >= _WINDOW_BUCKETS:
            # First sample, a whole window of silence, or a clock that went back (another event loop):
            # nothing in the ring is still valid.
            if self.successes or self.failures:
                self.clear()
            self._head = index
        elif index > head:
            for stale in range(head + 1, index + 1):
                slot = stale % _WINDOW_BUCKETS
                self.successes -= self._successes[slot]
                self.failures -= self._failures[slot]
                self._successes[slot] = self._failures[slot] = 0
            self._head = index
        return index % _WINDOW_BUCKETS

    def add(self, now: float, failed: bool) -> None:
        head = self._head
        # Most samples land in the newest bucket: nothing expires then.
        slot = head % _WINDOW_BUCKETS if math.floor(now / self._width) == head else self.advance(now)
        if failed:
            self._failures[slot] += 1
            self.failures += 1
        else:
            self._successes[slot] += 1
            self.successes += 1


class CircuitBreaker:
    """Rejects calls to a backend that keeps failing, and probes it before letting traffic back.

    Call :meth:`acquire` before each attempt and exactly one of :meth:`record_success`,
    :meth:`record_failure` or :meth:`release` after it, passing back the value ``acquire`` returned.
    Nothing here awaits, so the breaker is safe to share between tasks of one event loop.

    Outcomes of calls admitted while closed but finishing after the circuit opened are ignored: the
    decision was taken already, and only probes judge a recovering backend. ``acquire`` hands each probe
    a ticket, the number of its half-open period, so a probe that finishes after its period ended (the
    circuit closed, re-opened or was reset meanwhile) counts as a normal call if the circuit is closed
    and is ignored otherwise: a slow probe of one period never votes in the next.
    (``True``, the flag that ``acquire`` returned before probes had tickets, is taken for a probe of the
    current period.)

    Args:
        config: trip, break and probe settings; defaults to ``CircuitBreakerConfig()``.
        clock: the time source; defaults to the running event loop's clock.
        name: names the breaker in errors, statistics and events (their ``source``).
        events: where :class:`~asyncretry.BreakerStateChanged` events go; defaults to the global bus.
    """

    __slots__ = (
        "_base_break",
        "_break",
        "_clock",
        "_config",
        "_consecutive",
        "_events",
        "_in_flight",
        "_max_break",
        "_multiplier",
        "_opened_at",
        "_period",
        "_probe_failures",
        "_probe_successes",
        "_rejected",
        "_state",
        "_times_opened",
        "_until",
        "_window",
        "name",
    )

    remote: ClassVar[bool] = False
    """Whether the state lives on a remote server (Redis): the engine then awaits the ``*_async`` methods."""

    def __init__(
        self,
        config: CircuitBreakerConfig | None = None,
        *,
        clock: Clock | None = None,
        name: str = "breaker",
        events: EventBus | None = None,
    ) -> None:
        self._config = (
            CircuitBreakerConfig() if config is None else check_instance("config", config, CircuitBreakerConfig)
        )
        self._clock = DEFAULT_CLOCK if clock is None else check_clock("clock", clock)
        self.name = check_str("name", name)
        self._events = GLOBAL_EVENTS if events is None else check_instance("events", events, EventBus)
        self._window = _Window(as_seconds(self._config.sampling_duration))
        self._base_break = as_seconds(self._config.break_duration)
        self._max_break = as_seconds(self._config.max_break_duration)
        self._multiplier = self._config.break_duration_multiplier
        self._state = _CLOSED
        self._break = self._base_break
        self._until = 0.0  # when an open circuit turns half-open
        self._opened_at: float | None = None
        self._consecutive = 0
        self._in_flight = 0
        self._probe_successes = 0
        self._probe_failures = 0
        self._period = 0  # half-open periods so far: a probe's ticket is its period's number
        self._times_opened = 0
        self._rejected = 0

    @property
    def clock(self) -> Clock:
        """The breaker's time source (an engine sharing it passes the time it read: ``record_success(now=)``)."""
        return self._clock

    @property
    def config(self) -> CircuitBreakerConfig:
        """The breaker's settings."""
        return self._config

    @property
    def state(self) -> BreakerState:
        """The current state; an open circuit whose break has elapsed turns half-open on this read."""
        return self._refresh(self._clock.now())

    @property
    def is_closed(self) -> bool:
        """Whether the circuit is closed: then :meth:`acquire` admits a normal call (``False``) and
        changes nothing, so a caller may skip it. Reads no clock (only an open circuit changes with time)."""
        return self._state is _CLOSED

    def acquire(self) -> int:
        """Ask to make one attempt.

        Returns:
            0 for a normal call on a closed circuit; for a half-open probe, its ticket (the number of
            the half-open period, >= 1, so true). Pass the value to :meth:`record_success`,
            :meth:`record_failure` or :meth:`release`.

        Raises:
            CircuitOpenError: the circuit is open, isolated, or half-open with every probe slot taken;
                ``retry_after`` says how many seconds until a probe may be admitted (``inf`` when
                isolated; with the probe slots taken, the break a failing probe would start).
        """
        if self._state is _CLOSED:
            return 0  # only an open circuit changes with time alone: no need to read the clock
        now = self._clock.now()
        state = self._refresh(now)
        if state is _HALF_OPEN and self._probe_slots_taken() < self._config.half_open_max_probes:
            self._in_flight += 1
            return self._period
        self._rejected += 1
        raise CircuitOpenError(name=self.name, state=state.value, retry_after=self._retry_after(now))

    def record_success(self, probe: int, *, now: float | None = None) -> None:
        """Report that an admitted attempt succeeded.

        Args:
            probe: the value :meth:`acquire` returned for this attempt.
            now: the time on the breaker's clock, when the caller has just read it (saves a read).
        """
        state = self._state
        if state is _CLOSED:
            self._window.add(self._clock.now() if now is None else now, failed=False)
            self._consecutive = 0
        elif probe and state is _HALF_OPEN and self._current(probe):
            self._in_flight = max(0, self._in_flight - 1)
            self._probe_successes += 1
            needed = self._config.half_open_successes_to_close
            if self._probe_successes >= needed:
                reason = "probe succeeded" if needed == 1 else f"{needed} probes succeeded"
                self._close(self._clock.now(), reason)

    def record_failure(self, probe: int) -> None:
        """Report that an admitted attempt failed (a failure that should count against the backend).

        Args:
            probe: the value :meth:`acquire` returned for this attempt.
        """
        if probe and self._state is _HALF_OPEN:
            if not self._current(probe):
                return  # a probe of an earlier half-open period: its vote was not needed
            self._in_flight = max(0, self._in_flight - 1)
            self._probe_failures += 1
            needed = self._config.half_open_failures_to_reopen
            if self._probe_failures >= needed:
                self._break = min(self._break * self._multiplier, self._max_break)
                self._open(self._clock.now(), _HALF_OPEN, "probe failed" if needed == 1 else f"{needed} probes failed")
        elif self._state is _CLOSED:
            now = self._clock.now()
            self._window.add(now, failed=True)
            self._consecutive += 1
            reason = self._trip_reason()
            if reason is not None:
                self._open(now, _CLOSED, reason)

    def release(self, probe: int) -> None:
        """Report that an admitted attempt ended without an outcome (cancelled); nothing is recorded.

        Args:
            probe: the value :meth:`acquire` returned; a probe's slot is freed for another call.
        """
        if probe and self._state is _HALF_OPEN and self._current(probe):
            self._in_flight = max(0, self._in_flight - 1)

    def isolate(self) -> None:
        """Force the circuit open until :meth:`reset`; every call is rejected meanwhile."""
        old = self._state
        if old is _ISOLATED:
            return
        now = self._clock.now()
        self._state = _ISOLATED
        self._opened_at = now
        self._in_flight = self._probe_successes = self._probe_failures = 0
        self._times_opened += 1
        self._emit(now, old, "isolated by hand", None)

    def reset(self) -> None:
        """Close the circuit by hand and forget every sample, the consecutive count and the grown break."""
        self._close(self._clock.now(), "reset by hand")

    def retry_after(self) -> float:
        """Seconds until :meth:`acquire` would admit an attempt: 0 while the circuit is closed (reads no
        clock then), the rest of the break while open, ``inf`` while isolated (as
        :attr:`BreakerStatistics.retry_after`, without making a snapshot). A question only: it changes
        no state and emits no event."""
        if self._state is _CLOSED:
            return 0.0
        now = self._clock.now()
        if self._state is _OPEN and now >= self._until:
            return 0.0  # the break is over: the next acquire() admits a probe (and moves the state, not this)
        return self._retry_after(now)

    def statistics(self) -> BreakerStatistics:
        """Return a snapshot of the breaker's state and counters (evaluating the break's end first)."""
        now = self._clock.now()
        state = self._refresh(now)
        window = self._window
        window.advance(now)
        total = window.successes + window.failures
        return BreakerStatistics(
            name=self.name,
            state=state,
            failures=window.failures,
            successes=window.successes,
            failure_ratio=window.failures / total if total else 0.0,
            consecutive_failures=self._consecutive,
            opened_at=self._opened_at,
            retry_after=self._retry_after(now),
            break_duration=self._break,
            probes_in_flight=self._in_flight,
            times_opened=self._times_opened,
            rejected=self._rejected,
        )

    def __repr__(self) -> str:
        state = self._state
        if state is _OPEN and self._clock.now() >= self._until:
            state = _HALF_OPEN  # what the next read will see; repr itself changes nothing
        window = self._window
        return (
            f"<CircuitBreaker {self.name!r} {state.value} failures={window.failures}/"
            f"{window.failures + window.successes} consecutive={self._consecutive} "
            f"break={self._break:g}s times_opened={self._times_opened}>"
        )

    # -- transitions: the state is updated first, then the event goes out

    def _refresh(self, now: float) -> BreakerState:
        if self._state is _OPEN and now >= self._until:
            self._state = _HALF_OPEN
            self._period += 1
            self._in_flight = self._probe_successes = self._probe_failures = 0
            self._emit(now, _OPEN, f"break of {self._break:g} s elapsed", None)
        return self._state

    def _trip_reason(self) -> str | None:
        config = self._config
        if config.consecutive_failures is not None and self._consecutive >= config.consecutive_failures:
            return f"{self._consecutive} consecutive failures"
        if config.failure_ratio is not None:
            window = self._window
            total = window.successes + window.failures
            # Compare the quotient, not failures >= ratio * total: 0.7 * 10 is 7.000000000000001.
            ratio = window.failures / total if total else 0.0
            if total >= config.minimum_throughput and ratio >= config.failure_ratio:
                return f"failure ratio {ratio:.3g} >= {config.failure_ratio:g} over {total} calls"
        return None

    def _open(self, now: float, old: BreakerState, reason: str) -> None:
        self._state = _OPEN
        self._opened_at = now
        self._until = now + self._break
        self._in_flight = self._probe_successes = self._probe_failures = 0
        self._times_opened += 1
        self._emit(now, old, reason, self._break)

    def _close(self, now: float, reason: str) -> None:
        old = self._state
        self._state = _CLOSED
        self._window.clear()
        self._consecutive = 0
        self._break = self._base_break
        self._opened_at = None
        self._in_flight = self._probe_successes = self._probe_failures = 0
        if old is not _CLOSED:
            self._emit(now, old, reason, None)

    def _retry_after(self, now: float) -> float:
        state = self._state
        if state is _OPEN:
            return max(0.0, self._until - now)
        if state is _ISOLATED:
            return math.inf
        if state is _HALF_OPEN and self._probe_slots_taken() >= self._config.half_open_max_probes:
            return self._break
        return 0.0

    def _current(self, probe: int) -> bool:
        # ``True`` is the flag this method took before probes had tickets: a probe of the current period.
        return probe is True or probe == self._period

    def _probe_slots_taken(self) -> int:
        # A finished probe keeps its slot (its outcome counts towards the decision); a released one frees it.
        return self._in_flight + self._probe_successes + self._probe_failures

    def _emit(self, now: float, old: BreakerState, reason: str, break_duration: float | None) -> None:
        if self._events.wants(BreakerStateChanged):
            self._events.emit(BreakerStateChanged(
                time=now, source=self.name, old_state=old, new_state=self._state,
                reason=reason, break_duration=break_duration,
            ))

    async def acquire_async(self) -> int:
        """:meth:`acquire` for the engine's remote-state protocol (remote breakers do I/O here)."""
        return self.acquire()

    async def record_async(self, *, success: bool, probe: int) -> None:
        """Record an outcome, for the engine's remote-state protocol (remote breakers do I/O here)."""
        if success:
            self.record_success(probe)
        else:
            self.record_failure(probe)
