"""Conformance with the AWS SDKs' standard retry mode test cases, 2020 and 2026 profiles.

The cases live in ``tests/data/standard_retry_cases.json``, copied from smithy-kotlin, aws-sdk-go-v2,
botocore and smithy-rs (each case names its sources). Every case drives the real engine: a
:class:`~asyncretry.Retrier` on a :class:`~asyncretry.testing.VirtualClock` with a fixed random value,
and a scripted operation that answers each attempt with the case's next response. Before each attempt
the script checks what the previous response should have left behind: the tokens in the retry quota
and the delays slept so far. After the call the test checks the final quota, every delay, the number of
attempts and the outcome: the result, or the real last error with its history (which says why the
call stopped: attempts, quota ...).

Each case runs in up to three ways:

* ``call``: :meth:`Retrier.call`; failures are raised as exceptions and the policy's classifier judges them;
* ``attempts``: ``async for attempt in retrier.attempts()``; failures are returned responses marked with
  ``attempt.retry_result(...)`` / ``attempt.fail_result(...)``, the way an HTTP transport reports them. Only
  this way can carry a server-directed delay (``x-amz-retry-after``), so header cases run only here;
* ``defaults``: like ``call`` but with the profile's own default backoff, quota and costs, for the cases
  whose parameters are the profile defaults, reading the quota from ``retrier.statistics()``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asyncretry import (
    AWS_THROTTLING_CODES,
    AWS_TRANSIENT_CODES,
    Attempt,
    Classifier,
    ExponentialBackoff,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    history_of,
)
from asyncretry.testing import VirtualClock, fixed_random

DATA: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "standard_retry_cases.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = DATA["cases"]
TOLERANCE = 1e-9
_MARKING = ("attempts",)  # the ways that mark returned responses instead of raising errors
TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
THROTTLING_STATUS = frozenset({429, 509})
_ONE_SECOND = {"initial": 1.0, "multiplier": 2.0, "max_delay": 20.0}
PROFILE_BACKOFF: dict[str, tuple[dict[str, float], dict[str, float]]] = {
    "2020": (_ONE_SECOND, _ONE_SECOND),
    "2026": ({"initial": 0.05, "multiplier": 2.0, "max_delay": 20.0}, _ONE_SECOND),
}
"""The profiles' default backoff (transient, throttling): ExponentialBackoff parameters, SPEC 3."""


# ------------------------------------------------------------------------------------ the harness
class ServiceError(Exception):
    """An error response, raised the way an SDK raises a service error."""

    def __init__(self, status: int, error_code: str | None) -> None:
        self.status = status
        self.error_code = error_code
        super().__init__(f"HTTP {status}" + (f" {error_code}" if error_code else ""))


def response_kind(response: dict[str, Any]) -> OutcomeKind:
    """How SPEC section 4 classifies a scripted response (the ``attempts`` way applies it by hand)."""
    error = response.get("error")
    if error == "timeout":
        return OutcomeKind.TIMEOUT
    if error == "connection":
        return OutcomeKind.CONNECTION
    code = response.get("error_code")
    status = response["status_code"]
    if code in AWS_THROTTLING_CODES or status in THROTTLING_STATUS:
        return OutcomeKind.THROTTLING
    if status in TRANSIENT_STATUS or code in AWS_TRANSIENT_CODES:
        return OutcomeKind.TRANSIENT
    if status == 200:
        return OutcomeKind.TRANSIENT if response.get("body_status") == "RUNNING" else OutcomeKind.SUCCESS
    return OutcomeKind.NOT_RETRYABLE


def amz_retry_after(response: dict[str, Any]) -> float | None:
    """``x-amz-retry-after`` in seconds: integer milliseconds; anything else is ignored (SPEC 4.1)."""
    value = response.get("headers", {}).get("x-amz-retry-after")
    if value is None or not value.strip().isdigit():
        return None
    return int(value) / 1000.0


def _status_kind(error: Exception) -> OutcomeKind | None:
    # HTTP status rules for the `call` way; throttling codes are left to the classifier's code table,
    # which also makes a 5xx carrying a throttling code a throttling error.
    if not isinstance(error, ServiceError) or error.error_code in AWS_THROTTLING_CODES:
        return None
    if error.status in THROTTLING_STATUS:
        return OutcomeKind.THROTTLING
    if error.status in TRANSIENT_STATUS:
        return OutcomeKind.TRANSIENT
    return None


