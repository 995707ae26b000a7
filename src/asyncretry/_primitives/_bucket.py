"""A token bucket whose waiters are served strictly in arrival order, on asyncio and trio.

Design (the reasons behind the shape of :class:`TokenBucket`):

* Tokens are refilled lazily from the elapsed time whenever the bucket is touched; there is no
  background task. The uncontended path is a refill, a comparison and a subtraction.
* Waiters form one FIFO queue. Only the *head* sleeps on a timer (on the injected clock); every other
  waiter waits on its own event, so a thousand waiters cost one timer, not a thousand.
* Timers fire late (asyncio rounds its waits up to whole milliseconds). When the head wakes, every
  token that fell due meanwhile is handed out, in order, to as many waiters as it covers: while waiters
  queue, tokens never pile up to the capacity in continuous time, so the refill of a late wake-up is not
  capped until the queue is empty. Each served waiter is woken with its tokens already granted.
* Anything that changes the plan (``rate``/``capacity`` setters, :meth:`~TokenBucket.release`, a
  waiter leaving) wakes the head at once so that it re-plans; the head also wakes for the earliest
  ``timeout`` of the waiters behind it, so their timeouts need no timers of their own.
* A cancelled waiter leaves no trace: it leaves the queue (the next waiter takes over the head's
  role), and tokens granted to it just before the cancellation arrived are put back.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from threading import get_ident
from typing import Any, ClassVar

import anyio
import anyio.lowlevel

from .._exceptions import RateLimitTimeout
from .._validate import check_clock, check_number, check_seconds, check_str
from ._clock import DEFAULT_CLOCK, Clock, cached_loop
from ._waiter import CANCELLED, EXPIRED, GRANTED, REJECTED, WAITING, Waiter, in_event_loop

__all__ = ["BucketStatistics", "TokenBucket"]

# A waiter whose tokens are less than this many seconds of refill short is served: the float error of
# ``elapsed * rate`` (and asyncio firing timers up to its clock resolution early) would otherwise make
# the head sleep again for a few nanoseconds, which the clock may not even be able to represent.
_SLACK_SECONDS = 1e-9
# Relative slack for rate 0, where tokens only come back through release() as sums of floats.
_SLACK_RELATIVE = 1e-12

@dataclass(frozen=True, slots=True, kw_only=True)
class BucketStatistics:
    """A snapshot of an :class:`TokenBucket`.

    Attributes:
        name: the bucket's name.
        rate: the refill rate (tokens per second).
        capacity: the burst size (tokens).
        available: tokens in the bucket when the snapshot was taken (queued waiters not subtracted).
        waiting: calls queued in :meth:`TokenBucket.acquire` right now.
        acquired_total: tokens granted so far (tokens given back by cancelled calls are not counted).
        grants: successful acquisitions (:meth:`~TokenBucket.acquire` and
            :meth:`~TokenBucket.try_acquire`).
        waits: calls to :meth:`~TokenBucket.acquire` that had to queue.
        timeouts: calls that raised :class:`~asyncretry.RateLimitTimeout` (up front or while queued).
        cancelled: calls cancelled while queued or after their tokens were granted.
        rejected: queued calls that raised :class:`ValueError` because the capacity was lowered below
            what they asked for.
    """

    name: str
    rate: float
    capacity: float
    available: float
    waiting: int
    acquired_total: float
    grants: int
    waits: int
    timeouts: int
    cancelled: int
    rejected: int


class TokenBucket:
    """A token bucket: ``rate`` tokens per second, up to ``capacity``, with strictly FIFO waiters.

    Args:
        rate: refill rate in tokens per second, finite and >= 0. With 0 the bucket does not refill:
            tokens only come back through :meth:`release`.
        capacity: the most tokens the bucket holds (the burst size), finite and > 0.
        tokens: tokens at the start, 0 <= tokens <= capacity; defaults to ``capacity`` (full).
        clock: the time source; defaults to :data:`~asyncretry.DEFAULT_CLOCK` (the running loop's clock).
            A bucket created outside any event loop with the default clock starts refilling at its
            first use, because asyncio's and trio's clocks (real or virtual) have different origins.
        name: used in ``repr()``, :meth:`statistics` and :class:`~asyncretry.RateLimitTimeout`.

    Raises:
        ValueError: a number is NaN, infinite or out of range (the message names the parameter).
        TypeError: a number is not a real number.

    An :meth:`acquire` that finds its tokens there and no other call in progress does not yield to the
    event loop (like :class:`asyncio.Semaphore`): it is a refill and a subtraction. Calls that wait
    are served, and on asyncio also resume, in the order in which they called; on trio, calls served at
    the same instant resume in the scheduler's order. A waiting call is cancellable and leaves no trace
    when cancelled. Like the event loop it runs on, a bucket is not thread-safe.
    """

    __slots__ = (
        "_acquired",
        "_cancelled",
        "_capacity",
        "_clock",
        "_deadlines",
        "_grants",
        "_in_flight",
        "_last",
        "_loop",
        "_max_queued_n",
        "_now",
        "_queue",
        "_queued_tokens",
        "_rate",
        "_read",
        "_rejected",
        "_seq",
        "_timeouts",
        "_tokens",
        "_unresumed",
        "_waiting",
        "_waits",
        "name",
    )

    remote: ClassVar[bool] = False
    """Whether the state lives on a remote server (Redis): the engine then awaits the ``*_async`` methods."""

    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        tokens: float | None = None,
        clock: Clock | None = None,
        name: str = "bucket",
    ) -> None:
        self._rate = check_number("rate", rate, low=0.0)
        self._capacity = check_number("capacity", capacity, low=0.0, low_open=True)
        self._tokens = (
            self._capacity if tokens is None else check_number("tokens", tokens, low=0.0, high=self._capacity)
        )
        self._clock: Clock = DEFAULT_CLOCK if clock is None else check_clock("clock", clock)
        self._now = self._clock.now  # bound once: the uncontended acquire reads it on every call
        self._loop: Any = None  # the default clock's asyncio loop, read directly on the hot path ...
        self._read: Callable[[], float] = self._now  # ... with this, its time source
        # NaN: "no reading yet"; the first refill then only records the time (see _refill).
        self._last = (
            self._clock.now() if self._clock is not DEFAULT_CLOCK or in_event_loop() else math.nan
        )
        self.name = check_str("name", name)
        # The queue may hold waiters that left (cancelled, expired, rejected) behind a live head;
        # they are dropped when they reach the front. The head, queue[0], is always live.
        self._queue: deque[Waiter] = deque()
        self._in_flight = 0  # acquire() calls that queued or must yield and have not returned yet
        self._unresumed = 0  # queued calls served whose tasks have not resumed yet
        self._waiting = 0
        self._queued_tokens = 0.0  # sum of n over live waiters, for predicted waits
        self._max_queued_n = 0.0  # upper bound of n over live waiters
        self._deadlines: list[tuple[float, int, Waiter]] = []  # heap of waiters' timeouts
        self._seq = itertools.count()
        self._acquired = 0.0
        self._grants = 0
        self._waits = 0
        self._timeouts = 0
        self._cancelled = 0
        self._rejected = 0

    # --- configuration

    @property
    def rate(self) -> float:
        """The refill rate in tokens per second (>= 0).

        Setting it refills at the old rate up to now, then switches; queued waiters re-plan at once.
        """
        return self._rate

    @rate.setter
    def rate(self, value: float) -> None:
        value = check_number("rate", value, low=0.0)
        if value == self._rate:
            return  # nothing to re-plan
        self._serve(self._clock.now())
        self._rate = value
        self._replan()

    @property
    def capacity(self) -> float:
        """The most tokens the bucket holds (> 0).

        Setting it refills up to now and clamps the tokens to the new capacity. Queued calls that ask
        for more than the new capacity could never be served: they leave the queue and raise
        :class:`ValueError`, and the calls behind them move up.
        """
        return self._capacity

    @capacity.setter
    def capacity(self, value: float) -> None:
        value = check_number("capacity", value, low=0.0, low_open=True)
        if value == self._capacity:
            return
        now = self._clock.now()
        self._serve(now)
        self._capacity = value
        if self._tokens > value:
            self._tokens = value
        if value < self._max_queued_n:
            self._reject_above(value)
            self._serve(now)
        self._replan()

    @property
    def available(self) -> float:
        """Tokens in the bucket right now, after refilling; tokens promised to queued calls excluded."""
        self._serve(self._clock.now())
        return self._tokens

    # --- taking and giving back

    async def acquire(self, n: float = 1, *, timeout: float | timedelta | None = None) -> None:
        """Wait until ``n`` tokens are available and take them; calls are served strictly in order.

        A later call never overtakes an earlier one, even if it asks for fewer tokens. With ``rate``
        0 and no timeout, a call that has to wait waits until :meth:`release` or a rate change.

        Args:
            n: tokens to take, > 0 and <= ``capacity``. Default 1.
            timeout: the most this call may wait, in seconds (>= 0) or a ``timedelta``; ``None``
                (the default) waits as long as it takes. If the predicted wait (the tokens of the
                calls queued ahead, plus ``n``, less the tokens in the bucket, over the rate) already
                exceeds it, the call fails at once without queueing.

        Raises:
            RateLimitTimeout: the tokens cannot come within ``timeout``: predicted up front, or the
                timeout expired while queued (for example after the rate was lowered). The call then
                left the queue and took nothing.
            ValueError: ``n`` or ``timeout`` is out of range, or ``capacity`` was lowered below ``n``
                while the call was queued.
        """
        if timeout is not None:
            timeout = check_seconds("timeout", timeout, allow_inf=True)
        if n > 0 and not self._in_flight:
            # The uncontended path, kept to a refill and a subtraction on purpose. ``n > capacity``
            # needs no test here: the tokens never exceed the capacity, so it falls through to the
            # checks below (as does NaN).
            loop = self._loop
            if loop is not None and loop._thread_id == get_ident():
                now = self._read()  # the default clock's own reading, without its method call
            else:
                now = self._now()
                self._loop, self._read = cached_loop(self._clock)
            elapsed = now - self._last
            self._last = now
            tokens = self._tokens
            if elapsed > 0:
                tokens += elapsed * self._rate
                if tokens > self._capacity:
                    tokens = self._capacity
            if tokens >= n:
                self._tokens = tokens - n
                self._acquired += n
                self._grants += 1
                return
            self._tokens = tokens
        await self._acquire_slow(self._check_n(n), timeout)

    def try_acquire(self, n: float = 1) -> bool:
        """Take ``n`` tokens if they are available right now and nobody is queued; never waits.

        Args:
            n: tokens to take, > 0 and <= ``capacity``. Default 1.

        Returns:
            ``True`` if the tokens were taken; ``False`` if calls are queued (no overtaking) or there
            are not enough tokens.

        Raises:
            ValueError: ``n`` is out of range.
        """
        return self._try_take(self._check_n(n))

    def release(self, n: float) -> None:
        """Put ``n`` tokens back (the bucket never holds more than ``capacity``) and serve waiters.

        Args:
            n: tokens to put back, finite and >= 0.

        Raises:
            ValueError: ``n`` is negative, NaN or infinite.
        """
        self._put_back(check_number("n", n, low=0.0))

    def time_until_available(self, n: float = 1) -> float:
        """Predict how long a call to ``acquire(n)`` made now would wait, queued calls included.

        Args:
            n: tokens, > 0 and <= ``capacity``. Default 1.

        Returns:
            Seconds (0 if it would not wait); ``inf`` if the bucket does not refill (rate 0) and the
            tokens are not there. Changes of rate or capacity, releases and cancellations make the
            real wait differ.

        Raises:
            ValueError: ``n`` is out of range.
        """
        n = self._check_n(n)
        self._serve(self._clock.now())
        return self._predicted_wait(n)

    # --- introspection

    def statistics(self) -> BucketStatistics:
        """Return a snapshot of the bucket's state and counters."""
        self._serve(self._clock.now())
        return BucketStatistics(
            name=self.name,
            rate=self._rate,
            capacity=self._capacity,
            available=self._tokens,
            waiting=self._waiting,
            acquired_total=self._acquired,
            grants=self._grants,
            waits=self._waits,
            timeouts=self._timeouts,
            cancelled=self._cancelled,
            rejected=self._rejected,
        )

    def __repr__(self) -> str:
        # Only reads: a repr (in a debugger, a log line) must not serve waiters as a side effect.
        elapsed = self._clock.now() - self._last
        tokens = self._tokens + elapsed * self._rate if elapsed > 0 else self._tokens
        return (
            f"<TokenBucket {self.name!r} rate={self._rate:g}/s capacity={self._capacity:g} "
            f"available={min(tokens, self._capacity):g} waiting={self._waiting}>"
        )

    # --- internals

    def _check_n(self, n: float) -> float:
        return check_number("n", n, low=0.0, low_open=True, high=self._capacity)

    def _slack(self, n: float) -> float:
        return self._rate * _SLACK_SECONDS + n * _SLACK_RELATIVE

    def _enough(self, n: float) -> bool:
        return self._tokens + self._slack(n) >= n

    def _try_take(self, n: float) -> bool:
        """:meth:`try_acquire` for callers whose ``n`` is already checked (the retry quota)."""
        if self._queue:
            self._serve(self._clock.now())
            if self._queue:
                return False
        elif self._rate:  # at rate 0 nothing refills: the time is not needed (a rate change refills first)
            self._refill(self._clock.now())
        if not self._enough(n):
            return False
        self._take(n)
        return True

    def _take(self, n: float) -> None:
        tokens = self._tokens - n
        self._tokens = tokens if tokens > 0 else 0.0  # the slack in _enough() may overshoot
        self._acquired += n
        self._grants += 1

    def _predicted_wait(self, n: float) -> float:
        needed = self._queued_tokens + n - self._tokens
        if needed <= self._slack(n):
            return 0.0
        return needed / self._rate if self._rate > 0 else math.inf

    async def _acquire_slow(self, n: float, timeout: float | None) -> None:
        now = self._clock.now()
        self._serve(now)
        queue = self._queue
        if not queue and self._enough(n):
            self._take(n)
            if not self._unresumed:
                return
            # Calls granted just before this one have not resumed yet. They came first, so they
            # should also go first: yield once (below) instead of returning straight away.
            waiter = Waiter(n, None)
            waiter.state = GRANTED
            waiter.yield_first = True
            queued = False
        else:
            if timeout is not None:
                wait = self._predicted_wait(n)
                if wait > timeout:
                    self._timeouts += 1
                    raise RateLimitTimeout(name=self.name, wait=wait, timeout=timeout)
            waiter = self._enqueue(n, None if timeout is None else now + timeout)
            queued = True
        self._in_flight += 1
        done = False
        try:
            if queued:
                await self._wait(waiter)
            if waiter.state == GRANTED:
                if waiter.yield_first:
                    await anyio.lowlevel.checkpoint()
                else:
                    # A cancellation that raced the grant (trio, and anyio on asyncio once the wait
                    # is over, deliver it only at the next checkpoint) is honoured here, while the
                    # tokens can still be put back.
                    await anyio.lowlevel.checkpoint_if_cancelled()
            done = True
        finally:
            self._in_flight -= 1
            if queued and waiter.state == GRANTED:
                self._unresumed -= 1
            if not done:
                self._abandon(waiter)
        if waiter.state == EXPIRED:
            assert timeout is not None
            elapsed = self._clock.now() - now
            raise RateLimitTimeout(name=self.name, wait=elapsed + self._predicted_wait(n), timeout=timeout)
        if waiter.state == REJECTED:
            raise ValueError(
                f"n must be <= {self._capacity:g} (the capacity, lowered while the call was queued), got {n!r}"
            )

    def _enqueue(self, n: float, deadline: float | None) -> Waiter:
        queue = self._queue
        waiter = Waiter(n, anyio.Event() if queue else None)
        queue.append(waiter)
        self._waiting += 1
        self._waits += 1
        self._queued_tokens += n
        if n > self._max_queued_n:
            self._max_queued_n = n
        if deadline is not None and deadline < math.inf:
            heapq.heappush(self._deadlines, (deadline, next(self._seq), waiter))
        return waiter

    async def _wait(self, waiter: Waiter) -> None:
        clock = self._clock
        queue = self._queue
        while waiter.state == WAITING:
            if queue[0] is not waiter:
                assert waiter.event is not None
                await waiter.event.wait()  # set when served, or when this waiter becomes the head
                continue
            now = clock.now()
            granted_before = self._unresumed
            self._serve(now)
            if waiter.state != WAITING:
                # Served in its own task, without a trip through the scheduler: calls served before
                # it that have not resumed yet must not be overtaken.
                waiter.yield_first = granted_before > 0
                break
            delay = (waiter.n - self._tokens) / self._rate if self._rate > 0 else math.inf
            if self._deadlines:
                delay = min(delay, self._deadlines[0][0] - now)
            with anyio.CancelScope() as scope:
                waiter.scope = scope  # cancelled by wake(): served, or the plan changed
                try:
                    if delay < math.inf:
                        await clock.sleep(delay)
                    else:
                        await anyio.sleep_forever()
                finally:
                    waiter.scope = None

    def _refill(self, now: float) -> None:
        elapsed = now - self._last
        self._last = now
        if elapsed > 0:  # False for the first reading (NaN) and if a clock ever goes back
            self._tokens += elapsed * self._rate

    def _serve(self, now: float) -> None:
        """Refill up to ``now``, grant due tokens in order, expire timed-out waiters, wake the new head."""
        self._refill(now)
        queue = self._queue
        if queue:
            head = queue[0]
            while True:
                self._grant_due()
                if not (self._deadlines and self._deadlines[0][0] <= now):
                    break
                self._expire_due(now)
            if queue:
                if queue[0] is not head:
                    queue[0].wake()
                return
            self._queued_tokens = 0.0  # drop the float residue of many additions and subtractions
            self._max_queued_n = 0.0
            self._deadlines.clear()
        if self._tokens > self._capacity:
            self._tokens = self._capacity

    def _grant_due(self) -> None:
        queue = self._queue
        while queue:
            waiter = queue[0]
            if waiter.state != WAITING:
                queue.popleft()
                continue
            if not self._enough(waiter.n):
                return
            queue.popleft()
            self._take(waiter.n)
            self._unresumed += 1
            self._unlink(waiter, GRANTED)

    def _expire_due(self, now: float) -> None:
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            waiter = heapq.heappop(deadlines)[2]
            if waiter.state == WAITING:
                self._timeouts += 1
                self._unlink(waiter, EXPIRED)

    def _reject_above(self, capacity: float) -> None:
        largest = 0.0
        for waiter in self._queue:
            if waiter.state != WAITING:
                continue
            if waiter.n > capacity:
                self._rejected += 1
                self._unlink(waiter, REJECTED)
            elif waiter.n > largest:
                largest = waiter.n
        self._max_queued_n = largest

    def _unlink(self, waiter: Waiter, state: int) -> None:
        """Take a live waiter out of the accounting (the queue drops it lazily) and wake it."""
        waiter.state = state
        self._waiting -= 1
        self._queued_tokens -= waiter.n
        waiter.wake()

    def _replan(self) -> None:
        if self._queue:
            self._queue[0].wake()

    def _put_back(self, n: float) -> None:
        if not self._queue:  # the common case (a quota refund on success): nobody to serve
            if self._rate:  # at rate 0 nothing refills: the time is not needed (a rate change refills first)
                self._refill(self._clock.now())
            tokens = self._tokens + n
            self._tokens = tokens if tokens < self._capacity else self._capacity
            return
        now = self._clock.now()
        self._serve(now)
        self._tokens = min(self._capacity, self._tokens + n)
        self._serve(now)
        self._replan()

    def _abandon(self, waiter: Waiter) -> None:
        """Undo what a call that is leaving with an exception (a cancellation) had in the bucket."""
        if waiter.state == GRANTED:
            # The tokens were granted but the work will not happen: give them back.
            self._cancelled += 1
            self._acquired -= waiter.n
            self._grants -= 1
            self._put_back(waiter.n)
        elif waiter.state == WAITING:
            self._cancelled += 1
            was_head = self._queue[0] is waiter
            self._unlink(waiter, CANCELLED)
            if was_head:
                self._serve(self._clock.now())  # the next waiter takes over (or is served at once)

