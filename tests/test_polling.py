"""poll() follows AWS's polling guidance: NOT_READY, THROTTLED poll again; SUCCESS stops; the rest fails."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from asyncretry import (
    GiveUpInfo,
    PollFailed,
    PollStatus,
    Retrier,
    RetriesExhausted,
    RetryPolicy,
    history_of,
    poll,
)

pytestmark = pytest.mark.anyio


class Job:
    """A remote job whose successive polls report the given states (the last one repeats)."""

    def __init__(self, *states: str | BaseException) -> None:
        self.states = states
        self.polls: list[float] = []

    async def __call__(self) -> dict[str, Any]:
        self.polls.append(anyio.current_time())
        state = self.states[min(len(self.polls), len(self.states)) - 1]
        if isinstance(state, BaseException):
            raise state
        return {"state": state, "poll": len(self.polls)}

    def gaps(self) -> list[float]:
        return [round(b - a, 9) for a, b in zip(self.polls, self.polls[1:], strict=False)]


def state(result: dict[str, Any]) -> str:
    return str(result["state"])


async def test_not_ready_polls_again_with_the_aws_polling_delays() -> None:
    """NOT_READY polls again after 0.2, 0.4, 0.8, 1.6 s (2**retries * 100 ms); SUCCESS returns the result."""
    job = Job("NOT_READY", "NOT_READY", "NOT_READY", "NOT_READY", "SUCCESS")
    result = await poll(job, status=state)
    assert result == {"state": "SUCCESS", "poll": 5}
    assert job.gaps() == pytest.approx([0.2, 0.4, 0.8, 1.6])


async def test_polling_delays_are_capped_at_the_max_interval() -> None:
    """The wait between polls grows until max_interval and then stays there."""
    job = Job("NOT_READY", "NOT_READY", "NOT_READY", "NOT_READY", "NOT_READY", "SUCCESS")
    await poll(job, status=state, policy=RetryPolicy.polling(max_interval=1.0))
    assert job.gaps() == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0])


async def test_the_default_cap_is_20_seconds() -> None:
    """With the default policy the wait stops growing at 20 s."""
    job = Job(*["NOT_READY"] * 9, "SUCCESS")
    await poll(job, status=state)
    assert job.gaps() == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 20.0, 20.0])


async def test_throttled_polls_again() -> None:
    """THROTTLED means "poll again" too."""
    job = Job("THROTTLED", "NOT_READY", "SUCCESS")
    assert (await poll(job, status=state))["poll"] == 3
    assert job.gaps() == pytest.approx([0.2, 0.4])


async def test_success_returns_at_once() -> None:
    """A first poll that succeeds returns without waiting."""
    job = Job("SUCCESS")
    start = anyio.current_time()
    assert (await poll(job, status=state))["poll"] == 1
    assert anyio.current_time() == start


@pytest.mark.parametrize("final", ["FAILED", "CANCELLED", "rolled back"])
async def test_any_other_status_stops_with_poll_failed(final: str) -> None:
    """A status that is neither success nor a reason to poll again raises PollFailed with the result."""
    job = Job("NOT_READY", final)
    with pytest.raises(PollFailed) as err:
        await poll(job, status=state)
    assert err.value.status == final.lower()
    assert err.value.result == {"state": final, "poll": 2}
    assert len(job.polls) == 2


async def test_statuses_may_be_poll_status_members_or_strings_in_any_case() -> None:
    """PollStatus members and their string values (any case) are understood alike."""
    statuses = iter([PollStatus.NOT_READY, "not_ready", "Throttled", "SUCCESS"])
    job = Job("x")
    result = await poll(job, status=lambda r: next(statuses))
    assert result["poll"] == 4


async def test_poll_status_failed_is_a_failure() -> None:
    """PollStatus.FAILED stops polling with PollFailed(status='failed')."""
    with pytest.raises(PollFailed, match="'failed'"):
        await poll(Job("x"), status=lambda r: PollStatus.FAILED)


async def test_running_out_of_polls_raises_retries_exhausted() -> None:
    """Still NOT_READY after the last poll: RetriesExhausted with the last result and the history."""
    job = Job("NOT_READY")
    with pytest.raises(RetriesExhausted) as err:
        await poll(job, status=state, policy=RetryPolicy.polling(max_attempts=4))
    assert err.value.last_result == {"state": "NOT_READY", "poll": 4}
    assert err.value.why == "max_attempts"
    history = history_of(err.value)
    assert history is not None
    assert [a.reason for a in history.attempts] == ["NOT_READY"] * 4
    assert len(job.polls) == 4


async def test_a_deadline_stops_polling() -> None:
    """A polling deadline ends the polls once the next wait would pass it."""
    job = Job("NOT_READY")
    with pytest.raises(RetriesExhausted) as err:
        await poll(job, status=state, policy=RetryPolicy.polling(deadline=2.0))
    assert err.value.why == "deadline"
    assert job.gaps() == pytest.approx([0.2, 0.4, 0.8])


async def test_errors_raised_by_the_poll_are_classified() -> None:
    """A transient error while polling is retried; a not-retryable one is raised as is."""
    job = Job(ConnectionResetError("reset"), "SUCCESS")
    assert (await poll(job, status=state))["poll"] == 2
    error = PermissionError("denied")
    with pytest.raises(PermissionError) as err:
        await poll(Job(error), status=state)
    assert err.value is error


async def test_a_given_retrier_is_used() -> None:
    """poll(retrier=...) runs in that retrier's scope and counts in its statistics."""
    retrier = Retrier(RetryPolicy.polling(), name="jobs")
    await poll(Job("NOT_READY", "SUCCESS"), status=state, retrier=retrier, scope="job-42")
    stats = retrier.statistics()
    assert (stats.calls, stats.attempts) == (1, 2)
    assert [s.key for s in stats.scopes] == ["job-42"]


async def test_retrier_and_policy_together_are_refused() -> None:
    """poll() takes a retrier or a policy, not both."""
    with pytest.raises(TypeError, match="either retrier or policy"):
        await poll(Job("SUCCESS"), status=state, retrier=Retrier(), policy=RetryPolicy.polling())


async def test_a_failed_poll_reaches_the_give_up_hook() -> None:
    """The policy's on_give_up hook hears about a failed poll, with its result."""
    infos: list[GiveUpInfo] = []
    with pytest.raises(PollFailed):
        await poll(Job("FAILED"), status=state, policy=RetryPolicy.polling(on_give_up=infos.append))
    assert len(infos) == 1
    assert infos[0].outcome.result == {"state": "FAILED", "poll": 1}
    assert infos[0].history.gave_up == "not_retryable"
