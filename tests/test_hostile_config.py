"""Every public constructor either refuses a hostile value with a named error or builds an object that works.

The parameters are found by introspection (``inspect.signature``) of every public class of ``asyncretry``,
``asyncretry.httpx``, ``asyncretry.httpx2``, ``asyncretry.redis``, ``asyncretry.otel``, ``asyncretry.testing``,
``asyncretry.aiohttp``, ``asyncretry.grpc`` and ``asyncretry.aws`` (and of the public functions that build a
configured object, such as ``asyncretry.otel.instrument`` or ``asyncretry.aws.install``), so a parameter added later
is driven here without any change to this file; a public class added later fails
``test_every_public_class_is_covered`` until it is given a first use here (or named as not a setting).

The rule, for each (constructor, parameter, hostile value): either a ``ValueError`` or ``TypeError`` whose
message names the parameter, or an object whose ``repr()``, ``statistics()`` and first use raise no builtin
error (the library's own errors, such as ``RetryCapacityExceeded``, are
behaviour, not breakage). The per-request overrides (httpx's extensions, the aiohttp middleware's
``options(...)``, gRPC's ``call_options(...)``) are driven the same way at the end. The first uses of the
aiohttp, gRPC and AWS integrations (no network: fake handlers, continuations and ``before-send`` answers)
are in ``hostile_integrations.py``.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import math
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import asyncretry
import asyncretry.httpx
import asyncretry.httpx2
import asyncretry.otel
import asyncretry.redis
import asyncretry.testing
import hostile_integrations as integrations
import virtual_time
from asyncretry import AsyncRetryError, OutcomeKind, RetryPolicy

HOSTILE: list[Any] = [
    math.nan, math.inf, -math.inf,
    10**400, -(10**400), 2**64,
    1e308, -1e308, 1e-320, 5e-324, -5e-324, 1e-62,
    0, 0.0, -1, -0.5, 7, 0.5,
    True, False,
    "abc", "", "1",
    None, object(), 5j, [1.0], (), {"a": 1}, frozenset({1}), b"x",
]

# Besides exceptions, enums, protocols, events and statistics (found by type below), the records the library
# builds and hands out (histories, outcomes, attempts, the quotas servers announce) hold what they are given
# and are not settings; and
# VirtualTimeEventLoop is an event loop, made by asyncretry.testing.virtual_time_loop(). Instrumentation is
# made by asyncretry.otel.instrument(), which is driven instead (see FACTORIES).
NOT_SETTINGS = {
    "AnnouncedQuota", "Attempt", "AttemptRecord", "Attempts", "EnvSettings", "GiveUpInfo", "Instrumentation", "Outcome",
    "RetryHistory", "RetryInfo", "RetrierStatistics", "ScopeStatistics", "SyncAttempts", "VirtualTimeEventLoop",
    *integrations.NOT_SETTINGS,
}
PUBLIC_MODULES = (
    asyncretry, asyncretry.httpx, asyncretry.httpx2, asyncretry.redis, asyncretry.otel, asyncretry.testing,
    *integrations.MODULES,
)

# The public functions that build a configured object from settings: driven like the constructors.
FACTORIES: dict[str, Callable[..., Any]] = {
    "instrument": asyncretry.otel.instrument,
    "retry": asyncretry.retry,
    "fixed_random": asyncretry.testing.fixed_random,
    **integrations.FACTORIES,
}


def _public_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if not isinstance(obj, type) or name in NOT_SETTINGS:
                continue
            if issubclass(obj, (BaseException, enum.Enum, asyncretry.Event)) or getattr(obj, "_is_protocol", False):
                continue
            if name.endswith("Statistics"):
                continue
            # A name two modules define (the httpx and the aiohttp HttpClassifier): the later one by its full name.
            found[name if found.get(name, obj) is obj else f"{module.__name__}.{name}"] = obj
    return found


CLASSES: dict[str, Callable[..., Any]] = {**_public_classes(), **FACTORIES}


def _dead_redis_url() -> str:
    """A Redis URL on 127.0.0.1 where nothing listens: every round trip is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{probe.getsockname()[1]}/0"


DEAD_REDIS = _dead_redis_url()

