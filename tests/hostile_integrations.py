"""The first uses of the aiohttp, gRPC and AWS integrations, for tests/test_hostile_config.py.

Each first use runs without a network: the aiohttp middleware is called with a fake handler on asyncio
(aiohttp runs on asyncio only), the gRPC interceptors with a fake continuation (grpc.aio on asyncio, the
synchronous API in the calling thread), and the AWS handlers on a botocore client with fake credentials
whose ``before-send`` event answers instead of the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

import aiobotocore.awsrequest
import aiobotocore.session
import aiohttp
import botocore.awsrequest
import botocore.loaders
import botocore.session
import grpc
from grpc import aio
from yarl import URL

import asyncretry
import asyncretry.aiohttp
import asyncretry.aws
import asyncretry.grpc
import virtual_time
from asyncretry import AsyncRetryError

MODULES = (asyncretry.aiohttp, asyncretry.grpc, asyncretry.aws)

# The handlers are made by install() (on a botocore client, and on an aiobotocore one: install_aiobotocore) and
# install_session(), which are driven instead; what they made is used.
NOT_SETTINGS = {"AsyncClientRetryHandler", "ClientRetryHandler"}


def _fake_client() -> Any:
    """A botocore DynamoDB client with fake credentials on an address where nothing listens."""
    return _fake_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:1",
        aws_access_key_id="fake", aws_secret_access_key="fake",
    )


# One model loader for every session made here: each new session would read and parse the service's
# JSON model again (a third of a second a client), and these tests make hundreds.
_LOADER = botocore.loaders.create_loader()


def _fake_session(session: Any = None) -> Any:
    session = botocore.session.Session() if session is None else session
    session.register_component("data_loader", _LOADER)
    session.set_credentials("fake", "fake")
    return session


def _sync_channel() -> grpc.Channel:
    return grpc.insecure_channel("127.0.0.1:1")


class ChannelOpened:
    """A grpc.aio channel that was opened (and closed) on an event loop: grpc.aio makes channels on one."""


def _on_asyncio(make: Callable[..., aio.Channel]) -> Callable[..., ChannelOpened]:
    """``make`` (``insecure_channel``, ``secure_channel``), called on an asyncio loop and closed there."""

    @functools.wraps(make)
    def opened(*args: Any, **kwargs: Any) -> ChannelOpened:
        async def main() -> None:
            channel = make(*args, **kwargs)
            await channel.close()

        asyncio.run(main())
        return ChannelOpened()

    return opened


FACTORIES: dict[str, Callable[..., Any]] = {
    "insecure_channel": _on_asyncio(asyncretry.grpc.insecure_channel),
    "secure_channel": _on_asyncio(asyncretry.grpc.secure_channel),
    "call_options": asyncretry.grpc.call_options,
    "intercept_channel": asyncretry.grpc.intercept_channel,
    "install": asyncretry.aws.install,
    "install_session": asyncretry.aws.install_session,
    "policy_for": asyncretry.aws.policy_for,
}

# The arguments a constructor needs before one of its parameters can be driven (made fresh for each value).
REQUIRED: dict[str, Callable[[], dict[str, Any]]] = {
    "intercept_channel": lambda: {"channel": _sync_channel()},
    "install": lambda: {"client": _fake_client()},
    "insecure_channel": lambda: {"target": "127.0.0.1:1"},
    "secure_channel": lambda: {"target": "127.0.0.1:1", "credentials": grpc.local_channel_credentials()},
    "install_session": lambda: {"session": _fake_session()},
    "policy_for": lambda: {"client": _fake_client()},
}

# ---------------------------------------------------------------------------------------------- aiohttp


class _FakeResponse:
    """What the middleware reads of an aiohttp response."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.raw_headers = ((b"Content-Length", b"0"),)

    async def read(self) -> bytes:
        return b""

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def use_aiohttp_middleware(obj: Any) -> None:
    """A GET answered 503 then 200, and a POST answered 503 (not retried), on asyncio."""

    async def main() -> None:
        statuses = [503, 200, 503]

        async def handler(request: aiohttp.ClientRequest) -> Any:
            return _FakeResponse(statuses.pop(0) if statuses else 200)

        for method in ("GET", "POST"):
            request = aiohttp.ClientRequest(method, URL("http://test.invalid/"), data=b"x")
            with contextlib.suppress(AsyncRetryError):
                await obj(request, handler)

    virtual_time.run(main, "asyncio")  # the backoff between its attempts takes no real time


def use_aiohttp_options(options: dict[str, Any]) -> None:
    """``RetryMiddleware().options(**options)`` used once (it raises TypeError/ValueError if refused)."""
    use_aiohttp_middleware(_quick_middleware().options(**options))


