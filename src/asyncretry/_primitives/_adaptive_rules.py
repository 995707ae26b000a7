"""The adaptive profiles' rule names and formulas, as pure functions of their inputs.

:class:`~asyncretry._primitives._adaptive.AsyncretryRateController` applies the ``"asyncretry"``
profile's to one client's responses; the Redis script of the shared limiter (``asyncretry.redis``) has a
Lua function of the same name for each, applied to a fleet's, and a parity test feeds both the same table
of cases. The same controller applies the ``"independent"`` profile's rules (:data:`INDEPENDENT_RULES`),
whose ``share_stretch`` concerns a limiter per client only and so has no Lua counterpart.
:class:`~asyncretry._primitives._fair.FairRateController` applies the ``"fair"`` profile's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = [
    "INDEPENDENT_RULES",
    "MAX_DOUBLINGS",
    "RULES",
    "SHARE_RULES",
    "THROTTLE_STEPS",
    "chosen_steps",
    "fair_decrease",
    "fair_increase",
    "grown_rate",
    "hold_after",
    "repeat_cut",
    "share_stretch",
    "start_rate",
]

RULES = (
    "start_up",
    "one_decrease_per_event",
    "repeat_cut",
    "outage",
    "few_successes",
    "start_answers_backoff",
    "fleet_event_rate",
    "fleet_climb",
    "rtt_probe",
)
"""The rules a controller can run without, one at a time (``rules=``); all of them by default.

* ``start_up``: the first throttles start the rate from what was served so far (a share of what was
  sent if nothing was), not from the floor; without it the first throttle is an ordinary event.
* ``one_decrease_per_event``: a throttle of a request sent before the last decrease is an echo of the
  event already handled; without it every throttle is an event.
* ``repeat_cut``: a second fresh throttle within ``reaction_time`` of a decrease cuts the rate to the
  share of fresh answers that succeeded (between ``min_repeat_decrease`` and ``repeat_decrease``); one
  alone is tolerated. Without it such throttles are measured like any event.
* ``outage``: nothing served for ``measurement_window`` with enough answers to tell drops the rate to
  ``outage_probe`` of the capacity from before, which the first success restores. A client never served
  has no capacity to remember: its throttles are a share it has not won yet (one client of a fleet), and
  cut its rate as any event does.
* ``few_successes``: an estimate resting on few successes (one client of a fleet) is cut by
  ``repeat_decrease`` and held instead of measured, grows by ``fair_step`` per second and probes more
  slowly; a lucky success or two before the first throttle does not set the start.
* ``start_answers_backoff``: the start-up's throttles need no throttling backoff from the engine.
* ``fleet_event_rate``: a fleet client's rate follows its rate of congestion events, never cut below
  ``repeat_decrease`` of the rate it ran at (its fill rate, or what it was served over the last window if
  that is less), and its throttles need no throttling backoff.
* ``fleet_climb``: between two events that lowest rate climbs by the ``"fair"`` profile's additive step
  (``fair_step`` at ``fair_reference``, growing as ``(rate / fair_reference) ** fair_exponent`` and doubling
  every ``fair_probe`` since the cut), the same for every client, so that the clients cut last climb back
  and the shares converge; without it that rate stays where the last event put it.
* ``rtt_probe``: the probe doubles no faster than every ``probe_rtts`` smoothed round trips (measured
  from the send times), so that it grows by at most about ``ln 2 / probe_rtts`` in the round trip a
  throttle takes to come back; without it the probe doubles every ``probe_doubling_time`` whatever the
  round trip.

The rules of :data:`SHARE_RULES` are off by default; the ``"independent"`` profile runs
:data:`INDEPENDENT_RULES`. Always on, since they are the controller itself: the capacity measured at each
event and the restart at ``utilization`` of it, then the concave recovery and the exponential probe.
"""

SHARE_RULES = ("share_recovery", "pace_without_backoff")
"""Rules for a limiter per client of a fleet, which the default profile does not apply (``rules=`` takes them).

* ``share_recovery``: a client throttled while its rate was still below its estimate shares the server with
  clients it cannot see (but for the first event after the start-up, whose rate starts below what was
  served and whose first round trip emptied the server's bucket); for the next
  ``4 * max(recovery_time, measurement_window)`` its recovery and its probe take
  ``(estimate / share_reference) ** share_exponent`` times as long, so that a client with a larger share
  climbs back and probes more slowly and the shares converge (CUBIC's time back to its window grows as its
  cube root for the same reason). One limiter for all the traffic at a steady capacity is throttled only
  above its estimate, and keeps the default profile's pace.
* ``pace_without_backoff``: once the limiter is enabled, no throttle needs a throttling backoff from the
  retry engine: the bucket paces the client, and a backoff would only keep it from measuring its share.
"""

INDEPENDENT_RULES = (
    *(rule for rule in RULES if rule not in ("repeat_cut", "few_successes", "fleet_event_rate", "fleet_climb")),
    *SHARE_RULES,
)
"""The ``"independent"`` profile's rules: the default profile's without ``repeat_cut`` and its fleet rules, and
:data:`SHARE_RULES`. A client of a fleet throttled again right after its decrease was mostly caught by the
others' probes, not by a capacity that fell further."""

THROTTLE_STEPS = (
    "start_up",
    "one_decrease_per_event",
    "count_event",
    "outage",
    "repeat_cut",
    "measure",
    "fleet_event_rate",
    "few_successes",
    "restart_below_capacity",
)
"""The order in which a throttle's steps run; the first that decides the new rate ends the sequence.
``count_event``, ``measure`` and ``restart_below_capacity`` always run (when reached)."""

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


def share_stretch(capacity: float, *, reference: float, exponent: float) -> float:
    """How many times as long the recovery and the probe take for a client that shares the server.

    Returns:
        ``(capacity / reference) ** exponent``: 1 at ``reference``, more above it and less below, so that
        of two clients throttled alike the one with the larger share climbs back more slowly.
    """
    return float((capacity / reference) ** exponent)


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
