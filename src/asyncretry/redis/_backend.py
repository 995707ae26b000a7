"""The connection to Redis that the Redis-backed primitives share: client, key prefix, timeouts, health.

One :class:`RedisBackend` serves any number of primitives (one per scope, say). It runs their Lua scripts
(``EVALSHA``, falling back to ``EVAL`` once when the server does not know the script yet, for example after
a restart), bounds every round trip with ``operation_timeout`` so that no call hangs, and keeps one health
state for all of them: after a failure it stops sending anything until a recovery probe is due (a jittered
delay that doubles while probes keep failing), so a dead server is not hammered by every call of every
scope. Each primitive then applies its own ``on_unavailable`` choice (:class:`_Link`).
"""

from __future__ import annotations

import asyncio
import math
from asyncio import _get_running_loop  # C-accelerated, returns None instead of raising
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .._events import GLOBAL_EVENTS, BackendRecovered, BackendUnavailableEvent, EventBus
from .._exceptions import BackendUnavailable
from .._primitives._clock import DEFAULT_CLOCK, Clock, RandomSource, default_rng
from .._validate import check_choice, check_seconds
from ._scripts import Script

__all__ = ["BackendStatistics", "OnUnavailable", "RedisBackend"]

OnUnavailable = Literal["fail_open", "fail_closed"]
"""What a Redis-backed primitive does while Redis cannot be reached (see :class:`RedisBackend`)."""

_CHOICES = ("fail_open", "fail_closed")

# Errors that mean "the shared state cannot be reached right now" (as opposed to a bug or a bad setting,
# which propagate): no connection, a timeout, a server that is loading, read-only after a failover, out
# of memory, or a cluster that is reconfiguring.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # includes the builtin TimeoutError that asyncio.timeout raises
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)


class _Unavailable(Exception):
    """Internal: the backend is down (the round trip failed, or no probe is due yet).

    ``sent`` is False when nothing left the process (the backend was known to be down); True when a round
    trip was attempted, which the server may have run even though no answer came (a timeout).
    """

    def __init__(self, error: str, *, sent: bool) -> None:
        super().__init__(error)
        self.error = error
        self.sent = sent


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendStatistics:
    """A snapshot of a :class:`RedisBackend`.

    Attributes:
        name: the backend's name.
        up: whether the last round trip succeeded (True before the first one).
        round_trips: scripts that got an answer (``EVAL`` after ``NOSCRIPT`` counts as one more).
        failures: round trips that failed because the server could not be reached or timed out.
        outages: times the backend went from up to down.
        down_for: seconds since the current outage began (0 while up).
        next_probe_in: seconds until a call may try the server again (0 while up or when due).
    """

    name: str
    up: bool
    round_trips: int
    failures: int
    outages: int
    down_for: float
    next_probe_in: float


