"""The adaptive profiles' formulas, as pure functions of their inputs.

:class:`~asyncretry._primitives._adaptive.AsyncretryRateController` applies the ``"asyncretry"``
profile's to one client's responses; the Redis script of the shared limiter (``asyncretry.redis``) has a
Lua function of the same name for each, applied to a fleet's, and a parity test feeds both the same table
of cases. :class:`~asyncretry._primitives._fair.FairRateController` applies the ``"fair"`` profile's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = [
    "MAX_DOUBLINGS",
    "chosen_steps",
    "fair_decrease",
    "fair_increase",
    "grown_rate",
    "hold_after",
    "repeat_cut",
    "start_rate",
]

MAX_DOUBLINGS = 64.0
"""Clamp for the probe's exponent: 2**64 times any estimate is beyond every cap."""


def chosen_steps(
    rules: Iterable[str], known: tuple[str, ...], order: tuple[str, ...]
) -> tuple[frozenset[str], tuple[str, ...]]:
    """The rules a controller applies and the names of its steps, in ``order``, that run.

    Args:
        rules: the rules asked for (``rules=`` of a controller).
        known: the rules that can be switched off.
        order: every step, in the written order; a step that is not a rule always runs.

    Raises:
        ValueError: ``rules`` names a rule not in ``known``; the message lists the valid names.
    """
    chosen = frozenset(rules)
    unknown = sorted(chosen - set(known))
    if unknown:
        raise ValueError(f"rules must be names among {', '.join(known)}; got {', '.join(map(repr, unknown))}")
    return chosen, tuple(name for name in order if name in chosen or name not in known)


def start_rate(served: float, answered: float, *, min_repeat_decrease: float) -> float:
    """The capacity the first throttles start from: the served rate, or a share of the answered rate.

    Args:
        served: successes per second since the first answer (at most a measurement window).
        answered: answers per second over the same span.
        min_repeat_decrease: the share of ``answered`` to start from when nothing was served.

    Returns:
        ``served`` if above 0, else ``min_repeat_decrease * answered`` (a fleet throttled before any
        success starts from a share of what it sent, not from the floor).
    """
    return served if served > 0.0 else min_repeat_decrease * answered


def repeat_cut(successes: int, throttles: int, *, repeat_decrease: float, min_repeat_decrease: float) -> float:
    """The fraction of the rate kept when a decrease was not enough: the share of fresh answers served.

    Returns:
        ``successes / (successes + throttles)``, clamped to ``[min_repeat_decrease, repeat_decrease]``.
    """
    served = successes / max(successes + throttles, 1)
    return min(repeat_decrease, max(served, min_repeat_decrease))


def hold_after(
    previous: float,
    capacity: float,
    counted: float,
    *,
    held: float,
    stable_change: float,
    quick: float,
    slow: float,
    settle: float,
) -> tuple[float, float]:
    """How long to hold below a new capacity estimate before probing, and how long the estimate has held.

    Args:
        previous: the previous estimate (0: none).
        capacity: the new estimate.
        counted: the successes the new estimate rests on: a count of n is known to about ``2 / n``.
        held: how long the estimate had held before this measurement, seconds.
        stable_change: the change that still confirms the estimate (a fraction).
        quick, slow: the holds after a changed and a long-confirmed estimate (``quick_recovery_time``,
            ``recovery_time``), seconds.
        settle: how long an estimate must hold for the full hold (``settle_time``), seconds.

    Returns:
        The hold (``quick`` up to ``slow``, continuously: up to half the tolerance the estimate is
        confirmed, beyond all of it it moved) and how long the estimate has now held (shrunk as much
        as this measurement moved it).
    """
    if previous <= 0.0:
        return quick, held
    change = abs(capacity - previous) / previous
    tolerance = max(stable_change, 2.0 / max(counted, 1.0))
    weight = min(1.0, max(0.0, 2.0 - 2.0 * change / tolerance))
    held *= weight
    return quick + (slow - quick) * weight * min(1.0, held / settle), held


def grown_rate(
    capacity: float,
    *,
    fraction: float,
    elapsed: float,
    hold: float,
    doubling: float,
    step: float,
    sending: float,
    max_rate_growth: float,
) -> float:
    """The rate ``elapsed`` seconds after a restart at ``fraction`` of ``capacity``: recover, then probe.

    Args:
        capacity: the estimate the rate climbs back to.
        fraction: the share of it the rate restarted at.
        elapsed: seconds since the restart.
        hold: the seconds the concave climb back to ``capacity`` takes.
        doubling: once back, the rate probes above the estimate, doubling every this many seconds.
        step: an absolute addition, requests per second (0 for one limiter serving all the traffic).
        sending: the rate of answers lately (the probe never exceeds ``max_rate_growth`` times it, or
            the capacity, whichever is higher).
        max_rate_growth: as in the config.
    """
    if elapsed < hold:
        return capacity * (1.0 - (1.0 - fraction) * (1.0 - elapsed / hold) ** 3) + step
    doublings = min((elapsed - hold) / doubling, MAX_DOUBLINGS)
    probe: float = capacity * 2.0**doublings + step
    return min(probe, max_rate_growth * max(sending, capacity))


# --- the ``"fair"`` profile's formulas (:class:`~asyncretry._primitives._fair.FairRateController`)


def fair_increase(
    rate: float,
    elapsed: float,
    *,
    step: float,
    reference: float,
    probe: float = 0.0,
    exponent: float = 0.5,
    ceiling: float = math.inf,
) -> float:
    """The rate after ``elapsed`` seconds of success: an additive step that grows as ``rate ** exponent``.

    Every client at the same rate takes the same step, and a cut (proportional to the rate) outweighs a
    step that grows more slowly than the rate, so that the shares of a fleet converge; a step that grows
    with the rate keeps the share of throttled requests low at small rates (where AIMD's constant step
    would throttle most requests) and recovers quickly at large ones. The closer ``exponent`` is to 1,
    the weaker the pull towards equal shares.

    Args:
        rate: the rate now, requests per second (> 0).
        elapsed: seconds since the last update.
        step: the step at ``reference``, requests per second per second (``fair_step``).
        reference: the rate at which the step is ``step`` (``fair_reference``).
        probe: the doublings of the step so far (seconds since the last cut over ``fair_probe``): a client
            far below its share climbs back in a few seconds.
        exponent: how the step grows with the rate (``fair_exponent``).
        ceiling: the step never lifts the rate beyond this (``max_rate_growth`` times what the client
            really sends: an allowance it never tested is not capacity); a rate already above it is kept.
    """
    growth: float = step * (rate / reference) ** exponent * 2.0 ** min(probe, MAX_DOUBLINGS)
    return min(rate + growth * max(elapsed, 0.0), max(ceiling, rate))


def fair_decrease(rate: float, sending: float, *, beta: float, floor: float) -> float:
    """The rate after a congestion event: ``beta`` times what the client really sent, if less than its rate.

    Args:
        rate: the rate before the event, requests per second.
        sending: the answers per second of the last measurement window (a client that sends less than
            its rate allows is cut from what it sends, or the cut would not slow it).
        beta: the factor kept (``fair_decrease``).
        floor: the lowest rate (``fair_floor``).
    """
    base = min(rate, sending) if sending > 0.0 else rate
    return max(beta * base, floor)
