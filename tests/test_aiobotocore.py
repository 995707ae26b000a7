"""End to end: aiobotocore with its own retries off, retried by asyncretry exactly as botocore's standard mode.

A fake DynamoDB (AWS JSON 1.0 protocol, uvicorn on 127.0.0.1) answers a scripted series of responses:
``ThrottlingException`` (400, ``__type``), 503 with no error code, ``ValidationException``, or the item.
Each script runs twice against a fresh server: once through botocore's own standard retry mode (a sync
botocore client in a worker thread, its sleeps recorded instead of slept, its random source fixed), and
once through aiobotocore with ``total_max_attempts=1`` inside :meth:`Retrier.call` (a virtual clock records
the sleeps, the same fixed random value). The two must make the same attempts, leave the same tokens in
the retry quota and sleep the same delays.

aiobotocore runs on asyncio only (aiohttp), so these tests do not run on trio; they use the real clock
for the network (the retrier's sleeps are virtual).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal
from unittest import mock

import anyio.to_thread
import botocore.config
import botocore.configprovider
import botocore.endpoint
import botocore.session
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import ClientError
from botocore.retries import quota as botocore_quota
from botocore.retries import standard

from asyncretry import ExponentialBackoff, Retrier, RetryPolicy, history_of
from asyncretry._testserver import FaultServer
from asyncretry.testing import VirtualClock

pytestmark = [pytest.mark.anyio, pytest.mark.real_time]

RAND = 0.5
PROFILE: Literal["2020", "2026"] = "2026" if botocore.configprovider.NEW_RETRIES_ENABLED else "2020"
"""The cost profile of the installed botocore's standard mode (its 2026 rules sit behind a switch)."""
DYNAMODB_2026 = {"backoff": ExponentialBackoff(initial=0.025, multiplier=2.0, max_delay=20.0, jitter="full")}
"""botocore's 2026 rules give DynamoDB a 25 ms transient base instead of 50 ms."""

_JSON = [(b"content-type", b"application/x-amz-json-1.0")]
_PREFIX = "com.amazonaws.dynamodb.v20120810#"
RESPONSES: dict[str, tuple[int, dict[str, Any]]] = {
    "ok": (200, {"Item": {"id": {"S": "1"}, "name": {"S": "widget"}}}),
    "throttle": (400, {"__type": f"{_PREFIX}ThrottlingException", "message": "Rate exceeded"}),
    "provisioned": (400, {"__type": f"{_PREFIX}ProvisionedThroughputExceededException", "message": "slow"}),
    "validation": (400, {"__type": f"{_PREFIX}ValidationException", "message": "bad key"}),
    "503": (503, {}),  # no body, hence no error code: botocore names the error "503"
}


@pytest.fixture
def anyio_backend() -> str:
    """aiobotocore runs on asyncio only."""
    return "asyncio"


@pytest.fixture(autouse=True)
def no_aws_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Keep the developer's ~/.aws and any AWS_* variables out of the clients."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@dataclass
class FakeDynamoDB:
    """An ASGI app answering ``DynamoDB_20120810.*`` requests with the scripted responses, in order."""

    script: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        target = dict(scope["headers"]).get(b"x-amz-target", b"").decode()
        self.received.append(target)
        name = self.script[len(self.received) - 1] if len(self.received) <= len(self.script) else "ok"
        status, document = RESPONSES[name]
        body = json.dumps(document).encode() if document else b""
        headers = [*_JSON, (b"content-length", str(len(body)).encode()), (b"x-amzn-requestid", b"req-1")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FaultServer, FakeDynamoDB]]:
    """One fake DynamoDB on 127.0.0.1 for the module; each run sets its script."""
    app = FakeDynamoDB()
    with FaultServer(app) as running:  # type: ignore[arg-type]
        yield running, app


@dataclass
class Run:
    """What one call did: requests the server got, tokens left in the quota, delays slept, the outcome."""

    attempts: int
    tokens: float
    delays: list[float]
    outcome: str


def _outcome(result: Any, error: BaseException | None) -> str:
    if error is None:
        return f"ok {result['Item']['name']['S']}"
    assert isinstance(error, ClientError), repr(error)
    return f"{error.response['Error']['Code']} HTTP {error.response['ResponseMetadata']['HTTPStatusCode']}"