def _body_kind(result: dict[str, Any]) -> str | None:
    return "RUNNING" if result.get("body_status") == "RUNNING" else None


CLASSIFIER = Classifier(retry_if=_status_kind, retry_if_result=_body_kind)


def _backoff(spec: dict[str, Any]) -> ExponentialBackoff:
    return ExponentialBackoff(
        initial=spec["initial"],
        multiplier=spec["multiplier"],
        max_delay=spec["max_delay"],
        jitter="full" if spec["form"] == "botocore" else "reduce",
    )


def _uses_profile_backoff(case: dict[str, Any]) -> bool:
    transient, throttling = PROFILE_BACKOFF[case["profile"]]
    engine = case["engine"]

    def same(spec: dict[str, Any] | None, expected: dict[str, float]) -> bool:
        return spec is None or all(spec[key] == value for key, value in expected.items())

    return same(engine["backoff"], transient) and same(engine.get("throttling_backoff"), throttling)


class Harness:
    """One retrier set up for a case, and the scripted operation that checks each step."""

    def __init__(self, case: dict[str, Any], way: str) -> None:
        self.case = case
        self.way = way
        engine = case["engine"]
        profile = case["profile"]
        self.clock = VirtualClock()
        backoff = engine["backoff"]
        # The SDK tests draw exactly 1 (or 0 in Kotlin's form); fixed_random() stops short of 1.0, which
        # Backoff.delay() accepts, hence the plain lambdas.
        if way == "defaults":
            # The profile's own backoff in botocore's form (rand * cap), its own quota per scope.
            rand = 1.0
            policy = RetryPolicy(
                mode="standard", profile=profile, max_attempts=engine["max_attempts"], classifier=CLASSIFIER
            )
            self.quota: RetryQuota | None = None
            self.retrier = Retrier(policy, clock=self.clock, rng=lambda: rand)
        else:
            rand = backoff["rand"]
            throttling = engine.get("throttling_backoff")
            policy = RetryPolicy(
                mode="standard",
                profile=profile,
                max_attempts=engine["max_attempts"],
                backoff=_backoff(backoff),
                throttling_backoff=_backoff(throttling) if throttling is not None else None,
                classifier=CLASSIFIER,
            )
            self.quota = RetryQuota(RetryQuotaConfig.profile(profile), clock=self.clock)
            assert self.quota.try_acquire(self.quota.config.max_capacity - engine["initial_tokens"])
            self.retrier = Retrier(policy, clock=self.clock, rng=lambda: rand, quota=self.quota)
        self.expected_delays: list[float] = []

    def available(self) -> float:
        """Tokens in the quota now, from the quota object or the retrier's statistics."""
        if self.quota is not None:
            return self.quota.available
        scopes = self.retrier.statistics().scopes
        assert len(scopes) == 1
        assert scopes[0].quota is not None
        return scopes[0].quota.available

    def check_after(self, step: dict[str, Any], where: str) -> None:
        expected = step["expected"]
        if expected["outcome"] == "retry_request" and "delay" in expected:
            self.expected_delays.append(expected["delay"])
        assert self.available() == expected["retry_quota"], f"retry quota after {where}"
        delays = pytest.approx(self.expected_delays, abs=TOLERANCE)
        assert self.clock.sleeps == delays, f"delays after {where}"

    async def call(self, steps: list[dict[str, Any]], *, check_steps: bool = True) -> tuple[Any, Any, int]:
        """Run one call over ``steps``; return (result, error or Attempts, attempts made).

        With ``check_steps`` the quota and the delays are checked before every attempt after the first.
        """
        made = 0

        async def operation() -> dict[str, Any]:
            nonlocal made
            if made and check_steps:
                self.check_after(steps[made - 1], f"response {made}")
            response: dict[str, Any] = steps[made]["response"]
            made += 1
            await anyio.lowlevel.checkpoint()
            if self.way in _MARKING or response.get("status_code") == 200:
                return response
            if response.get("error") == "timeout":
                raise TimeoutError("read timed out")
            if response.get("error") == "connection":
                raise ConnectionResetError("connection reset by peer")
            raise ServiceError(response["status_code"], response.get("error_code"))

        if self.way not in _MARKING:
            try:
                return await self.retrier.call(operation), None, made
            except Exception as error:
                return None, error, made

        attempts = self.retrier.attempts()
        async for attempt in attempts:
            async with attempt:
                response = await operation()
                _mark(attempt, response)
        return response, attempts, made