def _quick_middleware(classifier: Any = None) -> asyncretry.aiohttp.RetryMiddleware:
    policy = asyncretry.RetryPolicy(backoff=asyncretry.NoBackoff())
    return asyncretry.aiohttp.RetryMiddleware(policy=policy, classifier=classifier)


# ------------------------------------------------------------------------------------------------- gRPC


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any = None


def _aio_error(code: grpc.StatusCode) -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details="fake")


class _AioCall:
    """A finished grpc.aio call: awaiting it raises its error, if any."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def __await__(self) -> Generator[Any, None, bytes]:
        return self._end().__await__()

    async def _end(self) -> bytes:
        if self.error is not None:
            raise self.error
        return b"reply"


def _details(timeout: float | None) -> _Details:
    return _Details("/pkg.Service/Method", timeout, aio.Metadata(), None, None)


def use_grpc_interceptors(obj: asyncretry.grpc.RetryInterceptors, options: dict[str, Any] | None = None) -> None:
    """A unary-unary call that fails with UNAVAILABLE once, then succeeds; with and without a timeout."""

    async def main() -> None:
        failures = [_aio_error(grpc.StatusCode.UNAVAILABLE)]

        async def continuation(details: Any, request: Any) -> _AioCall:
            return _AioCall(failures.pop() if failures else None)

        for timeout in (None, 5.0):
            with asyncretry.grpc.call_options(**(options or {})), contextlib.suppress(aio.AioRpcError, AsyncRetryError):
                await obj.intercept_unary_unary(continuation, _details(timeout), b"request")
            failures.append(_aio_error(grpc.StatusCode.UNAVAILABLE))

    virtual_time.run(main, "asyncio")  # the backoff between its attempts takes no real time


class _SyncError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "fake"

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def initial_metadata(self) -> tuple[()]:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


class _SyncOutcome:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def exception(self) -> Exception | None:
        return self.error


def use_sync_interceptors(obj: asyncretry.grpc.SyncRetryInterceptors) -> None:
    """A unary-unary call that fails with UNAVAILABLE once, then succeeds, in this thread (no backoff sleeps
    are long: the policy's first backoff is under a second)."""
    failures: list[Exception] = [_SyncError()]

    def continuation(details: Any, request: Any) -> _SyncOutcome:
        return _SyncOutcome(failures.pop() if failures else None)

    with contextlib.suppress(grpc.RpcError, AsyncRetryError):
        obj.unary_unary.intercept_unary_unary(continuation, _details(5.0), b"request")


def use_call_options(obj: asyncretry.grpc.CallOptions) -> None:
    """The options of one call, through the interceptors."""
    fields = ("idempotent", "retry", "hedge", "policy", "scope")
    use_grpc_interceptors(_quick_interceptors(), {name: getattr(obj, name) for name in fields})


def _quick_interceptors() -> asyncretry.grpc.RetryInterceptors:
    async def make() -> asyncretry.grpc.RetryInterceptors:
        return asyncretry.grpc.RetryInterceptors(policy=asyncretry.RetryPolicy(backoff=asyncretry.NoBackoff()))

    return asyncio.run(make())


class CallOptionsMade:
    """What ``call_options(...)`` returned (a context manager), so that its first use is found by type."""

    def __init__(self, made: contextlib.AbstractContextManager[asyncretry.grpc.CallOptions]) -> None:
        self.made = made


def use_call_options_made(obj: CallOptionsMade) -> None:
    with obj.made as options:
        use_call_options(options)


# -------------------------------------------------------------------------------------------------- AWS


def _answer(status: int, body: bytes) -> Callable[..., botocore.awsrequest.AWSResponse]:
    class Raw:
        def stream(self, **kwargs: Any) -> Iterator[bytes]:
            yield body

    def before_send(request: Any, **kwargs: Any) -> botocore.awsrequest.AWSResponse:
        return botocore.awsrequest.AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.0"},
                                               Raw())

    return before_send


def use_aws_client(client: Any) -> None:
    """One call that succeeds and one that fails with a non-retryable error, answered by ``before-send``."""
    for status, body in ((200, b'{"TableNames": []}'), (400, b'{"__type": "ValidationException"}')):
        client.meta.events.register("before-send.dynamodb", _answer(status, body), unique_id="hostile-answer")
        with contextlib.suppress(botocore.exceptions.ClientError, AsyncRetryError):
            client.list_tables()
        client.meta.events.unregister("before-send.dynamodb", unique_id="hostile-answer")


