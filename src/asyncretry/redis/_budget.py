"""RedisRetryBudget: the retry budget's sliding window kept on Redis, so that a fleet shares one budget.

Built by composition: it implements :class:`~asyncretry.protocols.RemoteBudget` and keeps a
local :class:`~asyncretry.RetryBudget` with the same config, which counts this process's own requests and
retries all along and answers while Redis cannot be reached (``on_unavailable="fail_open"``).

One Lua script (below) on one key (``{prefix}budget:{name}``, a hash) does everything atomically on the
server's clock: it slides the window, adds the requests and refunds the process reports, and allows or
refuses one retry. The hash holds the slices' counts and the slice numbering's origin (the key's
creation); it expires a window (plus a second) after its last use, when it holds nothing that counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis.asyncio

from .._events import (
    GLOBAL_EVENTS,
    BackendLost,
    BackendRecovered,
    BudgetExhausted,
    BudgetRestored,
    EventBus,
)
from .._exceptions import BackendUnavailable
from .._primitives._budget import (
    EPSILON,
    BudgetStatistics,
    BudgetTicket,
    RetryBudget,
    RetryBudgetConfig,
    ticket_to_refund,
)
from .._primitives._clock import DEFAULT_CLOCK, Clock
from .._validate import check_choice, check_seconds
from ._backend import RedisBackend, _Unavailable, as_backend
from ._link import OnUnavailable
from ._scripts import Script

__all__ = ["BUDGET", "RedisBudgetStatistics", "RedisRetryBudget"]

BUDGET = Script("budget", """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
-- The retry budget's window (asyncretry.RetryBudget's rule, over every process's counts).
-- ARGV: op (0: report only, 1: ask for one retry), requests to add, ratio, floor (retries the window
--       allows without requests), slice width (s), slices, refunds (m), then m pairs (slice, count)
local op, add = tonumber(ARGV[1]), tonumber(ARGV[2])
local ratio, floor, width, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local m = tonumber(ARGV[7])
local fields = {'origin', 'head', 'rq', 'rt'}
for i = 0, n - 1 do table.insert(fields, 'q' .. i); table.insert(fields, 'r' .. i) end
local raw = redis.call('HMGET', KEYS[1], unpack(fields))
local origin, head, rq, rt = tonumber(raw[1]), tonumber(raw[2]), tonumber(raw[3]), tonumber(raw[4])
local q, r = {}, {}
for i = 0, n - 1 do q[i] = tonumber(raw[5 + 2 * i]) or 0; r[i] = tonumber(raw[6 + 2 * i]) or 0 end
if origin == nil or head == nil or rq == nil or rt == nil then
  origin = now; head = 0; rq = 0; rt = 0
  for i = 0, n - 1 do q[i] = 0; r[i] = 0 end
end
local index = math.floor((now - origin) / width)
if origin + (index + 1) * width <= now then index = index + 1 end
if index > head then
  if index - head >= n then
    for i = 0, n - 1 do q[i] = 0; r[i] = 0 end
    rq = 0; rt = 0
  else
    for j = head + 1, index do
      local s = j % n
      rq = rq - q[s]; rt = rt - r[s]; q[s] = 0; r[s] = 0
    end
  end
  head = index
end
for k = 0, m - 1 do
  local s, c = tonumber(ARGV[8 + 2 * k]), tonumber(ARGV[9 + 2 * k])
  if s > head - n and s <= head then
    local d = math.min(c, r[s % n])
    r[s % n] = r[s % n] - d; rt = rt - d
  end
end
local cur = head % n
q[cur] = q[cur] + add; rq = rq + add
local ok = 0
if op == 1 and rt + 1 <= ratio * rq + floor + 1e-9 then
  r[cur] = r[cur] + 1; rt = rt + 1; ok = 1
end
local out = {'origin', string.format('%.17g', origin), 'head', head, 'rq', rq, 'rt', rt}
for i = 0, n - 1 do
  table.insert(out, 'q' .. i); table.insert(out, q[i]); table.insert(out, 'r' .. i); table.insert(out, r[i])
