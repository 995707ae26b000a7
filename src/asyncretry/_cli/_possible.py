"""The demo's yardstick: how many requests an ideal client fleet gets through the same server.

The share column of ``demo`` and ``simulate`` compares each configuration with this figure, so it must
be a true upper bound. "The capacity, capped by the demand, stretch by stretch" is not one: while the
capacity is below the demand, every client keeps a request waiting (a closed-loop client sends its next
request only once the last one is answered), and once the capacity rises these waiting requests are
served on top of the demand, up to one per client; a client that waited also sends its next request
sooner, as its schedule restarts from the late one. Configurations that wait (a rate limiter) collect
some of that, so a share of the capped capacity could exceed 100%.

The ideal fleet is the demo's clients exactly (the same number, each wanting ``rate`` requests per second,
the same first-request offsets, the next request ``1 / rate`` after the last one began or as soon as it
was answered if that is later), with perfect knowledge: each request goes out the moment the server's
token bucket can admit it (waiting requests first come, first served), so none is throttled, and none
fails (the server's transient 503s and outages are not held against it). Sending a request as early as
the bucket allows never costs a later one its token, so no client can get more through.
"""

from __future__ import annotations

import heapq
import math

from .._simulation import Scenario

__all__ = ["ideal_sends", "possible_successes"]


class _Tokens:
    """The demo server's token bucket (:class:`~asyncretry._simulation.SimulatedServer`'s rules), asked when
    it admits the next request rather than whether it admits one now.

    It holds ``burst * C(t)`` tokens at most, starts full, refills at ``C(t)``, and is capped to the new
    size at each change of the capacity (an outage, capacity 0, empties it).
    """

    __slots__ = ("_burst", "_index", "_last", "_segments", "_tokens")

    def __init__(self, scenario: Scenario, burst: float) -> None:
        self._segments = scenario.segments()
        self._burst = burst
        self._index = 0
        self._last = 0.0
        self._tokens = burst * self._segments[0][2]

    def take(self, time: float) -> float:
        """Take a token at ``time`` or, if none is there, when the next one comes in; returns that time
        (``inf`` if none comes in before the scenario ends).

        The state changes only here, where the server's ``admit`` would be called, and by the same float
        operations, so that the server would admit a request at every time returned.
        """
        time = max(time, self._last)
        while True:
            _start, end, capacity = self._segments[self._index]
            if time >= end and self._index + 1 < len(self._segments):
                # The stretch ended before `time`: fill to its end, then cap to the next stretch's bucket.
                self._tokens = min(self._tokens + (end - self._last) * capacity, self._burst * capacity)
                self._index += 1
                self._tokens = min(self._tokens, self._burst * self._segments[self._index][2])
                self._last = end
                continue
            due = time
            if self._level(due, capacity) < 1.0:
                last_stretch = self._index + 1 == len(self._segments)
                if capacity <= 0 or self._burst * capacity < 1.0:
                    if last_stretch:
                        return math.inf  # the last stretch never fills a token
                    time = end  # no token in this stretch: wait for the next one
                    continue
                due = time + (1.0 - self._level(time, capacity)) / capacity
                while self._level(due, capacity) < 1.0:  # rounding: the server must see the whole token
                    due = math.nextafter(due, math.inf)
                if due >= end and not last_stretch:
                    time = end
                    continue
            self._tokens = self._level(due, capacity) - 1.0
            self._last = due
            return due

    def _level(self, time: float, capacity: float) -> float:
        return min(self._tokens + (time - self._last) * capacity, self._burst * capacity)


def ideal_sends(scenario: Scenario, *, clients: int, rate: float, burst: float, latency: float) -> list[float]:
    """When the ideal fleet (see the module) sends each request answered within the scenario, in order.

    Args:
        scenario: the server's capacity script; the run lasts ``scenario.duration`` seconds.
        clients: the clients, each with one request at a time.
        rate: the requests per second each client wants.
        burst: the server's token bucket, as seconds of capacity (:class:`~._server.DemoServer`'s ``burst``).
        latency: the server's service time, seconds; a request still in service at the end is left out.

    Returns:
        The send times, seconds from the start of the scenario.
    """
    tokens = _Tokens(scenario, burst)
    interval = 1.0 / rate
    # (when the request was issued, which client): the waiting requests, served first come, first served
    waiting = [(index * interval / clients, index) for index in range(clients)]
    heapq.heapify(waiting)
    sends: list[float] = []
    while waiting:
        issued, index = heapq.heappop(waiting)
        sent = tokens.take(issued)
        if sent + latency > scenario.duration:
            continue  # still in service at the end; this client's later requests would be later still
        sends.append(sent)
        heapq.heappush(waiting, (max(sent + latency, issued + interval), index))
    return sends


def possible_successes(scenario: Scenario, *, clients: int, rate: float, burst: float, latency: float) -> int:
    """The most successful requests any configuration of these clients could get from this server: those of
    the ideal fleet (see the module and :func:`ideal_sends`, whose arguments it takes)."""
    return len(ideal_sends(scenario, clients=clients, rate=rate, burst=burst, latency=latency))
