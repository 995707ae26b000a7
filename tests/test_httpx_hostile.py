"""Whatever a server sends, the caller gets the response (or the typed error its retries ended in),
never a builtin exception from our parsing, and judging a response costs bounded memory.

Random statuses, headers (any bytes, and the ones we parse filled with garbage, huge numbers and
non-ASCII digits) and bodies (any bytes, deep nesting, gzip bombs) are served through
``httpx.MockTransport`` to ``AsyncRetryTransport`` (asyncio and trio) and ``RetryTransport``, with no
waits (``test_mode``), and read back raw by the caller.
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable
from functools import cache

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncretry import AsyncRetryError, RetryPolicy
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryInfo, RetryTransport
from asyncretry.testing import test_mode

# Run against httpx and httpx2 (tests using respx's global router: httpx only).
pytestmark = pytest.mark.usefixtures("client_package")

URL = "https://api.test/items"
POLICY = RetryPolicy(max_attempts=3)
BOMB_SIZE = 16 * 1024 * 1024  # decoded bytes of each bomb (about 16 KB compressed)
MEMORY_BOUND = 4 * 1024 * 1024  # the most a response may cost while the transport judges it


# -------------------------------------------------------------------------------------- the bodies
def _compressed(wbits: int, size: int) -> bytes:
    compressor = zlib.compressobj(9, wbits=wbits)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, compressor.flush()])


@cache
def bombs() -> dict[str, tuple[bytes, bytes]]:
    """Content-Encoding and body of bombs that decode to BOMB_SIZE bytes."""
    gzipped = _compressed(zlib.MAX_WBITS | 16, BOMB_SIZE)
    return {
        "gzip": (b"gzip", gzipped),
        "deflate": (b"deflate", _compressed(zlib.MAX_WBITS, BOMB_SIZE)),
        "raw-deflate": (b"deflate", _compressed(-zlib.MAX_WBITS, BOMB_SIZE)),
        "gzip-of-gzip": (b"gzip, gzip", gzip.compress(gzipped)),
    }


class Body:
    """A body and the headers that go with it (the content-encoding of a bomb)."""

    __slots__ = ("content", "headers")

    def __init__(self, content: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        self.content = content
        self.headers = headers


@cache
def named_bodies() -> dict[str, Body]:
    """The large bodies, by name: hypothesis draws the name (it will not print 64 KB in a failing example)."""
    found = {
        "65536 [": Body(b"[" * 65_536),
        "13000 {": Body(b'{"a":' * 13_000 + b"1" + b"}" * 13_000),
        "a code, then 32000 [": Body(
            b'{"__type": "ThrottlingException", "d": ' + b"[" * 32_000 + b"]" * 32_000 + b"}"
        ),
        "an unclosed string of escapes": Body(b"{" + b'"\\' * 20_000),
        "a 5000-digit number": Body(b'{"code": ' + b"9" * 5_000 + b"}"),
        "70000 bytes": Body(b"x" * 70_000),  # longer than max_error_body
    }
    for name, (encoding, content) in bombs().items():
        found[f"{name} bomb"] = Body(content, ((b"content-encoding", encoding),))
    return found


ERROR_BODIES = [
    b'{"__type": "com.amazonaws#ThrottlingException"}',
    b'{"code": "SlowDown"}',
    b"<Error><Code>RequestTimeout</Code></Error>",
]
BODIES = st.one_of(
    st.binary(max_size=2_000),
    st.sampled_from(ERROR_BODIES),
    st.sampled_from(ERROR_BODIES).map(lambda content: ("gzip", gzip.compress(content))),
    st.sampled_from(sorted(named_bodies())),
)
"""Bytes as they are, gzip-encoded bytes, or the name of a large body."""


def body_of(drawn: bytes | str | tuple[str, bytes]) -> Body:
    if isinstance(drawn, bytes):
        return Body(drawn)
    if isinstance(drawn, tuple):
        return Body(drawn[1], ((b"content-encoding", drawn[0].encode()),))
    return named_bodies()[drawn]


# ------------------------------------------------------------------------------------ the headers
PARSED = [
    b"retry-after", b"Retry-After", b"retry-after-ms", b"x-amz-retry-after", b"content-encoding",
    b"content-type", b"content-length", b"x-amzn-errortype", b"X-Amzn-ErrorType",
]
ODD_VALUES = [
    "\u00b2".encode(), b"\xb2", "\u0665".encode(), "\uff11".encode(), b"1_000", b"1e3", b"-1", b"nan", b"inf",
    b"Sun, 06 Nov 1994 08:49:37 GMT", b"Sunday, 06-Nov-94 08:49:37 GMT", b"Sun Nov  6 08:49:37 1994",
    b"Sun, 31 Feb 2026 25:61:61 GMT", b"Sun, 06 Nov 99999 08:49:37 +9999",
    b"gzip", b"deflate", b"br", b"zstd", b"gzip, deflate", b"identity", b"x-gzip", b"GZIP, gzip, gzip",
    b"application/json", b"application/json; charset=utf-16", b"text/xml; charset=\xff\x00", b"text/html",
    b"ThrottlingException:http://internal", b"a#b#c:d",
]
VALUES = st.one_of(
    st.binary(max_size=40),
    st.integers(13, 6_000).map(lambda digits: b"9" * digits),
    st.sampled_from(ODD_VALUES),
)
HEADERS = st.lists(st.tuples(st.sampled_from(PARSED) | st.binary(min_size=1, max_size=12), VALUES), max_size=8)
METHODS = st.sampled_from(["GET", "POST", "PUT"])


def server(status: int, headers: list[tuple[bytes, bytes]], body: Body) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering every attempt with a fresh response, its body a stream as a real server's is."""
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=[*headers, *body.headers], stream=httpx.ByteStream(body.content))

    return handle