# The arguments a constructor needs before one of its parameters can be driven.
REQUIRED: dict[str, dict[str, Any]] = {
    "TokenBucket": {"rate": 1.0, "capacity": 1.0},
    "BudgetTicket": {"slice": 0},
    "FixedBackoff": {"delay": 0.5},
    "HedgingConfig": {"delay": 0.1},
    "SequenceRandom": {"values": [0.5]},
    "TestMode": {"max_attempts": None, "no_wait": True},
    "RedisBackend": {"client": DEAD_REDIS},
    "RedisTokenBucket": {"redis": DEAD_REDIS, "rate": 1.0, "capacity": 1.0},
    "RedisRetryQuota": {"redis": DEAD_REDIS},
    "RedisAdaptiveRateLimiter": {"redis": DEAD_REDIS},
    "RedisCircuitBreaker": {"redis": DEAD_REDIS},
    "RedisRetryBudget": {"redis": DEAD_REDIS},
}


def _in_virtual_time(main: Callable[[], Awaitable[None]]) -> None:
    virtual_time.run(main, "trio")


def _on_asyncio(main: Callable[[], Awaitable[None]]) -> None:
    """Redis-backed objects run on asyncio only (redis-py's client)."""
    anyio.run(main, backend="asyncio")


def _use_bucket(obj: asyncretry.TokenBucket) -> None:
    obj.try_acquire(min(1.0, obj.capacity))
    obj.time_until_available(min(1.0, obj.capacity))


def _use_quota(obj: asyncretry.RetryQuota) -> None:
    obj.try_acquire(obj.cost_of(OutcomeKind.TRANSIENT))
    obj.release(1)


def _use_limiter(obj: asyncretry.AdaptiveRateLimiter) -> None:
    obj.update(True)
    obj.update(False)
    obj.try_acquire()
    obj.time_until_available()


def _use_breaker(obj: asyncretry.CircuitBreaker) -> None:
    probe = obj.acquire()
    obj.record_failure(probe)
    _ = obj.state


def _use_budget(obj: asyncretry.RetryBudget) -> None:
    async def main() -> None:
        obj.record_request()
        ticket = obj.spend()
        if ticket is not None:
            obj.refund(ticket)
        for _ in range(100):  # spent to exhaustion (its events), unless the floor is huge
            if not obj.try_spend():
                break
        for _ in range(3):
            await anyio.sleep(obj.config.window_seconds / 2)
            obj.record_request()
            obj.try_spend()

    _in_virtual_time(main)


def _client_package(transport_class: Any) -> Any:
    """The HTTP client package (httpx or httpx2) whose transports a retry transport class wraps."""
    return httpx2 if transport_class.__module__.startswith("asyncretry.httpx2") else httpx


def _use_async_transport(obj: Any) -> None:
    package = _client_package(type(obj))

    async def send() -> None:
        async with package.AsyncClient(transport=obj) as client:
            await client.get("http://test.invalid/")

    _in_virtual_time(send)


def _use_sync_transport(obj: Any) -> None:
    with _client_package(type(obj)).Client(transport=obj) as client:
        client.get("http://test.invalid/")


def _use_redis(obj: Any) -> None:
    """One round of the object's remote operations against a Redis that refuses: the fallback or the outage."""

    async def main() -> None:
        with contextlib.suppress(AsyncRetryError):
            if isinstance(obj, asyncretry.redis.RedisBackend):
                obj.key("bucket", "x")
                obj.next_probe_in(obj.key("bucket", "x"))
            elif isinstance(obj, asyncretry.redis.RedisTokenBucket):
                await obj.try_acquire(min(1.0, obj.capacity))
                await obj.time_until_available(min(1.0, obj.capacity))
            elif isinstance(obj, asyncretry.redis.RedisRetryQuota):
                await obj.try_acquire(obj.cost_of(OutcomeKind.TRANSIENT))
                await obj.release(1)
            elif isinstance(obj, asyncretry.redis.RedisAdaptiveRateLimiter):
                obj.update(True)
                obj.update(False)
                obj.time_until_available()
                await obj.refresh()
            elif isinstance(obj, asyncretry.redis.RedisCircuitBreaker):
                probe = await obj.acquire()
                await obj.record(success=False, probe=probe)
            elif isinstance(obj, asyncretry.redis.RedisRetryBudget):
                await obj.record_request()
                ticket = await obj.spend()
                if ticket is not None:
                    obj.refund(ticket)
        backend = obj if isinstance(obj, asyncretry.redis.RedisBackend) else obj.backend
        await backend.aclose()

    _on_asyncio(main)


