"""The retry budget bounds retries as a share of a sliding window's requests, plus a floor per second."""

from __future__ import annotations

import heapq
import logging
import math
import random
import re
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from asyncretry import (
    BudgetExhausted,
    BudgetRestored,
    BudgetStatistics,
    BudgetTicket,
    EventBus,
    RetryBudget,
    RetryBudgetConfig,
    otel,
)
from asyncretry.testing import VirtualClock, virtual_time_loop
from conftest import EventLog

DOCS = Path(__file__).resolve().parent.parent / "docs" / "retry-budget.md"


class Recorder(EventLog):
    """An event bus whose events are kept in order."""

    def kinds(self) -> list[str]:
        return self.names(BudgetExhausted, BudgetRestored)


def make(clock: VirtualClock | None = None, **config: Any) -> tuple[RetryBudget, VirtualClock, Recorder]:
    clock = clock if clock is not None else VirtualClock()
    recorder = Recorder()
    budget = RetryBudget(RetryBudgetConfig(**config), clock=clock, name="api", events=recorder.bus)
    return budget, clock, recorder


def spend_all(budget: RetryBudget, limit: int = 100_000) -> int:
    """Retries the budget allows right now, asked one after the other until it refuses."""
    allowed = 0
    while allowed < limit and budget.try_spend():
        allowed += 1
    return allowed


# -- settings


def test_the_defaults_are_finagles() -> None:
    """By default a budget allows 20% of the last 10 s of requests plus 10 retries per second, in 10 slices."""
    config = RetryBudgetConfig()
    assert (config.ratio, config.window_seconds, config.min_retries_per_second, config.slices) == (0.2, 10, 10, 10)
    assert (config.floor, config.slice_seconds) == (100, 1)
    assert config.allowance(1000) == 300


def test_a_timedelta_window_is_seconds() -> None:
    """window accepts a timedelta and keeps it as float seconds."""
    config = RetryBudgetConfig(window=timedelta(seconds=30), slices=3)
    assert config.window == 30.0
    assert config.window_seconds == 30.0
    assert config.slice_seconds == 10.0


def test_the_config_is_frozen() -> None:
    """A config cannot be changed after it is made."""
    config = RetryBudgetConfig()
    with pytest.raises(FrozenInstanceError):
        config.ratio = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ratio", -0.1, "ratio must be >= 0 and <= 1000, got -0.1"),
        ("ratio", 1000.5, "ratio must be >= 0 and <= 1000, got 1000.5"),
        ("ratio", math.nan, "ratio must be a finite number (>= 0 and <= 1000), got nan"),
        ("ratio", math.inf, "ratio must be a finite number (>= 0 and <= 1000), got inf"),
        ("ratio", 10**400, "ratio must be >= 0 and <= 1000, got 1000000"),
        ("window", 0, "window must be > 0 and <= 86400, got 0"),
        ("window", -5.0, "window must be > 0 and <= 86400, got -5.0"),
        ("window", 86_401, "window must be > 0 and <= 86400, got 86401"),
        ("window", math.inf, "window must be a finite number (> 0 and <= 86400), got inf"),
        ("window", math.nan, "window must be a finite number (> 0 and <= 86400), got nan"),
        ("window", timedelta(0), "window must be > 0 and <= 86400, got 0.0"),
        ("window", 10**400, "window must be a finite number (> 0 and <= 86400), got 1000000"),
        ("window", 1e-320, "window must be >= 1e-09 s (shorter durations cannot be measured), got 1e-320"),
        ("window", 5e-324, "window must be >= 1e-09 s (shorter durations cannot be measured), got 5e-324"),
        ("min_retries_per_second", -1, "min_retries_per_second must be >= 0 and <= 1e+06, got -1"),
        ("min_retries_per_second", math.inf, "min_retries_per_second must be a finite number (>= 0 and <= 1e+06)"),
        ("min_retries_per_second", 10**400, "min_retries_per_second must be >= 0 and <= 1e+06, got 1000000"),
        ("slices", 0, "slices must be an integer >= 1 and <= 100, got 0"),
        ("slices", 101, "slices must be an integer >= 1 and <= 100, got 101"),
        ("slices", 10**400, "slices must be an integer >= 1 and <= 100, got 1000000"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_it(field: str, value: object, message: str) -> None:
    """Each setting out of its range raises ValueError naming the setting, the value and the range."""
    with pytest.raises(ValueError, match=re.escape(message)):
        RetryBudgetConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("ratio", True), ("ratio", "0.1"), ("window", None), ("window", False), ("min_retries_per_second", True),
     ("slices", 2.0), ("slices", True)],
)
def test_a_value_of_the_wrong_type_is_a_type_error(field: str, value: object) -> None:
    """A bool, a string or None where a number belongs raises TypeError naming the setting."""
    with pytest.raises(TypeError, match=field):
        RetryBudgetConfig(**{field: value})  # type: ignore[arg-type]


