"""asyncretry installed as the retry handler of real aiobotocore and botocore clients (``asyncretry.aws``).

A fake AWS JSON endpoint on 127.0.0.1 (``tests/aws_fake.py``) answers scripted responses. These tests pin
what the SDK tables (``test_aws_tables.py``) do not: the SDK's own handler is gone, DynamoDB's CRC32
check, the 2026 per-service defaults, the SDK's ``retries`` config and environment, sessions, bad input,
and the adaptive limiter's waits never blocking the event loop. aiobotocore's default HTTP backend
(aiohttp) is asyncio-only; with its httpx backend (``AioConfig(http_session_cls=HttpxSession)``) the same
client runs on trio, and the tests that use it run on both backends.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import botocore.session
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.httpxsession import HttpxSession
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import ClientError

import aws_fake
from asyncretry import (
    AdaptiveLimiterConfig,
    BreakerState,
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    ExponentialBackoff,
    HedgingConfig,
    Retrier,
    RetriesExhausted,
    RetryPolicy,
    history_of,
)
from asyncretry.aws import (
    AsyncClientRetryHandler,
    ClientRetryHandler,
    install,
    install_session,
    policy_for,
    retry_history,
)
from asyncretry.testing import VirtualClock
from aws_fake import Answer, FakeAws

fake_aws = aws_fake.fake_aws
fake_credentials = aws_fake.fake_credentials

_SESSION = get_session()
_BOTOCORE_SESSION = botocore.session.get_session()
KEY = {"TableName": "items", "Key": {"id": {"S": "1"}}}
DOCS = (Path(__file__).resolve().parent.parent / "docs" / "aws.md").read_text(encoding="utf-8")
HTTPX = {"http_session_cls": HttpxSession}
"""aiobotocore's httpx backend, the one that runs on trio too."""

pytestmark = [
    pytest.mark.real_time,  # real sockets: the retriers' sleeps are virtual (VirtualClock) where they matter
    pytest.mark.filterwarnings("ignore:aiobotocore's httpx backend now prefers httpx2:DeprecationWarning"),
]


@asynccontextmanager
async def aio_client(url: str, service: str = "dynamodb", **config: Any) -> AsyncIterator[Any]:
    """An aiobotocore client of the fake endpoint (httpx backend when ``http_session_cls`` is given)."""
    async with _SESSION.create_client(service, region_name="us-east-1", endpoint_url=url,
                                      config=AioConfig(**config)) as client:
        yield client


def sync_client(url: str, service: str = "dynamodb", **config: Any) -> Any:
    """A botocore client of the fake endpoint."""
    return _BOTOCORE_SESSION.create_client(service, region_name="us-east-1", endpoint_url=url,
                                           config=Config(**config))


def _sdk_retry_handlers(client: Any) -> list[Any]:
    """The SDK's retry handlers and adaptive limiter still registered on the client's events (read from
    botocore's emitter, which has no public listing)."""
    found = []
    for event in ("needs-retry.dynamodb", "before-send.dynamodb", "after-call.dynamodb"):
        for handler in client.meta.events._emitter._handlers.prefix_search(event):
            module = type(getattr(handler, "__self__", handler)).__module__
            if ".retries" in module or "retryhandler" in module:
                found.append(handler)
    return found


@pytest.fixture
def virtual() -> VirtualClock:
    """The retrier's clock: sleeps are recorded, not slept."""
    return VirtualClock()


# ------------------------------------------------------------------- one layer retries, the SDK's config
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["standard", "adaptive", "legacy"])
async def test_install_replaces_the_sdks_handler_on_an_aiobotocore_client(
    fake_aws: tuple[str, FakeAws], mode: str, anyio_backend: str
) -> None:
    """After install no SDK retry handler or limiter is left, and a throttle and a 503 are retried once each."""
    url, app = fake_aws
    async with aio_client(url, retries={"mode": mode}, **HTTPX) as client:
        assert _sdk_retry_handlers(client)
        handler = install(client, Retrier(policy_for(client), clock=VirtualClock()))
        assert isinstance(handler, AsyncClientRetryHandler)
        assert _sdk_retry_handlers(client) == []
        app.play(Answer(400, "ThrottlingException"), Answer(503))
        result = await client.get_item(**KEY)
    assert len(app.received) == 3
    assert result["ResponseMetadata"]["RetryAttempts"] == 2
    assert (handler.statistics().attempts, handler.statistics().retries) == (3, 2)


