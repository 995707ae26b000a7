"""@retry wraps an async function in a shared retrier and keeps its name, docs and signature."""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from typing import Any, assert_type

import pytest

from asyncretry import NoBackoff, Retrier, RetryCapacityExceeded, RetryPolicy, history_of, retry


class Flaky:
    """Fails with ConnectionResetError the first ``failures`` times, then returns what it was given."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self, value: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionResetError(f"call {self.calls}")
        return value


async def fetch(key: str, *, version: int = 1) -> bytes:
    """Fetch ``key`` from the store."""
    return f"{key}@{version}".encode()


retried_fetch = retry(max_attempts=2)(fetch)


def test_the_wrapper_keeps_name_doc_module_and_signature() -> None:
    """The decorated function looks like the original to help(), inspect and frameworks."""
    assert retried_fetch.__name__ == "fetch"
    assert retried_fetch.__qualname__ == "fetch"
    assert retried_fetch.__doc__ == "Fetch ``key`` from the store."
    assert retried_fetch.__module__ == __name__
    assert inspect.signature(retried_fetch) == inspect.signature(fetch)
    assert inspect.iscoroutinefunction(retried_fetch)


@pytest.mark.anyio
async def test_the_wrapper_keeps_the_types_for_mypy() -> None:
    """mypy (strict, run on the tests) sees the original parameters and the awaited return type."""
    data = await retried_fetch("a", version=2)
    assert_type(data, bytes)
    assert data == b"a@2"


async def _type_errors_mypy_must_report() -> None:
    """Never called: each line is a type error; had the signature been lost, the ignores would be unused."""
    await retried_fetch(1)  # type: ignore[arg-type]
    await retried_fetch("a", version="2")  # type: ignore[arg-type]
    await retried_fetch("a", colour="red")  # type: ignore[call-arg]


@pytest.mark.anyio
async def test_calls_are_retried() -> None:
    """A decorated function that fails transiently is retried until it succeeds."""
    flaky = Flaky(failures=2)

    @retry(max_attempts=3, backoff=NoBackoff())
    async def get(value: int) -> int:
        return int(await flaky(value))

    assert await get(7) == 7
    assert flaky.calls == 3


@pytest.mark.anyio
async def test_all_calls_share_one_retrier() -> None:
    """Every call of the decorated function goes through the same retrier (one quota), exposed as .retrier."""
    @retry(max_attempts=2, backoff=NoBackoff())
    async def always_fails() -> None:
        raise ConnectionResetError

    retrier = always_fails.retrier  # type: ignore[attr-defined]
    assert isinstance(retrier, Retrier)
    for _ in range(3):
        with pytest.raises(ConnectionResetError):
            await always_fails()
    stats = retrier.statistics()
    assert (stats.calls, stats.attempts, stats.failures) == (3, 6, 3)
    quota = stats.scopes[0].quota
    assert quota is not None
    assert quota.available == 500 - 3 * 5


@pytest.mark.anyio
async def test_the_retrier_is_named_after_the_function() -> None:
    """A retrier made by the decorator takes the function's qualified name for events and statistics."""
    @retry()
    async def lookup() -> int:
        return 1

    await lookup()
    assert lookup.retrier.name.endswith("lookup")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_given_retrier_is_shared_and_keeps_its_name() -> None:
    """retry(retrier=r) makes every decorated function use r."""
    shared = Retrier(RetryPolicy(max_attempts=2), name="shared")

    @retry(retrier=shared)
    async def one() -> int:
        return 1

    @retry(retrier=shared, scope="two")
    async def two() -> int:
        return 2

    assert (await one(), await two()) == (1, 2)
    assert shared.statistics().calls == 2
    assert shared.name == "shared"
    assert sorted(shared.scope_keys()) == ["default", "two"]


def test_a_field_given_in_the_policy_and_as_an_argument_is_refused() -> None:
    """retry(policy, max_attempts=2) gives max_attempts twice: a TypeError says so and how to mean it."""
    base = RetryPolicy(max_attempts=5, backoff=NoBackoff())
    with pytest.raises(TypeError, match=r"max_attempts given twice.*policy\.replace\(max_attempts=\.\.\.\)"):
        retry(base, max_attempts=2)


@pytest.mark.anyio
async def test_a_policy_alone_is_used_as_is() -> None:
    """retry(policy) uses that very policy."""
    policy = RetryPolicy(max_attempts=4)

    @retry(policy)
    async def get() -> int:
        return 1

    assert get.retrier.policy is policy  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_methods_can_be_decorated() -> None:
    """A decorated method still receives self."""
    class Client:
        def __init__(self) -> None:
            self.flaky = Flaky(failures=1)

        @retry(max_attempts=2, backoff=NoBackoff())
        async def get(self, key: str) -> str:
            return str(await self.flaky(key))

    client = Client()
    assert await client.get("k") == "k"
    assert client.flaky.calls == 2


def test_retrier_and_policy_together_are_refused() -> None:
    """Passing a retrier and a policy (or policy fields) is ambiguous: TypeError."""
    shared = Retrier()
    with pytest.raises(TypeError, match="either retrier or a policy"):
        retry(RetryPolicy(), retrier=shared)
    with pytest.raises(TypeError, match="either retrier or a policy"):
        retry(retrier=shared, max_attempts=2)


def test_bad_policy_fields_fail_at_decoration_time() -> None:
    """Invalid or unknown policy fields raise when the decorator is built, not at the first call."""
    with pytest.raises(ValueError, match="max_attempts"):
        retry(max_attempts=0)
    with pytest.raises(TypeError, match="max_atempts"):
        retry(max_atempts=3)


