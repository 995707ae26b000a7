"""The OpenAI and Anthropic SDKs given an ``http_client`` with asyncretry's httpx2 transport and their own
retries off (``max_retries=0``), against a local server on 127.0.0.1 that answers as the APIs do (429 with
``retry-after-ms`` and ``retry-after``, Anthropic's 529 ``overloaded_error``, 503): asyncretry retries, the
SDK sends every request once (its ``x-stainless-retry-count`` header stays 0). The recipes of docs/sdks.md.

Both SDKs are built on httpx2 here; they are test-only dependencies of asyncretry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from asyncretry import FixedBackoff, RetryPolicy
from asyncretry._testserver import FaultServer
from asyncretry.httpx2 import AsyncRetryTransport, HttpClassifier, RetryTransport

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(30)]

POLICY = RetryPolicy(max_attempts=4, backoff=FixedBackoff(0.01))
# Anthropic's 529 (overloaded) is a throttling answer: retried, and adaptive mode slows down for it.
CLASSIFIER = HttpClassifier(throttling_statuses=frozenset({429, 509, 529}))
KEY = {"Idempotency-Key": "order-1"}  # the SDKs send none: without one, a POST is never sent twice

CHAT = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1_800_000_000, "model": "gpt-test",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}],
}
MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "hello"}], "usage": {"input_tokens": 1, "output_tokens": 1},
}
MODELS = {"object": "list", "data": [{"id": "gpt-test", "object": "model", "created": 0, "owned_by": "me"}]}


def rate_limited() -> tuple[int, dict[str, str], dict[str, Any]]:
    """OpenAI's 429: the wait in ``retry-after-ms`` (20 ms) and, rounded up, in ``retry-after``."""
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    return 429, {"retry-after-ms": "20", "retry-after": "1"}, body


def overloaded() -> tuple[int, dict[str, str], dict[str, Any]]:
    """Anthropic's 529."""
    return 529, {}, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def unavailable() -> tuple[int, dict[str, str], dict[str, Any]]:
    return 503, {}, {"error": {"message": "Service Unavailable", "type": "server_error"}}


class Api:
    """An ASGI app answering a script (then 200 with ``success``), recording each request's headers."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, str], dict[str, Any]]] = []
        self.success: dict[str, Any] = {}
        self.requests: list[dict[str, str]] = []

    def play(self, success: dict[str, Any], *answers: tuple[int, dict[str, str], dict[str, Any]]) -> None:
        self.script, self.success, self.requests = list(answers), success, []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.requests.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        status, headers, body = self.script.pop(0) if self.script else (200, {}, self.success)
        content = json.dumps(body).encode()
        raw = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": content})

    @property
    def sdk_retries(self) -> list[str]:
        """What the SDK said of each request: how many times it had retried it itself."""
        return [r.get("x-stainless-retry-count", "?") for r in self.requests]


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[Api, str]]:
    api = Api()
    with FaultServer(api) as server:  # type: ignore[arg-type]
        yield api, server.url


def async_http_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=AsyncRetryTransport(policy=POLICY, classifier=CLASSIFIER))


def async_openai(url: str) -> openai.AsyncOpenAI:
    """The async OpenAI client of the recipe: its retries off, ours in its http_client."""
    return openai.AsyncOpenAI(api_key="test", base_url=url + "/v1", max_retries=0, http_client=async_http_client())


@pytest.mark.anyio
async def test_openai_chat_is_retried_by_asyncretry_not_by_the_sdk(running: tuple[Api, str]) -> None:
    """A chat completion answered 429 (retry-after-ms), 503, then 200 is retried by asyncretry; the SDK sends once."""
    api, url = running
    api.play(CHAT, rate_limited(), unavailable())
    async with async_openai(url) as client:
        completion = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], extra_headers=KEY
        )
    assert completion.choices[0].message.content == "hello"
    assert len(api.requests) == 3
    assert api.sdk_retries == ["0", "0", "0"]


@pytest.mark.anyio
async def test_a_post_without_an_idempotency_key_is_not_replayed(running: tuple[Api, str]) -> None:
    """Without an Idempotency-Key a 503'd chat completion is sent once: the SDK raises its own error for it."""
    api, url = running
    api.play(CHAT, unavailable())
    async with async_openai(url) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert len(api.requests) == 1


@pytest.mark.anyio
async def test_openai_get_is_retried_without_a_key(running: tuple[Api, str]) -> None:
    """A GET (listing models) is idempotent: retried after 429 and 503 with no key."""
    api, url = running
    api.play(MODELS, rate_limited(), unavailable())
    async with async_openai(url) as client:
        models = await client.models.list()
    assert [model.id for model in models.data] == ["gpt-test"]
    assert api.sdk_retries == ["0", "0", "0"]


@pytest.mark.anyio
async def test_anthropic_overloaded_is_retried_by_asyncretry_not_by_the_sdk(running: tuple[Api, str]) -> None:
    """A message answered 529 (overloaded), 429 (retry-after-ms), then 200 is retried by asyncretry; the SDK
    sends once."""
    api, url = running
    api.play(MESSAGE, overloaded(), rate_limited())
    client = anthropic.AsyncAnthropic(api_key="test", base_url=url, max_retries=0, http_client=async_http_client())
    async with client:
        message = await client.messages.create(
            model="claude-test", max_tokens=16, messages=[{"role": "user", "content": "hi"}], extra_headers=KEY
        )
    assert message.content[0].type == "text"
    assert message.content[0].text == "hello"
    assert api.sdk_retries == ["0", "0", "0"]


def test_the_sync_clients_are_retried_by_asyncretry(running: tuple[Api, str]) -> None:
    """The sync OpenAI and Anthropic clients over RetryTransport: the same retries, the SDK sends once."""
    api, url = running
    transport = RetryTransport(policy=POLICY, classifier=CLASSIFIER)
    with httpx2.Client(transport=transport) as http:
        api.play(CHAT, rate_limited(), unavailable())
        chat = openai.OpenAI(api_key="test", base_url=url + "/v1", max_retries=0, http_client=http)
        completion = chat.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}], extra_headers=KEY
        )
        assert completion.choices[0].message.content == "hello"
        assert api.sdk_retries == ["0", "0", "0"]
        api.play(MESSAGE, overloaded(), unavailable())
        claude = anthropic.Anthropic(api_key="test", base_url=url, max_retries=0, http_client=http)
        message = claude.messages.create(
            model="claude-test", max_tokens=16, messages=[{"role": "user", "content": "hi"}], extra_headers=KEY
        )
        assert message.stop_reason == "end_turn"
        assert api.sdk_retries == ["0", "0", "0"]