def botocore_run(url: str, app: FakeDynamoDB, script: list[str], max_attempts: int) -> Run:
    """The call through botocore's standard retry mode (sync client; sleeps recorded, random fixed)."""
    app.script, app.received = script, []
    quotas: list[botocore_quota.RetryQuota] = []
    slept: list[float] = []

    class FixedRandomBackoff(standard.ExponentialBackoff):  # type: ignore[misc]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "random": lambda: RAND})

    class RecordedQuota(botocore_quota.RetryQuota):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            quotas.append(self)

    config = botocore.config.Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    with (
        mock.patch.object(standard, "ExponentialBackoff", FixedRandomBackoff),
        mock.patch.object(botocore_quota, "RetryQuota", RecordedQuota),
        mock.patch.object(botocore.endpoint, "time", SimpleNamespace(sleep=slept.append)),
    ):
        client = botocore.session.get_session().create_client(
            "dynamodb", region_name="us-east-1", endpoint_url=url, config=config,
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )
        result: Any = None
        error: BaseException | None = None
        try:
            result = client.get_item(TableName="items", Key={"id": {"S": "1"}})
        except ClientError as raised:
            error = raised
        finally:
            client.close()
    assert len(quotas) == 1
    return Run(len(app.received), quotas[0].available_capacity, slept, _outcome(result, error))


async def asyncretry_run(url: str, app: FakeDynamoDB, script: list[str], max_attempts: int) -> Run:
    """The call through aiobotocore (its retries off) inside ``Retrier.call`` with botocore's standard preset."""
    app.script, app.received = script, []
    clock = VirtualClock()
    service = DYNAMODB_2026 if PROFILE == "2026" else {}
    policy = RetryPolicy.aws_standard(PROFILE, max_attempts=max_attempts, **service)
    retrier = Retrier(policy, clock=clock, rng=lambda: RAND)
    config = AioConfig(retries={"mode": "standard", "total_max_attempts": 1})
    async with get_session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url=url, config=config,
        aws_access_key_id="testing", aws_secret_access_key="testing",
    ) as client:
        result: Any = None
        error: BaseException | None = None
        try:
            result = await retrier.call(client.get_item, TableName="items", Key={"id": {"S": "1"}})
        except ClientError as raised:
            error = raised
    scopes = retrier.statistics().scopes
    assert len(scopes) == 1
    assert scopes[0].quota is not None
    if error is not None:
        history = history_of(error)
        assert history is not None
        assert len(history.attempts) == len(app.received)
    return Run(len(app.received), scopes[0].quota.available, clock.sleeps, _outcome(result, error))


SCRIPTS = [
    pytest.param(["throttle", "503", "ok"], 3, id="throttling-503-success"),
    pytest.param(["503", "503", "503"], 3, id="503s-until-max-attempts"),
    pytest.param(["provisioned", "throttle", "503", "ok"], 4, id="four-attempts"),
    pytest.param(["validation"], 3, id="not-retryable"),
    pytest.param(["ok"], 3, id="first-try-success"),
]


@pytest.mark.parametrize(("script", "max_attempts"), SCRIPTS)
async def test_asyncretry_over_aiobotocore_retries_as_botocores_standard_mode(
    server: tuple[FaultServer, FakeDynamoDB], script: list[str], max_attempts: int
) -> None:
    """Same attempts, quota tokens left, delays and outcome as botocore's own standard mode on the same script."""
    running, app = server
    expected = await anyio.to_thread.run_sync(botocore_run, running.url, app, script, max_attempts)
    actual = await asyncretry_run(running.url, app, script, max_attempts)
    assert actual == expected
    assert all(target == "DynamoDB_20120810.GetItem" for target in app.received)


async def test_the_figures_are_botocores_published_costs(server: tuple[FaultServer, FakeDynamoDB]) -> None:
    """Throttling then 503 then success: 3 attempts, 500 - 5 - 5 + 5 tokens, delays rand * 1 s and rand * 2 s."""
    running, app = server
    run = await asyncretry_run(running.url, app, ["throttle", "503", "ok"], 3)
    if PROFILE == "2020":
        assert run == Run(3, 495, [RAND * 1.0, RAND * 2.0], "ok widget")
    else:  # 2026: a throttling retry costs 5 after a 1 s base, the 503's 14 after DynamoDB's 25 ms base
        assert run == Run(3, 495, [RAND * 1.0, RAND * 0.05], "ok widget")
