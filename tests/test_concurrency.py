"""One Retrier shared by 100 concurrent tasks: per-call state stays per call, shared state adds up exactly.

tenacity's shared ``AsyncRetrying`` mixes up attempt counts under concurrency (jd/tenacity#93); here
every call of a shared retrier must see exactly its own attempts, and the shared retry quota must end
where the arithmetic of SPEC sections 1.1 and 2 puts it, whatever order the tasks ran in. Everything runs
on asyncio and trio in virtual time (the default clock), so the tasks really overlap in their waits.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from asyncretry import (
    AdaptiveLimiterConfig,
    Classifier,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    history_of,
)
from asyncretry.testing import fixed_random

TASKS = 100
MAX_ATTEMPTS = 3
COST = {  # the 2020 profile (SPEC 2)
    OutcomeKind.TRANSIENT: 5,
    OutcomeKind.TIMEOUT: 10,
    OutcomeKind.THROTTLING: 5,
    OutcomeKind.CONNECTION: 5,
}
KINDS = list(COST)


class ServiceError(Exception):
    """A scripted service error carrying an AWS error code."""

    def __init__(self, code: str, task: int) -> None:
        self.error_code = code
        self.task = task
        super().__init__(f"{code} (task {task})")


def _error(kind: OutcomeKind, task: int) -> Exception:
    if kind is OutcomeKind.TIMEOUT:
        return TimeoutError(f"read timed out (task {task})")
    if kind is OutcomeKind.CONNECTION:
        return ConnectionResetError(f"connection reset (task {task})")
    if kind is OutcomeKind.THROTTLING:
        return ServiceError("ThrottlingException", task)
    return ServiceError("RequestTimeout", task)  # an AWS transient code


def _script(task: int) -> list[OutcomeKind]:
    """Task ``task`` fails ``task % 4`` times (kinds rotating with the task), then succeeds."""
    return [KINDS[(task + k) % len(KINDS)] for k in range(task % 4)]


def _expected_quota(start: float) -> tuple[float, float, float]:
    """(final tokens, tokens taken, tokens given back) after every task's script, by SPEC 1.1."""
    taken = given = 0.0
    for task in range(TASKS):
        failures = _script(task)
        retries = failures[: MAX_ATTEMPTS - 1]  # a failure of the last allowed attempt buys no retry
        taken += sum(COST[kind] for kind in retries)
        if len(failures) < MAX_ATTEMPTS:  # the call succeeds: its last acquisition comes back
            given += COST[retries[-1]] if retries else 1
    return start - taken + given, taken, given


@pytest.mark.anyio
@pytest.mark.parametrize("way", ["call", "attempts"])
async def test_100_tasks_share_one_retrier_and_the_quota_adds_up(way: str) -> None:
    """100 concurrent calls make exactly their scripted attempts; the shared quota ends on the arithmetic."""
    # A quota large enough that it never runs dry or overflows, so the result cannot depend on the order.
    quota = RetryQuota(RetryQuotaConfig(max_capacity=5000))
    start = 2500.0
    assert quota.try_acquire(5000 - start)
    retrier = Retrier(RetryPolicy(max_attempts=MAX_ATTEMPTS), rng=fixed_random(0.5), quota=quota)
    made = [0] * TASKS
    in_flight = peak = 0
    outcomes: dict[int, object] = {}

    async def operation(task: int) -> str:
        nonlocal in_flight, peak
        made[task] += 1
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await anyio.sleep(0.01)  # each attempt takes a little time, so the tasks overlap
        finally:
            in_flight -= 1
        failures = _script(task)
        if made[task] <= len(failures):
            raise _error(failures[made[task] - 1], task)
        return f"done {task}"

    async def run(task: int) -> None:
        try:
            if way == "call":
                outcomes[task] = await retrier.call_in("svc", operation, task)
            else:
                async for attempt in retrier.attempts(scope="svc"):
                    async with attempt:
                        outcomes[task] = await operation(task)
        except Exception as error:
            outcomes[task] = error

    async with anyio.create_task_group() as tg:
        for task in range(TASKS):
            tg.start_soon(run, task)

    assert peak > TASKS / 2
    for task in range(TASKS):
        failures = _script(task)
        outcome = outcomes[task]
        if len(failures) < MAX_ATTEMPTS:
            assert outcome == f"done {task}"
            assert made[task] == len(failures) + 1
        else:
            # The real last error of this very task, with this task's history.
            assert made[task] == MAX_ATTEMPTS
            assert isinstance(outcome, Exception)
            assert f"task {task})" in str(outcome)
            history = history_of(outcome)
            assert history is not None
            assert history.gave_up == "max_attempts"
            assert [a.kind for a in history.attempts] == failures[:MAX_ATTEMPTS]
    final, taken, given = _expected_quota(start)
    stats = quota.statistics()
    assert stats.available == final
    assert stats.acquired_total == (5000 - start) + taken
    assert stats.released_total == given
    retrier_stats = retrier.statistics()
    assert retrier_stats.calls == TASKS
    assert retrier_stats.attempts == sum(made)
    assert retrier_stats.retries == sum(made) - TASKS
    assert retrier_stats.successes == sum(len(_script(t)) < MAX_ATTEMPTS for t in range(TASKS))
    assert retrier_stats.failures == TASKS - retrier_stats.successes