def _mark(attempt: Attempt, response: dict[str, Any]) -> None:
    """Tell the attempt what the scripted response says of it, as an HTTP transport does."""
    kind = response_kind(response)
    reason = f"HTTP {response.get('status_code')}"
    if kind is OutcomeKind.SUCCESS:
        attempt.result = response
    elif kind.retryable:
        hint = amz_retry_after(response)
        if hint is not None:
            attempt.retry_result(response, reason=reason, kind=kind, server_delay=hint, server_delay_is_hint=True)
        else:
            attempt.retry_result(response, reason=reason, kind=kind, server_delay=response.get("server_delay"))
    else:
        attempt.fail_result(response, reason=reason)


def _check_outcome(
    harness: Harness, steps: list[dict[str, Any]], result: Any, error: Any, made: int
) -> None:
    """The call ended as the last step says, after exactly as many attempts as there are steps."""
    assert made == len(steps)
    harness.check_after(steps[-1], "the last response")
    outcome = steps[-1]["expected"]["outcome"]
    last = steps[-1]["response"]
    if harness.way in _MARKING:
        why = {"success": None, "max_attempts_exceeded": "max_attempts", "retry_quota_exceeded": "quota",
               "fail_request": "not_retryable"}[outcome]
        assert error.gave_up == why
        assert result is last
        assert len(error.history().attempts) == len(steps)
        return
    if outcome == "success":
        assert error is None
        assert result is last
        return
    assert result is None
    history = history_of(error)
    assert history is not None
    assert len(history.attempts) == len(steps)
    real = error
    why = {"max_attempts_exceeded": "max_attempts", "fail_request": "not_retryable",
           "retry_quota_exceeded": "quota"}[outcome]
    assert history.gave_up == why
    # The caller gets the real last error, not a wrapper, whatever stopped the retries.
    if last.get("error") == "timeout":
        assert isinstance(real, TimeoutError)
    else:
        assert isinstance(real, ServiceError)
        assert real.status == last["status_code"]


def _ways(case: dict[str, Any]) -> list[str]:
    steps = [s for t in case.get("threads", [case.get("responses", [])]) for s in t]
    server_directed = any("headers" in s["response"] or "server_delay" in s["response"] for s in steps)
    ways = [] if server_directed else ["call"]
    ways += ["attempts"]
    if not server_directed and case["engine"]["initial_tokens"] == 500 and _uses_profile_backoff(case):
        ways.append("defaults")
    return ways


def _params(kind: str) -> list[Any]:
    return [
        pytest.param(case, way, id=f"{case['profile']}-{case['name']}-{way}")
        for case in CASES
        if case["kind"] == kind
        for way in _ways(case)
    ]


# ------------------------------------------------------------------------------------------ tests
def test_the_data_names_a_source_and_a_profile_for_every_case() -> None:
    """Every case says where it comes from and which cost profile it belongs to; both profiles are covered."""
    assert {case["profile"] for case in CASES} == {"2020", "2026"}
    for case in CASES:
        assert case["source"], case["name"]
        assert all("/" in source and ":" in source for source in case["source"]), case["name"]
    assert sum(case["kind"] == "single" for case in CASES) >= 25


@pytest.mark.anyio
@pytest.mark.parametrize(("case", "way"), _params("single"))
async def test_single_call_cases(case: dict[str, Any], way: str) -> None:
    """Each SDK case: quota and delay after every response, attempt count and outcome match the SDKs."""
    harness = Harness(case, way)
    steps = case["responses"]
    result, error, made = await harness.call(steps)
    _check_outcome(harness, steps, result, error, made)
    stats = harness.retrier.statistics()
    retries = sum(s["expected"]["outcome"] == "retry_request" for s in steps)
    assert (stats.calls, stats.attempts, stats.retries) == (1, len(steps), retries)
    assert stats.scopes[0].quota is not None
    assert stats.scopes[0].quota.available == steps[-1]["expected"]["retry_quota"]


@pytest.mark.anyio
@pytest.mark.parametrize(("case", "way"), _params("multi_invocation"))
async def test_multi_invocation_cases(case: dict[str, Any], way: str) -> None:
    """Calls one after another on one retrier share its quota; each success refunds only its own last cost."""
    harness = Harness(case, way)
    calls: list[list[dict[str, Any]]] = [[]]
    for step in case["responses"]:
        calls[-1].append(step)
        if step["expected"]["outcome"] == "success":
            calls.append([])
    calls = [steps for steps in calls if steps]
    assert len(calls) > 1
    for steps in calls:
        result, error, made = await harness.call(steps)
        _check_outcome(harness, steps, result, error, made)
    assert harness.retrier.statistics().calls == len(calls)