def test_a_non_callable_is_refused() -> None:
    """Decorating something that cannot be called raises TypeError."""
    with pytest.raises(TypeError, match="@retry needs an async or plain function"):
        retry()(42)  # type: ignore[call-overload]


# ----------------------------------------------------------------------------- shorthands
@retry
async def plain_async(value: int) -> int:
    return value + 1


@retry
def plain_sync(value: int) -> int:
    return value * 2


@pytest.mark.anyio
async def test_retry_without_parentheses_decorates_with_the_default_policy() -> None:
    """@retry alone works on async and plain functions, with the default policy (AWS standard mode)."""
    assert await plain_async(1) == 2
    assert plain_sync(2) == 4
    assert plain_async.retrier.policy == RetryPolicy()  # type: ignore[attr-defined]
    assert plain_sync.retrier.policy == RetryPolicy()  # type: ignore[attr-defined]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "on",
    [ConnectionResetError, (KeyError, ConnectionResetError), lambda e: isinstance(e, ConnectionResetError)],
    ids=["type", "tuple", "predicate"],
)
async def test_on_retries_exactly_the_errors_it_names(on: Any) -> None:
    """on= (a type, a tuple of types or a predicate) retries those errors and nothing else."""
    flaky = Flaky(failures=1)

    @retry(on=on, backoff=NoBackoff())
    async def get(value: str) -> str:
        return str(await flaky(value))

    assert await get("x") == "x"
    assert flaky.calls == 2

    @retry(on=on, backoff=NoBackoff())
    async def wrong() -> None:
        raise ValueError("not named by on=")

    with pytest.raises(ValueError) as caught:
        await wrong()
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"


def test_on_and_classifier_together_are_refused() -> None:
    """on= and classifier= both say what to retry: giving both is a TypeError."""
    from asyncretry import Classifier

    with pytest.raises(TypeError, match="on= and classifier="):
        retry(on=OSError, classifier=Classifier())
    with pytest.raises(TypeError, match="on must be"):
        retry(on=42)  # type: ignore[call-overload]


# ------------------------------------------------------------------------------ synchronous code
class SyncFlaky:
    """A plain callable failing the first ``failures`` times."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, value: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionResetError(f"call {self.calls}")
        return value


def test_a_plain_function_stays_a_plain_function() -> None:
    """@retry on a def gives a def (not a coroutine function) that retries with the same engine."""
    flaky = SyncFlaky(failures=2)

    @retry(max_attempts=3, backoff=NoBackoff())
    def load(key: str) -> str:
        return str(flaky(key))

    assert not inspect.iscoroutinefunction(load)
    assert load("k") == "k"
    assert flaky.calls == 3
    stats = load.retrier.statistics()  # type: ignore[attr-defined]
    assert (stats.calls, stats.attempts, stats.retries, stats.successes) == (1, 3, 2, 1)
    assert_type(load("k"), str)


def test_a_plain_function_gives_up_with_history_and_spends_the_quota() -> None:
    """Giving up in sync code: the real last error with its history; the quota paid for each retry."""
    flaky = SyncFlaky(failures=10)

    @retry(max_attempts=3, backoff=NoBackoff())
    def load() -> None:
        flaky(None)

    with pytest.raises(ConnectionResetError) as caught:
        load()
    history = history_of(caught.value)
    assert history is not None
    assert (history.gave_up, len(history.attempts)) == ("max_attempts", 3)
    (scope,) = load.retrier.statistics().scopes  # type: ignore[attr-defined]
    assert scope.quota is not None
    assert scope.quota.available == 500 - 2 * 5


def test_sync_backoff_sleeps_for_real_unless_test_mode_says_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync form sleeps its backoff with time.sleep; test_mode() switches the sleeping off."""
    import time

    from asyncretry import FixedBackoff
    from asyncretry.testing import test_mode

    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)  # the driver calls time.sleep: recorded, still slept
    flaky = SyncFlaky(failures=1)

    @retry(max_attempts=2, backoff=FixedBackoff(0.02))
    def load(value: str) -> str:
        return str(flaky(value))

    assert load("a") == "a"
    assert slept == [0.02]
    flaky.calls = 0
    with test_mode():
        assert load("b") == "b"
    assert slept == [0.02]  # the retry under test_mode() slept nothing


def test_a_plain_function_returning_a_coroutine_is_refused() -> None:
    """A plain function that returns a coroutine was meant to be awaited: a TypeError, and no warning."""
    async def later() -> int:
        return 1

    @retry
    def wrong() -> Coroutine[Any, Any, int]:
        return later()

    with pytest.raises(TypeError, match="returned a coroutine"):
        _ = wrong()


def test_the_sync_forms_share_one_quota_across_threads() -> None:
    """Eight threads failing through one decorated function: exact quota arithmetic, no lost update."""
    import threading

    @retry(max_attempts=3, backoff=NoBackoff())
    def down() -> None:
        raise ConnectionResetError("down")

    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            with pytest.raises((ConnectionResetError, RetryCapacityExceeded)):
                down()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = down.retrier.statistics()  # type: ignore[attr-defined]
    (scope,) = stats.scopes
    assert scope.quota is not None
    assert stats.calls == 40
    assert scope.quota.available == 500 - 5 * stats.retries


def test_call_sync_and_the_sync_attempts_loop() -> None:
    """Retrier.sync_call and `for attempt in retrier.sync_attempts(): with attempt:` retry plain code."""
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()))
    flaky = SyncFlaky(failures=1)
    assert retrier.sync_call(flaky, "x") == "x"
    flaky.calls = 0
    for attempt in retrier.sync_attempts(scope="loop"):
        with attempt:
            value = flaky("y")
    assert value == "y"
    assert retrier.statistics().retries == 2
