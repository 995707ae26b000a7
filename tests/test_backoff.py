"""Backoff strategies reproduce the reference SDKs for the same random number, within bounds (SPEC 3)."""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from typing import Any
from unittest import mock

import anyio
import pytest
from botocore.retries import standard as botocore_standard
from botocore.retries.standard import ExponentialBackoff as BotocoreBackoff
from botocore.retries.standard import RetryContext
from hypothesis import given
from hypothesis import strategies as st

from asyncretry import DEFAULT_CLOCK
from asyncretry._primitives._backoff import (
    Backoff,
    DecorrelatedJitterBackoff,
    ExponentialBackoff,
    FixedBackoff,
    JitterMode,
    LinearBackoff,
    NoBackoff,
)
from asyncretry.testing import SequenceRandom

US = [0.0, 0.1234567, 0.25, 0.5, 0.75, 0.9999999]


class _AlwaysThrottling:
    def is_throttling_error_from_context(self, context: Any) -> bool:
        return True


def _botocore(u: float, attempt: int, *, throttling: bool) -> float:
    detector = _AlwaysThrottling() if throttling else None
    backoff = BotocoreBackoff(random=lambda: u, throttling_detector=detector)
    # botocore's 2026 rules sit behind a switch whose default depends on the release (aiobotocore pins
    # releases where it is off): turn it on, so that the comparison is with the rules and not a default.
    with mock.patch.object(botocore_standard, "NEW_RETRIES_ENABLED", True):
        return float(backoff.delay_amount(RetryContext(attempt_number=attempt)))


# -- the reference behaviours -----------------------------------------------------------------------------


@pytest.mark.parametrize("u", US)
@pytest.mark.parametrize("attempt", range(1, 13))
def test_aws_standard_and_throttling_equal_botocore_throttling_backoff(u: float, attempt: int) -> None:
    """aws_standard() (2020) and aws_throttling() (2026) give botocore's 1 s-base delay bit for bit."""
    expected = _botocore(u, attempt, throttling=True)
    assert ExponentialBackoff.aws_standard().delay(attempt, u) == expected
    assert ExponentialBackoff.aws_throttling().delay(attempt, u) == expected


@pytest.mark.parametrize("u", US)
@pytest.mark.parametrize("attempt", range(1, 13))
def test_aws_transient_equals_botocore_non_throttling_backoff_exactly(u: float, attempt: int) -> None:
    """aws_transient() (2026) gives botocore's 50 ms-base delay for non-throttling errors bit for bit."""
    assert ExponentialBackoff.aws_transient().delay(attempt, u) == _botocore(u, attempt, throttling=False)


def test_aws_standard_halves_the_doubling_cap_at_u_one_half() -> None:
    """With u = 0.5 the AWS standard delays are 0.5, 1, 2, 4, 8, then 10 (half the 20 s cap) for ever."""
    backoff = ExponentialBackoff.aws_standard()
    assert [backoff.delay(n, 0.5) for n in range(1, 10)] == [0.5, 1, 2, 4, 8, 10, 10, 10, 10]


def test_aws_transient_caps_grow_from_fifty_milliseconds() -> None:
    """The 2026 transient schedule's caps are 0.05 * 2**(n-1) up to 20 s."""
    caps = ExponentialBackoff.aws_transient().schedule(11)
    assert caps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 20.0, 20.0])


@pytest.mark.parametrize("u", US)
@pytest.mark.parametrize("attempt", range(1, 30))
def test_kotlin_preset_matches_the_kotlin_delay_provider_formula(u: float, attempt: int) -> None:
    """kotlin() is smithy-kotlin's min(10 ms * 1.5**(n-1), 20 s) * (1 - U[0, jitter)) with jitter 1.0."""
    cap_ms = min(10 * 1.5 ** (attempt - 1), 20_000.0)
    expected = cap_ms * (1.0 - 1.0 * u) / 1000
    assert ExponentialBackoff.kotlin().delay(attempt, u) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_kotlin_caps_grow_by_half_from_ten_milliseconds() -> None:
    """The Kotlin default's un-jittered delays are 10, 15, 22.5, 33.75 ms ... (u = 0 keeps the cap)."""
    backoff = ExponentialBackoff.kotlin()
    assert [backoff.delay(n, 0.0) for n in range(1, 5)] == pytest.approx([0.01, 0.015, 0.0225, 0.03375])


