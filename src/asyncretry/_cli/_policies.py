"""What ``asyncretry schedule`` can show: backoff strategies, the SNS delivery policy, the AWS presets."""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from .._engine._policy import RetryPolicy
from .._primitives._backoff import (
    Backoff,
    DecorrelatedJitterBackoff,
    ExponentialBackoff,
    FixedBackoff,
    LinearBackoff,
)
from .._primitives._delivery import DeliveryPolicy

__all__ = ["GROUPS", "POLICY_NAMES", "Schedule", "resolve"]

_BACKOFF = ("exponential", "exponential-reduce", "exponential-equal", "exponential-none", "decorrelated", "fixed",
            "linear")
_JITTER_NOTES = {
    "full": "full jitter: U(0, 1) x cap",
    "reduce": "full jitter, Kotlin's form: cap x (1 - U(0, 1))",
    "equal": "equal jitter: cap/2 + U(0, cap/2)",
    "none": "no jitter",
}
_SNS_FUNCTIONS = ("linear", "arithmetic", "geometric", "exponential")
_SNS = (*(f"sns-{f}" for f in _SNS_FUNCTIONS), "sns-aws-managed", "sns-customer-managed")
_AWS = ("standard-2020", "standard-2026", "standard-2026-throttling", "legacy", "kotlin", "qldb", "polling")

GROUPS: dict[str, tuple[str, ...]] = {
    "all": (*_BACKOFF, *_SNS, *_AWS),
    "backoff": _BACKOFF,
    "sns": _SNS,
    "aws": _AWS,
}
"""Names that stand for several policies."""

POLICY_NAMES: tuple[str, ...] = (*_BACKOFF, *_SNS, *_AWS)
"""Every policy ``asyncretry schedule`` knows, in the order it shows them."""

# Map the library's parameter names in error messages to the options that set them.
_OPTIONS = {
    "initial": "--initial", "multiplier": "--multiplier", "max_delay": "--max-delay", "base": "--base",
    "increment": "--increment", "delay": "--delay", "min_delay_target": "--min-delay-target",
    "max_delay_target": "--max-delay-target", "num_retries": "--num-retries",
    "num_no_delay_retries": "--no-delay-retries", "num_min_delay_retries": "--min-delay-retries",
    "num_max_delay_retries": "--max-delay-retries",
}


