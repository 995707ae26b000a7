"""The connection to Redis that the Redis-backed primitives share: client, key prefix, timeouts, health.

One :class:`RedisBackend` serves any number of primitives (one per scope, say). It runs their Lua scripts
(``EVALSHA``, falling back to ``EVAL`` once when the server does not know the script yet, for example after
a restart), bounds every round trip with ``operation_timeout`` so that no call hangs, and keeps one health
state for all of them: after a failure it stops sending anything until a recovery probe is due (a jittered
delay that doubles while probes keep failing), so a dead server is not hammered by every call of every
scope. Each primitive then applies its own ``on_unavailable`` choice (:class:`~._link._Link`).
"""

from __future__ import annotations

import asyncio
from asyncio import _get_running_loop  # C-accelerated, returns None instead of raising
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.crc import key_slot

from .._exceptions import ConfigurationError
from .._primitives._clock import DEFAULT_CLOCK, Clock, RandomSource, default_rng
from ._scripts import Script
from ._values import _MAX_DELAY, _MAX_TIMEOUT, check_parts, seconds

__all__ = ["BackendStatistics", "Client", "RedisBackend"]

# A setting that cannot work (a wrong password, a user without the rights to run scripts, a single-node
# client on a cluster, a key that holds something else): no waiting fixes it, so it fails loudly with
# ConfigurationError in both modes instead of failing open forever. Checked before any other error:
# redis-py's authentication errors are ConnectionErrors.
_MISCONFIGURED: tuple[type[BaseException], ...] = (
    redis.exceptions.AuthenticationError,
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.AuthorizationError,
    redis.exceptions.NoPermissionError,
    redis.exceptions.AskError,  # and MovedError: a plain client was given one node of a cluster
    redis.exceptions.ClusterCrossSlotError,
)
_MISCONFIGURED_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "WRONGTYPE", "MOVED", "ASK", "ERR unknown command")

# Anything else a client raises means "the shared state cannot be reached right now": no connection, a
# timeout (the builtin TimeoutError that asyncio.timeout raises), a server that is loading or busy,
# read-only after a failover, out of memory, a cluster that is reconfiguring or has lost the node of a
# slot, an answer in another protocol (something else listens on the port, or the connection is out of
# step), or a client's own failure (redis-py's cluster client closes connections that other tasks are
# using when it re-reads the topology: an AttributeError from inside its handshake). None escapes raw.


def _misconfigured(error: BaseException, *, cluster: bool) -> bool:
    if cluster and isinstance(error, redis.exceptions.AskError):
        return False  # a redirection a cluster client could not follow (a slot in flux): an outage
    if isinstance(error, _MISCONFIGURED):
        return True
    return isinstance(error, redis.exceptions.ResponseError) and str(error).startswith(_MISCONFIGURED_REPLIES)


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


class _Health:
    """Whether one shard (the server, or one cluster slot) answers, and when to probe it again."""

    __slots__ = ("delay", "down_since", "last_error", "probe_at", "probing")

    def __init__(self, delay: float) -> None:
        self.down_since: float | None = None
        self.probe_at = 0.0
        self.delay = delay
        self.probing = False
        self.last_error = ""


Client = redis.asyncio.Redis | redis.asyncio.RedisCluster
"""The redis-py asyncio clients a backend runs on: one server (or a Sentinel-managed primary), or a cluster."""


