"""The grpc.aio interceptors against a real grpc.aio server on 127.0.0.1 (generic handlers, bytes messages).

Each test scripts what the server answers to each call, in order (a status, a status with pushback, a
hang until cancelled, a stream that fails before or after its first message) and asserts on what the
server saw (calls, attempt metadata, time left) and what the client got (result, error, history).
grpc.aio runs on asyncio only: these tests run on asyncio (real time; no timed assertions), and one
test checks that trio is refused with a clear error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from grpc import aio

from asyncretry import (
    CircuitBreakerConfig,
    CircuitOpenError,
    FixedBackoff,
    GaveUp,
    HedgingConfig,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryScheduled,
    TurnStatistics,
    history_of,
)
from asyncretry.grpc import (
    ATTEMPTS_KEY,
    CHANNEL_OPTIONS,
    PUSHBACK_KEY,
    GrpcClassifier,
    RetryInterceptors,
    call_options,
    insecure_channel,
)

pytestmark = [pytest.mark.anyio, pytest.mark.real_time, pytest.mark.timeout(30)]

SERVICE = "t.Test"
FAST = RetryPolicy(max_attempts=4, backoff=FixedBackoff(0.001), throttling_backoff=FixedBackoff(0.001))
UNAVAILABLE, EXHAUSTED = grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """grpc.aio runs on asyncio only (tests/test_grpc_trio.py checks that trio is refused)."""
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
async def one_event_loop() -> AsyncIterator[None]:
    """The module's tests share one event loop: grpc.aio hands each completion to the loop of the call or
    server it belongs to, and a late one (a server stopped at once) must not meet a loop already closed."""
    yield  # noqa: PT022  (the loop lives as long as this fixture does: until the module's last test)


@dataclass
class Seen:
    """One call as the server saw it."""

    method: str
    attempts_before: str | None
    time_remaining: float | None
    requests: list[bytes] = field(default_factory=list)
    cancelled: bool = False


@dataclass
class Scripted:
    """A server that answers each call with the next step of its script (``"ok"`` once it runs out).

    Steps: ``"ok"``; a ``grpc.StatusCode`` (aborted with it); ``(code, pushback)`` (with trailing
    ``grpc-retry-pushback-ms``); ``"hang"`` (never answers; recorded as cancelled when the client gives up);
    for streams, ``"one-then-fail"`` (one message, then UNAVAILABLE).
    """

    script: list[Any] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    async def _step(self, context: aio.ServicerContext, method: str, requests: list[bytes]) -> Any:
        metadata = dict(context.invocation_metadata() or ())
        remaining = context.time_remaining()
        seen = Seen(method, metadata.get(ATTEMPTS_KEY), remaining, requests)
        self.seen.append(seen)
        step = self.script.pop(0) if self.script else "ok"
        if step == "hang":
            try:
                await asyncio.Event().wait()
            finally:
                seen.cancelled = True
        if isinstance(step, tuple):
            code, pushback = step
            context.set_trailing_metadata(((PUSHBACK_KEY, pushback),))
            await context.abort(code, "scripted")
        if isinstance(step, grpc.StatusCode):
            await context.abort(step, "scripted")
        return step

    async def unary(self, request: bytes, context: aio.ServicerContext) -> bytes:
        await self._step(context, "Unary", [request])
        return b"reply:" + request

    async def create(self, request: bytes, context: aio.ServicerContext) -> bytes:
        await self._step(context, "Create", [request])
        return b"created"

    async def stream(self, request: bytes, context: aio.ServicerContext) -> AsyncIterator[bytes]:
        step = await self._step(context, "Stream", [request])
        yield b"first"
        if step == "one-then-fail":
            await context.abort(UNAVAILABLE, "after the first message")
        yield b"second"

    async def upload(self, requests: AsyncIterator[bytes], context: aio.ServicerContext) -> bytes:
        received = [request async for request in requests]
        await self._step(context, "Upload", received)
        return b",".join(received)


@pytest.fixture
async def server() -> AsyncIterator[tuple[Scripted, str]]:
    """A scripted grpc.aio server on a free port of 127.0.0.1, and its target."""
    app = Scripted()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(app.unary),
        "Create": grpc.unary_unary_rpc_method_handler(app.create),
        "Stream": grpc.unary_stream_rpc_method_handler(app.stream),
        "Upload": grpc.stream_unary_rpc_method_handler(app.upload),
    }
    running = aio.server()
    running.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = running.add_insecure_port("127.0.0.1:0")
    await running.start()
    try:
        yield app, f"127.0.0.1:{port}"
    finally:
        await running.stop(None)


def channel(target: str, **options: Any) -> aio.Channel:
    """A channel to ``target`` whose calls asyncretry retries (``options`` go to :class:`RetryInterceptors`)."""
    options.setdefault("policy", FAST)
    return insecure_channel(target, retry=RetryInterceptors(target=target, **options))


async def cancelled(seen: Seen) -> bool:
    """Whether the server's handler of ``seen`` was cancelled, waiting (bounded) for the server to hear of it:
    the client moves on before the server's handler is cancelled."""
    for _ in range(500):
        if seen.cancelled:
            return True
        await asyncio.sleep(0.01)
    return False