class _Decorator:
    """What ``retry(...)`` returned, so that its first use can be looked up by type."""

    def __init__(self, decorate: Callable[..., Any]) -> None:
        self.decorate = decorate


class _Random:
    """What ``fixed_random(...)`` returned."""

    def __init__(self, draw: Callable[[], float]) -> None:
        self.draw = draw


def _use_decorator(obj: _Decorator) -> None:
    failures = [ConnectionResetError()]

    async def flaky() -> int:
        if failures:
            raise failures.pop()
        return 1

    decorated = obj.decorate(flaky)

    async def main() -> None:
        with contextlib.suppress(AsyncRetryError, ConnectionResetError):
            await decorated()

    _in_virtual_time(main)


def _use_instrumentation(obj: Any) -> None:
    with obj:
        obj.observe(asyncretry.RetryQuota())
        asyncretry.GLOBAL_EVENTS.emit(asyncretry.Throttled(time=0.0, source="test", reason="test"))


# How each public class (or factory) is used once, as a user would, after it was built from a hostile value.
# Looked up by the exact class first (its public name, then its name), then by a base class (an
# ExponentialBackoff is a Backoff).
FIRST_USES: dict[str, Callable[[Any], object]] = {
    "TokenBucket": _use_bucket,
    "RetryQuota": _use_quota,
    "AdaptiveRateLimiter": _use_limiter,
    "CircuitBreaker": _use_breaker,
    "RetryBudget": _use_budget,
    "BudgetTicket": lambda obj: asyncretry.RetryBudget().refund(obj),
    "RequestOverrides": lambda obj: asyncretry.parse_overrides(
        {key: getattr(obj, key) for key in sorted(asyncretry.RequestOverrides.keys()) if getattr(obj, key) is not None}
    ),
    "RetryQuotaConfig": lambda obj: _use_quota(asyncretry.RetryQuota(obj)),
    "AdaptiveLimiterConfig": lambda obj: _use_limiter(asyncretry.AdaptiveRateLimiter(obj)),
    "CircuitBreakerConfig": lambda obj: _use_breaker(asyncretry.CircuitBreaker(obj)),
    "RetryBudgetConfig": lambda obj: _use_budget(asyncretry.RetryBudget(obj)),
    "HedgingConfig": lambda obj: _run_calls(asyncretry.Retrier(RetryPolicy(hedging=obj))),
    "DeliveryPolicy": lambda obj: [
        (obj.nominal_delay(attempt), obj.phase(attempt), obj.to_json()) for attempt in range(1, obj.max_retries + 2)
    ],
    **dict.fromkeys(
        ("ExponentialBackoff", "DecorrelatedJitterBackoff", "FixedBackoff", "LinearBackoff", "NoBackoff"),
        lambda obj: [obj.delay(attempt, 0.5) for attempt in (1, 2, 50)],
    ),
    "Classifier": lambda obj: (obj.classify_error(ConnectionResetError()), obj.classify_result(None)),
    "RetryPolicy": lambda obj: _run_calls(asyncretry.Retrier(obj)),
    "Retrier": lambda obj: _run_calls(obj),
    "EventBus": lambda obj: obj.emit(asyncretry.Throttled(time=0.0, source="test", reason="test")),
    "AnyioClock": lambda obj: _in_virtual_time(lambda: obj.sleep(0.01)),
    "VirtualClock": lambda obj: obj.now(),
    "SequenceRandom": lambda obj: obj(),
    "TestMode": lambda obj: obj,  # a record of settings: test_mode() applies it (tests/test_testmode.py)
    "HttpClassifier": lambda obj: obj.plain_success(200),
    "AsyncRetryTransport": _use_async_transport,
    "RetryTransport": _use_sync_transport,
    "RedisBackend": _use_redis,
    "RedisTokenBucket": _use_redis,
    "RedisRetryQuota": _use_redis,
    "RedisAdaptiveRateLimiter": _use_redis,
    "RedisCircuitBreaker": _use_redis,
    "RedisRetryBudget": _use_redis,
    "Instrumentation": _use_instrumentation,
    "_Decorator": _use_decorator,
    "_Random": lambda obj: [obj.draw() for _ in range(3)],
    **integrations.FIRST_USES,
}