class RedisBackend:
    """A Redis connection shared by Redis-backed primitives, with a key prefix, timeouts and health tracking.

    Build it inside the asyncio event loop that uses it (redis-py's asyncio client binds its connections
    to that loop; it does not run on trio). TLS and authentication are redis-py's: pass a ``rediss://``
    URL with credentials (``rediss://user:password@host:6380/0``) and redis-py's ``ssl_*`` options as
    keyword arguments, or a client you configured yourself.

    Three deployments: one server (a URL, or a ``redis.asyncio.Redis``); a Redis Cluster
    (``cluster=True`` with the URL of any node, or a ``redis.asyncio.RedisCluster``), where each
    primitive's key lives on the node of its slot and redis-py follows ``MOVED``/``ASK`` and slot moves;
    and a Sentinel-managed primary (:meth:`sentinel`). On a cluster, health is kept per slot: a node
    that fails is an outage of the primitives whose keys it holds, not of the others.

    Args:
        client: a ``redis://`` / ``rediss://`` / ``unix://`` URL (the backend then owns the client and
            closes it in :meth:`aclose`), or an existing ``redis.asyncio.Redis`` or
            ``redis.asyncio.RedisCluster`` client (left open).
        prefix: prepended to every key, so that several applications can share one Redis; default
            ``"asyncretry:"``. Keys are ``{prefix}{kind}:{name}`` (``asyncretry:bucket:api``).
        cluster: with a URL, connect to a Redis Cluster through that node (default False).
        operation_timeout: the longest one round trip may take, seconds (> 0 and <= 3600, default
            0.5); a slower one counts as the server being unavailable. Applied to every call.
        connect_timeout: with a URL, redis-py's ``socket_connect_timeout``, seconds (> 0 and <= 3600,
            default 1).
        recovery_delay: after a failure, seconds before a call tries the server again (> 0 and <= 86400,
            default 1); it doubles after every failed probe, up to ``max_recovery_delay``, and is jittered
            (50-100 %).
        max_recovery_delay: the longest delay between probes, seconds (>= ``recovery_delay`` and
            <= 86400, default 30).
        name: names the backend in statistics and ``repr``; default ``"redis"``.
        clock: the time source for the recovery schedule; defaults to the running loop's clock.
        rng: random source for the jitter of the recovery delay.
        **client_options: with a URL, passed on to ``from_url`` (``ssl_ca_certs``, ``password``,
            ``max_connections``, ...). By default a URL-built client gets
            ``socket_timeout=operation_timeout`` and one immediate reconnect-and-retry (which replaces
            a pooled connection that died with a restarted server).

    Raises:
        ValueError: a duration is out of range (the message names it).
        TypeError: ``client`` is neither a URL nor a redis-py asyncio client, or options were given
            with a client.
    """

    __slots__ = (
        "_client",
        "_clock",
        "_cluster",
        "_discovered",
        "_discovery",
        "_failures",
        "_health",
        "_max_delay",
        "_operation_timeout",
        "_outages",
        "_owned",
        "_recovery_delay",
        "_rng",
        "_round_trips",
        "_sentinel",
        "_single",
        "name",
        "prefix",
    )

    def __init__(
        self,
        client: str | Client,
        *,
        prefix: str = "asyncretry:",
        cluster: bool = False,
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
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r} ({type(name).__name__})")
        if not isinstance(cluster, bool):
            raise TypeError(f"cluster must be a bool, got {cluster!r} ({type(cluster).__name__})")
        check_parts(clock, rng=rng)
        self._operation_timeout = seconds("operation_timeout", operation_timeout, high=_MAX_TIMEOUT)
        connect = seconds("connect_timeout", connect_timeout, high=_MAX_TIMEOUT)
        self._recovery_delay = seconds("recovery_delay", recovery_delay, high=_MAX_DELAY)
        self._max_delay = seconds("max_recovery_delay", max_recovery_delay, high=_MAX_DELAY)
        if self._max_delay < self._recovery_delay:
            raise ValueError(
                f"max_recovery_delay must be >= recovery_delay ({self._recovery_delay:g}), got {max_recovery_delay!r}"
            )
        if isinstance(client, str):
            options: dict[str, Any] = {
                "socket_connect_timeout": connect,
                "socket_timeout": self._operation_timeout,
                "retry": Retry(NoBackoff(), 1),
            }
            if cluster:
                # A node that is down must stop only the slots it serves, not the client's view of the others.
                options["require_full_coverage"] = False
            options.update(client_options)
            try:
                self._client: Client = (
                    redis.asyncio.RedisCluster.from_url(client, **options)
                    if cluster
                    else redis.asyncio.Redis.from_url(client, **options)
                )
            except ValueError as error:  # redis-py's words for a malformed URL do not say which argument
                raise ValueError(
                    f"client must be a redis://, rediss:// or unix:// URL, got {client!r} ({error})"
                ) from None
            self._owned = True
        elif isinstance(client, (redis.asyncio.Redis, redis.asyncio.RedisCluster)):
            if client_options:
                raise TypeError(
                    f"client options {sorted(client_options)} only apply to a URL; configure the client you pass"
                )
            self._client = client
            self._owned = False
        else:
            raise TypeError(
                "client must be a Redis URL, a redis.asyncio.Redis or a redis.asyncio.RedisCluster client, "
                f"got {client!r}"
            )
        self._cluster = isinstance(self._client, redis.asyncio.RedisCluster)
        self._discovered = not self._cluster  # a cluster's topology is read once before the first script
        self._discovery: asyncio.Future[Any] | None = None
        self._sentinel: Sentinel | None = None  # the sentinels' clients, closed with the backend's
        self.prefix = prefix
        self.name = name
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._rng = rng if rng is not None else default_rng
        self._single = _Health(self._recovery_delay)  # the one server's (unused on a cluster)
        self._health: dict[int, _Health] = {}  # a cluster's, by slot
        self._round_trips = 0
        self._failures = 0
        self._outages = 0

    @classmethod
    def sentinel(
        cls,
        sentinels: Sequence[tuple[str, int]],
        service_name: str,
        *,
        sentinel_options: dict[str, Any] | None = None,
        prefix: str = "asyncretry:",
        operation_timeout: float | timedelta = 0.5,
        connect_timeout: float | timedelta = 1.0,
        recovery_delay: float | timedelta = 1.0,
        max_recovery_delay: float | timedelta = 30.0,
        name: str = "redis",
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        **client_options: Any,
    ) -> RedisBackend:
        """A backend on the primary that Redis Sentinel names for ``service_name``, following failovers.

        Each new connection asks the sentinels for the current primary, and a connection to a primary
        that was demoted is dropped (redis-py's ``SentinelConnectionPool``), so after a failover the
        first probe reaches the new primary by itself. State written to the old primary and not yet
        replicated when it failed is lost (see ``docs/redis.md``).

        Args:
            sentinels: ``(host, port)`` of the sentinels (at least one).
            service_name: the primary's name in the sentinels' configuration.
            sentinel_options: redis-py options for the connections to the sentinels themselves
                (``password``, ``ssl``...); they get ``socket_timeout=operation_timeout`` by default.
            **client_options: options for the connections to the primary (``password``, ``ssl``...).
            The other arguments are :class:`RedisBackend`'s.

        Raises:
            ValueError: no sentinel, an empty ``service_name``, or a duration out of range.
        """
        if not isinstance(service_name, str) or not service_name:
            raise ValueError(f"service_name must be a non-empty str, got {service_name!r}")
        nodes = list(sentinels)
        if not nodes:
            raise ValueError(f"sentinels must list at least one (host, port), got {sentinels!r}")
        timeout = seconds("operation_timeout", operation_timeout, high=_MAX_TIMEOUT)
        connect = seconds("connect_timeout", connect_timeout, high=_MAX_TIMEOUT)
        own: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": connect}
        own.update(sentinel_options or {})
        options: dict[str, Any] = {
            "socket_timeout": timeout, "socket_connect_timeout": connect, "retry": Retry(NoBackoff(), 1),
        }
        options.update(client_options)
        watch = Sentinel(nodes, sentinel_kwargs=own)  # type: ignore[no-untyped-call]
        client = watch.master_for(service_name, **options)
        backend = cls(
            client, prefix=prefix, operation_timeout=timeout, connect_timeout=connect, recovery_delay=recovery_delay,
            max_recovery_delay=max_recovery_delay, name=name, clock=clock, rng=rng,
        )
        backend._owned = True
        backend._sentinel = watch
        return backend

    @property
    def client(self) -> Client:
        """The redis-py client the scripts run on."""
        return self._client

    @property
    def cluster(self) -> bool:
        """Whether the backend runs on a Redis Cluster."""
        return self._cluster

    @property
    def operation_timeout(self) -> float:
        """The longest one round trip may take, seconds."""
        return self._operation_timeout

    @property
    def up(self) -> bool:
        """Whether the last round trip of every shard succeeded (on a cluster: no slot in use is down)."""
        return all(health.down_since is None for health in self._shards())

    def key(self, kind: str, name: str) -> str:
        """The Redis key of a primitive: ``{prefix}{kind}:{name}``."""
        return f"{self.prefix}{kind}:{name}"

    async def run(self, script: Script, key: str, args: Sequence[str | int | float]) -> list[Any]:
        """Run one script on one key in one round trip (two if the server must be taught the script).

        Raises:
            RuntimeError: not running on asyncio (redis-py's asyncio client needs it).
            ConfigurationError: the server refused the backend's settings (a wrong password, no right
                to run scripts, a single-node client on a cluster): no retry can fix it.
            _Unavailable: the server could not be reached, timed out, or is down and no probe is due.
        """
        if _get_running_loop() is None:
            raise RuntimeError(
                "asyncretry.redis runs on asyncio only: redis-py's asyncio client does not run on trio "
                "(use the in-process primitives there)"
            )
        health = self._health_of(key)
        down_since = health.down_since
        if down_since is not None:
            if health.probing or self._clock.now() < health.probe_at:
                raise _Unavailable(health.last_error, sent=False)
            health.probing = True  # this call is the probe; the others keep to the fallback meanwhile
        try:
            # asyncio.timeout, not anyio.fail_after: this code runs on asyncio only, and it is the cheaper of the two.
            async with asyncio.timeout(self._operation_timeout):
                # redis-py's cluster client marks itself for a new reading after a connection error.
                if not self._discovered or (self._cluster and getattr(self._client, "_initialize", False)):
                    await self._discover()
                reply = await self._eval(script, key, args)
        except Exception as error:
            if _misconfigured(error, cluster=self._cluster):
                raise ConfigurationError(
                    f"Redis backend {self.name!r} refused the operation on {key!r}: {_describe(error)}; "
                    "check the URL, credentials and ACL (EVALSHA/EVAL need +@scripting), and pass a cluster "
                    "URL with cluster=True (or a redis.asyncio.RedisCluster) for a Redis Cluster"
                ) from error
            self._failures += 1
            self._mark_down(health, error, probe=down_since is not None)
            raise _Unavailable(health.last_error, sent=True) from error
        finally:
            if down_since is not None:
                health.probing = False
        self._round_trips += 1
        health.down_since = None
        return reply

    async def _eval(self, script: Script, key: str, args: Sequence[str | int | float]) -> list[Any]:
        client: Any = self._client  # redis-py's command methods are typed for its sync and async clients at once
        try:
            reply = await client.evalsha(script.sha, 1, key, *args)
        except redis.exceptions.NoScriptError:
            # A new or restarted server (or another cluster node): EVAL runs the script and caches it.
            self._round_trips += 1
            reply = await client.eval(script.source, 1, key, *args)
        if not isinstance(reply, list):
            raise redis.exceptions.InvalidResponse(f"a script answered {reply!r}, not a list")
        return reply

    async def _discover(self) -> None:
        """Read a cluster's topology (before the first script, and when the client asks for a new reading)
        in a task of the backend's own that no timeout cancels.

        redis-py's cluster client reads the topology on its first command; concurrent first commands go to
        the wrong nodes meanwhile (a burst of ``MOVED``, after which it closes every connection, those in
        use included), and a timeout that cancels the reading makes it close them all as well. One shared
        task that runs to its end, awaited through a shield, avoids both.
        """
        if not self._cluster:
            self._discovered = True
            return
        task = self._discovery
        if task is None or task.done():
            task = self._discovery = asyncio.ensure_future(self._client.initialize())
            task.add_done_callback(_retrieve)
        await asyncio.shield(task)
        self._discovered = True

    def _health_of(self, key: str) -> _Health:
        if not self._cluster:
            return self._single
        slot = key_slot(key.encode())
        health = self._health.get(slot)
        if health is None:
            health = self._health[slot] = _Health(self._recovery_delay)
        return health

    def _shards(self) -> list[_Health]:
        return list(self._health.values()) if self._cluster else [self._single]

    def _mark_down(self, health: _Health, error: BaseException, *, probe: bool) -> None:
        now = self._clock.now()
        health.last_error = _describe(error)
        if health.down_since is None:
            health.down_since = now
            self._outages += 1
            health.delay = self._recovery_delay
        elif probe:
            health.delay = min(health.delay * 2.0, self._max_delay)
        # Calls that were already in flight when the server died fail too, but only a failed probe
        # lengthens the delay.
        health.probe_at = now + health.delay * (0.5 + 0.5 * self._rng())

    def next_probe_in(self, key: str) -> float:
        """Seconds until a call on ``key`` may try the server again (0 while its shard is up)."""
        health = self._health_of(key)
        if health.down_since is None:
            return 0.0
        return max(0.0, health.probe_at - self._clock.now())

    def statistics(self) -> BackendStatistics:
        """Return a snapshot of the backend's health and counters (on a cluster, over the slots in use)."""
        now = self._clock.now()
        down = [health for health in self._shards() if health.down_since is not None]
        return BackendStatistics(
            name=self.name,
            up=not down,
            round_trips=self._round_trips,
            failures=self._failures,
            outages=self._outages,
            down_for=max((now - h.down_since for h in down if h.down_since is not None), default=0.0),
            next_probe_in=min((max(0.0, h.probe_at - now) for h in down), default=0.0),
        )

    async def aclose(self) -> None:
        """Close the client if the backend made it (from a URL, or :meth:`sentinel`); a client given is left open."""
        task, self._discovery = self._discovery, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if not self._owned:
            return
        client = self._client
        await client.aclose()
        if self._sentinel is not None:
            await asyncio.gather(*(sentinel.aclose() for sentinel in self._sentinel.sentinels))
        if isinstance(client, redis.asyncio.RedisCluster):
            # aclose() leaves the connections of the startup nodes, which a topology refresh after a
            # node failure keeps apart from the nodes in use, open (redis/redis-py#3572).
            manager = client.nodes_manager
            nodes = {id(node): node for node in (*manager.startup_nodes.values(), *manager.nodes_cache.values())}
            await asyncio.gather(*(node.disconnect() for node in nodes.values()), return_exceptions=True)

    async def __aenter__(self) -> RedisBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        down = [health for health in self._shards() if health.down_since is not None]
        state = "up" if not down else f"down ({down[0].last_error})"
        kind = " cluster" if self._cluster else ""
        return (
            f"<RedisBackend {self.name!r}{kind} prefix={self.prefix!r} {state} round_trips={self._round_trips} "
            f"operation_timeout={self._operation_timeout:g}s>"
        )


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a background task's failure as seen: the calls that awaited it report it as an outage."""
    if not task.cancelled():
        task.exception()


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def as_backend(redis_: RedisBackend | Client | str) -> RedisBackend:
    """The backend given, or a new one with default options for a URL or a client."""
    if isinstance(redis_, RedisBackend):
        return redis_
    if isinstance(redis_, (str, redis.asyncio.Redis, redis.asyncio.RedisCluster)):
        return RedisBackend(redis_)
    raise TypeError(
        f"redis must be a RedisBackend, a redis.asyncio.Redis or RedisCluster client or a URL, got {redis_!r}"
    )


