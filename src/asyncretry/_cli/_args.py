"""Argument types for the command line: each parses one option and says exactly what is wrong with it.

argparse turns an :class:`argparse.ArgumentTypeError` into ``error: argument --clients: <message>`` and
exit status 2, so every message here only says what was expected and what was given.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["capacity_schedule", "choice_list", "hedge_after", "number", "integer", "png_path"]


def integer(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high`` (both included)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def number(low: float, high: float, *, low_open: bool = False, unit: str = "") -> Callable[[str], float]:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``), with an optional unit for messages."""
    suffix = f" {unit}" if unit else ""
    allowed = f"{'>' if low_open else '>='} {low:g} and <= {high:g}{suffix}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number {allowed}, got {text!r}") from None
        if math.isnan(value) or value > high or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"must be a number {allowed}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def choice_list(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list of names from ``choices``, in the order given, without duplicates."""
    allowed = ", ".join(choices)

    def parse(text: str) -> tuple[str, ...]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {allowed}; got nothing")
        unknown = [name for name in names if name not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown name(s) {', '.join(unknown)}; choose from {allowed}")
        return tuple(dict.fromkeys(names))

    parse.__name__ = "list"
    return parse


def capacity_schedule(text: str) -> tuple[tuple[float, float], ...]:
    """``START:RATE,START:RATE,...``: the server's capacity (requests per second) from each start time (seconds).

    The first start must be 0 and the starts must increase; a rate of 0 is an outage.
    """
    example = "expected START:RATE pairs such as 0:100,30:0,35:50 (seconds : requests per second)"
    pairs: list[tuple[float, float]] = []
    for part in text.split(","):
        start_text, sep, rate_text = part.strip().partition(":")
        try:
            start, rate = float(start_text), float(rate_text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{example}, got {part.strip()!r}") from None
        if not sep or not (math.isfinite(start) and math.isfinite(rate)) or start < 0 or rate < 0:
            raise argparse.ArgumentTypeError(f"{example} (finite and >= 0), got {part.strip()!r}")
        pairs.append((start, rate))
    if pairs[0][0] != 0:
        raise argparse.ArgumentTypeError(f"the first start time must be 0, got {pairs[0][0]:g}")
    for (before, _), (after, _) in itertools.pairwise(pairs):
        if after <= before:
            raise argparse.ArgumentTypeError(f"start times must increase, got {before:g} then {after:g}")
    return tuple(pairs)


def hedge_after(text: str) -> tuple[str, float]:
    """``SECONDS`` (a fixed hedging delay, > 0 and <= 60) or ``pNN`` (a percentile of recent latencies, 1 to 99):
    ``("delay", seconds)`` or ``("quantile", q)``."""
    expected = "expected seconds (> 0 and <= 60) or a percentile such as p95 (p1 to p99)"
    text = text.strip().lower()
    if text.startswith("p"):
        try:
            percentile = int(text[1:])
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if not 1 <= percentile <= 99:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return "quantile", percentile / 100
    return "delay", number(0.0, 60.0, low_open=True, unit="s")(text)


def png_path(text: str) -> Path:
    """Where to write a plot: a ``.png`` file in a directory that exists."""
    path = Path(text)
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"expected a file name ending in .png, got {text!r}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the directory {str(path.parent)!r} does not exist")
    return path
