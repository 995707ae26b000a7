"""The retry budget: retries bounded as a share of recent requests over a sliding window (Finagle, Envoy, gRPC).

Where the AWS retry quota (:mod:`._quota`) counts tokens that successes earn back, a budget allows a
retry while::

    retries_in_window + 1 <= ratio * requests_in_window + min_retries_per_second * window

The window is a ring of ``slices`` time slices of ``window / slices`` seconds each: the current slice
and the ``slices - 1`` before it (so it spans between ``window - window / slices`` and ``window``
seconds). Slices are counted from the budget's first use. The constant term
``min_retries_per_second * window`` (the *floor*) lets a quiet client retry at all: with ratio 0.1 a
client making one call a minute would otherwise never earn a whole retry.

What it guarantees, exactly (up to float rounding of ``ratio * requests``):

1. At every moment, the retries in the window never exceed the window's allowance.
2. From the first use to any moment ``T`` seconds later, the retries allowed never exceed
   ``ratio * requests + min_retries_per_second * window * ceil(slices_elapsed / slices)``, where
   ``slices_elapsed`` counts the slices begun (the slice ``T`` falls in included). Proof: the windows
   ending in the current slice, ``slices`` slices before it, and so on tile the whole history without
   overlap, and (1) holds for each of them. Over 60 s of a total outage at 1,000 requests/s (a window
   of 10 s: six windows) this gives ``attempts / requests <= 1 + ratio + min_retries_per_second / 1000``.

The engine's use of it::

    budget.record_request()          # once per call, before its first attempt
    ticket = budget.spend()          # before each retry; records the retry when it returns a ticket
    if ticket is None:
        give up (why="budget")
    budget.refund(ticket)            # that retry will not happen after all (a deadline, a cancellation)

Each retry allowed has its own ticket, so that any number of calls can give their retries back in any
order: a refund takes back the retry of its ticket, from the slice it was counted in.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from datetime import timedelta

from .._events import GLOBAL_EVENTS, BudgetExhausted, BudgetRestored, EventBus
from .._validate import check_clock, check_instance, check_int, check_number, check_seconds
from ._clock import DEFAULT_CLOCK, Clock

__all__ = ["BudgetStatistics", "BudgetTicket", "RetryBudget", "RetryBudgetConfig", "ticket_to_refund"]

# Absorbs the float error of ``ratio * requests`` (0.29 * 100 == 28.999999999999996).
EPSILON = 1e-9

_MAX_RATIO = 1000.0
_MAX_WINDOW = 86_400.0  # a day: a longer window is a unit mistake (milliseconds given as seconds)
_MAX_FLOOR = 1e6


def _bounded(name: str, value: object, low: float, high: float, *, low_open: bool = False) -> float:
    """``check_number`` that also refuses integers too large to become a float (10**400) with ValueError."""
    if type(value) is int and not low <= value <= high:
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g} and <= {high:g}, got {value!r}")
    return check_number(name, value, low=low, high=high, low_open=low_open)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBudgetConfig:
    """How many retries a :class:`RetryBudget` allows: a share of recent requests plus a floor.

    The defaults are Finagle's: 20% of the requests of the last 10 s, plus 10 retries per second.

    Args:
        ratio: retries allowed per request in the window, from 0 to 1000 (0.2: one retry per five
            calls). Default 0.2.
        window: how far back requests and retries count, seconds (at least a nanosecond, at most a
            day) or a ``timedelta``. Default 10.
        min_retries_per_second: the floor: retries allowed per second of window whatever the traffic
            (>= 0, at most 1e6), so that a quiet client can still retry. Default 10.
        slices: the time slices the window is kept in, an integer from 1 to 100; the window slides
            one slice (``window / slices`` seconds) at a time. Default 10.

    ``ratio`` and ``min_retries_per_second`` cannot both be 0 (that budget would allow no retry at all:
    use ``max_attempts=1`` to turn retries off).

    Raises:
        ValueError: a value is out of range; the message names the parameter, the value and the range.
        TypeError: a value has the wrong type (``bool`` is not a number).
    """

    ratio: float = 0.2
    window: float | timedelta = 10.0
    min_retries_per_second: float = 10.0
    slices: int = 10

    def __post_init__(self) -> None:
        ratio = _bounded("ratio", self.ratio, 0.0, _MAX_RATIO)
        window = check_seconds("window", self.window, low_open=True, high=_MAX_WINDOW)
        floor = _bounded("min_retries_per_second", self.min_retries_per_second, 0.0, _MAX_FLOOR)
        check_int("slices", self.slices, low=1, high=100)
        if ratio == 0 and floor == 0:
            raise ValueError(
                "ratio=0 and min_retries_per_second=0 allow no retry at all: set either above 0 "
                "(or use max_attempts=1 to turn retries off)"
            )
        object.__setattr__(self, "ratio", ratio)
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "min_retries_per_second", floor)

    @property
    def window_seconds(self) -> float:
        """``window`` in seconds (a ``timedelta`` given is kept as float seconds already)."""
        window = self.window
        return window.total_seconds() if isinstance(window, timedelta) else window

    @property
    def slice_seconds(self) -> float:
        """The width of one slice: ``window / slices`` seconds."""
        return self.window_seconds / self.slices

    @property
    def floor(self) -> float:
        """The retries the window allows without any request: ``min_retries_per_second * window``."""
        return self.min_retries_per_second * self.window_seconds

    def allowance(self, requests: float) -> float:
        """The retries a window holding ``requests`` requests allows."""
        return self.ratio * requests + self.floor


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetStatistics:
    """A snapshot of a :class:`RetryBudget`.

    Attributes:
        name: the budget's name (its scope).
        requests: requests counted in the window now.
        retries: retries counted in the window now.
        allowance: retries the window allows (``ratio * requests + min_retries_per_second * window``).
        available: ``allowance - retries``, at least 0: a retry is allowed while it is >= 1.
        requests_total: requests recorded since the budget was made.
        retries_total: retries allowed since the budget was made (less those refunded).
        refused: retries refused since the budget was made.
        exhausted: whether the budget is in an exhaustion episode (a retry was refused and none
            could be paid for since).
    """

    name: str
    requests: int
    retries: int
    allowance: float
    available: float
    requests_total: int
    retries_total: int
    refused: int
    exhausted: bool


class BudgetTicket:
    """One retry a budget allowed: hand it to the budget's ``refund`` if that retry will not be made.

    Returned by :meth:`RetryBudget.spend` (and the Redis budget's ``spend``). A ticket is refunded at
    most once: a second refund of the same ticket changes nothing.

    Attributes:
        slice: the number of the budget's slice the retry was counted in.
        shared_slice: the slice of a window kept on a server it was counted in too, or ``None``.
        refunded: whether the ticket was refunded.
    """

    __slots__ = ("refunded", "shared_slice", "slice")

    def __init__(self, slice: int, shared_slice: int | None = None) -> None:
        self.slice = check_int("slice", slice, low=0)
        self.shared_slice = None if shared_slice is None else check_int("shared_slice", shared_slice, low=0)
        self.refunded = False

    def __repr__(self) -> str:
        shared = "" if self.shared_slice is None else f" shared_slice={self.shared_slice}"
        return f"<BudgetTicket slice={self.slice}{shared}{' refunded' if self.refunded else ''}>"


def ticket_to_refund(
    budget: object, ticket: BudgetTicket | None, last: BudgetTicket | None
) -> tuple[BudgetTicket | None, BudgetTicket | None]:
    """What a budget's ``refund(ticket)`` takes back: ``ticket`` (``None`` once refunded), or without one
    (deprecated, with a warning) the latest retry the budget allowed (``last``); and the new ``last``.

    Raises:
        TypeError: ``ticket`` is not a :class:`BudgetTicket`.
    """
    if ticket is None:
        warnings.warn(
            f"{type(budget).__name__}.refund() without a ticket is deprecated: pass the ticket spend() returned",
            DeprecationWarning,
            stacklevel=3,
        )
        ticket, last = last, None
    elif not isinstance(ticket, BudgetTicket):
        raise TypeError(f"ticket must be a BudgetTicket (what spend() returned), got {ticket!r}")
    if ticket is not None and ticket.refunded:
        ticket = None
    return ticket, last


class RetryBudget:
    """Allows retries while they stay within a share of the requests of a sliding window, plus a floor.

    Synchronous: no method awaits. Share one budget between every call to the same scope (and between
    retriers, to bound them together); all of its methods are O(1) (a slice that ends costs one
    subtraction when the window moves past it).

    Exhaustion is reported once per episode: :class:`~asyncretry.BudgetExhausted` when a retry is first
    refused; the episode ends, with :class:`~asyncretry.BudgetRestored`, at the first
    :meth:`record_request`, :meth:`try_spend` or :meth:`statistics` call that finds room for a retry.

    Args:
        config: ratio, window, floor and slices; defaults to ``RetryBudgetConfig()``.
        clock: the time source; defaults to the running event loop's clock.
        name: names the budget in statistics and events (their ``source``).
        events: where budget events go; defaults to the global bus.
    """

    __slots__ = (
        "_clock",
        "_config",
        "_end",
        "_events",
        "_exhausted",
        "_floor",
        "_head",
        "_last_spent",
        "_origin",
        "_ratio",
        "_refused",
        "_request_slots",
        "_requests",
        "_requests_total",
        "_retries",
        "_retries_total",
        "_retry_slots",
        "_width",
        "name",
    )

    def __init__(
        self,
        config: RetryBudgetConfig | None = None,
        *,
        clock: Clock | None = None,
        name: str = "budget",
        events: EventBus | None = None,
    ) -> None:
        if config is None:
            config = RetryBudgetConfig()
        elif not isinstance(config, RetryBudgetConfig):
            raise TypeError(f"config must be a RetryBudgetConfig, got {config!r}")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        self._config = config
        self._clock = check_clock("clock", clock) if clock is not None else DEFAULT_CLOCK
        self.name = name
        self._events = GLOBAL_EVENTS if events is None else check_instance("events", events, EventBus)
        self._ratio = config.ratio
        self._floor = config.floor
        self._width = config.slice_seconds
        self._request_slots = [0] * config.slices
        self._retry_slots = [0] * config.slices
        self._requests = 0  # in the window
        self._retries = 0  # in the window
        self._origin = math.nan  # the time of the first use: slices are counted from it
        self._head = 0  # the number of the current slice, from the origin
        self._end = -math.inf  # when the current slice ends
        self._last_spent: BudgetTicket | None = None  # the latest retry allowed, for refund() without a ticket
        self._requests_total = 0
        self._retries_total = 0
        self._refused = 0
        self._exhausted = False

    @property
    def config(self) -> RetryBudgetConfig:
        """The budget's settings."""
        return self._config

    @property
    def clock(self) -> Clock:
        """The time source the window slides on."""
        return self._clock

    def record_request(self, *, now: float | None = None) -> None:
        """Count one request (a call, before its first attempt): it earns ``ratio`` retries for a window.

        Args:
            now: the time on the budget's clock, if the caller has just read it (saves a clock read).
        """
        if now is None:
            now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        self._request_slots[self._head % self._config.slices] += 1
        self._requests += 1
        self._requests_total += 1
        if self._exhausted:
            self._restore_if_able(now)

    def spend(self, *, now: float | None = None) -> BudgetTicket | None:
        """Allow one retry if the window has room for it, and count it.

        Args:
            now: the time on the budget's clock, if the caller has just read it (saves a clock read).

        Returns:
            The retry's ticket (for :meth:`refund`) if it may go ahead (it is counted); ``None`` if the
            window's retries already use its allowance (the first refusal of an episode emits
            :class:`~asyncretry.BudgetExhausted`).
        """
        if now is None:
            now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        if self._retries + 1 <= self._ratio * self._requests + self._floor + EPSILON:
            ticket = self._count_retry()
            if self._exhausted:
                self._restore(now)
            return ticket
        self._refused += 1
        if not self._exhausted:
            self._exhaust(now)
        return None

    def try_spend(self, *, now: float | None = None) -> bool:
        """:meth:`spend` for a caller that will not refund: True if the retry may go ahead (it is counted)."""
        return self.spend(now=now) is not None

    def record_retry(self) -> BudgetTicket:
        """Count a retry that was allowed elsewhere without asking (a shared budget's, say); never refuses.

        Returns:
            The retry's ticket, for :meth:`refund`.
        """
        now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        return self._count_retry()

    def refund(self, ticket: BudgetTicket | None = None) -> None:
        """Take back the retry of ``ticket``: that retry will not be made after all.

        For a caller that gives up after :meth:`spend` allowed a retry (the retry's delay would run past
        the deadline, the call was cancelled while waiting). Each ticket is refunded once; nothing
        happens once the ticket's slice has left the window (the retry no longer counts anyway).

        Args:
            ticket: what :meth:`spend` returned. Omitting it (deprecated) takes back the latest retry
                allowed, which is wrong as soon as two calls share the budget.
        """
        ticket, self._last_spent = ticket_to_refund(self, ticket, self._last_spent)
        if ticket is None:
            return
        ticket.refunded = True
        now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        slices = self._config.slices
        spent = ticket.slice
        if self._head - slices < spent <= self._head and self._retry_slots[spent % slices] > 0:
            self._retry_slots[spent % slices] -= 1
            self._retries -= 1
            self._retries_total -= 1
        if self._exhausted:
            self._restore_if_able(now)

    @property
    def available(self) -> float:
        """``allowance - retries`` in the window now, at least 0: a retry is allowed while it is >= 1."""
        now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        return max(0.0, self._ratio * self._requests + self._floor - self._retries)

    def statistics(self) -> BudgetStatistics:
        """Return a snapshot of the window and the counters."""
        now = self._clock.now()
        if now >= self._end:
            self._advance(now)
        if self._exhausted:
            self._restore_if_able(now)
        allowance = self._ratio * self._requests + self._floor
        return BudgetStatistics(
            name=self.name,
            requests=self._requests,
            retries=self._retries,
            allowance=allowance,
            available=max(0.0, allowance - self._retries),
            requests_total=self._requests_total,
            retries_total=self._retries_total,
            refused=self._refused,
            exhausted=self._exhausted,
        )

    def __repr__(self) -> str:
        config = self._config
        return (
            f"<RetryBudget {self.name!r} retries={self._retries}/{self._ratio * self._requests + self._floor:g} "
            f"requests={self._requests} window={config.window_seconds:g}s ratio={config.ratio:g} "
            f"floor={config.min_retries_per_second:g}/s refused={self._refused}"
            f"{' exhausted' if self._exhausted else ''}>"
        )

    # -- internals

    def _count_retry(self) -> BudgetTicket:
        self._retry_slots[self._head % self._config.slices] += 1
        self._retries += 1
        self._retries_total += 1
        self._last_spent = ticket = BudgetTicket(self._head)
        return ticket

    def _advance(self, now: float) -> None:
        """Move the window to the slice ``now`` falls in, dropping the slices that left it."""
        if self._origin != self._origin:  # NaN: the first use starts slice 0
            self._origin = now
        width = self._width
        index = math.floor((now - self._origin) / width)
        if self._origin + (index + 1) * width <= now:  # float rounding at a slice's end
            index += 1
        head = self._head
        if index > head:
            slices = self._config.slices
            requests, retries = self._request_slots, self._retry_slots
            if index - head >= slices:
                requests[:] = [0] * slices
                retries[:] = [0] * slices
                self._requests = self._retries = 0
            else:
                for number in range(head + 1, index + 1):
                    slot = number % slices
                    self._requests -= requests[slot]
                    self._retries -= retries[slot]
                    requests[slot] = retries[slot] = 0
            self._head = index
        # A clock that went back (or rounding) keeps the current slice: the window never slides back.
        self._end = self._origin + (self._head + 1) * width

    def _exhaust(self, now: float) -> None:
        self._exhausted = True
        if self._events.wants(BudgetExhausted):
            self._events.emit(BudgetExhausted(
                time=now, source=self.name, requests=self._requests, retries=self._retries,
                allowance=self._ratio * self._requests + self._floor,
            ))

    def _restore_if_able(self, now: float) -> None:
        if self._retries + 1 <= self._ratio * self._requests + self._floor + EPSILON:
            self._restore(now)

    def _restore(self, now: float) -> None:
        self._exhausted = False
        if self._events.wants(BudgetRestored):
            self._events.emit(BudgetRestored(
                time=now, source=self.name,
                available=max(0.0, self._ratio * self._requests + self._floor - self._retries),
            ))