def test_kotlin_jitter_amount_one_half_cuts_at_most_half_the_cap() -> None:
    """A Kotlin-form jitter of 0.5 keeps each delay within (cap / 2, cap]; 0 means no jitter at all."""
    half = ExponentialBackoff(initial=1.0, multiplier=2.0, max_delay=20.0, jitter="reduce", jitter_amount=0.5)
    assert half.delay(3, 0.0) == 4.0
    assert half.delay(3, 0.5) == 3.0
    assert half.bounds(3) == (2.0, 4.0)
    none = ExponentialBackoff(jitter="reduce", jitter_amount=0.0)
    assert {none.delay(3, u) for u in US} == {4.0}


@pytest.mark.parametrize("u", US)
@pytest.mark.parametrize("attempt", range(1, 15))
def test_qldb_preset_matches_the_qldb_driver_formula(u: float, attempt: int) -> None:
    """qldb() is the QLDB drivers' equal jitter: t/2 + U(0, t/2) with t = min(10 ms * 2**n, 5000 ms)."""
    t_ms = min(10 * 2**attempt, 5000)
    expected = (t_ms / 2 + u * t_ms / 2) / 1000
    assert ExponentialBackoff.qldb().delay(attempt, u) == pytest.approx(expected, rel=1e-12)


def test_qldb_preset_allows_four_retries_from_ten_milliseconds() -> None:
    """The QLDB default schedules 4 retries; the first waits 10 to 20 ms and no delay exceeds 5 s."""
    backoff = ExponentialBackoff.qldb()
    assert backoff.max_retries == 4
    assert backoff.schedule(10) == pytest.approx([0.02, 0.04, 0.08, 0.16])
    assert backoff.bounds(1) == pytest.approx((0.01, 0.02))
    assert backoff.bounds(1000) == (2.5, 5.0)


def test_aws_polling_doubles_from_two_hundred_milliseconds_up_to_the_max_interval() -> None:
    """Polling waits 2**n * 100 ms after poll n, capped at max_interval, whatever u is."""
    backoff = ExponentialBackoff.aws_polling(max_interval=5.0)
    assert backoff.schedule(8) == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0])
    assert {backoff.delay(4, u) for u in US} == {1.6}
    assert ExponentialBackoff.aws_polling(max_interval=timedelta(milliseconds=100)).schedule(2) == [0.1, 0.1]
    assert ExponentialBackoff.aws_polling(max_retries=3).schedule(10) == pytest.approx([0.2, 0.4, 0.8])


def test_equal_jitter_spans_the_upper_half_of_the_cap() -> None:
    """Equal jitter is cap/2 + u * cap/2."""
    backoff = ExponentialBackoff(initial=1.0, max_delay=20.0, jitter="equal")
    assert [backoff.delay(3, u) for u in (0.0, 0.5, 1.0)] == [2.0, 3.0, 4.0]
    assert backoff.bounds(3) == (2.0, 4.0)


@given(u=st.floats(0.0, 1.0), attempt=st.integers(1, 40), amount=st.floats(0.0, 1.0))
def test_full_and_reduce_jitter_are_the_same_law_mirrored_in_u(u: float, attempt: int, amount: float) -> None:
    """'full' at u equals 'reduce' at 1 - u: the botocore and Kotlin forms differ only in how u is used."""
    full = ExponentialBackoff(initial=0.5, multiplier=1.7, max_delay=30.0, jitter_amount=amount)
    reduce = dataclasses.replace(full, jitter="reduce")
    assert full.delay(attempt, u) == pytest.approx(reduce.delay(attempt, 1.0 - u), rel=1e-9, abs=1e-12)


def test_full_jitter_amount_raises_the_floor() -> None:
    """'full' jitter with jitter_amount 0.5 draws from [cap/2, cap) upwards with u."""
    backoff = ExponentialBackoff(initial=1.0, max_delay=20.0, jitter_amount=0.5)
    assert [backoff.delay(3, u) for u in (0.0, 0.5)] == [2.0, 3.0]


def test_no_jitter_is_the_cap() -> None:
    """jitter='none' returns the capped exponential, ignoring u."""
    backoff = ExponentialBackoff(initial=0.1, multiplier=3.0, max_delay=2.0, jitter="none")
    assert [backoff.delay(n, 0.7) for n in range(1, 6)] == pytest.approx([0.1, 0.3, 0.9, 2.0, 2.0])