def test_a_budget_that_allows_nothing_is_refused() -> None:
    """ratio=0 with no floor could never allow a retry: it is refused, pointing at max_attempts=1."""
    with pytest.raises(ValueError, match=r"ratio=0 and min_retries_per_second=0 allow no retry.*max_attempts=1"):
        RetryBudgetConfig(ratio=0, min_retries_per_second=0)


def test_the_budget_checks_its_arguments() -> None:
    """RetryBudget refuses a config of another type, a name that is not a string and events that are no bus."""
    with pytest.raises(TypeError, match="config must be a RetryBudgetConfig"):
        RetryBudget(0.1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name must be a str"):
        RetryBudget(name=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"events must be a EventBus, got 5 \(int\)"):
        RetryBudget(events=5)  # type: ignore[arg-type]


# -- the rule


def test_a_quiet_client_can_retry_thanks_to_the_floor() -> None:
    """With no request at all, the floor allows min_retries_per_second x window retries, then refuses."""
    budget, _, _ = make(ratio=0.1, min_retries_per_second=2, window=10)
    assert spend_all(budget) == 20
    assert not budget.try_spend()
    assert budget.statistics().refused == 2


def test_requests_earn_ratio_retries_each() -> None:
    """100 requests at ratio 0.1 and no floor earn exactly 10 retries."""
    budget, _, _ = make(ratio=0.1, min_retries_per_second=0)
    assert not budget.try_spend()
    for _ in range(100):
        budget.record_request()
    assert spend_all(budget) == 10


def test_float_rounding_does_not_cost_a_retry() -> None:
    """0.29 x 100 is 28.999999999999996 in floats: the budget still allows the 29th retry."""
    budget, _, _ = make(ratio=0.29, min_retries_per_second=0)
    for _ in range(100):
        budget.record_request()
    assert spend_all(budget) == 29


def test_the_window_slides_one_slice_at_a_time() -> None:
    """A slice's requests and retries count until the window has moved a whole window past the slice."""
    budget, clock, _ = make(ratio=1, min_retries_per_second=0, window=10, slices=10)
    for _ in range(5):
        budget.record_request()
    assert spend_all(budget) == 5
    clock.advance(9.999)  # still in the tenth slice: everything counts
    assert (budget.statistics().requests, budget.statistics().retries) == (5, 5)
    assert not budget.try_spend()
    clock.advance(0.001)  # t = 10: the first slice has left the window
    stats = budget.statistics()
    assert (stats.requests, stats.retries, stats.available) == (0, 0, 0)


def test_retries_count_against_later_requests_until_their_slice_leaves() -> None:
    """Retries spent in one slice hold back the allowance of requests made in later slices of the window."""
    budget, clock, _ = make(ratio=0.5, min_retries_per_second=0, window=4, slices=4)
    for _ in range(10):
        budget.record_request()
    assert spend_all(budget) == 5  # t = 0: 10 requests, 5 retries
    clock.advance(2)
    for _ in range(10):
        budget.record_request()
    assert spend_all(budget) == 5  # t = 2: 20 requests allow 10, 5 already used
    clock.advance(2)  # t = 4: slice 0 leaves: 10 requests (5 allowed), 5 retries
    assert not budget.try_spend()
    clock.advance(2)  # t = 6: slice 2 leaves too: an empty window
    assert budget.statistics().requests == 0


def test_a_long_idle_spell_empties_the_window() -> None:
    """After more than a window without use the window is empty and the floor is available again."""
    budget, clock, _ = make(ratio=0.1, min_retries_per_second=1, window=10)
    for _ in range(50):
        budget.record_request()
    assert spend_all(budget) == 15
    clock.advance(1000)
    stats = budget.statistics()
    assert (stats.requests, stats.retries, stats.allowance, stats.available) == (0, 0, 10, 10)
    assert (stats.requests_total, stats.retries_total) == (50, 15)


def test_slices_count_from_the_first_use() -> None:
    """The first use starts slice 0 wherever the clock stands, so a full window follows it."""
    budget, clock, _ = make(VirtualClock(start=1234.5), ratio=1, min_retries_per_second=0, window=10, slices=10)
    budget.record_request()
    clock.advance(9.5)
    assert budget.statistics().requests == 1
    clock.advance(0.5)
    assert budget.statistics().requests == 0


def test_a_clock_that_goes_back_keeps_the_current_slice() -> None:
    """A clock read earlier than the last one counts in the current slice; the window never slides back."""
    budget, clock, _ = make(ratio=1, min_retries_per_second=0, window=10, slices=10)
    clock.advance(5)
    budget.record_request()
    clock._now = 3.0  # a clock jumping back (a different clock given by mistake)
    budget.record_request()
    assert budget.statistics().requests == 2


def test_a_refund_takes_back_its_tickets_retry_once() -> None:
    """refund(ticket) gives back the retry of that ticket; a second refund of the same ticket changes nothing."""
    budget, _, _ = make(ratio=1, min_retries_per_second=0)
    budget.record_request()
    ticket = budget.spend()
    assert ticket is not None
    assert budget.spend() is None
    budget.refund(ticket)
    assert budget.statistics().retries == 0
    budget.refund(ticket)
    assert budget.statistics().retries == 0
    assert budget.try_spend()
    assert budget.statistics().retries_total == 1


def test_every_spend_has_its_own_refund() -> None:
    """Many retries allowed, then refunded in any order: each refund takes back one, down to none."""
    budget, clock, _ = make(ratio=1, min_retries_per_second=0, window=10, slices=10)
    tickets = []
    for _ in range(5):
        for _ in range(20):
            budget.record_request()
            ticket = budget.spend()
            assert ticket is not None
            tickets.append(ticket)
        clock.advance(1)
    for ticket in tickets[::2] + tickets[1::2]:
        budget.refund(ticket)
    stats = budget.statistics()
    assert (stats.retries, stats.retries_total, stats.requests) == (0, 0, 100)


def test_refund_without_a_ticket_is_deprecated_and_takes_back_the_latest() -> None:
    """refund() with no ticket warns (DeprecationWarning) and takes back the latest retry allowed, once."""
    budget, _, _ = make(ratio=2, min_retries_per_second=0)
    budget.record_request()
    assert budget.try_spend()
    assert budget.try_spend()
    with pytest.warns(DeprecationWarning, match=r"pass the ticket spend\(\) returned"):
        budget.refund()
    with pytest.warns(DeprecationWarning, match="pass the ticket"):
        budget.refund()
    assert budget.statistics().retries == 1


def test_refund_refuses_what_is_not_a_ticket() -> None:
    """refund(5) is a TypeError naming the ticket and the value."""
    budget, _, _ = make()
    with pytest.raises(TypeError, match=r"ticket must be a BudgetTicket .*got 5"):
        budget.refund(5)  # type: ignore[arg-type]


def test_a_refund_after_its_slice_left_the_window_does_nothing() -> None:
    """A retry whose slice already left the window is not counted any more, so there is nothing to refund."""
    budget, clock, _ = make(ratio=1, min_retries_per_second=0, window=2, slices=2)
    budget.record_request()
    ticket = budget.spend()
    assert ticket is not None
    clock.advance(2)
    budget.record_request()
    budget.refund(ticket)
    assert budget.statistics().retries == 0
    assert budget.statistics().retries_total == 1


def test_record_retry_counts_without_asking() -> None:
    """record_retry counts a retry allowed elsewhere even past the allowance, and it then holds others back."""
    budget, _, _ = make(ratio=1, min_retries_per_second=0)
    budget.record_retry()
    budget.record_retry()
    budget.record_request()
    assert budget.statistics().retries == 2
    assert not budget.try_spend()


def test_a_caller_may_hand_over_the_time_it_just_read() -> None:
    """record_request and try_spend take now= (the budget's clock, read by the caller) instead of reading it."""
    budget, clock, _ = make(ratio=1, min_retries_per_second=0, window=10, slices=10)
    budget.record_request(now=0.0)
    assert budget.try_spend(now=5.0)
    assert not budget.try_spend(now=5.0)
    budget.record_request(now=10.5)  # slice 10: slice 0's request has left the window, slice 5's retry has not
    clock.advance(10.5)
    stats = budget.statistics()
    assert (stats.requests, stats.retries) == (1, 1)


# -- events, statistics, repr


def test_exhaustion_is_reported_once_per_episode() -> None:
    """The first refusal emits BudgetExhausted; further refusals nothing; room for a retry emits BudgetRestored."""
    budget, clock, recorder = make(ratio=0.5, min_retries_per_second=0)
    for _ in range(2):
        budget.record_request()
    assert spend_all(budget) == 1
    assert not budget.try_spend()
    assert not budget.try_spend()
    exhausted = recorder.events[0]
    assert isinstance(exhausted, BudgetExhausted)
    assert (exhausted.source, exhausted.requests, exhausted.retries, exhausted.allowance) == ("api", 2, 1, 1)
    assert exhausted.level == logging.WARNING
    budget.record_request()
    assert recorder.kinds() == ["BudgetExhausted"]  # 3 requests allow 1.5: still no room for a second retry
    budget.record_request()
    restored = recorder.events[-1]
    assert isinstance(restored, BudgetRestored)
    assert (restored.available, restored.level) == (1, logging.INFO)
    assert budget.try_spend()
    assert not budget.try_spend()
    assert recorder.kinds() == ["BudgetExhausted", "BudgetRestored", "BudgetExhausted"]
    assert [e.time for e in recorder.events] == [clock.now()] * 3


def test_time_alone_ends_an_episode_at_the_next_look() -> None:
    """When the window slides past the retries, the next statistics() call ends the episode."""
    budget, clock, recorder = make(ratio=0.1, min_retries_per_second=0.1, window=10, slices=10)
    assert spend_all(budget) == 1
    assert budget.statistics().exhausted
    clock.advance(10)
    assert not budget.statistics().exhausted
    assert recorder.kinds() == ["BudgetExhausted", "BudgetRestored"]


def test_statistics_describe_the_window() -> None:
    """statistics() gives the window's counts and allowance and the totals since the budget was made."""
    budget, _, _ = make(ratio=0.25, min_retries_per_second=0.5, window=4)
    for _ in range(8):
        budget.record_request()
    assert spend_all(budget) == 4
    stats = budget.statistics()
    assert stats == BudgetStatistics(
        name="api", requests=8, retries=4, allowance=4.0, available=0.0, requests_total=8, retries_total=4,
        refused=1, exhausted=True,
    )
    assert budget.available == 0.0


def test_the_repr_shows_the_state() -> None:
    """repr() names the budget and shows retries against the allowance, requests, settings and refusals."""
    budget, _, _ = make(ratio=0.1, min_retries_per_second=1, window=10)
    for _ in range(10):
        budget.record_request()
    spend_all(budget)
    assert repr(budget) == (
        "<RetryBudget 'api' retries=11/11 requests=10 window=10s ratio=0.1 floor=1/s refused=1 exhausted>"
    )


@pytest.mark.anyio
async def test_opentelemetry_counts_episodes_and_reads_what_is_available() -> None:
    """asyncretry.budget.exhaustions counts episodes; asyncretry.budget.available reads an observed budget."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    bus = EventBus()
    with otel.instrument(meter_provider=provider, bus=bus) as instrumentation:
        config = RetryBudgetConfig(ratio=0.5, min_retries_per_second=0.2, window=10)
        budget = RetryBudget(config, name="api", events=bus)
        instrumentation.observe(budget, attributes={"service": "billing"})
        assert spend_all(budget) == 2
        assert not budget.try_spend()  # the same episode
        budget.record_request()  # 2.5 allowed, 2 held: 0.5 available
        found: dict[str, dict[frozenset[tuple[str, Any]], Any]] = {}
        data = reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)
                        found.setdefault(metric.name, {})[frozenset((point.attributes or {}).items())] = point.value
    provider.shutdown()
    assert found["asyncretry.budget.exhaustions"] == {frozenset({"asyncretry.scope": "api"}.items()): 1}
    assert found["asyncretry.budget.available"] == {
        frozenset({"asyncretry.scope": "api", "service": "billing"}.items()): 0.5
    }


# -- the documented figures, in virtual time


def simulate(
    config: RetryBudgetConfig | None,
    *,
    fails: Callable[[float], bool],
    rate: int = 1000,
    seconds: int = 60,
    max_attempts: int = 3,
    backoff: float = 0.05,
) -> tuple[int, int, int]:
    """Calls at ``rate``/s for ``seconds`` s, each retried (after ``backoff`` x 2**n s) while the budget allows.

    The engine's order: ``record_request()`` before a call's first attempt, ``try_spend()`` after each
    failed attempt that has attempts left. ``config=None`` retries without a budget.

    Returns:
        (requests, attempts made before ``seconds``, calls that succeeded).
    """
    clock = VirtualClock()
    budget = RetryBudget(config, clock=clock) if config is not None else None
    queue: list[tuple[float, int, int]] = [(i / rate, i, 1) for i in range(rate * seconds)]
    heapq.heapify(queue)
    attempts = successes = 0
    sequence = len(queue)
    while queue:
        at, _, number = heapq.heappop(queue)
        clock.advance(at - clock.now())
        if number == 1 and budget is not None:
            budget.record_request()
        if at < seconds:
            attempts += 1
        if not fails(at):
            successes += 1
        elif number < max_attempts and (budget is None or budget.try_spend()):
            sequence += 1
            heapq.heappush(queue, (at + backoff * 2 ** (number - 1), sequence, number + 1))
    return rate * seconds, attempts, successes


def test_a_total_outage_is_held_to_one_plus_ratio_plus_floor_per_request() -> None:
    """60 s of total outage at 1,000 calls/s: attempts / requests <= 1 + ratio + floor / 1000 (1.11), and reaches it."""
    config = RetryBudgetConfig(ratio=0.1, min_retries_per_second=10, window=10)
    requests, attempts, _ = simulate(config, fails=lambda at: at < 60)
    bound = 1 + config.ratio + config.min_retries_per_second / 1000
    assert attempts / requests <= bound + 1e-12
    assert attempts / requests >= bound - 0.001  # the budget is used, not just respected
    _, unlimited, _ = simulate(None, fails=lambda at: at < 60)
    assert unlimited / requests > 2.99  # without a budget every call makes its three attempts


def test_a_brown_out_keeps_the_goodput_of_unlimited_retries() -> None:
    """10% of attempts fail at random: goodput with the budget is within 1% of retrying without a limit."""
    config = RetryBudgetConfig(ratio=0.1, min_retries_per_second=10, window=10)
    rng = random.Random(18)
    draws = [rng.random() < 0.1 for _ in range(200_000)]

    def fails_from(draws: list[bool]) -> Callable[[float], bool]:
        stream = iter(draws)
        return lambda at: next(stream)

    requests, _, budgeted = simulate(config, fails=fails_from(draws))
    _, _, unlimited = simulate(None, fails=fails_from(draws))
    assert unlimited / requests > 0.99
    assert budgeted >= 0.99 * unlimited


@pytest.mark.anyio
async def test_concurrent_calls_sharing_a_budget_keep_the_bound() -> None:
    """200 concurrent calls on the event loop's clock, all failing, share one budget: retries stay in bounds."""
    config = RetryBudgetConfig(ratio=0.1, min_retries_per_second=1, window=10)
    budget = RetryBudget(config, name="shared")  # the running loop's (virtual) clock
    made = [0]

    async def call(index: int) -> None:
        await anyio.sleep(index * 0.01)
        budget.record_request()
        for attempt in range(1, 4):
            made[0] += 1
            await anyio.sleep(0.005)  # the attempt, which fails
            if attempt == 3 or not budget.try_spend():
                return
            await anyio.sleep(0.02 * attempt)

    async with anyio.create_task_group() as group:
        for index in range(200):
            group.start_soon(call, index)
    stats = budget.statistics()
    assert stats.requests_total == 200
    assert made[0] - 200 == stats.retries_total <= 0.1 * 200 + 1 * 10
    assert stats.refused > 0


# -- property: the window never holds more retries than it allows


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, float]]:
    kinds = st.sampled_from(["request", "request", "spend", "spend", "refund", "wait"])
    return draw(st.lists(st.tuples(kinds, st.sampled_from([0.25, 0.5, 1.0, 2.5, 7.0])), max_size=120))