def kinds(error: BaseException) -> list[OutcomeKind]:
    history = history_of(error)
    assert history is not None
    return [attempt.kind for attempt in history.attempts]


# ------------------------------------------------------------------------------------------ statuses
@pytest.mark.parametrize(
    ("status", "kind"), [(UNAVAILABLE, OutcomeKind.TRANSIENT), (EXHAUSTED, OutcomeKind.THROTTLING)]
)
async def test_transient_and_throttling_statuses_are_retried(
    server: tuple[Scripted, str], status: grpc.StatusCode, kind: OutcomeKind
) -> None:
    """UNAVAILABLE (transient) and RESOURCE_EXHAUSTED (throttling) are retried as their kind; each retry
    carries grpc-previous-rpc-attempts, and the caller's call reports the successful attempt's status."""
    app, target = server
    app.script = [status, status]
    retry = RetryInterceptors(target=target, policy=FAST)
    scheduled: list[str] = []
    retry.retrier.subscribe(lambda e: scheduled.append(e.outcome) if isinstance(e, RetryScheduled) else None)
    async with insecure_channel(target, retry=retry) as ch:
        call = ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
        assert await call == b"reply:x"
        assert await call.code() is grpc.StatusCode.OK
    assert [s.attempts_before for s in app.seen] == [None, "1", "2"]
    assert scheduled == [kind.value, kind.value]


async def test_a_final_error_is_the_real_aio_rpc_error_with_its_history(server: tuple[Scripted, str]) -> None:
    """When the attempts run out the caller gets gRPC's own AioRpcError of the last attempt, history attached."""
    app, target = server
    app.script = [UNAVAILABLE] * 4
    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
    assert caught.value.code() is UNAVAILABLE
    assert kinds(caught.value) == [OutcomeKind.TRANSIENT] * 4
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "max_attempts"
    assert len(app.seen) == 4


async def test_the_status_table_is_configurable(server: tuple[Scripted, str]) -> None:
    """A classifier that lists ABORTED as transient retries it."""
    app, target = server
    app.script = [grpc.StatusCode.ABORTED]
    classifier = GrpcClassifier(transient={UNAVAILABLE, grpc.StatusCode.ABORTED})
    async with channel(target, classifier=classifier) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"reply:x"
    assert len(app.seen) == 2


# ------------------------------------------------------------------------------------------ pushback
async def test_pushback_replaces_the_backoff(server: tuple[Scripted, str]) -> None:
    """A grpc-retry-pushback-ms of 20 is the delay before the retry, not the 1 ms backoff (read from the
    history of the call's final error)."""
    app, target = server
    app.script = [(UNAVAILABLE, "20"), grpc.StatusCode.INVALID_ARGUMENT]
    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
    history = history_of(caught.value)
    assert history is not None
    assert [a.delay_after for a in history.attempts] == [0.02, None]


