"""One primitive's use of a backend: its key, its ``on_unavailable`` choice, its outage events and counters.

Every Redis-backed primitive holds a :class:`_Link` to its :class:`~._backend.RedisBackend`: the link runs
the primitive's script and turns an outage into the primitive's choice (``None``: use the local twin; or
:class:`~asyncretry.BackendUnavailable`), announcing each episode once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Literal

from .._events import GLOBAL_EVENTS, BackendLost, BackendRecovered, EventBus
from .._exceptions import BackendUnavailable
from .._primitives._clock import Clock
from .._validate import check_choice
from ._backend import Client, RedisBackend, _Unavailable, as_backend
from ._scripts import Script
from ._values import check_parts

__all__ = ["OnUnavailable"]

OnUnavailable = Literal["fail_open", "fail_closed"]
"""What a Redis-backed primitive does while Redis cannot be reached (see :class:`RedisBackend`)."""

_CHOICES = ("fail_open", "fail_closed")


class _Link:
    """One primitive's use of a backend: its key, its ``on_unavailable`` choice, its events and counters.

    ``run`` answers ``None`` when the primitive must use its local fallback (fail open), raises
    :class:`~asyncretry.BackendUnavailable` when it must fail closed, and emits
    :class:`~asyncretry.BackendLost` / :class:`~asyncretry.BackendRecovered` once per episode.

    Amounts a primitive defers to its next round trip (refunds, cancelled reservations, freed probe slots)
    are delivered at most once: a failed round trip that was attempted (``maybe_sent``) may still have run
    on the server (a timeout), so its amounts are dropped rather than sent twice; amounts of a round trip
    that never left the process (the backend was known to be down) are kept for the next one.
    """

    __slots__ = (
        "backend",
        "clock",
        "degraded_since",
        "events",
        "fail_closed",
        "fallback",
        "fallbacks",
        "fleet_size",
        "key",
        "kind",
        "maybe_sent",
        "name",
        "round_trips",
    )

    def __init__(
        self,
        redis_: RedisBackend | Client | str,
        *,
        kind: str,
        name: str,
        on_unavailable: str,
        events: EventBus | None,
        clock: Clock,
        fallback: str,
    ) -> None:
        check_choice("on_unavailable", on_unavailable, _CHOICES)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str (it names the Redis key), got {name!r} ({type(name).__name__})")
        if not name:
            raise ValueError("name must be a non-empty str (it names the Redis key), got ''")
        check_parts(clock, events)
        self.backend = as_backend(redis_)
        self.key = self.backend.key(kind, name)
        self.kind = kind
        self.name = name
        self.fail_closed = on_unavailable == "fail_closed"
        self.fallback = fallback
        self.events = events if events is not None else GLOBAL_EVENTS
        self.clock = clock
        self.degraded_since: float | None = None
        self.round_trips = 0
        self.fallbacks = 0
        self.maybe_sent = False  # whether the last failed round trip may have run on the server anyway
        self.fleet_size = 0  # a fleet limit's fallback: the processes it assumes share the limit (0: no share)

    @property
    def on_unavailable(self) -> str:
        return "fail_closed" if self.fail_closed else "fail_open"

    async def run(
        self, script: Script, args: Sequence[str | int | float], *, report: bool = False, strict: bool = False
    ) -> list[Any] | None:
        """One round trip; ``None``: use the local fallback.

        Args:
            report: the call reports an outcome (a refund, a breaker sample) rather than asking for
                permission: it never fails closed, the caller defers or drops it instead.
            strict: an administrative call (isolate, reset) that must reach Redis whatever the choice.

        Raises:
            BackendUnavailable: Redis cannot be reached and the primitive fails closed (or ``strict``).
        """
        try:
            reply = await self.backend.run(script, self.key, args)
        except _Unavailable as down:
            self.maybe_sent = down.sent
            self.fallbacks += 1
            self._degrade(down.error, closed=self.fail_closed or strict)
            if strict or (self.fail_closed and not report):
                raise BackendUnavailable(
                    f"Redis is unavailable for {self.kind} {self.name!r} ({down.error}); "
                    + ("this operation needs Redis" if strict else "failing closed (on_unavailable='fail_closed')")
                    + f"; the backend tries again in {self.backend.next_probe_in(self.key):.3g} s"
                ) from down.__cause__
            return None
        self.round_trips += 1
        since = self.degraded_since
        if since is not None:
            self.degraded_since = None
            if self.events.wants(BackendRecovered):
                now = self.clock.now()
                self.events.emit(BackendRecovered(time=now, source=self.name, down_for=now - since))
        return reply

    def _degrade(self, error: str, *, closed: bool) -> None:
        if self.degraded_since is not None:
            return
        now = self.clock.now()
        self.degraded_since = now
        if self.events.wants(BackendLost):
            fleet = self.fleet_size if not closed and self.fleet_size > 0 else None
            if closed:
                fallback = "none: calls fail with BackendUnavailable"
            elif fleet is not None and fleet > 1:
                fallback = f"{self.fallback} with 1/{fleet} of the shared limit (a fleet of {fleet} last seen)"
            else:
                fallback = self.fallback
            self.events.emit(BackendLost(
                time=now, source=self.name, error=error, fallback=fallback,
                share=None if fleet is None else 1.0 / fleet, fleet_size=fleet,
            ))

    @property
    def degraded(self) -> bool:
        return self.degraded_since is not None


class _Linked:
    """What every Redis-backed primitive exposes of its link: the backend and the key of its state."""

    __slots__ = ()
    _link: _Link

    @property
    def backend(self) -> RedisBackend:
        """The backend this object's state lives on."""
        return self._link.backend

    @property
    def key(self) -> str:
        """The Redis key this object's state lives under."""
        return self._link.key


class _Later:
    """An awaitable that starts its round trip only when awaited: a caller that leaves it alone (the work
    goes with a later round trip) gets no warning of a coroutine never awaited."""

    __slots__ = ("_start",)

    def __init__(self, start: Callable[[], Awaitable[None]]) -> None:
        self._start = start

    def __await__(self) -> Generator[Any, None, None]:
        return self._start().__await__()
