"""test_mode(): within the block retries do not wait and make fewer attempts; outside, nothing changes."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from asyncretry import FixedBackoff, Retrier, RetryPolicy, history_of
from asyncretry.testing import TestMode, VirtualClock, fixed_random, is_testing, set_testing, test_mode


class AlwaysFails:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        raise ConnectionResetError(f"call {self.calls}")


def make(max_attempts: int = 3) -> tuple[Retrier, VirtualClock]:
    clock = VirtualClock()
    return Retrier(RetryPolicy(max_attempts=max_attempts), clock=clock, rng=fixed_random(0.5)), clock


@pytest.mark.anyio
async def test_retries_do_not_sleep_in_test_mode() -> None:
    """No backoff sleep happens, but the delays are still computed and recorded in the history."""
    retrier, clock = make()
    with test_mode(), pytest.raises(ConnectionResetError) as err:
        await retrier.call(AlwaysFails())
    assert clock.sleeps == []
    history = history_of(err.value)
    assert history is not None
    assert [a.delay_after for a in history.attempts] == [0.5, 1.0, None]


@pytest.mark.anyio
async def test_no_time_passes_on_the_event_loop_either() -> None:
    """Under the default clock, a call that would back off for seconds takes no time at all."""
    retrier = Retrier(RetryPolicy.aws_legacy(max_attempts=6))
    start = anyio.current_time()
    with test_mode(), pytest.raises(ConnectionResetError):
        await retrier.call(AlwaysFails())
    assert anyio.current_time() == start


@pytest.mark.anyio
async def test_attempts_are_capped() -> None:
    """max_attempts caps every policy's attempts; a policy with fewer keeps its own."""
    retrier, _ = make(max_attempts=5)
    op = AlwaysFails()
    with test_mode(max_attempts=2), pytest.raises(ConnectionResetError):
        await retrier.call(op)
    assert op.calls == 2
    single, _ = make(max_attempts=1)
    op = AlwaysFails()
    with test_mode(max_attempts=3), pytest.raises(ConnectionResetError):
        await single.call(op)
    assert op.calls == 1


@pytest.mark.anyio
async def test_no_wait_can_be_turned_off_while_capping_attempts() -> None:
    """test_mode(no_wait=False, max_attempts=2) still sleeps but makes at most two attempts."""
    retrier, clock = make(max_attempts=5)
    with test_mode(max_attempts=2, no_wait=False), pytest.raises(ConnectionResetError):
        await retrier.call(AlwaysFails())
    assert clock.sleeps == [0.5]


@pytest.mark.anyio
async def test_test_mode_ends_with_its_block() -> None:
    """After the block, calls wait and make all their attempts again."""
    retrier, clock = make()
    with test_mode(max_attempts=1), pytest.raises(ConnectionResetError):
        await retrier.call(AlwaysFails())
    op = AlwaysFails()
    with pytest.raises(ConnectionResetError):
        await retrier.call(op)
    assert op.calls == 3
    assert clock.sleeps == [0.5, 1.0]


@pytest.mark.anyio
async def test_test_mode_is_restored_after_an_exception() -> None:
    """An exception leaving the block still restores normal behaviour."""
    retrier, clock = make()
    with pytest.raises(KeyError), test_mode(max_attempts=1):
        raise KeyError("boom")
    with pytest.raises(ConnectionResetError):
        await retrier.call(AlwaysFails())
    assert len(clock.sleeps) == 2


@pytest.mark.anyio
async def test_nested_blocks_restore_the_outer_settings() -> None:
    """An inner test_mode applies inside it; leaving it brings back the outer one."""
    retrier, _ = make(max_attempts=5)
    with test_mode(max_attempts=3):
        with test_mode(max_attempts=1):
            op = AlwaysFails()
            with pytest.raises(ConnectionResetError):
                await retrier.call(op)
            assert op.calls == 1
        op = AlwaysFails()
        with pytest.raises(ConnectionResetError):
            await retrier.call(op)
        assert op.calls == 3


@pytest.mark.anyio
async def test_tasks_started_inside_the_block_inherit_it() -> None:
    """Test mode is a context variable: tasks started within the block run in test mode too."""
    retrier, clock = make(max_attempts=4)
    ops = [AlwaysFails(), AlwaysFails()]

    async def run(op: AlwaysFails) -> None:
        with pytest.raises(ConnectionResetError):
            await retrier.call(op)

    with test_mode(max_attempts=2):
        async with anyio.create_task_group() as tg:
            for op in ops:
                tg.start_soon(run, op)
    assert [op.calls for op in ops] == [2, 2]
    assert clock.sleeps == []