@pytest.mark.parametrize(
    "step", [grpc.StatusCode.INVALID_ARGUMENT, (UNAVAILABLE, "-1"), (UNAVAILABLE, "soon"), (UNAVAILABLE, "1.5")],
    ids=["INVALID_ARGUMENT", "pushback -1", "pushback soon", "pushback 1.5"],
)
async def test_a_final_status_or_a_refusing_pushback_sends_the_call_once(
    server: tuple[Scripted, str], step: Any
) -> None:
    """A status outside the table, or a pushback that is negative or not an integer ("do not retry"):
    one call, its error raised at once."""
    app, target = server
    app.script = [step]
    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
    assert kinds(caught.value) == [OutcomeKind.NOT_RETRYABLE]
    assert len(app.seen) == 1


async def test_pushback_is_ignored_when_switched_off(server: tuple[Scripted, str]) -> None:
    """With honour_pushback=False a negative pushback does not stop the retries."""
    app, target = server
    app.script = [(UNAVAILABLE, "-1")]
    async with channel(target, classifier=GrpcClassifier(honour_pushback=False)) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"reply:x"
    assert len(app.seen) == 2


# ------------------------------------------------------------------------------------------ deadlines
class Timeouts(aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc has no type hints
    """An interceptor after asyncretry's: records the timeout each attempt is sent with."""

    def __init__(self) -> None:
        self.sent: list[float | None] = []

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.sent.append(details.timeout)
        return await continuation(details, request)


async def test_each_attempt_gets_the_time_left_and_a_hang_ends_at_the_deadline(server: tuple[Scripted, str]) -> None:
    """The retry is sent with less time than the first attempt had, never more than the call's timeout;
    a server that hangs ends the call with gRPC's own DEADLINE_EXCEEDED, not retried, history attached."""
    app, target = server
    app.script = [UNAVAILABLE, "hang"]
    timeouts = Timeouts()
    retry = RetryInterceptors(target=target, policy=FAST)
    async with aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=[*retry, timeouts]) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x", timeout=1.0)
    assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    first, second = timeouts.sent
    assert first is not None
    assert second is not None
    assert 0.0 < second < first <= 1.0
    assert len(app.seen) == 2
    assert await cancelled(app.seen[1])
    assert kinds(caught.value) == [OutcomeKind.TRANSIENT, OutcomeKind.NOT_RETRYABLE]


async def test_a_pushback_longer_than_the_time_left_gives_up_at_once(server: tuple[Scripted, str]) -> None:
    """A retry the server asks for after the deadline is never waited for: the call gives up at once."""
    app, target = server
    app.script = [(EXHAUSTED, "60000")]
    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x", timeout=5.0)
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "server_delay"
    assert caught.value.code() is EXHAUSTED
    assert len(app.seen) == 1


async def test_a_hedged_call_that_never_answers_ends_at_its_deadline(server: tuple[Scripted, str]) -> None:
    """A hedged call whose every attempt hangs ends with DEADLINE_EXCEEDED at its deadline, both attempts
    given the call's time left and both cancelled."""
    app, target = server
    app.script = ["hang", "hang"]
    hedging = HedgingConfig(delay=0.05, budget_ratio=1.0)
    async with channel(target, policy=FAST.replace(hedging=hedging)) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x", timeout=0.5)
    assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert [s.attempts_before for s in app.seen] == [None, "1"]
    # The server sees the deadline to its clock's precision: up to a millisecond or two more than 500 ms.
    assert all(s.time_remaining is not None and s.time_remaining <= 0.5 + 0.005 for s in app.seen)


async def test_a_hedged_call_at_its_deadline_ends_with_grpcs_error_and_its_history(
    server: tuple[Scripted, str],
) -> None:
    """A hedged call cut by its deadline ends with gRPC's DEADLINE_EXCEEDED (an AioRpcError) carrying the
    history: both attempts, cancelled, the second a hedge, gave_up "deadline"; counted as a failed call."""
    app, target = server
    app.script = ["hang", "hang"]
    events: list[GaveUp] = []
    retry = RetryInterceptors(target=target, policy=FAST.replace(hedging=HedgingConfig(delay=0.05, budget_ratio=1.0)))
    retry.retrier.subscribe(lambda event: events.append(event) if isinstance(event, GaveUp) else None)
    async with insecure_channel(target, retry=retry) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x", timeout=0.5)
    assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "deadline"
    assert [(a.number, a.kind, a.hedge) for a in history.attempts] == [
        (1, OutcomeKind.CANCELLED, False), (2, OutcomeKind.CANCELLED, True),
    ]
    assert [(e.why, e.attempts) for e in events] == [("deadline", 2)]
    assert retry.statistics().failures == 1


