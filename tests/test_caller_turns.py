"""Callers in turn: a call that names its caller waits for that caller's earlier calls before it joins a rate
limit's line, so that the line serves callers in turn, however many calls each one has.

A rate limit's line is first come, first served: without callers, a light caller's call waits behind every
call a heavy caller queued before it. With callers, each caller has one call in the line at a time, and the
light caller's call is served within one round of the callers. The engine tests run on a scope's fixed rate
limit (10 calls a second, a burst of one), so that every admission time is exact on the virtual clock, on
asyncio and trio; one runs on an adaptive limiter and one on a limiter shared through Redis.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import anyio
import anyio.lowlevel
import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    AdaptiveRateLimiter,
    RateLimitTimeout,
    Retrier,
    RetryPolicy,
    TokenBucket,
    TurnStatistics,
    history_of,
    parse_overrides,
)
from asyncretry._primitives._turns import CallerTurns

RATE = 10.0  # the scope's fixed rate limit: one call every 0.1 s


def _retrier(**policy: object) -> Retrier:
    return Retrier(RetryPolicy(rate_limit=RATE, rate_limit_burst=1.0, **policy))  # type: ignore[arg-type]


async def _admitted(retrier: Retrier, calls: Sequence[tuple[str, str | None]]) -> list[tuple[str, float]]:
    """Start ``calls`` (a name and a caller each) in this order at one instant; each makes one attempt that
    succeeds at once. Returns (name, time admitted) in the order of admission."""
    began = anyio.current_time()
    order: list[tuple[str, float]] = []

    async def one(name: str, caller: str | None) -> None:
        async for attempt in retrier.attempts(caller=caller):
            async with attempt:
                order.append((name, round(anyio.current_time() - began, 6)))

    async with anyio.create_task_group() as tg:
        for name, caller in calls:
            tg.start_soon(one, name, caller)
            await anyio.lowlevel.checkpoint()  # each task reaches the line before the next starts
    return order


# ------------------------------------------------------------------------------ the engine
@pytest.mark.anyio
async def test_without_callers_a_light_call_waits_behind_every_heavy_call() -> None:
    """First come, first served: the light call queued after ten heavy ones is admitted last, after 1 s."""
    calls = [(f"heavy{k}", None) for k in range(10)] + [("light", None)]
    order = await _admitted(_retrier(), calls)
    assert [name for name, _ in order][-1] == "light"
    assert order[-1][1] == pytest.approx(1.0)


@pytest.mark.anyio
async def test_with_callers_a_light_call_is_served_in_the_next_round() -> None:
    """Named callers take turns: the light caller's call goes right after the heavy caller's first waiting
    call (0.2 s), and the heavy caller's calls keep their own order."""
    calls = [(f"heavy{k}", "heavy") for k in range(10)] + [("light", "light")]
    order = await _admitted(_retrier(), calls)
    names = [name for name, _ in order]
    assert names[:3] == ["heavy0", "heavy1", "light"]
    assert dict(order)["light"] == pytest.approx(0.2)
    assert [name for name in names if name != "light"] == [f"heavy{k}" for k in range(10)]


@pytest.mark.anyio
async def test_callers_are_served_round_robin() -> None:
    """Three callers with four calls each, queued caller by caller, are admitted one of each in turn."""
    calls = [(f"{caller}{k}", caller) for caller in "abc" for k in range(4)]
    order = await _admitted(_retrier(), calls)
    names = [name for name, _ in order]
    # a0 takes the burst's token at once; then each caller has one call in the line, in turn.
    assert names == ["a0", "a1", "b0", "c0", "a2", "b1", "c1", "a3", "b2", "c2", "b3", "c3"]
    times = [at for _, at in order]
    assert times == pytest.approx([0.1 * k for k in range(12)])


@pytest.mark.anyio
async def test_calls_without_a_caller_are_each_their_own_caller() -> None:
    """An anonymous call joins the line as a caller of its own, beside the named callers' one call each."""
    calls = [(f"heavy{k}", "heavy") for k in range(5)] + [("anon0", None), ("anon1", None)]
    order = await _admitted(_retrier(), calls)
    assert [name for name, _ in order][:5] == ["heavy0", "heavy1", "anon0", "anon1", "heavy2"]


@pytest.mark.anyio
async def test_the_adaptive_limiter_serves_callers_in_turn() -> None:
    """The same holds in front of an adaptive limiter: once a throttle has enabled it, a light caller's call
    is not kept behind the heavy caller's queue."""
    limiter = AdaptiveRateLimiter(AdaptiveLimiterConfig(profile="independent"))
    retrier = Retrier(RetryPolicy(), limiter=limiter)
    for _ in range(3):  # enable it: a few sends and a throttle
        await limiter.acquire()
        limiter.update(False)
    limiter.update(True)
    assert limiter.enabled
    named: list[tuple[str, str | None]] = [(f"heavy{k}", "heavy") for k in range(20)]
    names = [name for name, _ in await _admitted(retrier, [*named, ("light", "light")])]
    assert names.index("light") <= 2
    anonymous: list[tuple[str, str | None]] = [(f"heavy{k}", None) for k in range(20)]
    names = [name for name, _ in await _admitted(retrier, [*anonymous, ("light", None)])]
    assert names.index("light") == 20


