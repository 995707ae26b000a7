"""The decision core alone: one table of cases, driven without an event loop and without importing anyio.

:class:`~asyncretry._engine._call.Call` takes every input of a decision as an argument (the outcome,
the time, the seconds the caller's own deadline leaves, the random draw, the breaker's answer) and
answers a :class:`~asyncretry.Step`: done, give up (and why), pay the retry's cost first, or retry
after a delay. Each row below is one decision, checked step by step.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

import asyncretry._engine._call as core
from asyncretry import (
    BreakerStateChanged,
    CircuitBreaker,
    CircuitBreakerConfig,
    EventBus,
    ExponentialBackoff,
    FixedBackoff,
    LinearBackoff,
    Outcome,
    OutcomeKind,
    RetryBudget,
    RetryBudgetConfig,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
    Step,
)
from asyncretry._engine._call import Call
from asyncretry._engine._scopes import Scope
from asyncretry.testing import VirtualClock

T = OutcomeKind
FAIL = Outcome(T.TRANSIENT, "HTTP 503")
NO_QUOTA = RetryPolicy(quota=False, backoff=FixedBackoff(0.5), max_attempts=3)


@dataclass
class Case:
    """One decision: a policy and the scope's parts, the outcome of attempt ``number`` and the inputs."""

    name: str
    policy: RetryPolicy
    outcome: Outcome
    expect: Step
    gave_up: str | None = None
    delay: float | None = None  # the delay of a RETRY
    due: int | None = None  # the cost of a PAY
    paid: str | bool | None = False  # PAY: what paying answered (None: paid; "quota"/"budget": refused)
    after_pay: Step | None = None
    number: int = 1
    quota: bool = False
    budget: bool = False
    now: float = 0.0
    inputs: dict[str, Any] = field(default_factory=dict)  # outer (a function), draw, breaker_wait
    refund: int = 0


CASES = [
    Case("success is done", NO_QUOTA, Outcome(T.SUCCESS, "ok"), Step.DONE),
    Case("success refunds the increment", RetryPolicy(), Outcome(T.SUCCESS, "ok"), Step.DONE, quota=True, refund=1),
    Case("not retryable", NO_QUOTA, Outcome(T.NOT_RETRYABLE, "HTTP 400"), Step.GIVE_UP, gave_up="not_retryable"),
    Case("out of attempts", NO_QUOTA, FAIL, Step.GIVE_UP, gave_up="max_attempts", number=3),
    Case("fixed backoff", NO_QUOTA, FAIL, Step.RETRY, delay=0.5),
    Case("linear backoff", NO_QUOTA.replace(backoff=LinearBackoff(initial=0.1, increment=0.2)), FAIL, Step.RETRY,
         delay=0.3, number=2),
    Case("full jitter takes the draw", NO_QUOTA.replace(backoff=ExponentialBackoff(initial=1.0)), FAIL, Step.RETRY,
         delay=0.5, number=2, inputs={"draw": 0.25}),
    Case("throttling backoff", NO_QUOTA.replace(throttling_backoff=FixedBackoff(2.0)), Outcome(T.THROTTLING, "429"),
         Step.RETRY, delay=2.0),
    Case("the server's Retry-After", NO_QUOTA, Outcome(T.TRANSIENT, "HTTP 503", server_delay=3.0), Step.RETRY,
         delay=3.0),
    Case("Retry-After capped", NO_QUOTA.replace(max_server_delay=1.0),
         Outcome(T.TRANSIENT, "HTTP 503", server_delay=30.0), Step.RETRY, delay=1.0),
    Case("an AWS hint is clamped to the backoff", NO_QUOTA,
         Outcome(T.TRANSIENT, "HTTP 503", server_delay=0.1, server_delay_is_hint=True), Step.RETRY, delay=0.5),
    Case("the call's deadline", NO_QUOTA.replace(deadline=0.4), FAIL, Step.GIVE_UP, gave_up="deadline"),
    Case("the caller's deadline", NO_QUOTA, FAIL, Step.GIVE_UP, gave_up="deadline", inputs={"outer": lambda: 0.5}),
    Case("a server delay past the deadline", NO_QUOTA.replace(deadline=2.0),
         Outcome(T.TRANSIENT, "HTTP 503", server_delay=5.0), Step.GIVE_UP, gave_up="server_delay"),
    Case("the breaker would still refuse", NO_QUOTA, FAIL, Step.GIVE_UP, gave_up="breaker",
         inputs={"breaker_wait": 10.0}),
    Case("the breaker admits after the sleep", NO_QUOTA, FAIL, Step.RETRY, delay=0.5, inputs={"breaker_wait": 0.5}),
    Case("pay the quota", RetryPolicy(backoff=FixedBackoff(0.5)), FAIL, Step.PAY, due=5, quota=True,
         paid=None, after_pay=Step.RETRY, delay=0.5),
    Case("a timeout costs more", RetryPolicy(backoff=FixedBackoff(0.5)), Outcome(T.TIMEOUT, "ReadTimeout"), Step.PAY,
         due=10, quota=True, paid=None, after_pay=Step.RETRY, delay=0.5),
    Case("the quota refuses", RetryPolicy(backoff=FixedBackoff(0.5)), FAIL, Step.PAY, due=5, quota=True,
         paid="quota", after_pay=Step.GIVE_UP, gave_up="quota"),
    Case("paid, then the deadline", RetryPolicy(backoff=FixedBackoff(0.5)), FAIL, Step.PAY, due=5, quota=True,
         paid=None, after_pay=Step.GIVE_UP, gave_up="deadline", inputs={"outer": lambda: 0.1}),
    Case("the budget's place", NO_QUOTA.replace(budget=RetryBudgetConfig()), FAIL, Step.PAY, due=0, budget=True,
         paid=None, after_pay=Step.RETRY, delay=0.5),
    Case("the budget refuses", NO_QUOTA.replace(budget=RetryBudgetConfig()), FAIL, Step.PAY, due=0, budget=True,
         paid="budget", after_pay=Step.GIVE_UP, gave_up="budget"),
    Case("a waiting quota: wait for the tokens", RetryPolicy(
        backoff=FixedBackoff(0.5), quota=RetryQuotaConfig(circuit_breaker_mode=False, refill_units_per_second=1.0),
    ), FAIL, Step.RETRY, delay=0.5, quota=True),
]