# ------------------------------------------------------------------------------------------ hedging
async def test_a_hedge_answers_for_a_replica_that_hangs(server: tuple[Scripted, str]) -> None:
    """With hedging, a first attempt that hangs is overtaken by a hedge (carrying grpc-previous-rpc-attempts),
    which wins; the hanging attempt is cancelled."""
    app, target = server
    app.script = ["hang"]
    hedging = HedgingConfig(delay=0.05, budget_ratio=1.0)
    async with channel(target, policy=FAST.replace(hedging=hedging)) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"reply:x"
    assert [s.attempts_before for s in app.seen] == [None, "1"]
    assert await cancelled(app.seen[0])


async def test_a_hedged_calls_history_shows_the_winner_and_the_loser(server: tuple[Scripted, str]) -> None:
    """The hedged call's statistics count one hedge; a later plain call is not hedged (it answers first)."""
    app, target = server
    app.script = ["hang"]
    retry = RetryInterceptors(target=target, policy=FAST.replace(hedging=HedgingConfig(delay=0.05, budget_ratio=1.0)))
    async with insecure_channel(target, retry=retry) as ch:
        await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
        await ch.unary_unary(f"/{SERVICE}/Unary")(b"y", timeout=10.0)
    assert retry.statistics().hedges == 1
    assert [s.attempts_before for s in app.seen] == [None, "1", None]


async def test_a_non_idempotent_method_is_never_hedged(server: tuple[Scripted, str]) -> None:
    """The policy's hedging skips a method that is not idempotent; asking for it per call is refused."""
    app, target = server
    hedging = HedgingConfig(delay=0.05, budget_ratio=1.0)
    classifier = GrpcClassifier(non_idempotent={f"/{SERVICE}/Create"})
    async with channel(target, policy=FAST.replace(hedging=hedging), classifier=classifier) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Create")(b"x") == b"created"
        with call_options(hedge=hedging), pytest.raises(ValueError, match="cannot be hedged: it is not idempotent"):
            await ch.unary_unary(f"/{SERVICE}/Create")(b"x")
    assert len(app.seen) == 1


# ------------------------------------------------------------------------------------------ streams
async def test_a_stream_that_failed_before_its_first_message_is_retried(server: tuple[Scripted, str]) -> None:
    """A response stream that fails before any message is sent again and read in full."""
    app, target = server
    app.script = [UNAVAILABLE]
    async with channel(target) as ch:
        messages = [m async for m in ch.unary_stream(f"/{SERVICE}/Stream")(b"x")]
    assert messages == [b"first", b"second"]
    assert [s.attempts_before for s in app.seen] == [None, "1"]


async def test_a_stream_that_delivered_a_message_is_never_retried(server: tuple[Scripted, str]) -> None:
    """Once a response stream delivered a message, its later failure reaches the caller, not retried, with
    the call's history: one attempt, failed with that status, gave_up "not_retryable"."""
    app, target = server
    app.script = ["one-then-fail"]
    received: list[bytes] = []
    async def read_all(call: Any) -> None:
        async for message in call:
            received.append(message)

    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await read_all(ch.unary_stream(f"/{SERVICE}/Stream")(b"x"))
    assert received == [b"first"]
    assert caught.value.code() is UNAVAILABLE
    assert len(app.seen) == 1
    history = history_of(caught.value)
    assert history is not None
    assert history.gave_up == "not_retryable"
    assert [(a.kind, a.reason) for a in history.attempts] == [
        (OutcomeKind.NOT_RETRYABLE, "UNAVAILABLE after a message"),
    ]


async def test_a_request_list_is_sent_again_whole(server: tuple[Scripted, str]) -> None:
    """A stream-unary call whose requests are a list is retried with every request again."""
    app, target = server
    app.script = [UNAVAILABLE]
    async with channel(target) as ch:
        assert await ch.stream_unary(f"/{SERVICE}/Upload")([b"a", b"b"]) == b"a,b"
    assert [s.requests for s in app.seen] == [[b"a", b"b"], [b"a", b"b"]]


