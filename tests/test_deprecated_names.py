"""Renamed public names keep working with a DeprecationWarning, and every public name follows one sync/async rule.

The rule (docs/retry-engine.md, "Names: async first"): the plain name is async, a synchronous twin carries
``sync_`` / ``Sync`` in front; inside httpx and the AWS integration the host library's convention wins.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import asyncretry
from asyncretry import BackendLost, NoBackoff, Retrier, RetryPolicy, TokenBucket

RENAMED = [
    ("asyncretry", "AsyncTokenBucket", TokenBucket),
    ("asyncretry", "BackendUnavailableEvent", BackendLost),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED, ids=lambda value: getattr(value, "__name__", value))
def test_old_module_names_give_the_new_object_with_a_warning(module: str, old: str, new: type) -> None:
    """Reading an old name gives the renamed object and a DeprecationWarning naming its new name."""
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: use {module}\.{new.__name__}"):
        value = getattr(importlib.import_module(module), old)
    assert value is new
    assert old not in asyncretry.__all__


def test_old_names_import_with_a_warning() -> None:
    """``from asyncretry import AsyncTokenBucket`` still works, with the warning."""
    with pytest.warns(DeprecationWarning, match="TokenBucket"):
        from asyncretry import AsyncTokenBucket
    assert AsyncTokenBucket is TokenBucket


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    """A name that never existed raises AttributeError naming the module."""
    with pytest.raises(AttributeError, match="'asyncretry' has no attribute 'NoSuchName'"):
        asyncretry.NoSuchName  # noqa: B018


def test_retrier_call_sync_still_works_with_a_warning() -> None:
    """Retrier.call_sync and call_sync_in are sync_call and sync_call_in under their old names, with a warning."""
    retrier = Retrier(RetryPolicy(backoff=NoBackoff()))
    with pytest.warns(DeprecationWarning, match=r"Retrier\.call_sync\(\) is deprecated: use Retrier\.sync_call\(\)"):
        assert retrier.call_sync(str.upper, "ok") == "OK"
    with pytest.warns(DeprecationWarning, match=r"Retrier\.call_sync_in\(\) is deprecated: use Retrier\.sync_call_in"):
        assert retrier.call_sync_in("files", str.upper, "ok") == "OK"
    assert retrier.sync_call_in("files", str.lower, "OK") == "ok"
    assert retrier.statistics().calls == 3


# ------------------------------------------------------------------------------------------ the naming rule
PUBLIC_MODULES = ["asyncretry", "asyncretry.testing", "asyncretry.otel", "asyncretry.protocols",
                  "asyncretry.redis", "asyncretry.grpc", "asyncretry.aiohttp", "asyncretry.httpx", "asyncretry.aws"]
# Where the host library's convention wins: httpx's AsyncHTTPTransport/HTTPTransport, botocore (sync) and
# aiobotocore (async) handlers.
HOST_CONVENTION = {"asyncretry.httpx": {"AsyncRetryTransport"}, "asyncretry.aws": {"AsyncClientRetryHandler"}}
# Named after the library, not an async/sync marker.
LIBRARY_NAME = {"AsyncRetryError"}
# Methods whose names are fixed by something else: httpx's transport API, the remote-state protocols'
# awaitable twins on the local primitives, the deprecated names above, SyncAttempts.end_sync (left for the
# drivers' restructuring to rename), and a question about the user's hook rather than a twin
# (RetryPolicy.on_give_up_is_async).
FIXED_METHODS = {"handle_async_request", "acquire_async", "record_async", "try_acquire_async", "release_async",
                 "call_sync", "call_sync_in", "end_sync", "on_give_up_is_async"}
TWIN = re.compile(r"(^Async|Async$|_async$|^async_|Sync$|_sync$)")


def _public(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_names_follow_the_async_first_rule(module_name: str) -> None:
    """No public name marks the async side (``Async...``) or puts ``sync`` at the end, host conventions aside."""
    allowed = HOST_CONVENTION.get(module_name, set()) | LIBRARY_NAME
    bad = [name for name, _ in _public(module_name) if TWIN.search(name) and name not in allowed]
    assert not bad, f"{module_name}: {bad}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_methods_follow_the_async_first_rule(module_name: str) -> None:
    """No public method of a public class marks the async side or puts ``sync`` at the end."""
    bad = [
        f"{name}.{member}" for name, obj in _public(module_name) if inspect.isclass(obj)
        for member in dir(obj)
        if not member.startswith("_") and TWIN.search(member) and member not in FIXED_METHODS
    ]
    assert not bad, f"{module_name}: {bad}"


IRREGULAR_PAST = {"GaveUp", "HedgeSent", "BackendLost", "LimiterHeld"}


def test_events_are_named_as_past_facts() -> None:
    """Every public event class names what happened in the past tense (``RetryScheduled``), never ``...Event``."""
    events = [name for name in asyncretry.__all__
              if inspect.isclass(getattr(asyncretry, name)) and issubclass(getattr(asyncretry, name), asyncretry.Event)
              and name != "Event"]
    assert len(events) >= 14
    bad = [name for name in events if not (name.endswith("ed") or name in IRREGULAR_PAST)]
    assert not bad
