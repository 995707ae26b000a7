"""The httpx and aiohttp twins of asyncretry's errors: one naming rule, and new instances carrying everything.

``as_httpx_error`` and ``as_aiohttp_error`` are fed the same table: each returns a new object of the class
that is both the asyncretry error and the client's error, with the original's message, attributes, attempt
history, notes, cause, context and traceback, and leaves the original as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import aiohttp
import httpx
import pytest

import asyncretry
import asyncretry.aiohttp
import asyncretry.httpx
from asyncretry import (
    AsyncRetryError,
    AttemptTimeout,
    BackendUnavailable,
    CircuitOpenError,
    RateLimitTimeout,
    RetryBudgetExceeded,
    RetryCapacityExceeded,
    RetryHistory,
    attach_history,
    history_of,
)
from asyncretry.aiohttp._errors import as_aiohttp_error
from asyncretry.httpx._errors import as_httpx_error

REQUEST = httpx.Request("GET", "https://example.test/")

CONVERTERS: dict[str, tuple[Callable[[AsyncRetryError], AsyncRetryError], type[Exception]]] = {
    "httpx": (lambda error: as_httpx_error(error, REQUEST), httpx.HTTPError),
    "aiohttp": (as_aiohttp_error, aiohttp.ClientError),
}

ERRORS: list[Callable[[], AsyncRetryError]] = [
    lambda: RetryCapacityExceeded(available=1.0, cost=5.0),
    lambda: RetryBudgetExceeded(available=0.0),
    lambda: RateLimitTimeout(name="limiter", wait=2.0, timeout=1.0),
    lambda: CircuitOpenError(name="breaker", state="open", retry_after=5.0),
    lambda: BackendUnavailable("redis down"),
    lambda: AttemptTimeout(1.0),
]


def _raised(make: Callable[[], AsyncRetryError]) -> AsyncRetryError:
    """An error as the engine hands it over: raised from a cause, during another error, with a history."""

    def fail() -> None:
        try:
            int("handled")
        except ValueError:
            error = make()
            attach_history(error, RetryHistory(scope="api", attempts=(), elapsed=0.5, gave_up="quota"))
            raise error from OSError("the cause")

    try:
        fail()
    except AsyncRetryError as raised:
        return raised
    raise AssertionError("fail() returned")


@pytest.mark.parametrize("client", CONVERTERS)
@pytest.mark.parametrize("make", ERRORS, ids=lambda make: type(make()).__name__)
def test_a_twin_is_a_new_instance_carrying_everything(client: str, make: Callable[[], AsyncRetryError]) -> None:
    """The twin is a new object of a class that is both errors, with the same message, attributes, history,
    notes, cause, context and traceback; the original keeps its own class."""
    convert, client_error = CONVERTERS[client]
    error = _raised(make)
    original_class = type(error)
    twin = convert(error)
    assert twin is not error
    assert type(error) is original_class
    assert isinstance(twin, original_class)
    assert isinstance(twin, client_error)
    assert str(twin) == str(error)
    assert twin.args == error.args
    assert {key: value for key, value in vars(twin).items() if key != "_request"} == vars(error)
    assert history_of(twin) is history_of(error) is not None
    assert twin.__notes__ == error.__notes__
    assert isinstance(twin.__cause__, OSError)
    assert isinstance(twin.__context__, ValueError)
    assert twin.__suppress_context__ is True
    assert twin.__traceback__ is error.__traceback__


@pytest.mark.parametrize("client", CONVERTERS)
def test_an_error_of_another_class_is_returned_as_it_is(client: str) -> None:
    """An error that has no twin (RetriesExhausted, or a twin already) comes back unchanged."""
    convert, _ = CONVERTERS[client]
    exhausted = asyncretry.RetriesExhausted("gave up", last_result=None, why="max_attempts")
    assert convert(exhausted) is exhausted
    twin = convert(CircuitOpenError(name="breaker", state="open", retry_after=5.0))
    assert convert(twin) is twin


def test_the_httpx_twin_names_its_request() -> None:
    """An httpx twin's request is the request that was refused."""
    twin = as_httpx_error(CircuitOpenError(name="breaker", state="open", retry_after=5.0), REQUEST)
    assert isinstance(twin, httpx.TransportError)
    assert twin.request is REQUEST


@pytest.mark.parametrize("module", [asyncretry.httpx, asyncretry.aiohttp], ids=lambda module: module.__name__)
def test_every_twin_is_named_by_one_rule(module: ModuleType) -> None:
    """Each twin class has its asyncretry class's name, with ``Error`` added where that name has none."""
    twins = [getattr(module, name) for name in module.__all__ if isinstance(getattr(module, name), type)
             and issubclass(getattr(module, name), AsyncRetryError)]
    assert len(twins) == 6
    for twin in twins:
        core = next(base for base in twin.__mro__[1:] if base.__module__ == AsyncRetryError.__module__)
        expected = core.__name__ if core.__name__.endswith("Error") else f"{core.__name__}Error"
        assert twin.__name__ == expected


@pytest.mark.parametrize(
    ("module", "old"),
    [(asyncretry.httpx, "CircuitOpenHTTPError"), (asyncretry.aiohttp, "CircuitOpenClientError")],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_the_old_twin_names_still_work_with_a_warning(module: ModuleType, old: str) -> None:
    """The old names give the new class, with a DeprecationWarning naming the new name."""
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: use \S+\.CircuitOpenError"):
        value = getattr(module, old)
    assert value is module.CircuitOpenError
    assert old not in module.__all__


def test_unknown_names_still_raise_attribute_error() -> None:
    """A name that never existed is an AttributeError naming the module, not a warning."""
    for module in (asyncretry.httpx, asyncretry.aiohttp):
        with pytest.raises(AttributeError, match=module.__name__):
            module.NoSuchName  # noqa: B018