def test_the_block_yields_its_settings() -> None:
    """The context manager yields the active TestMode."""
    with test_mode(max_attempts=2) as mode:
        assert mode == TestMode(max_attempts=2, no_wait=True)
    with test_mode() as mode:
        assert (mode.max_attempts, mode.no_wait) == (None, True)


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-1, ValueError), ("2", TypeError), (1.5, TypeError)]
)
def test_bad_max_attempts_is_refused(value: object, error: type[Exception]) -> None:
    """max_attempts must be an integer >= 1; the error names it."""
    with pytest.raises(error, match="max_attempts"), test_mode(max_attempts=value):  # type: ignore[arg-type]
        pass


def test_pytest_does_not_collect_test_mode_as_a_test() -> None:
    """test_mode and TestMode are marked so that importing them into a test module collects nothing."""
    assert test_mode.__test__ is False  # type: ignore[attr-defined]
    assert TestMode.__test__ is False


# ------------------------------------------------------------------------- process-wide: threads see it
class SyncAlwaysFails:
    """A plain function that always fails, counting its calls (from any thread)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise ConnectionResetError(f"call {self.calls}")


def _run_in_thread(retrier: Retrier, fn: SyncAlwaysFails) -> list[BaseException]:
    """Call ``fn`` through ``retrier`` in a new thread; returns what the call raised."""
    raised: list[BaseException] = []

    def work() -> None:
        try:
            retrier.sync_call(fn)
        except ConnectionResetError as error:
            raised.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return raised


@pytest.fixture
def hour_long_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A retrier whose waits would be an hour each; time.sleep records instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def _hourly() -> Retrier:
    return Retrier(RetryPolicy(max_attempts=3, backoff=FixedBackoff(3600.0)))


def test_a_thread_started_inside_the_block_sees_it(hour_long_backoff: list[float]) -> None:
    """A thread started inside test_mode() makes the capped attempts and never sleeps; after it, all is back."""
    failing = SyncAlwaysFails()
    with test_mode(max_attempts=2):
        raised = _run_in_thread(_hourly(), failing)
    assert len(raised) == 1
    assert failing.calls == 2
    assert hour_long_backoff == []
    assert not is_testing()
    _run_in_thread(_hourly(), failing)
    assert failing.calls == 5
    assert hour_long_backoff == [3600.0, 3600.0]


@pytest.mark.anyio
async def test_a_thread_started_inside_an_async_block_sees_it(hour_long_backoff: list[float]) -> None:
    """From an async test too (asyncio and trio): the block covers a thread the code under test starts."""
    failing = SyncAlwaysFails()
    with test_mode(max_attempts=1):
        raised = _run_in_thread(_hourly(), failing)
    assert len(raised) == 1
    assert failing.calls == 1
    assert hour_long_backoff == []


@pytest.mark.anyio
async def test_other_tasks_of_the_loop_are_not_in_the_block() -> None:
    """A task of the same loop that is not inside the block keeps its policy's attempts and waits."""
    retrier, clock = make()
    outside, inside = AlwaysFails(), AlwaysFails()
    entered = anyio.Event()
    done = anyio.Event()

    async def not_in_the_block() -> None:
        await entered.wait()
        with pytest.raises(ConnectionResetError):
            await retrier.call(outside)
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(not_in_the_block)
        with test_mode(max_attempts=1):
            entered.set()
            with pytest.raises(ConnectionResetError):
                await retrier.call(inside)
            await done.wait()
    assert (inside.calls, outside.calls) == (1, 3)
    assert clock.sleeps == [0.5, 1.0]


def test_set_testing_switches_every_thread_on_and_off(hour_long_backoff: list[float]) -> None:
    """set_testing(True) reaches threads started later; set_testing(False) switches it off again."""
    failing = SyncAlwaysFails()
    set_testing(True, max_attempts=1)
    try:
        assert is_testing()
        _run_in_thread(_hourly(), failing)
        assert failing.calls == 1
        with test_mode(max_attempts=2):  # a block wins over the switch, in its threads too
            _run_in_thread(_hourly(), failing)
            assert failing.calls == 3
    finally:
        set_testing(False)
    assert not is_testing()
    _run_in_thread(_hourly(), failing)
    assert failing.calls == 6  # three attempts again, and the waits are real once more
    assert hour_long_backoff == [3600.0, 3600.0]


@pytest.mark.anyio
async def test_set_testing_applies_to_async_calls_too() -> None:
    """The process-wide mode caps async calls and skips their sleeps, on asyncio and trio."""
    retrier, clock = make()
    set_testing(True, max_attempts=2)
    try:
        with pytest.raises(ConnectionResetError):
            await retrier.call(failing := AlwaysFails())
    finally:
        set_testing(False)
    assert failing.calls == 2
    assert clock.sleeps == []


def test_set_testing_checks_its_arguments() -> None:
    """A non-bool switch or a bad cap is refused, naming the parameter, and changes nothing."""
    with pytest.raises(TypeError, match="testing must be True or False"):
        set_testing("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_attempts"):
        set_testing(True, max_attempts=0)
    assert not is_testing()
