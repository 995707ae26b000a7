"""The drivers hold their call: what users see of ``Attempts`` and ``SyncAttempts``, and that the two agree.

A driver shows the call's record (``number``, ``gave_up``, ``outcome``, ``history()`` ...) and its steps
(``start``, ``end``, ``give_up``, ``abandon``), nothing of the decision core's state. The synchronous driver
is generated from the async one: the same calls leave the same record and counters in both.
"""

from __future__ import annotations

import pytest

from asyncretry import Attempts, FixedBackoff, HedgingConfig, OutcomeKind, Retrier, RetryPolicy, SyncAttempts
from asyncretry.testing import VirtualClock

POLICY = RetryPolicy(backoff=FixedBackoff(0.0), max_attempts=3, quota=False)
CORE_ONLY = ("settle", "paid", "begin", "refuse", "due", "wait_cost", "retry_paid", "refund_due", "scope", "policy")


def test_a_driver_holds_its_call_and_shows_none_of_the_core() -> None:
    """Neither driver is a Call: the core's decisions and state are not attributes of what users hold."""
    retrier = Retrier(POLICY, clock=VirtualClock())
    for driver in (retrier.attempts(), retrier.sync_attempts()):
        for name in CORE_ONLY:
            assert not hasattr(driver, name), name
        assert (driver.number, driver.done, driver.gave_up, driver.outcome) == (0, False, None, None)


def _sync_call(retrier: Retrier, kinds: list[OutcomeKind]) -> SyncAttempts:
    attempts = retrier.sync_attempts()
    for attempt, kind in zip(attempts, kinds, strict=False):
        with attempt:
            if kind is not OutcomeKind.SUCCESS:
                attempt.retry_result(kind.value, kind=kind)
    return attempts


async def _async_call(retrier: Retrier, kinds: list[OutcomeKind]) -> Attempts:
    attempts = retrier.attempts()
    index = 0
    async for attempt in attempts:
        async with attempt:
            kind = kinds[index]
            index += 1
            if kind is not OutcomeKind.SUCCESS:
                attempt.retry_result(kind.value, kind=kind)
    return attempts


@pytest.mark.anyio
@pytest.mark.parametrize("kinds", [
    [OutcomeKind.SUCCESS],
    [OutcomeKind.TRANSIENT, OutcomeKind.SUCCESS],
    [OutcomeKind.TRANSIENT, OutcomeKind.THROTTLING, OutcomeKind.TRANSIENT],
], ids=["success", "retry-then-success", "gives-up"])
async def test_the_generated_sync_driver_agrees_with_the_async_one(kinds: list[OutcomeKind]) -> None:
    """The same outcomes through ``for`` and ``async for`` leave the same record and the same counters."""
    sync_retrier, async_retrier = Retrier(POLICY, clock=VirtualClock()), Retrier(POLICY, clock=VirtualClock())
    done_sync = _sync_call(sync_retrier, kinds)
    done_async = await _async_call(async_retrier, kinds)
    for driver in (done_sync, done_async):
        assert driver.done
    assert (done_sync.number, done_sync.gave_up) == (done_async.number, done_async.gave_up)
    assert [r.kind for r in done_sync.history().attempts] == [r.kind for r in done_async.history().attempts]
    sync_stats, async_stats = sync_retrier.statistics(), async_retrier.statistics()
    assert (sync_stats.calls, sync_stats.attempts, sync_stats.retries, sync_stats.successes, sync_stats.failures) == (
        async_stats.calls, async_stats.attempts, async_stats.retries, async_stats.successes, async_stats.failures
    )


def test_end_sync_still_works_and_warns() -> None:
    """``SyncAttempts.end_sync`` (the old name of ``end``) settles the attempt, with a DeprecationWarning."""
    attempts = Retrier(POLICY, clock=VirtualClock()).sync_attempts()
    attempt = attempts.start()
    assert attempt is not None
    with pytest.warns(DeprecationWarning, match=r"end_sync\(\) is deprecated"):
        assert attempts.end_sync(attempt, None) is False
    assert attempts.done
    assert attempts.gave_up is None


def test_the_sync_driver_refuses_hedging() -> None:
    """``SyncAttempts.hedged`` says that hedging needs the async driver (its attempts run concurrently)."""
    attempts = Retrier(POLICY, clock=VirtualClock()).sync_attempts()

    async def send(attempt: object) -> int:
        return 1

    with pytest.raises(ValueError, match="hedging runs a call's attempts concurrently"):
        attempts.hedged(HedgingConfig(delay=0.1), send)