def test_decorrelated_jitter_draws_between_base_and_three_times_the_previous_delay() -> None:
    """Decorrelated jitter is min(cap, base + u * (3 * prev - base)), prev = base before the first retry."""
    backoff = DecorrelatedJitterBackoff(base=1.0, max_delay=10.0)
    assert backoff.delay(1, 0.5) == 2.0
    assert backoff.delay(2, 0.5, previous=2.0) == 3.5
    assert backoff.delay(3, 0.0, previous=3.5) == 1.0
    assert backoff.delay(3, 1.0, previous=3.5) == 10.0
    assert [backoff.bounds(n) for n in (1, 2, 3)] == [(1.0, 3.0), (1.0, 9.0), (1.0, 10.0)]


def test_decorrelated_jitter_clamps_an_outside_previous_delay_into_its_own_range() -> None:
    """A previous delay above what the strategy could have produced (a server's Retry-After) does not inflate
    the next delay, and one below base counts as base."""
    backoff = DecorrelatedJitterBackoff(base=1.0, max_delay=100.0)
    assert backoff.delay(1, 1.0, previous=60.0) == 3.0
    assert backoff.delay(2, 1.0, previous=math.inf) == 9.0
    assert backoff.delay(2, 1.0, previous=0.0) == 3.0


def test_decorrelated_schedule_chains_the_previous_delay() -> None:
    """schedule() with a random source feeds each delay back as the next one's previous."""
    backoff = DecorrelatedJitterBackoff(base=1.0, max_delay=50.0)
    assert backoff.schedule(4, SequenceRandom([0.5])) == [2.0, 3.5, 5.75, 9.125]
    assert backoff.schedule(5) == [3.0, 9.0, 27.0, 50.0, 50.0]


def test_fixed_linear_and_no_backoff() -> None:
    """Fixed waits the same, linear adds a step up to its cap, NoBackoff never waits."""
    assert FixedBackoff(0.25).schedule(3) == [0.25, 0.25, 0.25]
    assert FixedBackoff(delay=timedelta(seconds=2)).delay(7, 0.3) == 2.0
    assert repr(FixedBackoff(1.5, max_retries=2)) == "FixedBackoff(delay=1.5, max_retries=2)"
    linear = LinearBackoff(initial=1.0, increment=2.0, max_delay=6.0)
    assert linear.schedule(5) == [1.0, 3.0, 5.0, 6.0, 6.0]
    assert linear.bounds(2) == (3.0, 3.0)
    assert NoBackoff().schedule(3) == [0.0, 0.0, 0.0]
    assert NoBackoff(max_retries=1).schedule(3) == [0.0]


def test_durations_accept_timedelta_and_are_stored_as_float_seconds() -> None:
    """A timedelta given for a duration is stored as float seconds."""
    backoff = ExponentialBackoff(initial=timedelta(milliseconds=50), max_delay=timedelta(seconds=3))
    assert (backoff.initial, backoff.max_delay) == (0.05, 3.0)
    decorrelated = DecorrelatedJitterBackoff(base=timedelta(seconds=1), max_delay=timedelta(minutes=1))
    assert decorrelated.max_delay == 60.0
    linear = LinearBackoff(initial=timedelta(0), increment=timedelta(seconds=1))
    assert (linear.initial, linear.increment) == (0.0, 1.0)


def test_strategies_are_frozen_values() -> None:
    """Strategies cannot be changed after construction and compare by value."""
    backoff = ExponentialBackoff.aws_standard()
    with pytest.raises(dataclasses.FrozenInstanceError):
        backoff.initial = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FixedBackoff(1.0).interval = 2.0  # type: ignore[misc]
    assert backoff == ExponentialBackoff(initial=1, multiplier=2, max_delay=20)
    assert FixedBackoff(1.0) == FixedBackoff(delay=1)


@pytest.mark.parametrize(
    "strategy",
    [
        ExponentialBackoff(),
        DecorrelatedJitterBackoff(),
        FixedBackoff(1.0),
        LinearBackoff(),
        NoBackoff(),
    ],
    ids=lambda s: type(s).__name__,
)
def test_every_strategy_implements_the_backoff_protocol(strategy: Backoff) -> None:
    """Each strategy passes isinstance(x, Backoff) and has max_retries None unless told otherwise."""
    assert isinstance(strategy, Backoff)
    assert strategy.max_retries is None


# -- schedule() ---------------------------------------------------------------------------------------------


def test_schedule_without_rng_lists_the_upper_bounds() -> None:
    """schedule(n) with no rng is deterministic: the cap before jitter for each attempt."""
    backoff = ExponentialBackoff.aws_standard()
    assert backoff.schedule(7) == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0]
    assert backoff.schedule(7) == [backoff.bounds(n)[1] for n in range(1, 8)]
    assert backoff.schedule(0) == []


