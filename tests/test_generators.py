"""@retry on generator functions retries their start: a failure before the first item restarts them, one after
an item has been yielded reaches the caller as it is."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import assert_type

import pytest

from asyncretry import Classifier, HedgingConfig, NoBackoff, RetryPolicy, history_of, retry

QUICK = RetryPolicy(max_attempts=3, backoff=NoBackoff())


class Source:
    """A stream that fails with ConnectionResetError at item ``fail_at`` (0: before the first) on its first
    ``failures`` runs, and counts its runs and its closes."""

    def __init__(self, failures: int, fail_at: int = 0, items: int = 3) -> None:
        self.failures = failures
        self.fail_at = fail_at
        self.items = items
        self.runs = 0
        self.closed = 0

    def step(self, index: int) -> None:
        if index == self.fail_at and self.runs <= self.failures:
            raise ConnectionResetError(f"run {self.runs}, item {index}")


def _items(source: Source, prefix: str) -> Iterator[str]:
    """The stream's items, as the source lets them through (counting the run and its close)."""
    source.runs += 1
    try:
        for index in range(source.items):
            source.step(index)
            yield f"{prefix}{index}"
    finally:
        source.closed += 1


def async_stream(source: Source) -> Callable[[str], AsyncGenerator[str, None]]:
    @retry(QUICK)
    async def stream(prefix: str) -> AsyncGenerator[str, None]:
        """Stream the items."""
        for item in _items(source, prefix):
            yield item

    return stream


def sync_stream(source: Source) -> Callable[[str], Iterator[str]]:
    @retry(QUICK)
    def stream(prefix: str) -> Iterator[str]:
        """Stream the items."""
        yield from _items(source, prefix)

    return stream


async def collect(stream: AsyncIterator[str], into: list[str]) -> None:
    """Append every item of ``stream`` to ``into`` (what was seen stays seen if the stream fails)."""
    async for item in stream:
        into.append(item)


@retry(QUICK)
async def typed_pages(start: int) -> AsyncIterator[int]:
    """Pages from ``start``."""
    yield start


@retry(QUICK)
def typed_lines(path: str) -> Generator[str, int, bool]:
    """Lines of ``path``."""
    yield path
    return True


@pytest.mark.anyio
async def test_async_generator_failing_before_its_first_item_is_restarted() -> None:
    """Two failures before the first item: the generator runs three times and the caller sees every item once."""
    source = Source(failures=2)
    stream = async_stream(source)
    items = [item async for item in stream("a")]
    assert items == ["a0", "a1", "a2"]
    assert (source.runs, source.closed) == (3, 3)


@pytest.mark.anyio
async def test_async_generator_failing_after_an_item_raises() -> None:
    """A failure after an item was yielded is raised to the caller, and the generator is not restarted."""
    source = Source(failures=5, fail_at=1)
    stream = async_stream(source)
    seen: list[str] = []
    with pytest.raises(ConnectionResetError, match="run 1, item 1"):
        await collect(stream("a"), seen)
    assert seen == ["a0"]
    assert source.runs == 1


@pytest.mark.anyio
async def test_async_generator_that_never_starts_gives_up_with_the_history() -> None:
    """A generator failing before its first item on every attempt ends as a call does: the error, 3 attempts."""
    source = Source(failures=10)
    stream = async_stream(source)
    with pytest.raises(ConnectionResetError) as caught:
        await collect(stream("a"), [])
    assert source.runs == 3
    history = history_of(caught.value)
    assert history is not None
    assert len(history.attempts) == 3


@pytest.mark.anyio
async def test_async_generator_passes_sent_values_thrown_errors_and_close_through() -> None:
    """asend reaches the user's generator, athrow is handled by it, and aclose closes it."""
    received: list[object] = []

    @retry(QUICK)
    async def echo() -> AsyncGenerator[int, str]:
        value = 0
        while True:
            try:
                received.append((yield value))
            except KeyError:
                received.append("KeyError handled")
            value += 1

    generator = echo()
    assert await anext(generator) == 0
    assert await generator.asend("hello") == 1
    assert await generator.athrow(KeyError("k")) == 2
    await generator.aclose()
    assert received == ["hello", "KeyError handled"]


