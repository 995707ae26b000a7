"""``asyncretry schedule``: the delay before each retry, for backoff strategies, SNS policies and AWS presets.

Each row shows, for the retry after failed attempt ``n``, the range jitter draws the delay from
(``bounds(n)``); ``--seed`` adds the delays actually drawn with that seed, exactly as the retry engine
draws them (one random number per retry, each delay passed on as the previous one).
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from ._common import UsageError, pyplot
from ._policies import Schedule, resolve

__all__ = ["delays", "run"]

_TITLES = {
    "backoff": "Backoff strategies",
    "sns": "SNS delivery policy: four phases, four backoff functions",
    "aws": "AWS presets",
}


def _limit(schedule: Schedule, attempts: int) -> int:
    """How many of the first ``attempts`` retries the policy makes."""
    return attempts if schedule.retries is None else min(attempts, schedule.retries)


def delays(schedule: Schedule, attempts: int, seed: int | None = None) -> list[tuple[float, float]]:
    """``(low, high)`` bounds of the delay after failed attempts ``1..attempts`` (as far as the policy goes).

    With a seed, both are the delay drawn with ``random.Random(seed)``.
    """
    count = _limit(schedule, attempts)
    if seed is not None:
        drawn = schedule.backoff.schedule(count, random.Random(seed).random)
        return [(d, d) for d in drawn]
    return [schedule.backoff.bounds(n) for n in range(1, count + 1)]


_MOST = "most in all: every retry the policy makes (the n shown when it has no limit of its own)"


def _most_in_all(schedule: Schedule, attempts: int, seed: int | None) -> float:
    """The longest the policy waits in all: over every retry it makes, not only the columns shown."""
    count = attempts if schedule.retries is None else schedule.retries
    return math.fsum(high for _, high in delays(schedule, count, seed))


def _number(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _short(value: float) -> str:
    # ".05" for 0.05: a jitter range of two such numbers still fits a narrow column.
    text = _number(value)
    return text[1:] if text.startswith("0.") else text


def _cell(low: float, high: float) -> str:
    return _number(high) if low == high else f"{_short(low)}-{_short(high)}"


_WIDE = 110  # a terminal this wide shows every name on one line
_NAME_WIDTH = 15


def _hyphen_lines(name: str, width: int) -> str:
    """``name`` in lines of at most ``width`` characters, broken after hyphens only (a word is never split)."""
    lines = [""]
    for part in name.split("-"):
        piece = part if not lines[-1] else f"-{part}"
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines[-1] += "-"
            lines.append(part)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def _table(group: str, schedules: Sequence[Schedule], attempts: int, seeds: Sequence[int], width: int) -> Table:
    table = Table(
        title=f"{_TITLES[group]}: seconds before retry n",
        caption="a-b: jitter draws from a to b (.05 = 0.05 s); -: the policy has given up by then; " + _MOST
        if group != "sns" else
        "nominal delays: SNS's jitter lowers each by up to 10% at random; -: the policy has given up by then; "
        + _MOST,
        title_style="bold", caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=0,
    )
    # About 80 columns for 8 retries: a policy's name may wrap after a hyphen (never inside a word), a delay never.
    table.add_column("policy", style="bold", overflow="fold")
    table.add_column("max\nretries", justify="right", no_wrap=True)
    for n in range(1, attempts + 1):
        table.add_column(str(n), justify="right", no_wrap=True)
    table.add_column("most\nin all", justify="right", no_wrap=True)
    for schedule in schedules:
        bounds = delays(schedule, attempts)
        rows: list[tuple[str, list[tuple[float, float]]]] = [(schedule.name, bounds)]
        shown = schedule.name if width >= _WIDE else _hyphen_lines(schedule.name, _NAME_WIDTH)
        if any(low != high for low, high in bounds):  # a seed changes nothing without jitter
            rows += [(f"  seed {seed}", delays(schedule, attempts, seed)) for seed in seeds]
        for label, values in rows:
            # SNS's jitter is always "up to 10% less": the nominal delay says it all.
            cells = [_number(high) if group == "sns" else _cell(low, high) for low, high in values]
            cells += ["-"] * (attempts - len(cells))
            retries = "" if label != schedule.name else ("any" if schedule.retries is None else f"{schedule.retries:,}")
            seed = None if label == schedule.name else int(label.rpartition(" ")[2])
            most = _number(_most_in_all(schedule, attempts, seed))
            table.add_row(shown if label == schedule.name else label, retries, *cells, most,
                          style="dim" if label != schedule.name else None)
    return table


def _plot(groups: dict[str, list[Schedule]], attempts: int, seeds: Sequence[int], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 3.6 * len(groups)), squeeze=False)
    for ax, (group, schedules) in zip((row[0] for row in axes), groups.items(), strict=True):
        for index, schedule in enumerate(schedules):
            color = f"C{index % 10}"
            bounds = delays(schedule, attempts)
            xs = list(range(1, len(bounds) + 1))
            ax.plot(xs, [high for _, high in bounds], color=color, marker="o", ms=3, lw=1.4, label=schedule.name)
            if any(low != high for low, high in bounds):
                ax.fill_between(xs, [low for low, _ in bounds], [high for _, high in bounds], color=color, alpha=0.12)
            for seed in seeds:
                drawn = delays(schedule, attempts, seed)
                ax.plot(xs, [d for d, _ in drawn], color=color, ls=":", marker="x", ms=4, lw=0.8)
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_xlim(0.5, attempts + 0.5)
        ax.set_xlabel("retry n (after failed attempt n)")
        ax.set_ylabel("delay (s)")
        ax.set_title(_TITLES[group] + (": shaded = the jitter's range, dotted = drawn" if seeds else
                                       ": shaded = the jitter's range"), fontsize=10, loc="left")
        ax.legend(fontsize=7, ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace, console: Console) -> int:
    """Print (and plot) the schedules; returns the exit status."""
    if args.plot is not None:
        pyplot()
    try:
        schedules = resolve(args.policies, args)
    except ValueError as error:
        raise UsageError(str(error)) from None
    groups: dict[str, list[Schedule]] = {}
    for schedule in schedules:
        groups.setdefault(schedule.group, []).append(schedule)
    for group, members in groups.items():
        console.print(_table(group, members, args.attempts, args.seed, console.width))
        for schedule in members:
            console.print(f"  [bold]{schedule.name}[/bold]: {schedule.note}", style="dim")
        console.print()
    if args.plot is not None:
        _plot(groups, args.attempts, args.seed, args.plot)
        console.print(f"Plot written to {args.plot}")
    return 0