def test_schedule_with_rng_draws_one_number_per_attempt() -> None:
    """schedule(n, rng) equals delay(k, rng()) for k = 1..n and calls rng exactly n times."""
    rng = SequenceRandom([0.1, 0.9, 0.5])
    backoff = ExponentialBackoff.aws_standard()
    assert backoff.schedule(3, rng) == [0.1, 1.8, 2.0]
    assert rng.calls == 3


def test_schedule_stops_at_max_retries() -> None:
    """A strategy with max_retries never schedules more delays than that."""
    assert len(ExponentialBackoff(max_retries=2).schedule(10)) == 2
    assert FixedBackoff(1.0, max_retries=0).schedule(10) == []


# -- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: ExponentialBackoff(initial=0), r"initial must be > 0, got 0"),
        (lambda: ExponentialBackoff(initial=-1), r"initial must be > 0"),
        (lambda: ExponentialBackoff(multiplier=0.5), r"multiplier must be >= 1, got 0.5"),
        (lambda: ExponentialBackoff(initial=2, max_delay=1), r"max_delay must be >= initial \(2 s\), got 1"),
        (lambda: ExponentialBackoff(max_delay=math.inf), r"max_delay must be a finite number"),
        (lambda: ExponentialBackoff(jitter="x"), r"jitter must be one of 'full', .*, got 'x'"),  # type: ignore
        (lambda: ExponentialBackoff(jitter_amount=1.5), r"jitter_amount must be >= 0 and <= 1, got 1.5"),
        (lambda: ExponentialBackoff(jitter="equal", jitter_amount=0.5), r"jitter_amount only applies"),
        (lambda: ExponentialBackoff(max_retries=-1), r"max_retries must be an integer >= 0, got -1"),
        (lambda: ExponentialBackoff.aws_polling(max_interval=0), r"max_interval must be > 0, got 0"),
        (lambda: DecorrelatedJitterBackoff(base=0), r"base must be > 0, got 0"),
        (lambda: DecorrelatedJitterBackoff(base=5, max_delay=1), r"max_delay must be >= base \(5 s\), got 1"),
        (lambda: FixedBackoff(-1), r"delay must be >= 0, got -1"),
        (lambda: LinearBackoff(increment=-1), r"increment must be >= 0, got -1"),
        (lambda: LinearBackoff(initial=3, max_delay=2), r"max_delay must be >= initial \(3 s\), got 2"),
        (lambda: NoBackoff(max_retries=-2), r"max_retries must be an integer >= 0, got -2"),
    ],
)
def test_bad_configuration_is_refused_with_a_message_naming_the_parameter(factory: Any, message: str) -> None:
    """Each out-of-range setting raises ValueError naming the parameter, the value and the allowed range."""
    with pytest.raises(ValueError, match=message):
        factory()


def test_wrong_types_are_refused() -> None:
    """A string where a number belongs raises TypeError naming the parameter."""
    with pytest.raises(TypeError, match="multiplier must be a number"):
        ExponentialBackoff(multiplier="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_retries must be an integer"):
        LinearBackoff(max_retries=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "strategy",
    [ExponentialBackoff(), DecorrelatedJitterBackoff(), FixedBackoff(1.0), LinearBackoff(), NoBackoff()],
    ids=lambda s: type(s).__name__,
)
def test_bad_call_arguments_are_refused(strategy: Backoff) -> None:
    """attempt must be >= 1, u within [0, 1] and attempts >= 0; the message names the argument."""
    with pytest.raises(ValueError, match=r"attempt must be an integer >= 1, got 0"):
        strategy.delay(0, 0.5)
    with pytest.raises(ValueError, match=r"attempt must be an integer >= 1, got 0"):
        strategy.bounds(0)
    with pytest.raises(ValueError, match=r"u must be >= 0 and <= 1, got 1.5"):
        strategy.delay(1, 1.5)
    with pytest.raises(ValueError, match=r"u must be >= 0 and <= 1, got -0.1"):
        strategy.delay(1, -0.1)
    with pytest.raises(ValueError, match=r"attempts must be an integer >= 0, got -1"):
        strategy.schedule(-1)


def test_decorrelated_refuses_a_negative_previous_delay() -> None:
    """previous must be >= 0."""
    with pytest.raises(ValueError, match=r"previous must be >= 0, got -1"):
        DecorrelatedJitterBackoff().delay(2, 0.5, previous=-1.0)


# -- invariants ---------------------------------------------------------------------------------------------

_seconds = st.floats(min_value=1e-3, max_value=1e4)