@pytest.mark.anyio
async def test_an_empty_async_generator_is_a_success() -> None:
    """A generator that ends before yielding is a success with no items, run once."""
    runs = []

    @retry(QUICK)
    async def nothing() -> AsyncGenerator[int, None]:
        runs.append(1)
        if not runs:
            yield 0  # never: a generator function that yields nothing

    assert [item async for item in nothing()] == []
    assert runs == [1]


def test_sync_generator_failing_before_its_first_item_is_restarted() -> None:
    """The plain generator twin: two failures before the first item, three runs, every item once."""
    source = Source(failures=2)
    stream = sync_stream(source)
    assert list(stream("s")) == ["s0", "s1", "s2"]
    assert (source.runs, source.closed) == (3, 3)


def test_sync_generator_failing_after_an_item_raises() -> None:
    """A failure after the first item reaches the caller as it is, with no restart."""
    source = Source(failures=5, fail_at=2)
    stream = sync_stream(source)
    seen: list[str] = []
    with pytest.raises(ConnectionResetError, match="run 1, item 2"):
        seen.extend(stream("s"))
    assert seen == ["s0", "s1"]
    assert source.runs == 1


def test_sync_generator_passes_send_throw_close_and_its_return_value_through() -> None:
    """send, throw and close reach the user's generator, and its return value is the wrapper's."""
    generator = typed_lines("x")
    assert next(generator) == "x"
    with pytest.raises(StopIteration) as stopped:
        generator.send(3)
    assert stopped.value.value is True

    closed = []

    @retry(QUICK)
    def counter() -> Generator[int, None, None]:
        try:
            yield 1
            yield 2
        finally:
            closed.append(True)

    counting = counter()
    assert next(counting) == 1
    with pytest.raises(ValueError, match="thrown"):
        counting.throw(ValueError("thrown"))
    assert closed == [True]


def test_the_wrappers_keep_generator_kind_name_and_types() -> None:
    """The wrappers are generator functions of the same name and signature, typed as the originals for mypy."""
    assert_type(typed_pages(1), AsyncIterator[int])
    assert_type(typed_lines("p"), Generator[str, int, bool])
    assert typed_pages.__name__ == "typed_pages"
    assert typed_lines.__doc__ == "Lines of ``path``."
    assert inspect.isasyncgenfunction(typed_pages)
    assert inspect.isgeneratorfunction(typed_lines)


def _type_errors_mypy_must_report() -> None:
    """Never called: each line is a type error; had the signature been lost, the ignores would be unused."""
    typed_pages("1")  # type: ignore[arg-type]
    typed_lines(2)  # type: ignore[arg-type]


def test_hedging_and_result_judging_are_refused_for_generators() -> None:
    """A generator cannot be hedged nor judged by its result: refused at decoration, saying why."""
    with pytest.raises(ValueError, match="hedging would start two generators"):

        @retry(RetryPolicy(hedging=HedgingConfig(delay=0.1)))
        async def hedged() -> AsyncGenerator[int, None]:
            yield 1

    with pytest.raises(ValueError, match="retry_if_result"):

        @retry(classifier=Classifier(retry_if_result=lambda result: result is None))
        def judged() -> Iterator[int]:
            yield 1


@pytest.mark.anyio
async def test_the_start_is_retried_on_what_on_names() -> None:
    """on= decides what restarts a generator; after its attempts the last error is raised."""
    runs = []

    @retry(on=KeyError, max_attempts=3, backoff=NoBackoff())
    async def flaky() -> AsyncGenerator[int, None]:
        runs.append(1)
        if runs:
            raise KeyError("down")
        yield 1  # never: it raises before

    with pytest.raises(KeyError, match="down"):
        async for _ in flaky():
            pass
    assert len(runs) == 3