Outcome = tuple[httpx.Response, bytes] | Exception


def check(outcome: Outcome, body: Body) -> None:
    """The caller got a response carrying the body exactly as sent, or a typed error."""
    if isinstance(outcome, Exception):
        assert isinstance(outcome, (httpx.HTTPError, AsyncRetryError)), repr(outcome)
        return
    response, received = outcome
    assert received == body.content
    assert isinstance(response.extensions[EXTENSION], RetryInfo)


# ------------------------------------------------------------------------------------ the property
async def send_async(
    handler: Callable[[httpx.Request], httpx.Response], method: str
) -> Outcome:
    transport = AsyncRetryTransport(httpx.MockTransport(handler), policy=POLICY)
    try:
        with test_mode(no_wait=True):
            async with httpx.AsyncClient(transport=transport) as client, client.stream(method, URL) as response:
                return response, b"".join([chunk async for chunk in response.aiter_raw()])
    except Exception as error:
        return error


def send_sync(handler: Callable[[httpx.Request], httpx.Response], method: str) -> Outcome:
    transport = RetryTransport(httpx.MockTransport(handler), policy=POLICY)
    try:
        with test_mode(no_wait=True), httpx.Client(transport=transport) as client, \
                client.stream(method, URL) as response:
            return response, b"".join(response.iter_raw())
    except Exception as error:
        return error


@pytest.mark.anyio
@settings(max_examples=200)
@given(status=st.integers(100, 599), headers=HEADERS, body=BODIES, method=METHODS)
async def test_any_response_reaches_the_async_caller(
    status: int, headers: list[tuple[bytes, bytes]], body: bytes | str | tuple[str, bytes], method: str
) -> None:
    """Through AsyncRetryTransport, any status, headers and body give the response as sent, or a typed error."""
    check(await send_async(server(status, headers, body_of(body)), method), body_of(body))


@settings(max_examples=200)
@given(status=st.integers(100, 599), headers=HEADERS, body=BODIES, method=METHODS)
def test_any_response_reaches_the_sync_caller(
    status: int, headers: list[tuple[bytes, bytes]], body: bytes | str | tuple[str, bytes], method: str
) -> None:
    """Through RetryTransport, any status, headers and body give the response as sent, or a typed error."""
    check(send_sync(server(status, headers, body_of(body)), method), body_of(body))


# -------------------------------------------------------------------------------------- the memory
def bomb_server(name: str) -> Callable[[httpx.Request], httpx.Response]:
    return server(503, [(b"content-type", b"application/json")], named_bodies()[f"{name} bomb"])


def traced_peak() -> int:
    _, peak = tracemalloc.get_traced_memory()
    return peak


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["gzip", "deflate", "raw-deflate", "gzip-of-gzip"])
async def test_a_bomb_costs_the_async_transport_bounded_memory(name: str) -> None:
    """Judging a 503 whose error body inflates to 16 MB costs AsyncRetryTransport under 4 MB."""
    handler = bomb_server(name)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        outcome = await send_async(handler, "GET")
        peak = traced_peak()
    finally:
        tracemalloc.stop()
    check(outcome, named_bodies()[f"{name} bomb"])
    assert peak < MEMORY_BOUND


@pytest.mark.parametrize("name", ["gzip", "deflate", "raw-deflate", "gzip-of-gzip"])
def test_a_bomb_costs_the_sync_transport_bounded_memory(name: str) -> None:
    """Judging a 503 whose error body inflates to 16 MB costs RetryTransport under 4 MB."""
    handler = bomb_server(name)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        outcome = send_sync(handler, "GET")
        peak = traced_peak()
    finally:
        tracemalloc.stop()
    check(outcome, named_bodies()[f"{name} bomb"])
    assert peak < MEMORY_BOUND
