"""@retry wraps an async function in a shared retrier and keeps its name, docs and signature."""

from __future__ import annotations

import inspect
from typing import Any, assert_type

import pytest

from asyncretry import NoBackoff, Retrier, RetryPolicy, history_of, retry


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


@pytest.mark.anyio
async def test_policy_fields_apply_on_top_of_a_policy() -> None:
    """retry(policy, **fields) uses the policy with those fields replaced."""
    base = RetryPolicy(max_attempts=5, backoff=NoBackoff())
    flaky = Flaky(failures=10)

    @retry(base, max_attempts=2)
    async def get() -> Any:
        return await flaky(None)

    with pytest.raises(ConnectionResetError) as err:
        await get()
    assert flaky.calls == 2
    history = history_of(err.value)
    assert history is not None
    assert history.gave_up == "max_attempts"
    assert get.retrier.policy == base.replace(max_attempts=2)  # type: ignore[attr-defined]


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
    with pytest.raises(TypeError, match="@retry needs an async function"):
        retry()(42)  # type: ignore[arg-type]