@given(
    ops=operations(),
    ratio=st.sampled_from([0.0, 0.1, 0.29, 0.5, 1.0, 3.0]),
    floor=st.sampled_from([0.0, 0.1, 0.5, 2.0]),
    slices=st.integers(min_value=1, max_value=8),
)
def test_retries_in_the_window_never_exceed_its_allowance(
    ops: list[tuple[str, float]], ratio: float, floor: float, slices: int
) -> None:
    """Against a model that keeps every event: same counts, same answers, within the allowance, and the tiling bound."""
    if ratio == 0 and floor == 0:
        floor = 0.1
    config = RetryBudgetConfig(ratio=ratio, min_retries_per_second=floor, window=float(slices), slices=slices)
    clock = VirtualClock()
    budget = RetryBudget(config, clock=clock)
    budget.statistics()  # the first use, at t = 0, starts slice 0
    events: list[tuple[int, str]] = []  # (slice, "request" | "retry"); slices are 1 s wide, from t = 0
    tickets: list[tuple[int, BudgetTicket]] = []  # retries not refunded: the oldest is refunded first
    for kind, amount in ops:
        now_slice = math.floor(clock.now())
        in_window = [k for s, k in events if s > now_slice - slices]
        requests, retries = in_window.count("request"), in_window.count("retry")
        if kind == "request":
            budget.record_request()
            events.append((now_slice, "request"))
        elif kind == "spend":
            expected = retries + 1 <= ratio * requests + floor * slices + 1e-9
            ticket = budget.spend()
            assert (ticket is not None) is expected
            if ticket is not None:
                events.append((now_slice, "retry"))
                tickets.append((now_slice, ticket))
        elif kind == "refund" and tickets:
            spent, ticket = tickets.pop(0)
            budget.refund(ticket)
            if spent > now_slice - slices:
                events.remove((spent, "retry"))
        elif kind == "wait":
            clock.advance(amount)
        stats = budget.statistics()
        now_slice = math.floor(clock.now())
        in_window = [k for s, k in events if s > now_slice - slices]
        assert (stats.requests, stats.retries) == (in_window.count("request"), in_window.count("retry"))
        assert stats.retries <= ratio * stats.requests + floor * slices + 1e-9
        windows = math.ceil((now_slice + 1) / slices)
        total_requests = sum(1 for _, k in events if k == "request")
        total_retries = sum(1 for _, k in events if k == "retry")
        assert total_retries <= ratio * total_requests + floor * slices * windows + 1e-9
        assert stats.retries_total == total_retries


# -- the documentation's examples


def _examples() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_docs_have_examples() -> None:
    """docs/retry-budget.md shows code (and so the next test has something to run)."""
    assert len(_examples()) >= 2


@pytest.mark.parametrize("index", range(len(_examples()) if DOCS.exists() else 0))
def test_the_docs_examples_run(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Python example of docs/retry-budget.md runs to the end in virtual time (its asserts state what it shows)."""
    real_run = anyio.run

    def virtual_run(func: Callable[[], Any]) -> Any:
        return real_run(func, backend_options={"loop_factory": virtual_time_loop})

    monkeypatch.setattr(anyio, "run", virtual_run)
    exec(compile(_examples()[index], f"{DOCS.name}[{index}]", "exec"), {"__name__": "docs_example"})