# The factories whose result is a plain function, a context manager or nothing (what they changed is one of
# their arguments): wrapped so that the first use is found by type.
WRAP_RESULT: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "retry": lambda made, _: _Decorator(made),
    "fixed_random": lambda made, _: _Random(made),
    "call_options": lambda made, _: integrations.CallOptionsMade(made),
    "install_session": lambda _, arguments: integrations.SessionInstalled(arguments["session"]),
}


def _first_use_of(obj: Any) -> Callable[[Any], object] | None:
    """The first use of ``obj``'s class, by its public name (``asyncretry.aiohttp.HttpClassifier``) or its
    name alone (``HttpClassifier``), else of a base class."""
    for kind in type(obj).__mro__:
        public = [f"{module.__name__}.{kind.__name__}" for module in PUBLIC_MODULES
                  if getattr(module, kind.__name__, None) is kind]
        for key in (*public, kind.__name__):
            if key in FIRST_USES:
                return FIRST_USES[key]
    return None


def _first_use(obj: Any) -> None:
    """Use the object once as a user would (the sync parts, and async parts in trio's virtual time)."""
    use = _first_use_of(obj)
    assert use is not None, f"no first use for {type(obj).__name__}: add one to FIRST_USES"
    use(obj)


def _run_calls(retrier: asyncretry.Retrier) -> None:
    """One call that succeeds at once and one that fails once first, in trio's virtual time."""
    failures = [ConnectionResetError()]

    async def flaky() -> int:
        if failures:
            raise failures.pop()
        return 1

    async def main() -> None:
        for _ in range(3):
            # Refused by a quota, a breaker or a deadline: behaviour, not breakage.
            with contextlib.suppress(AsyncRetryError, ConnectionResetError):
                await retrier.call(flaky)
            failures.append(ConnectionResetError())

    _in_virtual_time(main)


def _defaults(name: str) -> dict[str, Any]:
    arguments = dict(REQUIRED.get(name, {}))
    if name in integrations.REQUIRED:
        arguments.update(integrations.REQUIRED[name]())
    if name.endswith("RetryTransport"):
        package = _client_package(CLASSES[name])
        arguments["transport"] = package.MockTransport(lambda request: package.Response(200))
    return arguments


def _parameters(name: str, cls: Callable[..., Any]) -> list[str]:
    signature = inspect.signature(cls)
    return [
        p.name for p in signature.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_")
    ]


