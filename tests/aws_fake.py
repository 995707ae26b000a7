"""A fake AWS JSON 1.0 service (DynamoDB, SQS) for the tests of ``asyncretry.aws``: scripted answers.

Each request takes the next answer of :attr:`FakeAws.script` (then ``{}`` with 200): an HTTP status,
an error code (``__type``, as AWS JSON services send it), extra headers, and for a success a body whose
``x-amz-crc32`` header may be made wrong on purpose. :attr:`FakeAws.rate` turns it into a throttling
endpoint instead: a token bucket admits that many requests per second (a burst of 50 ms of them, at
least 1) and answers ``ThrottlingException`` above. It runs under
:class:`asyncretry._testserver.FaultServer` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from binascii import crc32
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from asyncretry._testserver import FaultServer

_PREFIX = "com.amazonaws.dynamodb.v20120810#"


@dataclass
class Answer:
    """One scripted answer."""

    status: int = 200
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    bad_crc32: bool = False
    delay: float = 0.0


@dataclass
class FakeAws:
    """The ASGI app: scripted answers, then 200 ``{}`` (or throttling above a rate)."""

    script: list[Answer] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    rate: float | None = None
    throttled: int = 0
    _tokens: float = 0.0
    _last: float = 0.0

    def play(self, *answers: Answer) -> None:
        """Answer the next requests with ``answers``; forget what was received."""
        self.script, self.received = list(answers), []

    def _next(self) -> Answer:
        if self.script:
            return self.script.pop(0)
        if self.rate is not None:
            now = time.monotonic()
            burst = max(1.0, self.rate * 0.05)
            self._tokens = min(burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens < 1.0:
                self.throttled += 1
                return Answer(400, "ThrottlingException")
            self._tokens -= 1.0
        return Answer()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        self.received.append(dict(scope["headers"]).get(b"x-amz-target", b"").decode())
        answer = self._next()
        if answer.delay:
            await asyncio.sleep(answer.delay)  # the server's own loop (uvicorn's thread): a slow answer
        document = dict(answer.body)
        if answer.code is not None:
            document = {"__type": f"{_PREFIX}{answer.code}", "message": answer.code}
        body = json.dumps(document).encode()
        headers = {"content-type": "application/x-amz-json-1.0", "content-length": str(len(body)),
                   "x-amzn-requestid": "req-1", **answer.headers}
        if answer.status < 300:
            headers["x-amz-crc32"] = str((crc32(body) & 0xFFFFFFFF) + (1 if answer.bad_crc32 else 0))
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def fake_aws() -> Iterator[tuple[str, FakeAws]]:
    """One fake AWS endpoint on 127.0.0.1 for the module: its URL and its app."""
    app = FakeAws()
    with FaultServer(app) as running:  # type: ignore[arg-type]
        yield running.url, app


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials; the developer's ~/.aws and AWS_* settings stay out of the clients."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL",
                 "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
