"""What the commands share: the error they report, number formats, and matplotlib loaded on demand."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CommandError", "UsageError", "percent", "pyplot", "seconds"]


class CommandError(Exception):
    """A failure to report to the user in one line, with exit status 1 (a missing extra, say)."""


class UsageError(CommandError):
    """Arguments that are valid one by one but not together: reported like argparse's errors, exit status 2."""


def pyplot() -> Any:
    """Return ``matplotlib.pyplot`` on the non-interactive Agg backend.

    Raises:
        CommandError: matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError:
        raise CommandError(
            "--plot needs matplotlib, which comes with the 'plot' extra: pip install 'asyncretry[plot]'"
        ) from None
    matplotlib.use("Agg")  # files only: never open a window, work without a display
    import matplotlib.pyplot as plt

    return plt


def seconds(value: float) -> str:
    """A duration for humans, compact enough for a narrow table cell: ``850ms``, ``1.25s``, ``0``, ``-`` for NaN."""
    if math.isnan(value):
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf"
    if value < 1.0:
        return f"{value * 1000:.3g}ms"
    return f"{value:.3g}s"


def percent(value: float) -> str:
    """A fraction as a percentage with a precision that suits its size: ``0.12%``, ``4.5%``, ``63%``."""
    if math.isnan(value):
        return "-"
    pct = value * 100
    if pct == 0:
        return "0%"
    if pct < 1:
        return f"{pct:.2f}%"
    if pct < 10:
        return f"{pct:.1f}%"
    return f"{pct:.0f}%"
