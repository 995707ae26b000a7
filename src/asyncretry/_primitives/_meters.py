"""Meters of the adaptive limiter: the SDKs' smoothed send-rate meter, a sliding-window counter and a
round-trip average.

All are told the time instead of reading a clock. :class:`SendRateMeter` is the ``"aws"`` profile's
(SPEC section 5, lag and smoothing included); :class:`SlidingCounter` gives the ``"asyncretry"``
profile its rates over recent spans; :class:`RoundTrip` gives the ``"asyncretry"`` and ``"fair"``
profiles the round trip their requests take.
"""

from __future__ import annotations

import math

__all__ = ["RoundTrip", "SendRateMeter", "SlidingCounter"]


class SendRateMeter:
    """Measures the send rate: requests counted in time buckets, smoothed exponentially.

    A bucket's rate is only known once a request lands in a later bucket, so the measured rate lags
    by up to one bucket: that is the SDKs' trade-off, kept for conformance.

    Args:
        start: the time the meter starts, seconds; the first bucket boundary is ``floor(start)``.
        bucket_width: seconds per bucket; default 0.5.
        smoothing: the weight of the newest bucket's rate; default 0.8.
    """

    __slots__ = ("_count", "_last_bucket", "_scale", "_smoothing", "_width", "rate")

    def __init__(self, start: float, *, bucket_width: float = 0.5, smoothing: float = 0.8) -> None:
        # floor(t * (1/width)) / (1/width) rather than floor(t / width) * width: for decimal widths such
        # as 0.1 it lands exactly on the boundary (0.3 -> 0.3, not 0.2), and for 0.5 it is SPEC's floor(2t)/2.
        self._scale = 1.0 / bucket_width
        self._width = bucket_width
        self._smoothing = smoothing
        self._last_bucket = float(math.floor(start))
        self._count = 0
        self.rate = 0.0

    def record(self, now: float) -> float:
        """Count one request sent at ``now``; returns the measured rate (requests per second)."""
        bucket = math.floor(now * self._scale) / self._scale
        self._count += 1
        if bucket > self._last_bucket:
            current = self._count / (bucket - self._last_bucket)
            self.rate = self._smoothing * current + (1.0 - self._smoothing) * self.rate
            self._count = 0
            self._last_bucket = bucket
        elif bucket < self._last_bucket - self._width:
            # Time went backwards, which a monotonic clock never does: the limiter was built on one clock
            # and is used on another (built outside the event loop, used inside a virtual-time loop).
            # Re-anchor instead of freezing the measurement until the new clock catches up. (The first
            # bucket can lie below floor(start), but never by a whole width.)
            self._last_bucket = bucket
            self._count = 1
        return self.rate

    def __repr__(self) -> str:
        return f"SendRateMeter(rate={self.rate!r}, last_bucket={self._last_bucket!r}, count={self._count})"


class SlidingCounter:
    """Counts events in fixed time slots over a trailing horizon, to give rates over recent spans.

    Args:
        width: the slot width, seconds.
        horizon: the longest span :meth:`rate` can look back over, seconds.
        start: the time the counter starts, seconds.
    """

    __slots__ = ("_counts", "_newest", "_size", "_width", "total")

    def __init__(self, width: float, horizon: float, start: float) -> None:
        self._width = width
        self.total = 0  # every event counted since the start
        self._size = math.ceil(horizon / width) + 1
        self._counts = [0] * self._size
        self._newest = math.floor(start / width)  # the index of the newest slot

    def _advance(self, index: int) -> None:
        shift = index - self._newest
        if shift <= 0:
            return
        counts = self._counts
        if shift >= self._size:
            counts[:] = [0] * self._size
        else:
            del counts[:shift]
            counts.extend([0] * shift)
        self._newest = index

    def add(self, now: float) -> None:
        """Count one event at ``now``."""
        self.total += 1
        index = math.floor(now / self._width)
        self._advance(index)
        offset = self._newest - index
        if offset < self._size:
            self._counts[-1 - offset] += 1

    def rate(self, now: float, span: float) -> float:
        """Events per second over about the last ``span`` seconds (whole slots; the current one partly)."""
        self._advance(math.floor(now / self._width))
        slots = max(1, min(self._size, round(span / self._width)))
        elapsed = min(max(now - self._newest * self._width, 0.0), self._width)
        covered = (slots - 1) * self._width + elapsed
        total = sum(self._counts[self._size - slots :])
        return total / covered if covered > 0 else total / self._width

    def rate_so_far(self, now: float, first: float, span: float) -> float:
        """Events per second since the first event (at ``first``): every event so far over the time since it
        plus one slot, until that reaches ``span``; then the rate over the last ``span`` (:meth:`rate`).

        The extra slot gives events that came all at once a rate (a slot's worth), and makes the rate of the
        same events the same wherever in a slot they fell: counted in whole slots, it varies by up to twice.
        """
        span_so_far = now - first + self._width
        if span_so_far <= span:
            return self.total / span_so_far
        return self.rate(now, span)

    def __repr__(self) -> str:
        return f"SlidingCounter(width={self._width!r}, recent={sum(self._counts)}, total={self.total})"


class RoundTrip:
    """The moving average of the round trips measured from send times, seconds.

    Args:
        weight: how much of each round trip's departure from the average it takes in, in ``(0, 1]``.
        first: the average before any round trip was measured; 0 (the default): none, the first one
            measured sets it.
    """

    __slots__ = ("_weight", "value")

    def __init__(self, weight: float, first: float = 0.0) -> None:
        self._weight = weight
        self.value = first

    def add(self, now: float, sent_at: float | None) -> None:
        """Take in the round trip of an answer received at ``now`` to a request sent at ``sent_at``
        (``None``, or a send time after ``now``: nothing to measure)."""
        if sent_at is None or now < sent_at:
            return
        rtt = now - sent_at
        self.value = rtt if self.value == 0.0 else self.value + self._weight * (rtt - self.value)

    def __repr__(self) -> str:
        return f"RoundTrip({self.value!r})"
