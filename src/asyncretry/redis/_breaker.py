"""RedisCircuitBreaker: one circuit breaker for a whole fleet, its state machine run by a script on Redis.

It implements :class:`~asyncretry.protocols.RemoteBreaker` (``await acquire()``,
``await record(success=, probe=)``, a synchronous ``release(probe)``) and holds a local
:class:`~asyncretry.CircuitBreaker` with the same config as its fail-open fallback.

The rules are :class:`~asyncretry.CircuitBreaker`'s (failure ratio over a sliding window of ten time
buckets, consecutive failures, growing breaks, half-open probes); the state and the window live in one
Redis hash and every operation is one script on the server's clock. So failures seen by any process count
towards tripping, an open circuit rejects calls in every process, and the half-open probe slots are shared:
``half_open_max_probes=1`` admits one probe in the whole fleet.

A probe slot is leased: if the process holding it dies (or its cancellation is never reported), the slot
frees itself after ``probe_lease`` seconds. Each transition happens once, in the script of the process
that caused it, and that process emits :class:`~asyncretry.BreakerStateChanged`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .._events import GLOBAL_EVENTS, BreakerStateChanged, EventBus
from .._exceptions import CircuitOpenError
from .._primitives._breaker import BreakerState, BreakerStatistics, CircuitBreaker, CircuitBreakerConfig
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._validate import as_seconds
from ._backend import Client, RedisBackend
from ._link import OnUnavailable, _Link, _Linked
from ._scripts import BREAKER
from ._values import _MAX_DELAY, fmt, num, seconds, text, ttl_ms

__all__ = ["RedisBreakerStatistics", "RedisCircuitBreaker"]

_PEEK, _ACQUIRE, _SUCCESS, _FAILURE, _ISOLATE, _RESET = range(6)
_STATES = (BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.ISOLATED)


def script_settings(config: CircuitBreakerConfig, lease: float, key_ttl_ms: int) -> tuple[str | int, ...]:
    """The breaker script's settings arguments (``ARGV[4]`` to ``ARGV[15]``) for a config."""
    c = config
    return (
        fmt(c.failure_ratio), c.minimum_throughput, fmt(as_seconds(c.sampling_duration)),
        c.consecutive_failures if c.consecutive_failures is not None else -1,
        fmt(as_seconds(c.break_duration)), fmt(c.break_duration_multiplier), fmt(as_seconds(c.max_break_duration)),
        c.half_open_max_probes, c.half_open_successes_to_close, fmt(lease), key_ttl_ms,
        c.half_open_failures_to_reopen,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisBreakerStatistics(BreakerStatistics):
    """A snapshot of a :class:`RedisCircuitBreaker`: the fleet's breaker as of the last round trip.

    ``failures``, ``successes``, ``times_opened`` and ``rejected`` count the whole fleet; ``opened_at``
    is on this process's clock. While degraded, the local fallback breaker's figures.

    Attributes:
        degraded: whether the last operation could not reach Redis.
        round_trips: scripts this breaker ran on Redis.
        fallbacks: operations that could not reach Redis.
    """

    degraded: bool
    round_trips: int
    fallbacks: int


@dataclass(slots=True)
class _View:
    """The fleet breaker as the last round trip saw it."""

    state: BreakerState = BreakerState.CLOSED
    retry_after: float = 0.0
    failures: int = 0
    successes: int = 0
    consecutive: int = 0
    opened_at: float | None = None  # local clock
    break_duration: float = 0.0
    in_flight: int = 0
    times_opened: int = 0
    rejected: int = 0
    seen_at: float = math.nan  # local clock


class RedisCircuitBreaker(_Linked):
    """A circuit breaker shared through Redis by every process that uses the same ``name``.

    Ask :meth:`acquire` before an attempt and :meth:`record` after it, one round trip each; a cancelled
    probe is handed back by :meth:`release`, deferred to the next round trip. :meth:`statistics` and
    :attr:`state` answer from the last round trip (the engine reads ``retry_after`` there),
    extrapolating the end of a break on the local clock; :meth:`refresh` asks the server.

    Args:
        redis: a :class:`RedisBackend`, a ``redis.asyncio.Redis`` / ``RedisCluster`` client, or a URL.
        config: trip, break and probe settings (every process must use the same); defaults to
            ``CircuitBreakerConfig()``.
        name: names the shared breaker (the Redis key ``{prefix}breaker:{name}``), errors and events.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) judges calls with a
            local in-process breaker that starts closed; ``"fail_closed"`` rejects them with
            :class:`~asyncretry.BackendUnavailable`. Outcomes are never refused: while Redis is away they
            go to the local breaker (fail open) or are dropped (fail closed).
        probe_lease: seconds after which an unreported probe's slot is freed (> 0 and <= 86400, default 60).
        key_ttl: seconds an unused breaker is kept on Redis (> 0 and <= ten years, default 600); an open
            circuit is kept at least until its break ends, an isolated one until it is reset.
        clock: the time source; defaults to the running loop's clock.
        events: where :class:`~asyncretry.BreakerStateChanged` and the backend's events go.

    Raises:
        ValueError: a setting is out of range (the message names it).
        TypeError: a setting has the wrong type.
    """

    __slots__ = ("_args", "_clock", "_events", "_link", "_local", "_released", "_released_in", "_view")


    def __init__(
        self,
        redis: RedisBackend | Client | str,
        config: CircuitBreakerConfig | None = None,
        *,
        name: str = "breaker",
        on_unavailable: OnUnavailable = "fail_open",
        probe_lease: float | timedelta = 60.0,
        key_ttl: float | timedelta = 600.0,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        if config is not None and not isinstance(config, CircuitBreakerConfig):
            raise TypeError(f"config must be a CircuitBreakerConfig, got {config!r}")
        lease = seconds("probe_lease", probe_lease, high=_MAX_DELAY)
        key_ttl_ms = ttl_ms(key_ttl)
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._events = events if events is not None else GLOBAL_EVENTS
        self._link = _Link(
            redis, kind="breaker", name=name, on_unavailable=on_unavailable, events=events,
            clock=self._clock, fallback="a local in-process circuit breaker",
        )
        self._local = CircuitBreaker(config, clock=clock, name=name, events=events)
        c = self._local.config
        self._args = script_settings(c, lease, key_ttl_ms)
        self._released = 0  # cancelled probes of half-open period _released_in, reported with the next round trip
        self._released_in = 0
        self._view = _View(break_duration=as_seconds(c.break_duration))

    @property
    def name(self) -> str:
        """The breaker's name (its Redis key is ``{prefix}breaker:{name}``)."""
        return self._link.name

    @property
    def config(self) -> CircuitBreakerConfig:
        """The breaker's settings."""
        return self._local.config

    @property
    def state(self) -> BreakerState:
        """The fleet breaker's state as of the last round trip (open turns half-open when its break is over)."""
        if self._link.degraded:
            return self._local.state
        return self._extrapolated()[0]

    async def acquire(self) -> int:
        """Ask the fleet breaker to admit one attempt; one round trip.

        Returns:
            0 for a normal call; for a half-open probe, its ticket (the number of the fleet's half-open
            period, >= 1). Pass it to :meth:`record`.

        Raises:
            CircuitOpenError: the circuit is open, isolated, or half-open with every probe slot taken.
            BackendUnavailable: Redis cannot be reached and the breaker fails closed.
        """
        reply = await self._run(_ACQUIRE)
        if reply is None:
            return self._local.acquire()
        result = int(reply[0])
        if result < 0:
            view = self._view
            raise CircuitOpenError(name=self.name, state=view.state.value, retry_after=view.retry_after)
        return result

    async def record(self, *, success: bool, probe: int) -> None:
        """Report an admitted attempt's outcome to the fleet breaker; one round trip, never fails closed."""
        reply = await self._run(_SUCCESS if success else _FAILURE, probe, report=True)
        if reply is None and not self._link.fail_closed:
            if success:
                self._local.record_success(probe)
            else:
                self._local.record_failure(probe)

    def release(self, probe: int) -> None:
        """Hand back a probe's slot (the attempt was cancelled); reported with the next round trip."""
        if not probe:
            return
        if probe > self._released_in:  # only the newest period's slots can still be free: older ones ended
            self._released, self._released_in = 0, probe
        if probe == self._released_in:
            self._released += 1
        self._local.release(probe)  # in case the probe came from the local fallback

    async def isolate(self) -> None:
        """Force the fleet's circuit open until :meth:`reset` (the key is kept until then).

        Raises:
            BackendUnavailable: Redis cannot be reached (an administrative call never falls back).
        """
        await self._run(_ISOLATE, strict=True)

    async def reset(self) -> None:
        """Close the fleet's circuit and forget its samples and grown break.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        await self._run(_RESET, strict=True)

    async def refresh(self) -> RedisBreakerStatistics:
        """Read the fleet breaker's state now (one round trip) and return :meth:`statistics`."""
        await self._run(_PEEK, report=True)
        return self.statistics()

    def statistics(self) -> RedisBreakerStatistics:
        """Return the fleet breaker as of the last round trip (the local fallback's while degraded)."""
        link = self._link
        if link.degraded:
            local = self._local.statistics()
            values: dict[str, Any] = {
                "state": local.state, "failures": local.failures, "successes": local.successes,
                "failure_ratio": local.failure_ratio, "consecutive_failures": local.consecutive_failures,
                "opened_at": local.opened_at, "retry_after": local.retry_after,
                "break_duration": local.break_duration, "probes_in_flight": local.probes_in_flight,
                "times_opened": local.times_opened, "rejected": local.rejected,
            }
        else:
            view = self._view
            state, retry_after = self._extrapolated()
            total = view.failures + view.successes
            values = {
                "state": state, "failures": view.failures, "successes": view.successes,
                "failure_ratio": view.failures / total if total else 0.0,
                "consecutive_failures": view.consecutive, "opened_at": view.opened_at,
                "retry_after": retry_after, "break_duration": view.break_duration,
                "probes_in_flight": view.in_flight, "times_opened": view.times_opened,
                "rejected": view.rejected,
            }
        return RedisBreakerStatistics(
            name=self.name, degraded=link.degraded, round_trips=link.round_trips, fallbacks=link.fallbacks, **values
        )

    def __repr__(self) -> str:
        view = self._view
        state = "degraded" if self._link.degraded else "shared"
        return (
            f"<RedisCircuitBreaker {self.name!r} key={self._link.key!r} {self.state.value} "
            f"failures={view.failures}/{view.failures + view.successes} times_opened={view.times_opened} "
            f"{state} on_unavailable={self._link.on_unavailable!r}>"
        )

    # -- internals

    def _extrapolated(self) -> tuple[BreakerState, float]:
        view = self._view
        if view.state is BreakerState.OPEN and not math.isnan(view.seen_at):
            left = view.retry_after - (self._clock.now() - view.seen_at)
            if left <= 0.0:
                return BreakerState.HALF_OPEN, 0.0  # what the next round trip will find
            return BreakerState.OPEN, left
        return view.state, view.retry_after

    async def _run(
        self, op: int, probe: int = 0, *, report: bool = False, strict: bool = False
    ) -> list[Any] | None:
        released, period, self._released = self._released, self._released_in, 0
        # Freed probe slots go at most once (see _Link); the probe lease covers any that are lost.
        reply = await self._link.run(
            BREAKER, (op, int(probe), released, *self._args, period, ""), report=report, strict=strict
        )
        if reply is None:
            if not self._link.maybe_sent and period == self._released_in:
                self._released += released
            return None
        self._observe(reply)
        return reply

    def _observe(self, reply: list[Any]) -> None:
        now = self._clock.now()
        server_now = num(reply[11])
        opened = num(reply[6])
        retry_after = num(reply[2])
        view = self._view
        view.state = _STATES[int(reply[1])]
        view.retry_after = math.inf if retry_after < 0 else retry_after
        view.failures = int(reply[3])
        view.successes = int(reply[4])
        view.consecutive = int(reply[5])
        view.opened_at = None if opened < 0 else now - (server_now - opened)
        view.break_duration = num(reply[7])
        view.in_flight = int(reply[8])
        view.times_opened = int(reply[9])
        view.rejected = int(reply[10])
        view.seen_at = now
        if len(reply) > 12 and self._events.wants(BreakerStateChanged):
            for change in reply[12:]:
                old, new, reason, duration = text(change).split("|")
                self._events.emit(BreakerStateChanged(
                    time=now, source=self.name, old_state=BreakerState(old), new_state=BreakerState(new), reason=reason,
                    break_duration=float(duration) if duration else None,
                ))
