"""The circuit breaker's rules exist twice, in Python (``CircuitBreaker``) and in Lua (the Redis script):
one table of event sequences runs through both, and every step must leave them in the same state.

Each case is a config and a list of steps at given times (seconds). The Lua script is run directly on the
suite's server with its clock argument, so both sides see exactly the same times. A step is one of:

- ``ok`` / ``fail``: ask to make an attempt, then report a success / a failure if it was admitted;
- ``take``: ask to make an attempt and keep its admission (numbered from 0 in the order taken);
- ``win k`` / ``lose k`` / ``drop k``: report a success / a failure / a cancellation for admission ``k``;
- ``isolate``, ``reset``, ``peek`` (read the state).

After each step both sides are compared: what the admission answered (a call, a probe, refused), the
state, the window's counts, the consecutive failures, the break, the probes in flight, the counters,
``retry_after`` and the transitions announced.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from asyncretry import (
    BreakerStateChanged,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    Event,
    EventBus,
)
from asyncretry.redis._breaker import script_settings
from asyncretry.redis._scripts import BREAKER
from asyncretry.testing import VirtualClock
from conftest_redis import RedisServer

pytestmark = [pytest.mark.redis]

C = CircuitBreakerConfig
T0 = 1000.0  # both clocks start here (the window's buckets are counted from time 0 on both sides)

# name: (config, [(time after T0, step), ...])
CASES: dict[str, tuple[CircuitBreakerConfig, list[tuple[float, str]]]] = {
    "consecutive failures trip it; a success in between starts the count again": (
        C(failure_ratio=None, consecutive_failures=3, break_duration=5),
        [(0, "fail"), (0.1, "fail"), (0.2, "ok"), (0.3, "fail"), (0.4, "fail"), (0.5, "fail"), (0.6, "fail"),
         (1.0, "ok"), (2.0, "peek")],
    ),
    "the failure ratio trips it once the window holds the minimum throughput": (
        C(failure_ratio=0.5, minimum_throughput=4, sampling_duration=10),
        [(0, "ok"), (0.5, "fail"), (1, "ok"), (1.5, "fail"), (2, "ok"), (2.5, "fail"), (3, "fail"), (3.5, "ok")],
    ),
    "a ratio just under the limit does not trip it": (
        C(failure_ratio=0.7, minimum_throughput=10, sampling_duration=30),
        [(i * 0.1, "fail" if i % 10 < 6 else "ok") for i in range(10)] + [(1.1, "ok"), (1.2, "peek")],
    ),
    "samples leave the window bucket by bucket": (
        C(failure_ratio=0.5, minimum_throughput=4, sampling_duration=10),
        [(0, "fail"), (0.5, "fail"), (1.5, "fail"), (9.4, "peek"), (10.2, "ok"), (10.6, "fail"), (11.7, "ok"),
         (11.8, "fail"), (25, "peek"), (25.1, "fail")],
    ),
    "the break elapses into half-open; a successful probe closes it and forgets the window": (
        C(failure_ratio=None, consecutive_failures=2, break_duration=2),
        [(0, "fail"), (0, "fail"), (1, "ok"), (1.999, "peek"), (2, "peek"), (2.1, "take"), (2.2, "ok"),
         (2.3, "win 0"), (2.4, "ok"), (2.5, "fail"), (2.6, "peek")],
    ),
    "a failed probe re-opens it with a longer break, capped": (
        C(failure_ratio=None, consecutive_failures=1, break_duration=1, break_duration_multiplier=3,
          max_break_duration=5),
        [(0, "fail"), (1, "fail"), (1.5, "ok"), (4, "fail"), (9, "peek"), (9.5, "fail"), (14.5, "take"),
         (14.6, "win 0"), (14.7, "fail"), (15.7, "peek")],
    ),
    "probes vote: two to close, two to re-open, and the admitted probes are all there are": (
        C(failure_ratio=None, consecutive_failures=1, break_duration=1, half_open_max_probes=3,
          half_open_successes_to_close=2, half_open_failures_to_reopen=2),
        [(0, "fail"), (1, "take"), (1, "take"), (1, "take"), (1, "take"), (1.1, "lose 0"), (1.15, "take"),
         (1.2, "win 1"), (1.3, "lose 2"), (2.3, "take"), (2.3, "take"), (2.4, "win 5"), (2.5, "ok"),
         (2.6, "win 6"), (2.7, "peek")],
    ),
    "a probe of an earlier half-open period casts no vote": (
        C(failure_ratio=None, consecutive_failures=1, break_duration=1, half_open_max_probes=2),
        [(0, "fail"), (1, "take"), (1, "take"), (1.1, "lose 0"), (2.1, "take"), (2.2, "lose 1"),
         (2.3, "win 1"), (2.4, "peek"), (2.5, "win 2"), (2.6, "peek")],
    ),
    "a cancelled probe frees its slot; a probe that ended keeps it": (
        C(failure_ratio=None, consecutive_failures=1, break_duration=1, half_open_max_probes=2,
          half_open_successes_to_close=2),
        [(0, "fail"), (1, "take"), (1, "take"), (1, "take"), (1.1, "drop 0"), (1.2, "take"), (1.3, "win 1"),
         (1.4, "take"), (1.5, "win 2"), (1.6, "peek")],
    ),
    "isolated, it refuses everything until reset, which forgets the grown break": (
        C(failure_ratio=None, consecutive_failures=1, break_duration=1, break_duration_multiplier=2),
        [(0, "fail"), (1, "fail"), (2, "isolate"), (2.1, "fail"), (100, "ok"), (100, "isolate"), (101, "reset"),
         (101.1, "ok"), (101.2, "fail"), (101.3, "peek"), (102.3, "peek")],
    ),
    "reset by hand while open or closed": (
        C(failure_ratio=0.5, minimum_throughput=2, sampling_duration=5),
        [(0, "ok"), (0.1, "fail"), (0.2, "reset"), (0.3, "peek"), (0.4, "fail"), (0.5, "reset"), (0.6, "fail"),
         (0.7, "isolate"), (0.8, "ok"), (0.9, "reset"), (1.0, "ok")],
    ),
}


class _Python:
    """The in-process breaker on a virtual clock."""

    def __init__(self, config: CircuitBreakerConfig) -> None:
        self.clock = VirtualClock(T0)
        self.changes: list[tuple[str, str, str, float | None]] = []
        bus = EventBus()
        bus.subscribe(self._heard)
        self.breaker = CircuitBreaker(config, clock=self.clock, name="parity", events=bus)

    def _heard(self, event: Event) -> None:
        if isinstance(event, BreakerStateChanged):
            self.changes.append((str(event.old_state), str(event.new_state), event.reason, event.break_duration))

    def at(self, now: float) -> None:
        self.clock.advance(now - self.clock.now())

    def acquire(self) -> int | None:
        try:
            return self.breaker.acquire()
        except CircuitOpenError:
            return None

    def report(self, op: str, ticket: int) -> None:
        {"win": self.breaker.record_success, "lose": self.breaker.record_failure, "drop": self.breaker.release}[op](
            ticket
        )

    def admin(self, op: str) -> None:
        if op == "isolate":
            self.breaker.isolate()
        elif op == "reset":
            self.breaker.reset()

    def observe(self) -> dict[str, Any]:
        s = self.breaker.statistics()
        return {
            "state": s.state.value, "failures": s.failures, "successes": s.successes,
            "consecutive": s.consecutive_failures, "break": s.break_duration, "in_flight": s.probes_in_flight,
            "times_opened": s.times_opened, "rejected": s.rejected, "retry_after": s.retry_after,
        }


class _Lua:
    """The Redis script, run directly with its clock argument; a cancelled probe goes with the next script."""

    STATES = ("closed", "open", "half_open", "isolated")
    OPS = ("peek", "acquire", "win", "lose", "isolate", "reset")  # the script's op codes, in order

    def __init__(self, client: redis.Redis, config: CircuitBreakerConfig) -> None:
        self.client = client
        self.key = f"parity:{uuid.uuid4().hex}"
        self.settings = script_settings(config, 3600.0, 600_000)  # a probe lease no case reaches
        self.now = T0
        self.released = self.released_in = 0
        self.reply: list[Any] = []
        self.changes: list[tuple[str, str, str, float | None]] = []

    def at(self, now: float) -> None:
        self.now = now

    def run(self, op: str, probe: int = 0) -> int:
        released, self.released = self.released, 0
        self.reply = self.client.eval(
            BREAKER.source, 1, self.key, self.OPS.index(op), probe, released, *self.settings, self.released_in,
            repr(self.now),
        )
        for change in self.reply[12:]:
            old, new, reason, duration = change.decode().split("|")
            self.changes.append((old, new, reason, float(duration) if duration else None))
        return int(self.reply[0])

    def acquire(self) -> int | None:
        result = self.run("acquire")
        return None if result < 0 else result

    def report(self, op: str, ticket: int) -> None:
        if op != "drop":
            self.run(op, ticket)
            return
        if ticket:  # as RedisCircuitBreaker.release: counted for the newest period, sent with the next script
            if ticket > self.released_in:
                self.released, self.released_in = 0, ticket
            if ticket == self.released_in:
                self.released += 1
        self.run("peek")

    def admin(self, op: str) -> None:
        self.run(op)

    def observe(self) -> dict[str, Any]:
        self.run("peek")
        r = self.reply
        retry_after = float(r[2])
        return {
            "state": self.STATES[int(r[1])], "failures": int(r[3]), "successes": int(r[4]), "consecutive": int(r[5]),
            "break": float(r[7]), "in_flight": int(r[8]), "times_opened": int(r[9]), "rejected": int(r[10]),
            "retry_after": math.inf if retry_after < 0 else retry_after,
        }


def _play(side: _Python | _Lua, steps: list[tuple[float, str]]) -> Iterator[tuple[str, Any]]:
    """Run the steps on one side; yield, after each, what its admission answered and what it looks like."""
    tickets: list[int | None] = []
    for offset, step in steps:
        side.at(T0 + offset)
        op, *index = step.split()
        answer: str | None = None
        if op in ("ok", "fail", "take"):
            ticket = side.acquire()
            answer = "refused" if ticket is None else ("probe" if ticket else "call")
            if op == "take":
                tickets.append(ticket)
            elif ticket is not None:
                side.report("win" if op == "ok" else "lose", ticket)
        elif op in ("win", "lose", "drop"):
            ticket = tickets[int(index[0])]
            if ticket is not None:
                side.report(op, ticket)
        elif op in ("isolate", "reset"):
            side.admin(op)
        yield f"{offset} {step}", (answer, side.observe(), list(side.changes))


@pytest.fixture(scope="module")
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_server.url) as made:
        yield made


@pytest.mark.parametrize("case", list(CASES))
def test_the_python_and_lua_breakers_agree_at_every_step(client: redis.Redis, case: str) -> None:
    """The case's steps leave the in-process breaker and the Redis script in the same state after each one."""
    config, steps = CASES[case]
    lua = _Lua(client, config)
    try:
        played = zip(_play(_Python(config), steps), _play(lua, steps), strict=True)
        for (step, python), (_, script) in played:
            assert script == python, f"after step {step!r}"
    finally:
        client.delete(lua.key)


def test_the_table_reaches_every_state_and_every_transition() -> None:
    """The cases between them pass through every state and announce every kind of transition."""
    seen: set[tuple[str, str]] = set()
    for config, steps in CASES.values():
        for _, (_, _, changes) in _play(_Python(config), steps):
            seen |= {(old, new) for old, new, _, _ in changes}
    assert seen == {
        ("closed", "open"), ("open", "half_open"), ("half_open", "closed"), ("half_open", "open"),
        ("closed", "isolated"), ("open", "isolated"), ("isolated", "closed"), ("open", "closed"),
    }
