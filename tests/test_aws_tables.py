"""The SDKs' standard-mode and long-polling tables through real SDK clients with asyncretry installed.

The cases of ``tests/data/standard_retry_cases.json`` (2020 and 2026 profiles) and
``tests/data/long_polling_cases.json`` run through a real aiobotocore client (DynamoDB ``GetItem``, SQS
``ReceiveMessage`` / ``SendMessage``) and a real botocore client, against a fake AWS endpoint on
127.0.0.1 that answers each attempt with the case's next response (status, ``__type`` error code,
``x-amz-retry-after``). The SDK's own retry handler is gone (:func:`asyncretry.aws.install`): the
engine decides every retry from what botocore parsed. Each run checks the attempts the server got,
the delays slept, the tokens left in the quota and how the call ended.

Not run here: the cases that script a connection timeout or a result judged by its body (a real
client cannot be made to time out on cue without real waiting); ``tests/test_conformance.py`` runs them.
aiobotocore's default HTTP backend (aiohttp) is asyncio-only; the trio runs are in ``test_aws_handler.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import ClientError

import aws_fake
from asyncretry import (
    ExponentialBackoff,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    botocore_classifier,
)
from asyncretry.aws import install, retry_history
from asyncretry.testing import VirtualClock
from aws_fake import Answer, FakeAws

DATA = Path(__file__).parent / "data"
fake_aws = aws_fake.fake_aws
fake_credentials = aws_fake.fake_credentials


def _cases(name: str) -> list[dict[str, Any]]:
    cases = json.loads((DATA / name).read_text(encoding="utf-8"))["cases"]
    runnable = []
    for case in cases:
        steps = case.get("responses", [])
        if case["kind"] == "single" and not any(
            "error" in s["response"] or "body_status" in s["response"] or "server_delay" in s["response"]
            for s in steps
        ):
            runnable.append(case)
    return runnable


_SESSION = get_session()  # one session each for the module: the service models are loaded once
_BOTOCORE_SESSION = botocore.session.get_session()
STANDARD = _cases("standard_retry_cases.json")
LONG_POLLING = _cases("long_polling_cases.json")


def _backoff(spec: dict[str, Any] | None) -> ExponentialBackoff | None:
    if spec is None:
        return None
    return ExponentialBackoff(initial=spec["initial"], multiplier=spec["multiplier"], max_delay=spec["max_delay"],
                              jitter="full" if spec["form"] == "botocore" else "reduce")


def _answer(response: dict[str, Any]) -> Answer:
    return Answer(response["status_code"], response.get("error_code"), dict(response.get("headers", {})))


class Setup:
    """The case's policy, quota and retrier for one client (the classifier knows the client's model)."""

    def __init__(self, case: dict[str, Any], client: Any) -> None:
        engine = case["engine"]
        profile = case["profile"]
        rand = engine["backoff"]["rand"]
        self.clock = VirtualClock()
        self.policy = RetryPolicy(
            mode="standard", profile=profile, max_attempts=engine["max_attempts"],
            backoff=_backoff(engine["backoff"]), throttling_backoff=_backoff(engine.get("throttling_backoff")),
            classifier=botocore_classifier(client),
        )
        self.quota = RetryQuota(RetryQuotaConfig.profile(profile), clock=self.clock)
        assert self.quota.try_acquire(self.quota.config.max_capacity - engine["initial_tokens"])
        self.retrier = Retrier(self.policy, clock=self.clock, rng=lambda: rand, quota=self.quota)
        install(client, self.retrier, policy=self.policy)


def _call_of(case: dict[str, Any], client: Any, url: str) -> Callable[[], Any]:
    if case["given"].get("service") == "sqs":
        queue = f"{url}/123456789012/jobs"
        if case["engine"].get("long_polling"):
            return lambda: client.receive_message(QueueUrl=queue, WaitTimeSeconds=20)
        return lambda: client.send_message(QueueUrl=queue, MessageBody="job")
    return lambda: client.get_item(TableName="items", Key={"id": {"S": "1"}})


def _check(case: dict[str, Any], app: FakeAws, setup: Setup, slept: list[float], result: Any,
           error: BaseException | None) -> None:
    steps = case["responses"]
    assert len(app.received) == len(steps), "attempts the server got"
    expected_delays = [s["expected"]["delay"] for s in steps if "delay" in s["expected"]]
    assert [d for d in slept if d > 0] == pytest.approx([d for d in expected_delays if d > 0], abs=1e-9)
    assert setup.quota.available == steps[-1]["expected"]["retry_quota"]
    outcome = steps[-1]["expected"]["outcome"]
    last = steps[-1]["response"]
    if outcome == "success":
        assert error is None
        assert result["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert result["ResponseMetadata"]["RetryAttempts"] == len(steps) - 1
        return
    assert error is not None
    # Whatever stopped the retries (the attempts, the quota), the call ends with the SDK's own error for the
    # last response, the engine's history kept with it.
    history = retry_history(error)
    assert history is not None
    assert history.gave_up == {"max_attempts_exceeded": "max_attempts", "fail_request": "not_retryable",
                               "retry_quota_exceeded": "quota"}[outcome]
    assert len(history.attempts) == len(steps)
    assert isinstance(error, ClientError), repr(error)
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == last["status_code"]
    if "error_code" in last:
        assert error.response["Error"]["Code"] == last["error_code"]


def _service(case: dict[str, Any]) -> str:
    return "sqs" if case["given"].get("service") == "sqs" else "dynamodb"


_PARAMS = [pytest.param(case, id=f"{case['profile']}-{case['name']}") for case in STANDARD + LONG_POLLING]


@pytest.fixture
def anyio_backend() -> str:
    """aiobotocore's default HTTP backend (aiohttp) runs on asyncio only."""
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("case", _PARAMS)
async def test_the_sdk_tables_pass_through_a_real_aiobotocore_client(
    fake_aws: tuple[str, FakeAws], case: dict[str, Any]
) -> None:
    """An aiobotocore client with asyncretry installed makes the attempts, sleeps the delays and leaves the
    quota each SDK case prescribes, and ends as the case says."""
    url, app = fake_aws
    app.play(*(_answer(step["response"]) for step in case["responses"]))
    config = Config(retries={"mode": "standard"})
    async with _SESSION.create_client(_service(case), region_name="us-east-1", endpoint_url=url,
                                           config=config) as client:
        setup = Setup(case, client)
        result: Any = None
        error: BaseException | None = None
        try:
            result = await _call_of(case, client, url)()
        except Exception as raised:
            error = raised
    _check(case, app, setup, setup.clock.sleeps, result, error)


@pytest.mark.parametrize("case", _PARAMS)
def test_the_sdk_tables_pass_through_a_real_botocore_client(
    fake_aws: tuple[str, FakeAws], case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A botocore (boto3's) client with asyncretry installed does the same, its waits blocking the thread."""
    url, app = fake_aws
    app.play(*(_answer(step["response"]) for step in case["responses"]))
    client = _BOTOCORE_SESSION.create_client(
        _service(case), region_name="us-east-1", endpoint_url=url, config=Config(retries={"mode": "standard"})
    )
    setup = Setup(case, client)
    slept: list[float] = []
    result: Any = None
    error: BaseException | None = None
    with monkeypatch.context() as patch:
        patch.setattr(time, "sleep", slept.append)  # the sync driver's waits, recorded instead of slept
        try:
            result = _call_of(case, client, url)()
        except Exception as raised:
            error = raised
    client.close()
    _check(case, app, setup, slept, result, error)