def make(case: Case) -> Call:
    """A call of ``case`` whose attempt ``case.number`` has begun (earlier ones failed and were recorded)."""
    clock = VirtualClock()
    quota = RetryQuota(case.policy.quota_config, clock=clock) if case.quota and case.policy.quota_config else None
    budget = RetryBudget(case.policy.budget, clock=clock) if case.budget and case.policy.budget else None
    scope = Scope("s", quota, None, None, None, 0.0, budget, clock)
    call = Call(scope, case.policy, 0.0, EventBus())
    for number in range(1, case.number):
        call.begin(0.0, 0)
        call.record_failure(number, 0.0, FAIL, None, 0.0)
    call.begin(0.0, 0)
    return call


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_decision_of_the_core(case: Case) -> None:
    """The core answers each row's step (and delay, cost, reason to give up) from the row's inputs alone."""
    call = make(case)
    step = call.settle(case.number, case.now, case.outcome, None, case.now, **case.inputs)
    assert step is case.expect
    if step is Step.PAY:
        assert call.due == case.due
        assert case.paid is not False
        inputs = {k: v for k, v in case.inputs.items() if k != "draw"}
        step = call.paid(case.paid, case.now, **inputs)  # type: ignore[arg-type]
        assert step is case.after_pay
    if step is Step.RETRY:
        assert call.delay == pytest.approx(case.delay)
        assert call.gave_up is None
        assert call.retrying
    if step is Step.GIVE_UP:
        assert call.gave_up == case.gave_up
        assert call.done
        assert call.history().gave_up == case.gave_up
    if step is Step.DONE:
        assert call.refund_due == case.refund
        assert call.history().gave_up is None
    if case.policy.quota_config is not None and not case.policy.quota_config.circuit_breaker_mode:
        assert call.wait_cost == 5  # the driver waits for these tokens before the retry


def test_a_call_ends_with_its_last_outcome_whatever_refused_the_next_attempt() -> None:
    """A refusal after an attempt ends the call with that attempt's error (history attached, why recorded);
    a refusal before any attempt ends it with the refusal itself."""
    policy = NO_QUOTA
    call = make(Case("", policy, FAIL, Step.RETRY))
    error = ConnectionResetError("down")
    assert call.settle(1, 0.0, Outcome(T.CONNECTION, "reset", error), error, 1.0) is Step.RETRY
    call.refuse(RuntimeError("open"), "breaker", 2.0)
    assert call.ending is error
    assert (call.gave_up, call.done) == ("breaker", True)
    fresh = Call(Scope("s", None, None, None, None, 0.0), policy, 0.0, EventBus())
    refusal = RuntimeError("open")
    fresh.refuse(refusal, "breaker", 0.0)
    assert fresh.ending is refusal


def test_asking_the_breaker_moves_no_state() -> None:
    """retry_after() of an open breaker whose break is over answers 0 and moves nothing (acquire() does)."""
    clock = VirtualClock()
    bus = EventBus()
    changes: list[BreakerStateChanged] = []
    bus.subscribe(lambda event: changes.append(event) if isinstance(event, BreakerStateChanged) else None)
    config = CircuitBreakerConfig(failure_ratio=None, consecutive_failures=1, break_duration=5.0)
    breaker = CircuitBreaker(config, clock=clock, events=bus)
    breaker.record_failure(0)
    assert [(e.old_state, e.new_state) for e in changes] == [("closed", "open")]
    clock.advance(10.0)
    assert breaker.retry_after() == 0.0
    assert len(changes) == 1  # the question moved nothing
    assert breaker.acquire()  # the probe's ticket: acquiring is what moves the state
    assert [e.new_state for e in changes] == ["open", "half_open"]


def test_the_core_runs_no_listener_it_hands_its_events_to_the_driver() -> None:
    """A decision's events wait in the call until the driver takes them: no listener runs inside the core."""
    case = Case("", NO_QUOTA.replace(max_attempts=1), FAIL, Step.GIVE_UP)
    call = make(case)
    heard: list[object] = []
    call.events.subscribe(heard.append)
    assert call.settle(1, 0.0, FAIL, None, 1.0) is Step.GIVE_UP
    assert heard == []
    events = call.take_events()
    assert events is not None
    assert [type(event).__name__ for event in events] == ["AttemptFinished", "GaveUp"]
    assert call.take_events() is None


def test_the_core_imports_no_anyio_and_reads_no_hidden_input() -> None:
    """The core module imports no anyio and calls no random source or ambient deadline of its own."""
    tree = ast.parse(inspect.getsource(core))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("anyio") for name in imported)
    source = inspect.getsource(core)
    assert "_rng(" not in source
    assert "current_effective_deadline" not in source
    assert "retrier" not in source  # it writes no counter of the retrier's: the executor counts


def test_the_core_counts_nothing_and_hands_a_probe_back() -> None:
    """A cancelled attempt ends the call and hands the breaker's probe ticket back for the driver to free."""
    call = make(Case("", NO_QUOTA, FAIL, Step.RETRY))
    call.probe = 7
    assert call.abandon() == 7
    assert call.done
    assert call.probe == 0