def use_aws_handler(obj: asyncretry.aws.ClientRetryHandler) -> None:
    """The handler's client is not kept: a new client with the same handler settings is used instead."""
    client = _fake_client()
    asyncretry.aws.install(client, obj.retrier, policy=obj.policy, scope=obj.scope)
    use_aws_client(client)


class SessionInstalled:
    """``install_session`` returns nothing: its session is what it changed."""

    def __init__(self, session: Any) -> None:
        self.session = session


def use_session(obj: SessionInstalled) -> None:
    use_aws_client(obj.session.create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:1",
        aws_access_key_id="fake", aws_secret_access_key="fake",
    ))


AIOBOTOCORE_CLIENT = "an aiobotocore client, made on the event loop"


class AsyncInstalled:
    """What ``install`` on an aiobotocore client returned, used there (the client lives on its loop)."""


def _aio_answer(status: int, body: bytes) -> Callable[..., aiobotocore.awsrequest.AioAWSResponse]:
    class Raw:
        async def read(self) -> bytes:
            return body

    def before_send(request: Any, **kwargs: Any) -> aiobotocore.awsrequest.AioAWSResponse:
        headers = {"Content-Type": "application/x-amz-json-1.0"}
        return aiobotocore.awsrequest.AioAWSResponse(request.url, status, headers, Raw())

    return before_send


@functools.wraps(asyncretry.aws.install)
def install_aiobotocore(client: Any, retrier: Any = None, **settings: Any) -> AsyncInstalled:
    """``install`` on an aiobotocore client (``client``: :data:`AIOBOTOCORE_CLIENT`), then one call that succeeds
    and one that fails, answered by ``before-send``, and its statistics."""

    async def main() -> None:
        session = _fake_session(aiobotocore.session.get_session())
        async with session.create_client("dynamodb", region_name="us-east-1",
                                          endpoint_url="http://127.0.0.1:1") as made:
            handler = asyncretry.aws.install(made if client == AIOBOTOCORE_CLIENT else client, retrier, **settings)
            repr(handler), handler.statistics()
            for status, body in ((200, b'{"TableNames": []}'), (400, b'{"__type": "ValidationException"}')):
                answer = _aio_answer(status, body)
                made.meta.events.register("before-send.dynamodb", answer, unique_id="hostile-answer")
                with contextlib.suppress(botocore.exceptions.ClientError, AsyncRetryError):
                    await made.list_tables()
                made.meta.events.unregister("before-send.dynamodb", unique_id="hostile-answer")

    asyncio.run(main())
    return AsyncInstalled()


FACTORIES["install_aiobotocore"] = install_aiobotocore
REQUIRED["install_aiobotocore"] = lambda: {"client": AIOBOTOCORE_CLIENT}

FIRST_USES: dict[str, Callable[[Any], object]] = {
    "AsyncInstalled": lambda obj: obj,  # used by install_aiobotocore itself, on its client's event loop
    "RetryMiddleware": use_aiohttp_middleware,
    "asyncretry.aiohttp.HttpClassifier": lambda obj: use_aiohttp_middleware(_quick_middleware(classifier=obj)),
    "_WithOptions": use_aiohttp_middleware,
    "RetryInterceptors": use_grpc_interceptors,
    "SyncRetryInterceptors": use_sync_interceptors,
    "GrpcClassifier": lambda obj: (obj.outcome(_aio_error(grpc.StatusCode.UNAVAILABLE)),
                                   obj.is_idempotent("/pkg.Service/Method")),
    "CallOptions": use_call_options,
    "CallOptionsMade": use_call_options_made,
    "Channel": lambda obj: obj.close(),
    "ChannelOpened": lambda obj: obj,  # made and closed: a first call needs a server (tests/test_grpc.py)
    "ClientRetryHandler": use_aws_handler,
    "SessionInstalled": use_session,
}


def use_grpc_call_options(options: dict[str, Any]) -> None:
    """``call_options(**options)`` around calls through the interceptors (TypeError/ValueError if refused)."""
    asyncretry.grpc.call_options(**options)  # refused here, before any ``with``, if it is refused at all
    use_grpc_interceptors(_quick_interceptors(), options)


# The per-request overrides of the integrations: the keys each takes, and a use of one request with them.
OVERRIDE_USES: dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], None]]] = {
    "RetryMiddleware.options": (asyncretry.RequestOverrides.keys(), use_aiohttp_options),
    "call_options": (frozenset({"idempotent", "retry", "hedge", "policy", "scope", "caller"}), use_grpc_call_options),
}
NONE_IS_UNSET = {"call_options"}
"""Where an option given as ``None`` is one not given (its keyword's default), rather than a wrong type."""