@st.composite
def _strategies(draw: st.DrawFn) -> Backoff:
    kind = draw(st.sampled_from(["exponential", "decorrelated", "fixed", "linear", "none"]))
    if kind == "exponential":
        initial = draw(_seconds)
        jitter: JitterMode = draw(st.sampled_from(["full", "reduce", "equal", "none"]))
        return ExponentialBackoff(
            initial=initial,
            multiplier=draw(st.floats(1.0, 1e3)),
            max_delay=initial * draw(st.floats(1.0, 1e6)),
            jitter=jitter,
            jitter_amount=draw(st.floats(0.0, 1.0)) if jitter in ("full", "reduce") else 1.0,
        )
    if kind == "decorrelated":
        base = draw(_seconds)
        return DecorrelatedJitterBackoff(base=base, max_delay=base * draw(st.floats(1.0, 1e6)))
    if kind == "fixed":
        return FixedBackoff(draw(st.floats(0.0, 1e4)))
    if kind == "linear":
        initial = draw(st.floats(0.0, 1e4))
        return LinearBackoff(
            initial=initial,
            increment=draw(st.floats(0.0, 1e4)),
            max_delay=initial + draw(st.floats(0.0, 1e5)),
        )
    return NoBackoff()


def _ceiling(strategy: Backoff) -> float:
    if isinstance(strategy, FixedBackoff):
        return strategy.interval
    if isinstance(strategy, NoBackoff):
        return 0.0
    assert isinstance(strategy, (ExponentialBackoff, DecorrelatedJitterBackoff, LinearBackoff))
    return float(strategy.max_delay)  # type: ignore[arg-type]  # stored as float seconds


@given(
    strategy=_strategies(),
    attempt=st.one_of(st.integers(1, 100), st.integers(1, 10**30)),
    u=st.floats(0.0, 1.0),
    previous=st.one_of(st.none(), st.floats(0.0, 1e9)),
)
def test_every_delay_is_within_bounds_and_never_negative_or_above_the_cap(
    strategy: Backoff, attempt: int, u: float, previous: float | None
) -> None:
    """For any strategy, attempt, u and previous delay: 0 <= low <= delay <= high <= the strategy's cap."""
    delay = strategy.delay(attempt, u, previous)
    low, high = strategy.bounds(attempt)
    assert 0.0 <= low <= delay <= high <= _ceiling(strategy)
    assert strategy.delay(attempt, u, previous) == delay  # pure


@given(strategy=_strategies(), attempt=st.integers(1, 200))
def test_upper_bounds_never_decrease_from_one_attempt_to_the_next(strategy: Backoff, attempt: int) -> None:
    """The largest possible delay never shrinks as attempts accumulate."""
    assert strategy.bounds(attempt)[1] <= strategy.bounds(attempt + 1)[1]


@pytest.mark.parametrize("attempt", [1_000, 10_000, 10**6, 10**100])
@pytest.mark.parametrize("multiplier", [1.0000001, 1.5, 2.0, 10.0, 1e300])
def test_huge_attempt_numbers_saturate_at_the_cap_without_overflow(attempt: int, multiplier: float) -> None:
    """multiplier**(n-1) is never computed where it would overflow: large attempts just give the cap."""
    backoff = ExponentialBackoff(initial=1e-3, multiplier=multiplier, max_delay=30.0, jitter="none")
    growth = (attempt - 1) * math.log(multiplier)
    expected = 30.0 if growth > math.log(30.0 / 1e-3) else 1e-3 * math.exp(growth)
    assert backoff.delay(attempt, 0.5) == pytest.approx(expected, rel=1e-6)
    assert DecorrelatedJitterBackoff(base=1e-3, max_delay=30.0).bounds(attempt) == (1e-3, 30.0)
    assert LinearBackoff(increment=1e300, max_delay=30.0).delay(attempt, 0.5) == 30.0


# -- sharing ------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_one_strategy_shared_by_concurrent_calls_gives_each_its_own_schedule() -> None:
    """Strategies hold no per-call state: ten tasks sleeping through one strategy's schedule all finish at
    the sum of its delays, as if each had it to itself."""
    backoff = ExponentialBackoff(initial=1.0, max_delay=8.0, jitter="none")
    finished: list[float] = []
    start = DEFAULT_CLOCK.now()

    async def call() -> None:
        for attempt in range(1, 6):
            await DEFAULT_CLOCK.sleep(backoff.delay(attempt, 0.5))
        finished.append(DEFAULT_CLOCK.now() - start)

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(call)
    assert finished == pytest.approx([1 + 2 + 4 + 8 + 8] * 10)
