"""`BreakerState`: the states of a circuit breaker.

In the base layer, beside the events, so that :class:`~asyncretry.BreakerStateChanged` carries the same
type as :attr:`BreakerStatistics.state <asyncretry.BreakerStatistics>`. A ``StrEnum``: each state also
compares equal to its string (``BreakerState.OPEN == "open"``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["BreakerState"]


class BreakerState(StrEnum):
    """The state of a :class:`CircuitBreaker`."""

    CLOSED = "closed"
    """Calls flow; outcomes are sampled to decide whether to trip."""
    OPEN = "open"
    """Calls are rejected until the break duration has elapsed."""
    HALF_OPEN = "half_open"
    """A limited number of probe calls are admitted to test the backend; the rest are rejected."""
    ISOLATED = "isolated"
    """Forced open by hand (:meth:`CircuitBreaker.isolate`) until :meth:`CircuitBreaker.reset`."""