@pytest.mark.anyio
@pytest.mark.parametrize(("case", "way"), _params("multi_threaded"))
async def test_multi_threaded_cases(case: dict[str, Any], way: str) -> None:
    """Concurrent calls on one retrier all succeed after their scripted attempts; the final quota matches."""
    harness = Harness(case, way)
    outcomes: dict[int, tuple[Any, Any, int]] = {}

    async def thread(index: int, steps: list[dict[str, Any]]) -> None:
        # The source checks only the final quota: concurrent calls may interleave in any order.
        outcomes[index] = await harness.call(steps, check_steps=False)

    async with anyio.create_task_group() as tg:
        for index, steps in enumerate(case["threads"]):
            tg.start_soon(thread, index, steps)
    for index, steps in enumerate(case["threads"]):
        result, error, made = outcomes[index]
        assert made == len(steps)
        if way in _MARKING:
            assert error.gave_up is None
        else:
            assert error is None
        assert result is steps[-1]["response"]
    assert harness.available() == case["expected_final_quota"]


@pytest.mark.anyio
@pytest.mark.parametrize("rand", [0.25, 0.5, 0.9])
async def test_botocore_and_kotlin_random_conventions_mirror_each_other(rand: float) -> None:
    """botocore's ``rand * cap`` with rand u sleeps what smithy-kotlin's ``cap * (1 - u)`` does with 1 - u."""
    sleeps = []
    botocore = (ExponentialBackoff(jitter="full"), rand)
    kotlin = (ExponentialBackoff(jitter="reduce"), 1.0 - rand)
    for backoff, u in (botocore, kotlin):
        clock = VirtualClock()
        policy = RetryPolicy(max_attempts=5, backoff=backoff, classifier=CLASSIFIER)
        retrier = Retrier(policy, clock=clock, rng=fixed_random(u))

        async def fail() -> None:
            raise ServiceError(503, None)

        with pytest.raises(ServiceError):
            await retrier.call(fail)
        sleeps.append(clock.sleeps)
    assert sleeps[0] == pytest.approx(sleeps[1], abs=TOLERANCE)
    assert sleeps[0] == pytest.approx([rand * cap for cap in (1, 2, 4, 8)], abs=TOLERANCE)


# ------------------------------------------------------------------------------ long-polling (2026)
LONG_POLLING: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "long_polling_cases.json").read_text(encoding="utf-8")
)["cases"]


class LongPollingHarness(Harness):
    """A :class:`Harness` whose policy is ``aws_standard("2026", long_polling=...)`` as the case says.

    A ``retry_quota_exceeded`` step may carry a delay: the sleep before the call gives up.
    """

    def __init__(self, case: dict[str, Any], way: str) -> None:
        super().__init__(case, way)
        rand = case["engine"]["backoff"]["rand"]
        policy = RetryPolicy.aws_standard(
            "2026",
            long_polling=case["engine"]["long_polling"],
            max_attempts=self.retrier.policy.max_attempts,
            backoff=self.retrier.policy.backoff,
            throttling_backoff=self.retrier.policy.throttling_backoff,
            classifier=CLASSIFIER,
        )
        self.retrier = Retrier(policy, clock=self.clock, rng=lambda: rand, quota=self.quota)

    def check_after(self, step: dict[str, Any], where: str) -> None:
        expected = step["expected"]
        if expected["outcome"] != "retry_request" and "delay" in expected:
            self.expected_delays.append(expected["delay"])
        super().check_after(step, where)


def test_the_long_polling_data_names_its_sources() -> None:
    """Every long-polling case names at least one SDK source and the 2026 profile; both flags occur."""
    assert all(case["source"] and case["profile"] == "2026" for case in LONG_POLLING)
    assert {case["engine"]["long_polling"] for case in LONG_POLLING} == {True, False}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("case", "way"),
    [pytest.param(case, way, id=f"{case['name']}-{way}") for case in LONG_POLLING for way in ("attempts", "call")],
)
async def test_long_polling_cases(case: dict[str, Any], way: str) -> None:
    """A long-polling call sleeps the backoff before a give-up the quota forces, and at no other give-up."""
    harness = LongPollingHarness(case, way)
    steps = case["responses"]
    result, error, made = await harness.call(steps)
    _check_outcome(harness, steps, result, error, made)