class RedisBackend:
    """A Redis connection shared by Redis-backed primitives, with a key prefix, timeouts and health tracking.

    Build it inside the asyncio event loop that uses it (redis-py's asyncio client binds its connections
    to that loop; it does not run on trio). TLS and authentication are redis-py's: pass a ``rediss://``
    URL with credentials (``rediss://user:password@host:6380/0``) and redis-py's ``ssl_*`` options as
    keyword arguments, or a client you configured yourself.

    Args:
        client: a ``redis://`` / ``rediss://`` / ``unix://`` URL (the backend then owns the client and
            closes it in :meth:`aclose`), or an existing ``redis.asyncio.Redis`` client (left open).
        prefix: prepended to every key, so that several applications can share one Redis; default
            ``"asyncretry:"``. Keys are ``{prefix}{kind}:{name}`` (``asyncretry:bucket:api``).
        operation_timeout: the longest one round trip may take, seconds (> 0, default 0.5); a slower
            one counts as the server being unavailable. Applied to every call, whatever the client.
        connect_timeout: with a URL, redis-py's ``socket_connect_timeout``, seconds (> 0, default 1).
        recovery_delay: after a failure, seconds before a call tries the server again (> 0, default 1);
            it doubles after every failed probe, up to ``max_recovery_delay``, and is jittered (50-100 %).
        max_recovery_delay: the longest delay between probes, seconds (>= ``recovery_delay``, default 30).
        name: names the backend in statistics and ``repr``; default ``"redis"``.
        clock: the time source for the recovery schedule; defaults to the running loop's clock.
        rng: random source for the jitter of the recovery delay.
        **client_options: with a URL, passed on to ``redis.asyncio.Redis.from_url`` (``ssl_ca_certs``,
            ``password``, ``max_connections``, ...). By default a URL-built client gets
            ``socket_timeout=operation_timeout`` and one immediate reconnect-and-retry (which replaces
            a pooled connection that died with a restarted server).

    Raises:
        ValueError: a duration is out of range (the message names it).
        TypeError: ``client`` is neither a URL nor a ``redis.asyncio.Redis``, or options were given
            with a client.
    """

    __slots__ = (
        "_client",
        "_clock",
        "_delay",
        "_down_since",
        "_failures",
        "_last_error",
        "_max_delay",
        "_operation_timeout",
        "_outages",
        "_owned",
        "_probe_at",
        "_probing",
        "_recovery_delay",
        "_rng",
        "_round_trips",
        "name",
        "prefix",
    )

    def __init__(
        self,
        client: str | redis.asyncio.Redis,
        *,
        prefix: str = "asyncretry:",
        operation_timeout: float | timedelta = 0.5,
        connect_timeout: float | timedelta = 1.0,
        recovery_delay: float | timedelta = 1.0,
        max_recovery_delay: float | timedelta = 30.0,
        name: str = "redis",
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        **client_options: Any,
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {prefix!r} ({type(prefix).__name__})")
        self._operation_timeout = check_seconds("operation_timeout", operation_timeout, low_open=True)
        connect = check_seconds("connect_timeout", connect_timeout, low_open=True)
        self._recovery_delay = check_seconds("recovery_delay", recovery_delay, low_open=True)
        self._max_delay = check_seconds("max_recovery_delay", max_recovery_delay, low=self._recovery_delay)
        if isinstance(client, str):
            options: dict[str, Any] = {
                "socket_connect_timeout": connect,
                "socket_timeout": self._operation_timeout,
                "retry": Retry(NoBackoff(), 1),
            }
            options.update(client_options)
            self._client: redis.asyncio.Redis = redis.asyncio.Redis.from_url(client, **options)
            self._owned = True
        elif isinstance(client, redis.asyncio.Redis):
            if client_options:
                raise TypeError(
                    f"client options {sorted(client_options)} only apply to a URL; configure the client you pass"
                )
            self._client = client
            self._owned = False
        else:
            raise TypeError(f"client must be a Redis URL or a redis.asyncio.Redis client, got {client!r}")
        self.prefix = prefix
        self.name = name
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._rng = rng if rng is not None else default_rng
        self._down_since: float | None = None
        self._probe_at = 0.0
        self._delay = self._recovery_delay
        self._probing = False
        self._last_error = ""
        self._round_trips = 0
        self._failures = 0
        self._outages = 0

    @property
    def client(self) -> redis.asyncio.Redis:
        """The redis-py client the scripts run on."""
        return self._client

    @property
    def operation_timeout(self) -> float:
        """The longest one round trip may take, seconds."""
        return self._operation_timeout

    @property
    def up(self) -> bool:
        """Whether the last round trip succeeded."""
        return self._down_since is None

    def key(self, kind: str, name: str) -> str:
        """The Redis key of a primitive: ``{prefix}{kind}:{name}``."""
        return f"{self.prefix}{kind}:{name}"

    async def run(self, script: Script, key: str, args: Sequence[str | int | float]) -> list[Any]:
        """Run one script on one key in one round trip (two if the server must be taught the script).

        Raises:
            RuntimeError: not running on asyncio (redis-py's asyncio client needs it).
            _Unavailable: the server could not be reached, timed out, or is down and no probe is due.
        """
        if _get_running_loop() is None:
            raise RuntimeError(
                "asyncretry.redis runs on asyncio only: redis-py's asyncio client does not run on trio "
                "(use the in-process primitives there)"
            )
        down_since = self._down_since
        if down_since is not None:
            if self._probing or self._clock.now() < self._probe_at:
                raise _Unavailable(self._last_error, sent=False)
            self._probing = True  # this call is the probe; the others keep to the fallback meanwhile
        try:
            # asyncio.timeout, not anyio.fail_after: this code runs on asyncio only, and it is ~4x cheaper.
            async with asyncio.timeout(self._operation_timeout):
                reply = await self._eval(script, key, args)
        except _UNAVAILABLE as error:
            self._failures += 1
            self._mark_down(error, probe=down_since is not None)
            raise _Unavailable(self._last_error, sent=True) from error
        finally:
            if down_since is not None:
                self._probing = False
        self._round_trips += 1
        self._down_since = None
        return reply

    async def _eval(self, script: Script, key: str, args: Sequence[str | int | float]) -> list[Any]:
        client: Any = self._client  # redis-py's command methods are typed for its sync and async clients at once
        try:
            reply = await client.evalsha(script.sha, 1, key, *args)
        except redis.exceptions.NoScriptError:
            # A new or restarted server: EVAL runs the script and caches it for the next EVALSHA.
            self._round_trips += 1
            reply = await client.eval(script.source, 1, key, *args)
        return list(reply)

    def _mark_down(self, error: BaseException, *, probe: bool) -> None:
        now = self._clock.now()
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self._last_error = text
        if self._down_since is None:
            self._down_since = now
            self._outages += 1
            self._delay = self._recovery_delay
        elif probe:
            self._delay = min(self._delay * 2.0, self._max_delay)
        # Calls that were already in flight when the server died fail too, but only a failed probe
        # lengthens the delay.
        self._probe_at = now + self._delay * (0.5 + 0.5 * self._rng())

    def statistics(self) -> BackendStatistics:
        """Return a snapshot of the backend's health and counters."""
        now = self._clock.now()
        down_since = self._down_since
        return BackendStatistics(
            name=self.name,
            up=down_since is None,
            round_trips=self._round_trips,
            failures=self._failures,
            outages=self._outages,
            down_for=0.0 if down_since is None else now - down_since,
            next_probe_in=0.0 if down_since is None else max(0.0, self._probe_at - now),
        )

    async def aclose(self) -> None:
        """Close the client if the backend made it from a URL (a client passed in is left open)."""
        if self._owned:
            await self._client.aclose()

    async def __aenter__(self) -> RedisBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "up" if self._down_since is None else f"down ({self._last_error})"
        return (
            f"<RedisBackend {self.name!r} prefix={self.prefix!r} {state} round_trips={self._round_trips} "
            f"operation_timeout={self._operation_timeout:g}s>"
        )


def as_backend(redis_: RedisBackend | redis.asyncio.Redis | str) -> RedisBackend:
    """The backend given, or a new one with default options for a URL or a client."""
    if isinstance(redis_, RedisBackend):
        return redis_
    if isinstance(redis_, (str, redis.asyncio.Redis)):
        return RedisBackend(redis_)
    raise TypeError(f"redis must be a RedisBackend, a redis.asyncio.Redis client or a URL, got {redis_!r}")


class _Link:
    """One primitive's use of a backend: its key, its ``on_unavailable`` choice, its events and counters.

    ``run`` answers ``None`` when the primitive must use its local fallback (fail open), raises
    :class:`~asyncretry.BackendUnavailable` when it must fail closed, and emits
    :class:`~asyncretry.BackendUnavailableEvent` / :class:`~asyncretry.BackendRecovered` once per episode.

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
        "key",
        "kind",
        "maybe_sent",
        "name",
        "round_trips",
    )

    def __init__(
        self,
        redis_: RedisBackend | redis.asyncio.Redis | str,
        *,
        kind: str,
        name: str,
        on_unavailable: str,
        events: EventBus | None,
        clock: Clock,
        fallback: str,
    ) -> None:
        check_choice("on_unavailable", on_unavailable, _CHOICES)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str (it names the Redis key), got {name!r}")
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
                    + f"; the backend tries again in {self.backend.statistics().next_probe_in:.3g} s"
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
        if self.events.wants(BackendUnavailableEvent):
            fallback = "none: calls fail with BackendUnavailable" if closed else self.fallback
            self.events.emit(BackendUnavailableEvent(time=now, source=self.name, error=error, fallback=fallback))

    @property
    def degraded(self) -> bool:
        return self.degraded_since is not None


def fmt(value: float | None) -> str:
    """A float for a script argument (``repr`` round-trips exactly); ``None`` and infinity become ``-1``."""
    return "-1" if value is None or math.isinf(value) else repr(float(value))


def num(value: Any) -> float:
    """A number from a script's reply (bytes or str, depending on the client's ``decode_responses``)."""
    return float(value)


def text(value: Any) -> str:
    """A string from a script's reply."""
    return value.decode() if isinstance(value, bytes) else str(value)


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
