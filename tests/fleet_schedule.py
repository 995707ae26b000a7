"""The send times of one client of a fleet whose limiter is cut by its fleet's congestion events, shared by
the default profile's rule tests (the controller alone and through the limiter)."""

from __future__ import annotations


def fleet_sends(rate: float, every: float = 1.5) -> tuple[list[float], list[float]]:
    """The send times of one client of a fleet sending ``rate`` requests a second, and those of its
    throttles: first at 0.1 s (which enables its limiter), then every ``every`` seconds at the same times
    as every other client of its fleet, up to 7.6 s."""
    throttles = [0.1 + every * k for k in range(int(7.5 / every + 1e-9) + 1)]
    sends = sorted({round(k / rate, 6) for k in range(1, round(throttles[-1] * rate))} | set(throttles))
    return sends, throttles


def then_served(last: float, rate: float, seconds: float = 4.0) -> list[float]:
    """The send times of ``seconds`` of ``rate`` requests a second after ``last``, none of them throttled."""
    return [last + k / rate for k in range(1, round(seconds * rate) + 1)]