end
redis.call('HSET', KEYS[1], unpack(out))
redis.call('PEXPIRE', KEYS[1], math.ceil(width * n * 1000) + 1000)
return {ok, rq, rt, head}
""")

_REPORT, _SPEND = 0, 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisBudgetStatistics(BudgetStatistics):
    """A snapshot of a :class:`RedisRetryBudget`.

    ``requests``, ``retries``, ``allowance`` and ``available`` are the fleet's window as of the last
    round trip (this process's requests not yet sent included); the local fallback's while degraded.
    ``requests_total``, ``retries_total`` and ``refused`` count this process's calls.

    Attributes:
        degraded: whether the last round trip could not reach Redis.
        pending: requests counted here and not yet sent to Redis.
        round_trips: scripts this budget ran on Redis.
        fallbacks: operations that could not reach Redis (answered locally, deferred or refused).
    """

    degraded: bool
    pending: int
    round_trips: int
    fallbacks: int


class RedisRetryBudget:
    """A retry budget shared through Redis: the fleet's retries stay within a share of the fleet's requests.

    Every process that builds one with the same backend prefix and ``name`` (all with the same config)
    counts into one window on the server, so the rule of :class:`~asyncretry.RetryBudget` holds for
    the fleet as a whole: retries in the window <= ``ratio * requests + min_retries_per_second * window``,
    with the floor shared too (not one floor per process). Events
    (:class:`~asyncretry.BudgetExhausted` / :class:`~asyncretry.BudgetRestored`) describe what this
    process saw.

    :meth:`spend` is one round trip; it returns a ticket that :meth:`refund` takes back.
    :meth:`record_request` sends the requests counted since the last round trip when that was
    ``sync_interval`` seconds ago or more, and otherwise leaves them for the next round trip: requests
    reach the window late, never early, so the bound holds all the same (it can only be stricter).
    Requests and refunds of a round trip that fails after it may have reached the server (a timeout)
    are dropped rather than sent twice; so are those of a round trip cancelled mid-way.

    Args:
        redis: a :class:`RedisBackend`, a ``redis.asyncio.Redis`` client, or a URL.
        config: ratio, window, floor and slices; defaults to ``RetryBudgetConfig()``.
        name: names the shared budget (its Redis key), its statistics and events.
        on_unavailable: while Redis cannot be reached, ``"fail_open"`` (the default) answers from the
            local budget, which has counted this process's requests and retries all along;
            ``"fail_closed"`` makes :meth:`spend` raise :class:`~asyncretry.BackendUnavailable`.
            :meth:`record_request` and :meth:`refund` never fail: they report, they do not ask.
        sync_interval: the longest requests wait here before being sent on their own, seconds
            (from 0, every request sent at once, to the slice width ``window / slices``) or a
            ``timedelta``. Default: a tenth of the slice width (0.1 s with the default config).
        clock: the time source of the local budget and of ``sync_interval``; defaults to the running
            loop's clock. The shared window runs on the Redis server's clock.
        events: where the budget's and the backend's events go; defaults to the global bus.

    Raises:
        ValueError: ``on_unavailable``, ``name`` or ``sync_interval`` is out of range.
        TypeError: ``config`` or ``redis`` has the wrong type.
    """

    __slots__ = (
        "_backend",
        "_clock",
        "_config",
        "_degraded_since",
        "_events",
        "_exhausted",
        "_fail_closed",
        "_fallbacks",
        "_head",
        "_key",
        "_last_spent",
        "_last_sync",
        "_local",
        "_pending",
        "_refunds",
        "_refused",
        "_requests",
        "_requests_total",
        "_retries",
        "_retries_total",
        "_round_trips",
        "_sync_interval",
        "name",
    )

    def __init__(
        self,
        redis: RedisBackend | redis.asyncio.Redis | str,
        config: RetryBudgetConfig | None = None,
        *,
        name: str = "budget",
        on_unavailable: OnUnavailable = "fail_open",
        sync_interval: float | timedelta | None = None,
        clock: Clock | None = None,
        events: EventBus | None = None,
    ) -> None:
        check_choice("on_unavailable", on_unavailable, ("fail_open", "fail_closed"))
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str (it names the Redis key), got {name!r}")
        self._local = RetryBudget(config, clock=clock, name=name, events=events)
        self._config = config = self._local.config
        width = config.slice_seconds
        if sync_interval is None:
            self._sync_interval = width / 10
        else:
            if isinstance(sync_interval, int) and not isinstance(sync_interval, bool) and sync_interval > width:
                raise ValueError(
                    f"sync_interval must be >= 0 and <= {width:g} (the slice width), got {sync_interval!r}"
                )
            self._sync_interval = check_seconds("sync_interval", sync_interval, high=width)
        self._backend = as_backend(redis)
        self._key = self._backend.key("budget", name)
        self.name = name
        self._clock = clock if clock is not None else DEFAULT_CLOCK
        self._events = events if events is not None else GLOBAL_EVENTS
        self._fail_closed = on_unavailable == "fail_closed"
        self._pending = 0
        self._refunds: dict[int, int] = {}
        self._last_spent: BudgetTicket | None = None  # the latest retry allowed, for refund() without a ticket
        self._last_sync = -math.inf
        self._requests = self._retries = self._head = 0
        self._requests_total = self._retries_total = self._refused = 0
        self._round_trips = self._fallbacks = 0
        self._degraded_since: float | None = None
        self._exhausted = False

    @property
    def config(self) -> RetryBudgetConfig:
        """The budget's settings (every process sharing the key must use the same)."""
        return self._config

    @property
    def backend(self) -> RedisBackend:
        """The backend the window lives on."""
        return self._backend

    @property
    def key(self) -> str:
        """The Redis key of the window."""
        return self._key

    @property
    def degraded(self) -> bool:
        """Whether the last round trip could not reach Redis."""
        return self._degraded_since is not None

    async def record_request(self) -> None:
        """Count one request; sent now if the last round trip is ``sync_interval`` old, else with the next one."""
        self._requests_total += 1
        self._pending += 1
        self._local.record_request()
        if self._clock.now() - self._last_sync >= self._sync_interval:
            await self._round_trip(_REPORT)

    async def spend(self) -> BudgetTicket | None:
        """Allow one retry if the fleet's window has room for it, and count it (one round trip).

        Returns:
            The retry's ticket (for :meth:`refund`) if it may go ahead; ``None`` if the fleet's retries
            already use the allowance.

        Raises:
            BackendUnavailable: Redis cannot be reached and the budget fails closed.
        """
        reply = await self._round_trip(_SPEND)
        if reply is None:
            if self._fail_closed:
                raise BackendUnavailable(
                    f"Redis is unavailable for budget {self.name!r}; failing closed (on_unavailable='fail_closed'); "
                    f"the backend tries again in {self._backend.statistics().next_probe_in:.3g} s"
                )
            ticket = self._local.spend()
            if ticket is not None:
                self._retries_total += 1
            else:
                self._refused += 1
            self._last_spent = ticket
            return ticket
        if reply:
            local = self._local.record_retry()
            self._retries_total += 1
            self._last_spent = ticket = BudgetTicket(local.slice, self._head)
            if self._exhausted:
                self._restore()
            return ticket
        self._refused += 1
        if not self._exhausted:
            self._exhaust()
        return None

    async def try_spend(self) -> bool:
        """:meth:`spend` for a caller that will not refund: True if the retry may go ahead (it is counted)."""
        return await self.spend() is not None

    def refund(self, ticket: BudgetTicket | None = None) -> None:
        """Take back the retry of ``ticket`` (it will not be made); sent with the next round trip.

        Each ticket is refunded once; a retry whose slice has left the window no longer counts anyway.

        Args:
            ticket: what :meth:`spend` returned. Omitting it (deprecated) takes back the latest retry
                allowed, which is wrong as soon as two calls share the budget.
        """
        ticket, self._last_spent = ticket_to_refund(self, ticket, self._last_spent)
        if ticket is None:
            return
        self._local.refund(ticket)  # marks it refunded
        self._retries_total -= 1
        shared = ticket.shared_slice
        if shared is not None:
            self._refunds[shared] = self._refunds.get(shared, 0) + 1

    async def flush(self) -> RedisBudgetStatistics:
        """Send the requests and refunds counted here now, and return the statistics it brings back."""
        await self._round_trip(_REPORT)
        return self.statistics()

    def statistics(self) -> RedisBudgetStatistics:
        """Return the fleet's window as last seen (no round trip) and this process's counters."""
        if self._degraded_since is not None:
            local = self._local.statistics()
            requests, retries, exhausted = local.requests, local.retries, local.exhausted
        else:
            requests, retries, exhausted = self._requests + self._pending, self._retries, self._exhausted
        allowance = self._config.allowance(requests)
        return RedisBudgetStatistics(
            name=self.name,
            requests=requests,
            retries=retries,
            allowance=allowance,
            available=max(0.0, allowance - retries),
            requests_total=self._requests_total,
            retries_total=self._retries_total,
            refused=self._refused,
            exhausted=exhausted,
            degraded=self._degraded_since is not None,
            pending=self._pending,
            round_trips=self._round_trips,
            fallbacks=self._fallbacks,
        )

    def __repr__(self) -> str:
        stats = self.statistics()
        state = "degraded" if stats.degraded else "shared"
        return (
            f"<RedisRetryBudget {self.name!r} key={self._key!r} retries={stats.retries}/{stats.allowance:g} "
            f"requests={stats.requests} {state}{' exhausted' if stats.exhausted else ''} "
            f"on_unavailable={'fail_closed' if self._fail_closed else 'fail_open'!r}>"
        )

    # -- internals

    async def _round_trip(self, op: int) -> bool | None:
        """Run the script once; the answer to ``op`` (True: a retry allowed), or None: Redis is unavailable."""
        config = self._config
        pending, self._pending = self._pending, 0
        refunds, self._refunds = self._refunds, {}
        args: list[str | int | float] = [
            op, pending, repr(config.ratio), repr(config.floor), repr(config.slice_seconds), config.slices,
            len(refunds),
        ]
        for spent, count in refunds.items():
            args += [spent, count]
        try:
            reply: list[Any] = await self._backend.run(BUDGET, self._key, args)
        except _Unavailable as down:
            self._fallbacks += 1
            if not down.sent:  # nothing left the process: keep the reports for the next round trip
                self._pending += pending
                for spent, count in refunds.items():
                    self._refunds[spent] = self._refunds.get(spent, 0) + count
            self._degrade(down.error)
            return None
        self._round_trips += 1
        self._last_sync = self._clock.now()
        self._requests, self._retries, self._head = int(reply[1]), int(reply[2]), int(reply[3])
        if self._degraded_since is not None:
            self._recover()
        if self._exhausted and self._retries + 1 <= config.allowance(self._requests) + EPSILON:
            self._restore()
        return bool(int(reply[0]))

    def _degrade(self, error: str) -> None:
        if self._degraded_since is not None:
            return
        now = self._clock.now()
        self._degraded_since = now
        if self._events.wants(BackendLost):
            fallback = (
                "none: retries fail with BackendUnavailable" if self._fail_closed else "a local in-process retry budget"
            )
            self._events.emit(BackendLost(time=now, source=self.name, error=error, fallback=fallback))

    def _recover(self) -> None:
        since, self._degraded_since = self._degraded_since, None
        if since is not None and self._events.wants(BackendRecovered):
            now = self._clock.now()
            self._events.emit(BackendRecovered(time=now, source=self.name, down_for=now - since))

    def _exhaust(self) -> None:
        self._exhausted = True
        if self._events.wants(BudgetExhausted):
            self._events.emit(BudgetExhausted(
                time=self._clock.now(), source=self.name, requests=self._requests, retries=self._retries,
                allowance=self._config.allowance(self._requests),
            ))

    def _restore(self) -> None:
        self._exhausted = False
        if self._events.wants(BudgetRestored):
            self._events.emit(BudgetRestored(
                time=self._clock.now(), source=self.name,
                available=max(0.0, self._config.allowance(self._requests) - self._retries),
            ))