@pytest.mark.anyio
async def test_100_tasks_in_a_total_outage_get_exactly_100_retries_from_500_tokens() -> None:
    """With every attempt failing, 500 tokens at cost 5 pay for exactly 100 retries, then retries stop."""
    policy = RetryPolicy(max_attempts=MAX_ATTEMPTS, classifier=Classifier(transient=(ServiceError,)))
    retrier = Retrier(policy, rng=fixed_random(0.5))
    made = [0] * TASKS
    errors: list[Exception] = []

    async def operation(task: int) -> None:
        made[task] += 1
        await anyio.sleep(0.01)
        raise ServiceError("ServiceUnavailable", task)

    async def run(task: int) -> None:
        try:
            await retrier.call_in("svc", operation, task)
        except Exception as error:
            errors.append(error)

    async with anyio.create_task_group() as tg:
        for task in range(TASKS):
            tg.start_soon(run, task)

    assert len(errors) == TASKS
    assert sum(made) - TASKS == 100
    for error in errors:
        history = history_of(error)
        assert history is not None
        # The real error of the last attempt, whatever stopped the retries (attempts or the quota).
        assert isinstance(error, ServiceError)
        assert history.gave_up in ("quota", "max_attempts")
        real = error
        assert made[real.task] == len(history.attempts)
    assert any(history_of(error).gave_up == "quota" for error in errors)  # type: ignore[union-attr]
    scope = retrier.statistics().scopes[0]
    assert scope.quota is not None
    assert scope.quota.available == 0
    assert scope.quota.acquired_total == 500
    assert scope.quota.released_total == 0


@pytest.mark.anyio
async def test_100_tasks_share_an_adaptive_limiter_that_paces_them_after_throttles() -> None:
    """Adaptive mode (the exact AWS limiter, which drops to its floor rate on the first throttle): each
    attempt of 100 tasks acquires the shared limiter and updates it once, and retries are paced."""
    retrier = Retrier(
        RetryPolicy(mode="adaptive", max_attempts=5, limiter=AdaptiveLimiterConfig(profile="aws")),
        rng=fixed_random(0.5),
    )
    made = [0] * TASKS
    throttled = 0
    results: list[str] = []

    async def operation(task: int) -> str:
        nonlocal throttled
        made[task] += 1
        await anyio.lowlevel.checkpoint()
        if task % 5 == 0 and made[task] == 1:  # one task in five is throttled once
            throttled += 1
            raise ServiceError("ThrottlingException", task)
        return f"done {task}"

    async def run(task: int) -> None:
        results.append(await retrier.call_in("table", operation, task))

    async with anyio.create_task_group() as tg:
        for task in range(TASKS):
            tg.start_soon(run, task)

    assert sorted(results) == sorted(f"done {task}" for task in range(TASKS))
    assert made == [2 if task % 5 == 0 else 1 for task in range(TASKS)]
    limiter = retrier.statistics().scopes[0].limiter
    assert limiter is not None
    assert limiter.enabled
    assert limiter.acquires == sum(made)
    assert limiter.updates == sum(made)
    assert limiter.throttles == throttled == TASKS // 5
    assert limiter.waiting == 0
    assert limiter.waits > 0  # after the throttles the limiter really made tasks wait