def _value_id(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 20 else text[:17] + "..."


def _must_refuse(annotation: object, value: Any) -> bool:
    """Whether a value is of the wrong type for a flag or a string parameter, so that only an error will do."""
    if annotation in ("bool", "bool | None"):
        return not (isinstance(value, bool) or (value is None and annotation == "bool | None"))
    if annotation == "str":
        return not isinstance(value, str)
    return False


def _build(name: str, arguments: dict[str, Any]) -> Any:
    """``CLASSES[name]`` called with ``arguments`` (a positional-only one passed by position), its result
    wrapped when it is a plain function (see WRAP_RESULT)."""
    constructor = CLASSES[name]
    parameters = inspect.signature(constructor).parameters
    positional = [
        arguments.pop(p.name) for p in parameters.values() if p.kind is p.POSITIONAL_ONLY and p.name in arguments
    ]
    built = constructor(*positional, **arguments)
    wrap = WRAP_RESULT.get(name)
    return built if wrap is None else wrap(built, arguments)


def _violations(name: str, parameter: str, values: list[Any] = HOSTILE) -> list[str]:
    """Every hostile value for which the rule fails, with what happened."""
    cls = CLASSES[name]
    annotation = inspect.signature(cls).parameters[parameter].annotation
    found = []
    for value in values:
        arguments = _defaults(name)
        if parameter == "transport" and name.endswith("RetryTransport"):
            continue  # the wrapped transport is httpx's business: any object is tried as one
        arguments[parameter] = value
        try:
            obj = _build(name, arguments)
        except (ValueError, TypeError) as error:
            if parameter not in str(error):
                found.append(f"{_value_id(value)}: {type(error).__name__} without the name: {error}")
            continue
        except Exception as error:
            found.append(f"{_value_id(value)}: {type(error).__name__} at construction: {error}")
            continue
        if _must_refuse(annotation, value):
            found.append(f"{_value_id(value)}: accepted for a parameter of type {annotation}")
            continue
        try:
            repr(obj)
            statistics: Callable[[], object] | None = getattr(obj, "statistics", None)
            if statistics is not None:
                statistics()
            _first_use(obj)
        except AsyncRetryError:
            pass
        except Exception as error:
            found.append(f"{_value_id(value)}: accepted, then {type(error).__name__} in use: {error}")
    return found


# (constructor, parameter) pairs whose constructor lives in a file another engineer owns and still breaks
# the rule; strict, so that the fix turns the case into a failure until its line here is removed.
KNOWN_ELSEWHERE: dict[tuple[str, str], str] = {}
"""(class, parameter) pairs whose checks live in code not yet fixed: strict xfails, so a fix shows up here."""


CASES = [
    pytest.param(
        name, parameter, id=f"{name}.{parameter}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_ELSEWHERE[(name, parameter)])]
        if (name, parameter) in KNOWN_ELSEWHERE else [],
    )
    for name, cls in sorted(CLASSES.items())
    for parameter in _parameters(name, cls)
]


def test_every_public_class_is_covered() -> None:
    """Every public class of every public module is driven here (with a first use) or named as not a setting."""
    missing = []
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            key = next((key for key, driven in CLASSES.items() if driven is getattr(module, name)), None)
            if key is None or key in FACTORIES:  # not a class, or not a setting; factories: the next test
                continue
            if _first_use_of(_build(key, _defaults(key))) is None:
                missing.append(f"{module.__name__}.{name}")
    assert missing == [], missing
    assert {"RedisBackend", "RedisTokenBucket", "RedisRetryBudget", "RetryBudget", "RetryBudgetConfig",
            "DeliveryPolicy", "HedgingConfig", "instrument"} <= set(CLASSES)


def test_every_factory_result_is_used() -> None:
    """What each public factory builds (instrument() -> Instrumentation) has a first use, so it is driven too."""
    for name in FACTORIES:
        built = _build(name, _defaults(name))
        try:
            assert _first_use_of(built) is not None, name
        finally:
            with contextlib.suppress(Exception):
                built.uninstrument()


def test_every_public_settings_class_is_driven() -> None:
    """The introspection finds the configuration classes and their parameters (so the cases below are real)."""
    for name in ("TokenBucket", "RetryPolicy", "RetryQuotaConfig", "CircuitBreakerConfig",
                 "AdaptiveLimiterConfig", "Retrier", "AsyncRetryTransport", "HttpClassifier", "VirtualClock"):
        assert name in CLASSES
    assert len(CASES) > 80


@pytest.mark.parametrize(("name", "parameter"), CASES)
def test_hostile_values_fail_at_construction_or_work(name: str, parameter: str) -> None:
    """A hostile value for this parameter is refused with an error naming it, or the object works."""
    assert _violations(name, parameter) == []


# Beyond the fixed list: any float (subnormals, huge, NaN, infinities), integers of any size, and other types.
VALUES = st.one_of(
    st.floats(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.lists(st.floats(), max_size=2),
    st.timedeltas(),
)
OWNED = [(name, parameter) for name, cls in sorted(CLASSES.items()) for parameter in _parameters(name, cls)
         if (name, parameter) not in KNOWN_ELSEWHERE]


@settings(max_examples=400)
@given(case=st.sampled_from(OWNED), value=VALUES)
def test_any_value_fails_at_construction_or_works(case: tuple[str, str], value: Any) -> None:
    """Whatever value a parameter gets, it is refused with an error naming it or the object works."""
    name, parameter = case
    assert _violations(name, parameter, [value]) == []


# ------------------------------------------------------------------------------------ per-request overrides
OVERRIDE_KEYS = sorted(asyncretry.RequestOverrides.keys())


def _override_is_valid(key: str, value: Any) -> bool:
    """Whether ``value`` is of the type the override ``key`` takes (anything else must be refused)."""
    if key in ("retry", "read_body"):
        return isinstance(value, bool)
    if key == "idempotent":
        return value is None or isinstance(value, bool)
    if key == "hedge":
        return value is None or isinstance(value, (bool, asyncretry.HedgingConfig))
    if key == "scope":
        return isinstance(value, str) and value != ""
    if key == "caller":
        return value is None or (isinstance(value, str) and value != "")
    return isinstance(value, RetryPolicy)


def _send_with_override(key: str, value: Any, transport_kind: str) -> tuple[Exception | None, int]:
    """A POST (no idempotency key) to a server answering 503, with ``{key: value}``: the error, and the sends."""
    sends = [0]

    def unavailable(request: httpx.Request) -> httpx.Response:
        sends[0] += 1
        return httpx.Response(503)

    extensions = {asyncretry.httpx.EXTENSION: {key: value}}
    policy = RetryPolicy(backoff=asyncretry.NoBackoff())
    try:
        if transport_kind == "sync":
            sync = asyncretry.httpx.RetryTransport(httpx.MockTransport(unavailable), policy=policy)
            with httpx.Client(transport=sync) as client:
                client.post("http://test.invalid/", content=b"x", extensions=extensions)
        else:
            hedged = policy.replace(hedging=asyncretry.HedgingConfig(delay=0.01))
            transport = asyncretry.httpx.AsyncRetryTransport(httpx.MockTransport(unavailable), policy=hedged)

            async def send() -> None:
                async with httpx.AsyncClient(transport=transport) as client:
                    await client.post("http://test.invalid/", content=b"x", extensions=extensions)

            _in_virtual_time(send)
    except (TypeError, ValueError) as error:
        return error, sends[0]
    return None, sends[0]


def _override_violations(key: str, value: Any) -> list[str]:
    """What goes wrong when a request carries ``{key: value}``, through both transports (nothing, if all is well)."""
    found = []
    for kind in ("sync", "async"):
        error, sends = _send_with_override(key, value, kind)
        if error is not None:
            if f"[{key!r}]" not in str(error):
                found.append(f"{kind} {key}={_value_id(value)}: {type(error).__name__} without the key: {error}")
            if sends:
                found.append(f"{kind} {key}={_value_id(value)}: refused after {sends} sends")
            continue
        if not _override_is_valid(key, value):
            found.append(f"{kind} {key}={_value_id(value)}: accepted")
        if sends > 1 and not (key == "idempotent" and value is True):
            found.append(f"{kind} {key}={_value_id(value)}: a POST without an idempotency key sent {sends} times")
    return found


def _integration_override_violations(key: str, value: Any) -> list[str]:
    """What goes wrong when the aiohttp middleware's ``options(...)`` or gRPC's ``call_options(...)`` get
    ``{key: value}`` and a request is made with them (nothing, if all is well)."""
    found = []
    for where, (keys, use) in integrations.OVERRIDE_USES.items():
        if key not in keys:
            continue
        try:
            use({key: value})
        except (TypeError, ValueError) as error:
            if key not in str(error):
                found.append(f"{where} {key}={_value_id(value)}: {type(error).__name__} without the key: {error}")
            continue
        except AsyncRetryError:
            pass
        except Exception as error:
            found.append(f"{where} {key}={_value_id(value)}: accepted, then {type(error).__name__}: {error}")
            continue
        unset = value is None and where in integrations.NONE_IS_UNSET
        if not unset and not _override_is_valid(key, value):
            found.append(f"{where} {key}={_value_id(value)}: accepted")
    return found


@pytest.mark.parametrize("key", OVERRIDE_KEYS)
def test_hostile_overrides_are_refused_or_work(key: str) -> None:
    """A hostile value for a per-request override (httpx extensions, the aiohttp middleware's options(...),
    gRPC's call_options(...)) is refused before sending, naming the key, or it works."""
    assert [found for value in HOSTILE for found in _override_violations(key, value)] == []
    assert [found for value in HOSTILE for found in _integration_override_violations(key, value)] == []


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(OVERRIDE_KEYS), value=VALUES)
def test_any_override_value_is_refused_or_works(key: str, value: Any) -> None:
    """Whatever value an override gets, it is refused naming the key, or honoured without resending a POST."""
    assert _override_violations(key, value) + _integration_override_violations(key, value) == []
