"""Whatever a server sends, the aiohttp middleware's caller gets a response or an ``aiohttp.ClientError``, never a
builtin exception from our parsing, and judging a response costs bounded memory.

Random statuses, headers (any bytes, and the ones we parse filled with garbage, huge numbers and
non-ASCII digits) and bodies (any bytes, deep nesting, a gzip bomb) are sent raw from 127.0.0.1
(:mod:`rawserver`) to a session with the middleware (asyncio: aiohttp runs on asyncio only).
"""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncretry import NoBackoff, RetryPolicy
from asyncretry.aiohttp import RetryMiddleware, retry_info
from rawserver import RawServer, response

pytestmark = pytest.mark.timeout(120)

POLICY = RetryPolicy(max_attempts=2, backoff=NoBackoff(), max_server_delay=0.0)
PARSED = ["Retry-After", "retry-after-ms", "x-amz-retry-after", "x-amzn-ErrorType", "Content-Type",
          "Content-Encoding", "Content-Length"]
GARBAGE = st.one_of(
    st.sampled_from(["", " ", "-1", "1e9", "9" * 5000, "\u0665", "1_0", "gzip", "gzip, br", "deflate", "json",
                     "application/json; charset=utf-16", "Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59",
                     "ThrottlingException", "a" * 300, "NaN", "inf"]),
    st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=40),
)
NAMES = st.one_of(st.sampled_from(PARSED), st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True))
BODIES = st.one_of(
    st.binary(max_size=2048),
    st.sampled_from([b"[" * 32_000, b'{"__type": "' + b"x" * 5000 + b'"}', b'{"code": "SlowDown"}',
                     b"<Error><Code>Throttling</Code></Error>", gzip.compress(b"\0" * 100_000, mtime=0)]),
)


async def fetch(url: str) -> tuple[int, bytes] | aiohttp.ClientError:
    """The status and body the caller reads, or the aiohttp error the call ended in."""
    middleware = RetryMiddleware(policy=POLICY, error_body_timeout=0.5)
    try:
        async with aiohttp.ClientSession(middlewares=[middleware], timeout=aiohttp.ClientTimeout(total=5)) as client, \
                client.get(url) as resp:
            assert retry_info(resp).attempts >= 1
            return resp.status, await resp.read()
    except aiohttp.ClientError as error:
        return error


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    status=st.integers(100, 599),
    headers=st.lists(st.tuples(NAMES, GARBAGE), max_size=6),
    body=BODIES,
    length=st.booleans(),
)
def test_any_response_ends_in_a_response_or_an_aiohttp_error(
    status: int, headers: list[tuple[str, str]], body: bytes, length: bool
) -> None:
    """Any status, header values (any Latin-1 text, our parsed headers full of garbage) and body bytes: the
    caller gets a response or an aiohttp.ClientError; nothing else escapes."""
    raw = [(name.encode("latin-1"), value.encode()) for name, value in headers]  # non-Latin-1 text as UTF-8 bytes
    answer = response(status, raw, body, length=length and not any(n.lower() == "content-length" for n, _ in headers))
    with RawServer(lambda n: answer) as server:
        result = asyncio.run(fetch(server.url))
    assert isinstance(result, (tuple, aiohttp.ClientError))


def test_judging_a_gzip_bomb_costs_bounded_memory() -> None:
    """A 503 whose error body inflates to 16 MB is judged by status and headers: the client holds under 4 MB."""
    bomb = gzip.compress(b"\0" * (16 * 1024 * 1024), mtime=0)
    answer = response(503, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb)

    async def judge(url: str) -> int:
        middleware = RetryMiddleware(policy=POLICY)
        async with aiohttp.ClientSession(middlewares=[middleware]) as client, client.get(url) as resp:
            assert retry_info(resp).attempts == 2
            return resp.status

    with RawServer(lambda n: answer) as server:
        tracemalloc.start()
        try:
            assert asyncio.run(judge(server.url)) == 503
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
