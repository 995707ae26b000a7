"""Every async test runs twice: on asyncio and on trio, in virtual time unless marked ``real_time``.

asyncio runs on asyncretry's own virtual-time loop, trio on ``MockClock(autojump_threshold=0)``; both
jump straight to the next timer, so timing tests are exact and instant.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
from collections.abc import Container, Iterator
from typing import Any

import anyio
import pytest
from hypothesis import settings

import virtual_time
from asyncretry import Event, EventBus
from asyncretry._testserver import FaultServer, FaultyApp, ServerConfig

# The Redis fixtures live here (conftest level) so that the session-scoped server starts once per run,
# not once per test module that uses it. The Redis test modules override anyio_backend themselves
# (asyncio only: redis-py's client does not run on trio).
from conftest_redis import closed_port as closed_port
from conftest_redis import own_redis_server as own_redis_server
from conftest_redis import prefix as prefix
from conftest_redis import redis_server as redis_server

# Property tests are part of a deterministic suite: the same examples on every run and machine,
# no example database written into the tree, and no wall-clock deadline on a loaded CI machine.
settings.register_profile("asyncretry", derandomize=True, database=None, deadline=None)
settings.load_profile("asyncretry")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    real_time = request.node.get_closest_marker("real_time") is not None
    return (request.param, {} if real_time else virtual_time.backend_options(request.param))


# -- the project's fault-injecting HTTP server (uvicorn on 127.0.0.1), for the httpx integration tests
@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    """One fault server per test module; each test gets its app configured afresh (:func:`fresh_app`)."""
    with FaultServer(FaultyApp()) as running:
        yield running


def fresh_app(server: FaultServer, config: ServerConfig) -> FaultyApp:
    """The server's app with ``config`` and no record of earlier requests."""
    app = server.app
    assert isinstance(app, FaultyApp)
    app.configure(config)
    app.reset()
    return app


def under_load(begin: float, outcomes: Container[object], *, seconds: float = 0.5, at_most: float = 10.0) -> bool:
    """Whether a worker of a load test against a real server goes on: for ``seconds`` from ``begin``, and on a
    machine too loaded for any answer within the policy's deadline in that time, until the first 200 (at most
    ``at_most`` seconds from ``begin``)."""
    now = anyio.current_time()
    return now < begin + seconds or (200 not in outcomes and now < begin + at_most)


# -- the event recorder of the whole suite
class EventLog:
    """What a bus delivers, in order: the events themselves, or what :meth:`keep` makes of them.

    Args:
        bus: the bus to listen to; a new :class:`~asyncretry.EventBus` (``.bus``) if omitted.

    A test module that keeps only some events, or keeps them as tuples, overrides :meth:`keep`.
    """

    def __init__(self, bus: EventBus | None = None) -> None:
        self.bus = bus if bus is not None else EventBus()
        self.events: list[Any] = []
        self.undo = self.bus.subscribe(self._hear)

    def keep(self, event: Event) -> Any:
        """What to record of ``event`` (``None``: nothing); the event itself by default."""
        return event

    def of(self, *types: type[Event]) -> list[Any]:
        """The recorded events of these types, in order."""
        return [e for e in self.events if isinstance(e, types)]

    def names(self, *types: type[Event]) -> list[str]:
        """The class names of the recorded events of these types, in order."""
        return [type(e).__name__ for e in self.of(*types)]

    def _hear(self, event: Event) -> None:
        kept = self.keep(event)
        if kept is not None:
            self.events.append(kept)


# -- the httpx integration's behavioural tests run against httpx and against httpx2
CLIENT_PACKAGES = ("httpx", "httpx2")


# respx's global router patches httpx's own transports: tests using it run on httpx only. A test using a
# ``respx.MockRouter`` runs on both (for httpx2, tests/respx_twin.py's router takes its place).
_GLOBAL_RESPX = re.compile(r"\brespx\.(mock|get|post|put|patch|delete|head|options|route|calls)\b")


def _mocks_with_respx(metafunc: pytest.Metafunc) -> bool:
    """Whether a test uses respx's global router, itself or through a helper of its module."""
    text = _source(metafunc.function)
    helpers = _global_respx_helpers(metafunc.module.__name__)
    return bool(_GLOBAL_RESPX.search(text)) or any(re.search(rf"\b{re.escape(name)}\b", text) for name in helpers)


@functools.cache
def _global_respx_helpers(module_name: str) -> frozenset[str]:
    """The names of a test module's own functions and classes that use respx's global router (read once per
    module: reading a class's source parses its whole file)."""
    module = sys.modules[module_name]
    return frozenset(
        name for name, value in vars(module).items()
        if getattr(value, "__module__", None) == module_name and callable(value)
        and _GLOBAL_RESPX.search(_source(value))
    )


def _source(value: Any) -> str:
    try:
        return inspect.getsource(value)
    except (OSError, TypeError):
        return ""


def _httpx2_twin(value: Any) -> Any:
    """The object of ``asyncretry.httpx2`` generated from ``value`` of ``asyncretry.httpx``, if it is one."""
    home = getattr(value, "__module__", None)
    if not isinstance(home, str) or not home.startswith("asyncretry.httpx.") or not hasattr(value, "__name__"):
        return None
    twin_module = importlib.import_module("asyncretry.httpx2." + home.removeprefix("asyncretry.httpx."))
    return getattr(twin_module, value.__name__, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "client_package" in metafunc.fixturenames:
        packages = CLIENT_PACKAGES[:1] if _mocks_with_respx(metafunc) else CLIENT_PACKAGES
        metafunc.parametrize("client_package", packages, indirect=True)


@pytest.fixture
def client_package(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The HTTP client package a test of the httpx integration runs against (a module opts in with
    ``pytest.mark.usefixtures("client_package")``). For httpx2, the test modules' ``httpx`` is httpx2, their
    ``respx`` is tests/respx_twin.py, and the names they imported from ``asyncretry.httpx`` are
    ``asyncretry.httpx2``'s, for that test."""
    if request.param == "httpx2":
        import httpx2

        import respx_twin

        for name, module in list(sys.modules.items()):
            if not (name.startswith("test_httpx_") or name == request.module.__name__):
                continue
            if getattr(module, "httpx", None) is not None:
                monkeypatch.setattr(module, "httpx", httpx2)
            if getattr(module, "respx", None) is not None:
                monkeypatch.setattr(module, "respx", respx_twin)
            for attr, value in list(vars(module).items()):
                twin = _httpx2_twin(value)
                if not attr.startswith("__") and twin is not None:
                    monkeypatch.setattr(module, attr, twin)
    return str(request.param)
