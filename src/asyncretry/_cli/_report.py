"""How ``demo`` and ``simulate`` show their runs: live progress, the comparison table, the plot."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Table

from ._common import percent, pyplot, seconds
from ._workload import Configuration, RunResult, Tally

__all__ = ["COLUMNS_NOTE", "footnotes", "live_progress", "plot_runs", "results_table"]


WIDE = 120
"""The terminal width from which the progress lines show every counter; narrower, the essential ones."""


def _stats(tally: Tally, *, wide: bool = True) -> str:
    throttled = tally.throttled_attempts / tally.attempts if tally.attempts else 0.0
    if not wide:  # fits an 80-column terminal beside the name and the time, every figure with its label
        text = f"ok {tally.succeeded:>5} failed {tally.failed:>4} 429 {percent(throttled):>5}"
        if tally.fill_rate is not None:
            text += f" limiter {tally.fill_rate:4.0f}/s"
        return text
    text = (
        f"requests {tally.requests:>5} ok {tally.succeeded:>5} failed {tally.failed:>5} "
        f"sends {tally.attempts:>5} 429 {percent(throttled):>5}"
    )
    if tally.fill_rate is not None:
        text += f" limiter {tally.fill_rate:5.1f}/s"
    return text


@contextmanager
def live_progress(
    console: Console, configurations: Sequence[Configuration], duration: float, *, unit: str = "s"
) -> Iterator[Callable[[int], Callable[[Tally], None]]]:
    """Show one progress line per configuration; yields ``tick_for(index)``, the ``on_tick`` of each run.

    From :data:`WIDE` columns a line shows a bar and every counter; narrower (80 columns, say), no bar and
    only successes, failures, the share throttled and the limiter's rate, each with its label, so that no
    line is cut short.
    """
    wide = console.width >= WIDE
    # Narrower than WIDE, the bar goes (the time says as much) so that the labels keep their room.
    bar = [BarColumn(bar_width=16)] if wide else []
    progress = Progress(
        TextColumn("{task.description:<14}"),
        *bar,
        TextColumn("{task.completed:>5.1f}/{task.total:.0f} " + unit),
        TextColumn("{task.fields[stats]}"),
        console=console,
        transient=False,
        refresh_per_second=8,
    )
    tasks: list[TaskID] = [
        progress.add_task(c.name, total=duration, stats="[dim]waiting[/dim]") for c in configurations
    ]

    def tick_for(index: int) -> Callable[[Tally], None]:
        task = tasks[index]

        def on_tick(tally: Tally) -> None:
            progress.update(task, completed=min(tally.elapsed, duration), stats=_stats(tally, wide=wide))

        return on_tick

    with progress:
        yield tick_for
        for task in tasks:
            progress.update(task, completed=duration)


COLUMNS_NOTE = (
    "requests: requests made; ok/s: successful requests per second; share: of the goodput of an ideal "
    "fleet that sends each request when the server can admit it; 429s: share of sends answered 429; "
    "sends/req: sends per request (retries included); trips: breaker trips; p50, p99: latency per request, "
    "retries and waits included; failed: requests that failed."
)
"""What the columns of :func:`results_table` mean, for its caption."""


def results_table(results: Sequence[RunResult], *, title: str, caption: str | None = None) -> Table:
    """The comparison table: one row per configuration, 75 columns wide (cells never wrap inside a number)."""
    table = Table(
        title=title, caption=caption, title_style="bold", caption_justify="left", box=box.SIMPLE_HEAD,
        pad_edge=False, padding=0,
    )
    table.add_column("configuration", style="bold")  # a long label wraps at its spaces; numbers never do
    for header in ("requests", "ok/s", "share", "429s", "sends/\nreq", "trips", "p50", "p99", "failed"):
        table.add_column(header, justify="right", no_wrap=True)
    for r in results:
        table.add_row(
            r.name,
            f"{r.requests}",
            f"{r.goodput:.1f}",
            percent(r.share),
            percent(r.throttled_fraction),
            f"{r.amplification:.2f}x" if r.requests else "-",
            "-" if r.breaker_trips is None else f"{r.breaker_trips}",
            seconds(r.latency(0.5)),
            seconds(r.latency(0.99)),
            f"{r.failed}",
        )
    return table


def footnotes(results: Sequence[RunResult]) -> list[str]:
    """The lines under the table: what the failed requests ended with, and which rules cut the adaptive
    limiters' rate (``LimiterRateChanged.rule``), each configuration's in turn."""
    notes = []
    for heading, counts in (
        ("Failed requests ended with: ", [(r.name, r.failures) for r in results]),
        ("The adaptive limiter's rate was cut by: ", [(r.name, r.cuts) for r in results]),
    ):
        lines = [
            f"{name}: " + ", ".join(f"{what}\u00a0x{n}" for what, n in counted.items())  # a count stays with its name
            for name, counted in counts
            if counted
        ]
        if lines:
            notes.append(heading + "; ".join(lines))
    return notes


def plot_runs(results: Sequence[RunResult], path: Path, *, time_label: str = "time (s)") -> None:
    """Draw, per configuration, the send rate, the goodput, the capacity and the limiter's fill rate over time."""
    plt = pyplot()
    rows = len(results)
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.4 * rows + 0.6), squeeze=False, sharex=True)
    top = 0.0
    for r in results:
        width = r.trace.bin_width
        top = max(top, max((n / width for n in r.trace.arrivals), default=0.0),
                  max(c for _, c in r.scenario.schedule))
    for row, r in enumerate(results):
        ax = axes[row][0]
        width = r.trace.bin_width
        times = [(k + 0.5) * width for k in range(len(r.trace.arrivals))]
        for start, end, capacity in r.scenario.segments():
            if capacity <= 0:
                ax.axvspan(start, end, color="tab:red", alpha=0.12, lw=0)
        ax.plot(times, [n / width for n in r.trace.arrivals], color="tab:blue", lw=1.0, label="send rate")
        ax.plot(times, [n / width for n in r.trace.ok], color="tab:green", lw=1.0, label="goodput")
        steps = [(s, c) for s, _, c in r.scenario.segments()] + [(r.scenario.duration, r.scenario.schedule[-1][1])]
        ax.step([s for s, _ in steps], [c for _, c in steps], where="post", color="black", ls="--", lw=1.2,
                label="capacity")
        if any(not math.isnan(f) for f in r.fill_rate):
            ax.plot([(k + 1) * width for k in range(len(r.fill_rate))], r.fill_rate, color="tab:orange", lw=1.4,
                    label="limiter fill rate")
        ax.set_ylim(0, top * 1.1 + 1)
        ax.set_xlim(0, r.scenario.duration)
        ax.set_ylabel("requests/s")
        ax.set_title(
            f"{r.name}: goodput {r.goodput:.1f}/s, {percent(r.throttled_fraction)} of sends throttled, "
            f"amplification {r.amplification:.2f}x, {r.failed} failed",
            fontsize=9, loc="left",
        )
        ax.legend(loc="upper left", fontsize=7, ncols=4)
    axes[-1][0].set_xlabel(time_label)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