@pytest.mark.anyio
async def test_a_call_whose_turn_does_not_come_by_its_deadline_is_refused_with_its_history() -> None:
    """The turn is a rate-limit wait like the others: it is bounded by the call's deadline, and the call ends
    with RateLimitTimeout, its history attached, and nothing left behind in the scope's turns."""
    retrier = _retrier(deadline=0.25)
    refused: list[BaseException] = []

    async def one(caller: str) -> None:
        try:
            async for attempt in retrier.attempts(caller=caller):
                async with attempt:
                    pass
        except RateLimitTimeout as error:
            refused.append(error)

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(one, "heavy")
            await anyio.lowlevel.checkpoint()
    assert len(refused) == 3  # admitted at 0, 0.1 and 0.2 s; the others' turns do not come within 0.25 s
    history = history_of(refused[0])
    assert history is not None
    assert history.gave_up == "rate_limit"
    stats = retrier.statistics().scopes[0].turns
    assert stats is not None
    assert (stats.callers, stats.waiting) == (0, 0)
    assert stats.timeouts + retrier.statistics().scopes[0].rate_limit.timeouts == 3  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_call_cancelled_while_it_waits_for_its_turn_leaves_no_trace() -> None:
    """Cancelled in its caller's line, a call takes nothing: the caller's next call gets the turn."""
    retrier = _retrier()
    order: list[tuple[str, float]] = []
    began = anyio.current_time()

    async def one(name: str) -> None:
        async for attempt in retrier.attempts(caller="c"):
            async with attempt:
                order.append((name, round(anyio.current_time() - began, 6)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "first")  # the burst's token, at once
        await anyio.sleep(0.01)
        tg.start_soon(one, "second")  # holds the turn, in the rate limit's line until 0.1 s
        await anyio.sleep(0.01)
        async with anyio.create_task_group() as doomed:
            doomed.start_soon(one, "cancelled")  # waits for the turn
            await anyio.sleep(0.01)
            assert retrier.statistics().scopes[0].turns == TurnStatistics(
                name="default", callers=1, waiting=1, waits=1, timeouts=0)
            doomed.cancel_scope.cancel()
        tg.start_soon(one, "third")
    assert order == [("first", 0.0), ("second", pytest.approx(0.1)), ("third", pytest.approx(0.2))]
    stats = retrier.statistics().scopes[0].turns
    assert stats is not None
    assert (stats.callers, stats.waiting, stats.timeouts) == (0, 0, 0)


@pytest.mark.anyio
async def test_scope_statistics_show_the_callers_waiting() -> None:
    """While calls wait, the scope's statistics count the callers in the line and the calls behind them."""
    retrier = _retrier()
    seen: list[TurnStatistics | None] = []

    async def one(caller: str) -> None:
        async for attempt in retrier.attempts(caller=caller):
            async with attempt:
                pass

    async with anyio.create_task_group() as tg:
        for caller in ("a", "a", "a", "b"):
            tg.start_soon(one, caller)
            await anyio.lowlevel.checkpoint()
        await anyio.sleep(0.01)
        seen.append(retrier.statistics().scopes[0].turns)
    # a's first call took the burst's token without waiting; a's second and b's first are in the line.
    assert seen == [TurnStatistics(name="default", callers=2, waiting=1, waits=1, timeouts=0)]
    assert retrier.statistics().scopes[0].turns == TurnStatistics(
        name="default", callers=0, waiting=0, waits=1, timeouts=0)


@pytest.mark.anyio
async def test_a_call_admitted_at_once_takes_no_turn() -> None:
    """A call whose tokens are there needs no turn: the scope keeps no turns until a call with a caller waits."""
    retrier = _retrier()
    async for attempt in retrier.attempts(caller="solo"):
        async with attempt:
            pass
    assert retrier.statistics().scopes[0].turns is None


@pytest.mark.anyio
@pytest.mark.parametrize(("caller", "error", "match"), [
    ("", ValueError, "caller must be a non-empty string .*got ''"),
    (7, TypeError, "caller must be a string, got 7 \\(int\\)"),
    (b"tenant", TypeError, "caller must be a string, got b.tenant. \\(bytes\\)"),
])
async def test_a_bad_caller_is_refused_at_the_call(caller: object, error: type[Exception], match: str) -> None:
    retrier = _retrier()
    with pytest.raises(error, match=match):
        retrier.attempts(caller=caller)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        retrier.sync_attempts(caller=caller)  # type: ignore[arg-type]


def test_the_caller_override_is_checked_and_parsed() -> None:
    assert parse_overrides({"caller": "tenant-42"}).caller == "tenant-42"
    with pytest.raises(ValueError, match=r"overrides\['caller'\] must be a non-empty string"):
        parse_overrides({"caller": ""})


# ------------------------------------------------------------------------------ the primitive
# The same script for the turns of tasks and of threads: caller "a" holds its turn; a second call of "a"
# times out waiting for it; a call of "b" is not held; once "a" lets go, its next call gets the turn.
SCRIPT_OUTCOME = ["a2: RateLimitTimeout(wait=inf, timeout=0.05)", "b1: in", "a3: in"]
SCRIPT_STATISTICS = TurnStatistics(name="t", callers=0, waiting=0, waits=1, timeouts=1)


def _try(seen: list[str], name: str, enter: Callable[[], AbstractContextManager[None]]) -> None:
    try:
        with enter():
            seen.append(f"{name}: in")
    except RateLimitTimeout as error:
        seen.append(f"{name}: RateLimitTimeout(wait={error.wait}, timeout={error.timeout})")


def test_threads_follow_the_script() -> None:
    turns = CallerTurns("t")
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with turns.turn_blocking("a"):
            holding.set()
            done.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(5)
    seen: list[str] = []
    _try(seen, "a2", lambda: turns.turn_blocking("a", timeout=0.05))
    _try(seen, "b1", lambda: turns.turn_blocking("b", timeout=0.05))
    done.set()
    thread.join(5)
    _try(seen, "a3", lambda: turns.turn_blocking("a", timeout=5.0))
    assert seen == SCRIPT_OUTCOME
    assert turns.statistics() == SCRIPT_STATISTICS


@pytest.mark.anyio
async def test_tasks_follow_the_script() -> None:
    turns = CallerTurns("t")
    holding, release = anyio.Event(), anyio.Event()
    seen: list[str] = []

    async def hold() -> None:
        async with turns.turn("a"):
            holding.set()
            await release.wait()

    async def attempt(name: str, caller: str, timeout: float) -> None:
        try:
            async with turns.turn(caller, timeout=timeout):
                seen.append(f"{name}: in")
        except RateLimitTimeout as error:
            seen.append(f"{name}: RateLimitTimeout(wait={error.wait}, timeout={error.timeout})")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await holding.wait()
        await attempt("a2", "a", 0.05)
        await attempt("b1", "b", 0.05)
        release.set()
    await attempt("a3", "a", 5.0)
    assert seen == SCRIPT_OUTCOME
    assert turns.statistics() == SCRIPT_STATISTICS


@pytest.mark.anyio
async def test_while_calls_wait_the_statistics_count_callers_and_calls_behind() -> None:
    turns = CallerTurns("t")
    inside: list[str] = []
    release = anyio.Event()

    async def hold(caller: str, name: str) -> None:
        async with turns.turn(caller):
            inside.append(name)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for caller, name in (("a", "a1"), ("a", "a2"), ("b", "b1")):
            tg.start_soon(hold, caller, name)
            await anyio.lowlevel.checkpoint()
        await anyio.sleep(1)
        assert inside == ["a1", "b1"]
        assert turns.statistics() == TurnStatistics(name="t", callers=2, waiting=1, waits=1, timeouts=0)
        release.set()
    assert inside == ["a1", "b1", "a2"]
    assert turns.statistics().callers == 0


def test_synchronous_calls_with_a_caller_take_turns_at_the_rate_limit() -> None:
    """sync_attempts(caller=...): of one caller's threads one waits at the rate limit at a time, the others
    behind it; the tokens given back admit them all."""
    bucket = TokenBucket(0.0, 2.0, tokens=0.0)  # no refill: only release() gives tokens
    retrier = Retrier(rate_limit=bucket)
    admitted: list[str] = []

    def one(name: str) -> None:
        for attempt in retrier.sync_attempts(caller="batch"):
            with attempt:
                admitted.append(name)

    threads = [threading.Thread(target=one, args=(name,)) for name in ("t1", "t2")]
    for thread in threads:
        thread.start()
    seen = None
    for _ in range(500):  # until both threads are in: one at the rate limit, one behind it (at most 5 s)
        scopes = retrier.statistics().scopes
        seen = scopes[0].turns if scopes else None
        if seen is not None and seen.waiting == 1:
            break
        time.sleep(0.01)
    assert seen == TurnStatistics(name="default", callers=1, waiting=1, waits=1, timeouts=0)
    assert admitted == []
    bucket.release(2)
    for thread in threads:
        thread.join(10)
    assert sorted(admitted) == ["t1", "t2"]
    assert retrier.statistics().scopes[0].turns == TurnStatistics(
        name="default", callers=0, waiting=0, waits=1, timeouts=0)