async def test_a_request_generator_is_sent_once(server: tuple[Scripted, str]) -> None:
    """A stream-unary call whose requests come from a generator cannot be replayed: it is sent once."""
    app, target = server
    app.script = [UNAVAILABLE]

    def requests() -> Iterator[bytes]:
        yield b"a"
        yield b"b"

    async with channel(target) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.stream_unary(f"/{SERVICE}/Upload")(requests())
    assert "cannot be sent again" in repr(history_of(caught.value))
    assert len(app.seen) == 1


# ------------------------------------------------------------------------------------------ idempotency
async def test_a_non_idempotent_method_is_sent_once(server: tuple[Scripted, str]) -> None:
    """UNAVAILABLE from a method listed as not idempotent is final: the server may have done the work."""
    app, target = server
    app.script = [UNAVAILABLE]
    classifier = GrpcClassifier(non_idempotent={f"/{SERVICE}/*"})
    async with channel(target, classifier=classifier) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Create")(b"x")
    assert "not idempotent" in repr(history_of(caught.value))
    assert len(app.seen) == 1


async def test_a_non_idempotent_method_is_retried_after_a_pushback(server: tuple[Scripted, str]) -> None:
    """A server that pushes back with a delay asks for the retry: even a non-idempotent method is sent again."""
    app, target = server
    app.script = [(UNAVAILABLE, "1")]
    classifier = GrpcClassifier(non_idempotent={f"/{SERVICE}/Create"})
    async with channel(target, classifier=classifier) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Create")(b"x") == b"created"
    assert len(app.seen) == 2


async def test_per_call_options_override_idempotency_and_retries(server: tuple[Scripted, str]) -> None:
    """call_options(idempotent=True) retries a listed method; call_options(retry=False) sends a call once."""
    app, target = server
    classifier = GrpcClassifier(idempotent_by_default=False)
    async with channel(target, classifier=classifier) as ch:
        app.script = [UNAVAILABLE]
        with call_options(idempotent=True):
            assert await ch.unary_unary(f"/{SERVICE}/Create")(b"x") == b"created"
        app.script = [UNAVAILABLE]
        with call_options(retry=False, idempotent=True), pytest.raises(aio.AioRpcError):
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
    assert len(app.seen) == 3


async def test_the_caller_option_takes_turns_at_the_rate_limit(server: tuple[Scripted, str]) -> None:
    """call_options(caller=...): of one caller's calls that wait for the scope's rate limit (4 a second, a burst
    of one), one waits at the rate limit and the other behind it, in the caller's turn; all are answered."""
    _app, target = server
    retry = RetryInterceptors(target=target, policy=FAST.replace(rate_limit=4.0, rate_limit_burst=1.0))

    async def one(ch: aio.Channel) -> None:
        with call_options(caller="batch"):
            assert await ch.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"reply:x"

    async with insecure_channel(target, retry=retry) as ch:
        await asyncio.gather(one(ch), one(ch), one(ch))
    (scope,) = retry.retrier.statistics().scopes
    assert scope.turns == TurnStatistics(name=scope.key, callers=0, waiting=0, waits=1, timeouts=0)


async def test_a_channel_that_cannot_connect_is_retried_even_for_a_non_idempotent_method(
    server: tuple[Scripted, str],
) -> None:
    """"failed to connect to all addresses" proves no server got the call: the retry is allowed."""
    _, _target = server
    closed = "127.0.0.1:1"
    classifier = GrpcClassifier(idempotent_by_default=False)
    async with channel(closed, classifier=classifier, policy=FAST.replace(max_attempts=2)) as ch:
        with pytest.raises(aio.AioRpcError) as caught:
            await ch.unary_unary(f"/{SERVICE}/Create")(b"x", timeout=10.0)
    assert kinds(caught.value) == [OutcomeKind.TRANSIENT, OutcomeKind.TRANSIENT]