class _SnsJsonError(ValueError):
    """The ``--sns-json`` policy is unreadable or invalid."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """One row of the output: a named delay strategy and how many retries its policy makes.

    Attributes:
        name: the row's name.
        group: ``backoff``, ``sns`` or ``aws``.
        backoff: the strategy.
        retries: retries the policy makes (``None``: no limit of its own); later cells show ``-``.
        note: one line of explanation.
    """

    name: str
    group: str
    backoff: Backoff
    retries: int | None
    note: str


def option_names(message: str) -> str:
    """Rewrite a validation message to name the command-line options instead of the parameters.

    ``"max_delay must be >= initial (30 s), got 20.0"`` becomes
    ``"argument --max-delay: must be >= --initial (30 s), got 20.0"``, like argparse's own messages.
    """
    message = re.sub(r"\b(" + "|".join(sorted(_OPTIONS, key=len, reverse=True)) + r")\b",
                     lambda m: _OPTIONS[m.group(1)], message)
    return re.sub(r"^(--[\w-]+) must ", r"argument \1: must ", message)


def _sns_base(args: argparse.Namespace) -> DeliveryPolicy:
    if args.sns_json is not None:
        text = args.sns_json
        if text.startswith("@"):
            try:
                text = Path(text[1:]).read_text(encoding="utf-8")
            except OSError as error:
                raise _SnsJsonError(f"cannot read {text[1:]!r}: {error.strerror}") from None
        try:
            return DeliveryPolicy.from_json(text)
        except (ValueError, TypeError) as error:
            raise _SnsJsonError(str(error)) from None
    return DeliveryPolicy(
        min_delay_target=args.min_delay_target,
        max_delay_target=args.max_delay_target,
        num_retries=args.num_retries,
        num_no_delay_retries=args.no_delay_retries,
        num_min_delay_retries=args.min_delay_retries,
        num_max_delay_retries=args.max_delay_retries,
    )


def _build(name: str, args: argparse.Namespace) -> Schedule:
    initial, multiplier, cap = args.initial, args.multiplier, args.max_delay
    if name.startswith("exponential"):
        jitter = name.partition("-")[2] or "full"
        backoff = ExponentialBackoff(initial=initial, multiplier=multiplier, max_delay=cap, jitter=jitter)  # type: ignore[arg-type]
        return Schedule(name, "backoff", backoff, None,
                        f"min({initial:g} x {multiplier:g}^(n-1), {cap:g}) s, " + _JITTER_NOTES[jitter])
    if name == "decorrelated":
        return Schedule(name, "backoff", DecorrelatedJitterBackoff(base=args.base, max_delay=cap), None,
                        f"min({cap:g}, U({args.base:g}, 3 x previous)) s")
    if name == "fixed":
        return Schedule(name, "backoff", FixedBackoff(args.delay), None, f"{args.delay:g} s every time")
    if name == "linear":
        return Schedule(name, "backoff", LinearBackoff(initial=initial, increment=args.increment, max_delay=cap),
                        None, f"min({initial:g} + {args.increment:g} x (n-1), {cap:g}) s")
    if name in ("sns-aws-managed", "sns-customer-managed"):
        policy = (DeliveryPolicy.aws_managed_endpoints() if name == "sns-aws-managed"
                  else DeliveryPolicy.customer_managed_endpoints())
        return Schedule(name, "sns", policy, policy.num_retries, f"SNS's own policy, {policy.num_retries:,} retries")
    if name.startswith("sns-"):
        function = name.partition("-")[2]
        base = _sns_base(args)
        policy = dataclasses.replace(base, backoff_function=function)  # type: ignore[arg-type]
        return Schedule(
            name, "sns", policy, policy.num_retries,
            f"{policy.num_no_delay_retries} immediate, {policy.num_min_delay_retries} at "
            f"{policy.min_delay_target:g} s, {policy.num_backoff_retries} {function} to {policy.max_delay_target:g} s, "
            f"{policy.num_max_delay_retries} at {policy.max_delay_target:g} s",
        )
    standard_2026 = RetryPolicy.aws_standard("2026")
    presets: dict[str, tuple[RetryPolicy, Backoff | None, str]] = {
        "standard-2020": (RetryPolicy.aws_standard("2020"), None,
                          "AWS standard mode (botocore): U(0,1) x min(2^(n-1), 20) s"),
        "standard-2026": (standard_2026, None, "AWS 2026 profile, transient errors: base 50 ms"),
        "standard-2026-throttling": (standard_2026, standard_2026.throttling_backoff,
                                     "AWS 2026 profile, throttling errors: base 1 s"),
        "legacy": (RetryPolicy.aws_legacy(), None, "legacy mode: 5 attempts, no quota"),
        "kotlin": (RetryPolicy.kotlin(), None, "AWS SDK for Kotlin: min(10 ms x 1.5^(n-1), 20 s), full jitter"),
        "qldb": (RetryPolicy.qldb(), None, "QLDB driver: 10 ms to 5 s, equal jitter, 4 retries"),
        "polling": (RetryPolicy.polling(), None, "AWS polling guidance: 2^n x 100 ms, capped at 20 s"),
    }
    preset, override, note = presets[name]
    chosen = override if override is not None else preset.backoff
    assert chosen is not None
    return Schedule(name, "aws", chosen, preset.max_attempts - 1, note)


def resolve(names: list[str], args: argparse.Namespace) -> list[Schedule]:
    """The schedules the user asked for (groups expanded, duplicates dropped), in the catalogue's order.

    Raises:
        ValueError: a parameter is out of range (the message names the option).
    """
    wanted: set[str] = set()
    for name in names or ["all"]:
        wanted.update(GROUPS.get(name, (name,)))
    try:
        return [_build(name, args) for name in POLICY_NAMES if name in wanted]
    except _SnsJsonError as error:
        raise ValueError(f"argument --sns-json: {error}") from None
    except (ValueError, TypeError) as error:
        raise ValueError(option_names(str(error))) from None