@pytest.mark.parametrize("mode", ["standard", "adaptive", "legacy"])
def test_install_replaces_the_sdks_handler_on_a_botocore_client(
    fake_aws: tuple[str, FakeAws], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a botocore client: exactly one layer retries."""
    url, app = fake_aws
    client = sync_client(url, retries={"mode": mode})
    handler = install(client)
    assert isinstance(handler, ClientRetryHandler)
    assert _sdk_retry_handlers(client) == []
    app.play(Answer(400, "ThrottlingException"), Answer(503))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    result = client.get_item(**KEY)
    assert len(app.received) == 3
    assert result["ResponseMetadata"]["RetryAttempts"] == 2
    assert handler.statistics().retries == 2


def test_a_boto3_client_takes_the_handler(fake_aws: tuple[str, FakeAws], monkeypatch: pytest.MonkeyPatch) -> None:
    """A boto3 client is a botocore client: install retries its calls, and its total_max_attempts holds."""
    import boto3

    url, app = fake_aws
    client = boto3.client("dynamodb", endpoint_url=url, config=Config(retries={"mode": "standard",
                                                                                 "total_max_attempts": 2}))
    handler = install(client)
    app.play(Answer(503), Answer(503), Answer(503))
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    with pytest.raises(ClientError) as raised:
        client.get_item(**KEY)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert len(app.received) == 2
    assert handler.policy.max_attempts == 2


@pytest.mark.parametrize(
    ("environ", "retries", "expected"),
    [
        pytest.param({}, {"mode": "standard"}, ("standard", 3), id="standard-default"),
        pytest.param({"AWS_RETRY_MODE": "adaptive", "AWS_MAX_ATTEMPTS": "5"}, None, ("adaptive", 5), id="env"),
        pytest.param({"AWS_RETRY_MODE": "adaptive", "AWS_MAX_ATTEMPTS": "5"}, {"mode": "standard", "max_attempts": 1},
                     ("standard", 2), id="code-over-env-max-attempts-means-retries"),
        pytest.param({}, {"mode": "standard", "total_max_attempts": 7}, ("standard", 7), id="total-max-attempts"),
        pytest.param({"AWS_RETRY_MODE": "legacy"}, None, ("legacy", 5), id="legacy"),
    ],
)
def test_the_policy_honours_the_sdks_retries_config_and_environment(
    fake_aws: tuple[str, FakeAws], monkeypatch: pytest.MonkeyPatch, environ: dict[str, str],
    retries: dict[str, Any] | None, expected: tuple[str, int],
) -> None:
    """Mode and attempts come from Config(retries=...), else AWS_RETRY_MODE / AWS_MAX_ATTEMPTS, as botocore
    resolves them (``max_attempts`` in code counts retries); adaptive mode gets the SDKs' exact limiter."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    url, _ = fake_aws
    client = botocore.session.get_session().create_client(
        "sqs", region_name="us-east-1", endpoint_url=url, config=Config(retries=retries) if retries else None
    )
    policy = policy_for(client, profile="2020")
    assert (policy.mode, policy.max_attempts) == expected
    if policy.mode == "adaptive":
        assert policy.limiter_config is not None
        assert policy.limiter_config.profile == "aws"
        assert policy_for(client, limiter=AdaptiveLimiterConfig()).limiter_config == AdaptiveLimiterConfig()


def test_dynamodb_gets_the_2026_defaults(fake_aws: tuple[str, FakeAws]) -> None:
    """Under the 2026 rules DynamoDB calls get 4 attempts and a 25 ms transient base; other services
    3 attempts and 50 ms; the 2020 rules have no per-service defaults; code wins over them."""
    url, _ = fake_aws
    dynamodb = sync_client(url, retries={"mode": "standard"})
    sqs = sync_client(url, "sqs", retries={"mode": "standard"})
    policy = policy_for(dynamodb, profile="2026")
    assert policy.max_attempts == 4
    assert policy.backoff == ExponentialBackoff(initial=0.025, multiplier=2.0, max_delay=20.0, jitter="full")
    assert policy_for(sqs, profile="2026").max_attempts == 3
    assert policy_for(dynamodb, profile="2020").max_attempts == 3
    assert policy_for(sync_client(url, retries={"mode": "standard", "total_max_attempts": 2}),
                      profile="2026").max_attempts == 2


@pytest.mark.anyio
async def test_a_dynamodb_call_retries_4_times_from_25_ms(
    fake_aws: tuple[str, FakeAws], virtual: VirtualClock, anyio_backend: str
) -> None:
    """A DynamoDB call under the 2026 rules makes 4 attempts, sleeping 25, 50 and 100 ms (random draw 1)."""
    url, app = fake_aws
    async with aio_client(url, retries={"mode": "standard"}, **HTTPX) as client:
        policy = policy_for(client, profile="2026")
        install(client, Retrier(policy, clock=virtual, rng=lambda: 1.0), policy=policy)
        app.play(*[Answer(500)] * 4)
        with pytest.raises(ClientError) as raised:
            await client.get_item(**KEY)
    assert len(app.received) == 4
    assert virtual.sleeps == pytest.approx([0.025, 0.05, 0.1])
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


# ------------------------------------------------------------------------------------ CRC32
@pytest.mark.anyio
async def test_a_crc32_mismatch_is_retried_by_an_aiobotocore_client(
    fake_aws: tuple[str, FakeAws], virtual: VirtualClock, anyio_backend: str
) -> None:
    """A DynamoDB 200 whose body does not match its x-amz-crc32 is retried as a transient error."""
    url, app = fake_aws
    async with aio_client(url, retries={"mode": "standard"}, **HTTPX) as client:
        handler = install(client, Retrier(policy_for(client), clock=virtual))
        app.play(Answer(body={"Item": {"id": {"S": "bad"}}}, bad_crc32=True), Answer(body={"Item": {"id": {"S": "1"}}}))
        result = await client.get_item(**KEY)
    assert result["Item"] == {"id": {"S": "1"}}
    assert len(app.received) == 2
    assert handler.statistics().retries == 1


def test_a_crc32_mismatch_is_retried_by_a_botocore_client(
    fake_aws: tuple[str, FakeAws], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a botocore client; when every body is corrupt the call raises RetriesExhausted with its
    history instead of returning a corrupt item."""
    url, app = fake_aws
    client = sync_client(url, retries={"mode": "standard", "total_max_attempts": 3})
    install(client)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    app.play(Answer(bad_crc32=True))
    assert client.get_item(**KEY)["ResponseMetadata"]["RetryAttempts"] == 1
    app.play(*[Answer(bad_crc32=True)] * 3)
    with pytest.raises(RetriesExhausted) as raised:
        client.get_item(**KEY)
    history = history_of(raised.value)
    assert history is not None
    assert [a.reason for a in history.attempts] == ["crc32 mismatch"] * 3


# -------------------------------------------------------------------------------- sessions, bad input
@pytest.mark.anyio
async def test_install_on_an_aiobotocore_session_covers_every_client(
    fake_aws: tuple[str, FakeAws], anyio_backend: str, virtual: VirtualClock
) -> None:
    """Every client an aiobotocore session makes after install is retried by the one shared retrier."""
    url, app = fake_aws
    session = get_session()
    retrier = Retrier(RetryPolicy.aws_standard(), clock=virtual)
    install_session(session, retrier)
    for _ in range(2):
        async with session.create_client("dynamodb", region_name="us-east-1", endpoint_url=url,
                                         config=AioConfig(**HTTPX)) as client:
            assert _sdk_retry_handlers(client) == []
            app.play(Answer(503))
            await client.get_item(**KEY)
    assert (retrier.statistics().calls, retrier.statistics().retries) == (2, 2)


def test_install_on_a_botocore_session_covers_every_client(
    fake_aws: tuple[str, FakeAws], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a botocore session; installing twice is refused."""
    url, app = fake_aws
    session = botocore.session.get_session()
    retrier = Retrier(RetryPolicy.aws_standard())
    install_session(session, retrier)
    with pytest.raises(ValueError, match="already installed"):
        install_session(session)
    with pytest.raises(TypeError, match="use install_session"):
        install(session)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    client = session.create_client("dynamodb", region_name="us-east-1", endpoint_url=url)
    app.play(Answer(400, "ProvisionedThroughputExceededException"))
    client.get_item(**KEY)
    assert retrier.statistics().retries == 1


def test_bad_targets_and_policies_are_refused(fake_aws: tuple[str, FakeAws]) -> None:
    """Not a client, a second install, hedging, a per-attempt timeout, a bad profile: clear errors."""
    url, _ = fake_aws
    with pytest.raises(TypeError, match="client must be"):
        install(object())
    with pytest.raises(TypeError, match="session must be"):
        install_session(object())
    client = sync_client(url)
    with pytest.raises(ValueError, match="hedging"):
        install(client, policy=RetryPolicy(hedging=HedgingConfig(delay=0.1)))
    with pytest.raises(ValueError, match="attempt_timeout"):
        install(client, policy=RetryPolicy(attempt_timeout=1.0))
    with pytest.raises(ValueError, match="profile must be"):
        install(client, profile="2030")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="retrier must be"):
        install(client, "retrier")  # type: ignore[arg-type]
    install(client, policy=RetryPolicy(deadline=5.0))  # a sync client's waits stop at the deadline
    with pytest.raises(ValueError, match="already installed"):
        install(client)


@pytest.mark.anyio
async def test_an_aiobotocore_client_refuses_a_policy_deadline(
    fake_aws: tuple[str, FakeAws], anyio_backend: str
) -> None:
    """An async client's deadline is the caller's cancel scope (anyio.fail_after), not the policy's."""
    url, _ = fake_aws
    async with aio_client(url, **HTTPX) as client:
        with pytest.raises(ValueError, match=r"anyio\.fail_after"):
            install(client, policy=RetryPolicy(deadline=5.0))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the example uses aiohttp, asyncio's backend
async def test_the_docs_example_shares_one_retrier_between_clients(
    fake_aws: tuple[str, FakeAws], anyio_backend: str
) -> None:
    """docs/aws.md's aiobotocore example runs against the fake endpoint: a throttle is retried, and the
    shared retrier's limiter and quota saw it."""
    code = next(block for block in DOCS.split("```python\n") if "async def read_items" in block).split("```")[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/aws.md", "exec"), namespace)
    url, app = fake_aws
    app.play(Answer(400, "ThrottlingException"), Answer(body={"Item": {"id": {"S": "1"}}}),
             Answer(body={"Item": {"id": {"S": "2"}}}))
    with anyio.fail_after(30):
        items = await namespace["read_items"](url, ["1", "2"])
    assert items == [{"id": {"S": "1"}}, {"id": {"S": "2"}}]
    scope = namespace["TABLE"].statistics().scopes[0]
    assert scope.key == "items"
    assert scope.limiter is not None
    assert (scope.limiter.updates, scope.limiter.throttles) == (3, 1)  # three responses, one throttle


@pytest.mark.anyio
async def test_a_call_cancelled_on_the_wire_frees_its_half_open_probe(
    fake_aws: tuple[str, FakeAws], virtual: VirtualClock, anyio_backend: str
) -> None:
    """A call cancelled while its half-open probe is on the wire gives the probe's slot back: the next call
    is admitted as the probe instead of being refused by a breaker stuck half-open."""
    url, app = fake_aws
    breaker = CircuitBreaker(CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=5.0),
                             clock=virtual)
    retrier = Retrier(RetryPolicy.aws_standard(max_attempts=1), clock=virtual, breaker=breaker)
    async with aio_client(url, **HTTPX) as client:
        install(client, retrier)
        app.play(Answer(503))
        with pytest.raises(ClientError) as opened:  # the failure opened the circuit; the call ends with it
            await client.get_item(**KEY)
        assert not isinstance(opened.value, CircuitOpenError)
        assert breaker.state is BreakerState.OPEN
        virtual.advance(6.0)
        app.play(Answer(delay=5.0))
        with anyio.move_on_after(0.5) as waited:
            await client.get_item(**KEY)
        assert waited.cancelled_caught
        gc.collect()
        app.play()
        await client.get_item(**KEY)  # admitted as the probe: it succeeds and closes the circuit
    assert breaker.statistics().state is BreakerState.CLOSED


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_an_aiohttp_client_on_trio_is_refused_clearly(fake_aws: tuple[str, FakeAws], anyio_backend: str) -> None:
    """aiobotocore's aiohttp backend cannot run on trio: install says so and names the httpx backend."""
    url, _ = fake_aws
    async with aio_client(url) as client:
        with pytest.raises(RuntimeError, match=r"AioConfig\(http_session_cls=HttpxSession\)"):
            install(client)


def test_the_sdks_own_error_carries_the_attempt_history(
    fake_aws: tuple[str, FakeAws], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the attempts run out or an error is not retryable, the ClientError the SDK raises gives the
    engine's history through retry_history; a success leaves the response's metadata alone."""
    url, app = fake_aws
    client = sync_client(url, retries={"mode": "standard", "total_max_attempts": 2})
    install(client)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    app.play(Answer(503), Answer(503))
    with pytest.raises(ClientError) as exhausted:
        client.get_item(**KEY)
    history = retry_history(exhausted.value)
    assert history is not None
    assert (history.gave_up, [a.reason for a in history.attempts]) == ("max_attempts", ["ClientError (HTTP 503)"] * 2)
    app.play(Answer(400, "ValidationException"))
    with pytest.raises(ClientError) as final:
        client.get_item(**KEY)
    history = retry_history(final.value)
    assert history is not None
    assert (history.gave_up, len(history.attempts)) == ("not_retryable", 1)
    assert "AsyncRetryHistory" not in client.get_item(**KEY)["ResponseMetadata"]