# ------------------------------------------------------------------------------------------ shared state
async def test_interceptors_share_the_retriers_scopes_and_breaker(server: tuple[Scripted, str]) -> None:
    """Two channels over one Retrier share per-method scopes; an open breaker refuses the next call."""
    app, target = server
    breaker = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=2)
    retrier = Retrier(FAST.replace(max_attempts=1, breaker=breaker))
    app.script = [UNAVAILABLE, UNAVAILABLE, "ok"]
    async with insecure_channel(target, retry=RetryInterceptors(retrier=retrier, target=target)) as a, \
            insecure_channel(target, retry=RetryInterceptors(retrier=retrier, target=target)) as b:
        for ch in (a, b):
            with pytest.raises(aio.AioRpcError):
                await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
        with pytest.raises(CircuitOpenError):
            await a.unary_unary(f"/{SERVICE}/Unary")(b"x")
    assert retrier.scope_keys() == [f"{target}/{SERVICE}/Unary"]
    assert len(app.seen) == 2


async def test_resource_exhausted_reaches_the_adaptive_limiter_of_the_methods_scope(
    server: tuple[Scripted, str],
) -> None:
    """In adaptive mode a RESOURCE_EXHAUSTED is a throttle for the scope's limiter, which is then enabled."""
    app, target = server
    app.script = [EXHAUSTED]
    retry = RetryInterceptors(target=target, policy=FAST.replace(mode="adaptive"))
    async with insecure_channel(target, retry=retry) as ch:
        assert await ch.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"reply:x"
    (scope,) = retry.statistics().scopes
    assert scope.limiter is not None
    assert (scope.limiter.enabled, scope.limiter.updates, scope.limiter.throttles) == (True, 2, 1)


async def test_per_call_options_choose_the_scope_and_the_policy(server: tuple[Scripted, str]) -> None:
    """call_options(scope=, policy=) puts a call in another scope under another policy (here: one attempt)."""
    app, target = server
    app.script = [UNAVAILABLE]
    retry = RetryInterceptors(target=target, policy=FAST)
    async with insecure_channel(target, retry=retry) as ch:
        with call_options(scope="orders", policy=FAST.replace(max_attempts=1)), pytest.raises(aio.AioRpcError):
            await ch.unary_unary(f"/{SERVICE}/Unary")(b"x")
    assert retry.retrier.scope_keys() == ["orders"]
    assert len(app.seen) == 1


# ------------------------------------------------------------------------------------------ configuration
@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"transient": {grpc.StatusCode.OK}}, ValueError, "OK"),
        ({"transient": {14}}, TypeError, "grpc.StatusCode"),
        ({"timeout": {UNAVAILABLE}}, ValueError, "listed twice"),
        ({"non_idempotent": {"Create"}}, ValueError, "/pkg.Service/Method"),
        ({"honour_pushback": "yes"}, TypeError, "honour_pushback"),
    ],
)
def test_a_bad_classifier_is_refused_clearly(options: dict[str, Any], error: type[Exception], message: str) -> None:
    """A classifier with a bad status, overlapping sets, a malformed method or a non-bool flag is refused."""
    with pytest.raises(error, match=message):
        GrpcClassifier(**options)


def test_bad_interceptor_arguments_are_refused_clearly() -> None:
    """Both a retrier and a policy, a classifier of the wrong type, or a bad per-call option are refused."""
    with pytest.raises(TypeError, match="either retrier or policy"):
        RetryInterceptors(retrier=Retrier(), policy=RetryPolicy())
    with pytest.raises(TypeError, match="GrpcClassifier"):
        RetryInterceptors(classifier=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="idempotent must be True or False"), call_options(idempotent="yes"):  # type: ignore[arg-type]
        pass
    with pytest.raises(TypeError, match="hedge"), call_options(hedge=True):
        pass


def test_the_interceptors_are_three_and_the_channel_options_turn_grpc_retries_off() -> None:
    """A RetryInterceptors is the three interceptors grpc.aio sorts by kind; the options disable gRPC's retries."""
    retry = RetryInterceptors()
    assert [type(i).__mro__[1] for i in retry] == [
        aio.UnaryUnaryClientInterceptor, aio.UnaryStreamClientInterceptor, aio.StreamUnaryClientInterceptor,
    ]
    assert ("grpc.enable_retries", 0) in CHANNEL_OPTIONS
    assert len(retry) == 3
