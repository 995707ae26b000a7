"""What a simulated run says: the targets it misses, a table of runs side by side, and a plot of the traces.

The runs themselves are :mod:`asyncretry._simulation`'s (which re-exports these functions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._simulation import SimulationResult

__all__ = ["format_table", "plot_results", "target_failures"]


def target_failures(result: SimulationResult) -> list[str]:
    """The adaptive limiter's targets (meant for N = 50) that a run misses; empty if it meets them all.

    One shared limiter: goodput >= 93% of ``C`` over the whole run and >= 97% in steady
    state (>= 90% for ``C`` = 1,000), <= 1% of sends throttled, reconverged within 8 s after the start
    and every change, fairness >= 0.95. Independent limiters, one per worker: goodput
    >= 97%, <= 15% of sends throttled, fairness >= 0.90, and no worker without a success.
    """
    m = result.metrics
    checks: tuple[tuple[bool, str], ...]
    if result.layout == "independent":
        idle = sum(1 for n in result.worker_successes if n == 0)
        checks = (
            (m.goodput >= 0.97, f"goodput {m.goodput:.1%} < 97%"),
            (m.throttled <= 0.15, f"throttled {m.throttled:.2%} > 15%"),
            (m.fairness >= 0.90, f"fairness {m.fairness:.3f} < 0.90"),
            (idle == 0, f"{idle} workers without a success"),
        )
    else:
        steady = 0.90 if result.scenario.name == "c1000" else 0.97
        checks = (
            (m.goodput >= 0.93, f"goodput {m.goodput:.1%} < 93%"),
            (m.steady_goodput >= steady, f"steady goodput {m.steady_goodput:.1%} < {steady:.0%}"),
            (m.throttled <= 0.01, f"throttled {m.throttled:.2%} > 1%"),
            (max(m.reconverge, default=0.0) <= 8.0, f"reconverged after {_seconds(m.reconverge)} s, not <= 8 s"),
            (m.fairness >= 0.95, f"fairness {m.fairness:.3f} < 0.95"),
        )
    run = f"{result.scenario.name} N={result.workers} {result.label} ({result.layout})"
    return [f"{run}: {why}" for ok, why in checks if not ok]


# --- output


def _seconds(values: Sequence[float]) -> str:
    return " / ".join("never" if math.isinf(v) else f"{v:.1f}" for v in values)


def format_table(results: Sequence[SimulationResult]) -> str:
    """One row per run: the figures and the goodput's distance from the physical limit.

    "reconverge" lists the start first, then each later change (step, end of an outage).
    """
    header = (
        f"{'scenario':<10} {'N':>3} {'client':<10} {'layout':<11} {'goodput':>8} {'steady':>7} {'throttled':>9} "
        f"{'reconverge (s)':>14} {'fairness':>8} {'max wait':>8} {'vs limit':>8}"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        m = r.metrics
        lines.append(
            f"{r.scenario.name:<10} {r.workers:>3} {r.label:<10} {r.layout:<11} {m.goodput:>8.1%} "
            f"{m.steady_goodput:>7.1%} {m.throttled:>9.2%} {_seconds(m.reconverge):>14} {m.fairness:>8.3f} "
            f"{m.longest_wait:>7.1f}s {(m.goodput - m.limit) * 100:>+7.1f}%"
        )
    return "\n".join(lines)


def _smooth(values: Sequence[float], span: int) -> list[float]:
    # A centred moving average: single bins are too noisy to read at a glance.
    half = span // 2
    out: list[float] = []
    for k in range(len(values)):
        window = values[max(0, k - half) : k + half + 1]
        out.append(sum(window) / len(window))
    return out


def plot_results(results: Sequence[SimulationResult], path: str) -> None:
    """Save a figure of send rate, goodput, fill rate and capacity over time: a row per scenario and
    N, a column per client (the physical limit is left out: it is the capacity line).

    Needs matplotlib (the ``plot`` extra), which is imported here only.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows: dict[tuple[str, int], list[SimulationResult]] = {}
    for r in results:
        if r.label != "limit":
            rows.setdefault((r.scenario.name, r.workers), []).append(r)
    if not rows:
        raise ValueError("results must contain at least one simulated run")
    columns = max(len(runs) for runs in rows.values())
    fig, axes = plt.subplots(
        len(rows), columns, figsize=(7.0 * columns, 2.4 * len(rows)), squeeze=False, sharex=True
    )
    for row, ((name, workers), runs) in enumerate(rows.items()):
        for column, r in enumerate(runs):
            ax = axes[row][column]
            times = r.times()
            per_second = 1.0 / r.bin_width
            span = max(1, round(0.5 / r.bin_width))
            ax.plot(times, [s * per_second for s in _smooth(r.sends, span)], lw=0.7, color="tab:blue",
                    label="send rate")
            ax.plot(times, [s * per_second for s in _smooth(r.successes, span)], lw=0.7, color="tab:green",
                    label="goodput")
            ax.plot(times, r.fill_rate, lw=0.9, color="tab:orange", label="fill rate")
            ax.plot(times, [r.scenario.capacity_at(t - r.bin_width) for t in times], lw=1.0, color="black",
                    ls="--", label="capacity C")
            ax.set_ylim(0, 1.6 * max(c for _, c in r.scenario.schedule))
            m = r.metrics
            ax.set_title(
                f"{name}, N={workers}, {r.label}: goodput {m.goodput:.1%}, throttled {m.throttled:.2%}",
                fontsize=9,
            )
            ax.set_ylabel("requests/s", fontsize=8)
            ax.tick_params(labelsize=7)
        for column in range(len(runs), columns):
            axes[row][column].set_visible(False)
    for column in range(columns):
        axes[-1][column].set_xlabel("virtual time (s)", fontsize=8)
    axes[0][0].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
