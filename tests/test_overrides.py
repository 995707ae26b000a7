"""Per-request overrides are checked as strictly as constructor arguments, by one function for every transport."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from asyncretry import HedgingConfig, NoBackoff, RequestOverrides, RetryPolicy, parse_overrides
from asyncretry.httpx import EXTENSION, AsyncRetryTransport, RetryTransport

URL = "https://api.test/orders"
QUICK = RetryPolicy(backoff=NoBackoff())
HEDGING = QUICK.replace(hedging=HedgingConfig(delay=0.01))

# (override, error, what the message must hold): the value's key and the value itself
BAD = [
    ({"idempotent": "false"}, TypeError, r"\['idempotent'\] must be True or False, got 'false'"),
    ({"idempotent": 1}, TypeError, r"\['idempotent'\] must be True or False, got 1"),
    ({"retry": "false"}, TypeError, r"\['retry'\] must be True or False, got 'false'"),
    ({"retry": 0}, TypeError, r"\['retry'\] must be True or False, got 0"),
    ({"retry": None}, TypeError, r"\['retry'\] must be True or False, got None"),
    ({"read_body": "false"}, TypeError, r"\['read_body'\] must be True or False, got 'false'"),
    ({"hedge": "yes"}, TypeError, r"\['hedge'\] must be True, False or a HedgingConfig"),
    ({"scope": 42}, TypeError, r"\['scope'\] must be a string, got 42"),
    ({"scope": ""}, ValueError, r"\['scope'\] must be a non-empty string"),
    ({"policy": {"max_attempts": 2}}, TypeError, r"\['policy'\] must be a RetryPolicy"),
    ({"retries": False}, ValueError, r"unknown keys \['retries'\] \('retries': did you mean 'retry'\?\)"),
    ({"idempotnet": True}, ValueError, r"did you mean 'idempotent'\?"),
    ("retry", TypeError, r"must be a mapping"),
]


class Counter:
    """A respx side effect answering every request with one status, counting the sends."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = statuses
        self.count = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        return httpx.Response(self.statuses[min(self.count, len(self.statuses)) - 1])


def _router(counter: Counter) -> respx.MockRouter:
    router = respx.MockRouter(assert_all_called=False)
    router.route(url=URL).mock(side_effect=counter)
    return router


def async_client(counter: Counter, policy: RetryPolicy = QUICK) -> httpx.AsyncClient:
    transport = AsyncRetryTransport(httpx.MockTransport(_router(counter).async_handler), policy=policy)
    return httpx.AsyncClient(transport=transport)


def sync_client(counter: Counter, policy: RetryPolicy = QUICK) -> httpx.Client:
    return httpx.Client(transport=RetryTransport(httpx.MockTransport(_router(counter).handler), policy=policy))


# ------------------------------------------------------------------------------ parse_overrides
@pytest.mark.parametrize(("override", "error", "match"), BAD)
def test_parse_overrides_names_the_key_and_the_value(override: Any, error: type[Exception], match: str) -> None:
    """A value of the wrong type, out of range, or an unknown key is an error naming the key and the value."""
    with pytest.raises(error, match=match):
        parse_overrides(override, "request.extensions['asyncretry']")


def test_parse_overrides_returns_the_checked_values() -> None:
    """Valid overrides come back as they were given; keys not given stay None."""
    policy = RetryPolicy(max_attempts=5)
    parsed = parse_overrides({"retry": False, "policy": policy, "idempotent": None, "hedge": True})
    assert parsed == RequestOverrides(retry=False, policy=policy, hedge=True)
    assert parsed.scope is None
    assert parsed.read_body is None
    assert parsed.caller is None
    assert RequestOverrides.keys() == {"retry", "policy", "scope", "caller", "idempotent", "read_body", "hedge"}


def test_request_overrides_checks_its_fields_too() -> None:
    """RequestOverrides built by hand refuses what parse_overrides refuses, naming the field."""
    with pytest.raises(TypeError, match="idempotent must be True or False, got 'false'"):
        RequestOverrides(idempotent="false")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ the transports
@pytest.mark.anyio
@pytest.mark.parametrize(("override", "error", "match"), BAD)
async def test_async_transport_refuses_bad_overrides_before_sending(
    override: Any, error: type[Exception], match: str
) -> None:
    """A bad override fails the request before anything is sent (asyncio and trio)."""
    counter = Counter(503)
    async with async_client(counter) as client:
        with pytest.raises(error, match=match):
            await client.post(URL, content=b"order", extensions={EXTENSION: override})
    assert counter.count == 0


@pytest.mark.parametrize(("override", "error", "match"), BAD)
def test_sync_transport_refuses_bad_overrides_before_sending(override: Any, error: type[Exception], match: str) -> None:
    """The synchronous transport refuses the same overrides with the same errors."""
    counter = Counter(503)
    with sync_client(counter) as client, pytest.raises(error, match=match):
        client.post(URL, content=b"order", extensions={EXTENSION: override})
    assert counter.count == 0


@pytest.mark.anyio
async def test_a_string_false_never_makes_a_post_retried_or_hedged() -> None:
    """{'idempotent': 'false'} under a hedging policy is refused: the POST is neither retried nor hedged."""
    counter = Counter(503)
    async with async_client(counter, HEDGING) as client:
        with pytest.raises(TypeError, match="idempotent"):
            await client.post(URL, content=b"order", extensions={EXTENSION: {"idempotent": "false"}})
        response = await client.post(URL, content=b"order")
    assert response.status_code == 503
    assert counter.count == 1  # the plain POST: sent once, not retried


@pytest.mark.anyio
async def test_valid_overrides_still_work() -> None:
    """True and False are honoured: idempotent=True retries a POST, retry=False sends once, None is the default."""
    counter = Counter(503, 503, 200)
    async with async_client(counter) as client:
        response = await client.post(URL, content=b"order", extensions={EXTENSION: {"idempotent": True}})
        assert (response.status_code, counter.count) == (200, 3)
        counter.count = 0
        response = await client.get(URL, extensions={EXTENSION: {"retry": False, "idempotent": None}})
        assert (response.status_code, counter.count) == (503, 1)
        counter.count = 0
        response = await client.get(URL, extensions={EXTENSION: {"retry": True, "idempotent": False}})
        assert (response.status_code, counter.count) == (503, 1)  # not idempotent: a 503 is not sent again


def test_valid_overrides_still_work_in_the_sync_transport() -> None:
    """The synchronous transport honours the same valid overrides."""
    counter = Counter(503, 503, 200)
    with sync_client(counter) as client:
        response = client.post(URL, content=b"order", extensions={EXTENSION: {"idempotent": True}})
        assert (response.status_code, counter.count) == (200, 3)
        counter.count = 0
        response = client.get(URL, extensions={EXTENSION: {"retry": False}})
        assert (response.status_code, counter.count) == (503, 1)


@pytest.mark.anyio
async def test_retry_false_beside_a_policy_sends_once_under_that_policy() -> None:
    """{'retry': False, 'policy': P}: one attempt, and the rest of P (its deadline, say) still applies."""
    counter = Counter(503, 200)
    policy = RetryPolicy(max_attempts=5, backoff=NoBackoff(), deadline=30.0)
    async with async_client(counter) as client:
        response = await client.get(URL, extensions={EXTENSION: {"retry": False, "policy": policy}})
    assert (response.status_code, counter.count) == (503, 1)
