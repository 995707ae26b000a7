"""The ``asyncretry`` command: ``demo``, ``schedule`` and ``simulate``.

Only the argument parser lives here, so that ``asyncretry --help`` works without the ``cli`` extra; each
command's module (and with it httpx, rich, uvicorn, matplotlib) is imported when the command runs.

Exit status: 0 on success, 2 for bad arguments (the message names the argument), 1 for any other error
(a missing extra, say), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ._args import capacity_schedule, choice_list, hedge_after, integer, number, png_path
from ._common import CommandError, UsageError

__all__ = ["build_parser", "main"]

_CONFIGURATIONS = ("none", "naive", "standard", "adaptive", "budget")
_DEFAULT_CONFIGURATIONS = _CONFIGURATIONS[:4]  # the budget is asked for by name (the demo stays under a minute)
_LAYOUTS = ("shared", "independent")  # as asyncretry._simulation.LAYOUTS, without importing it for --help
_EXTRA_MODULES = {"httpx": "cli", "rich": "cli", "uvicorn": "cli", "matplotlib": "plot"}


class _Formatter(argparse.HelpFormatter):
    """Wraps every text to the terminal's width, never inside a word, and shows real defaults as typed.

    argparse's own wrapping breaks at hyphens (``standard-2026-`` / ``throttling``); the names of policies
    and options must stay whole, so lines break at spaces only.
    """

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False,
            break_long_words=False,
        )

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default is None or default is argparse.SUPPRESS or "(default" in text:
            return text
        if isinstance(default, (tuple, list)):
            if not default:
                return text
            default = ",".join(map(str, default))
        return f"{text} (default: {default})"


def _limiter_profiles() -> tuple[str, ...]:
    from .._primitives._limiter_config import PROFILES

    return tuple(PROFILES)


def _default_profile() -> str:
    from .._primitives._limiter_config import AdaptiveLimiterConfig

    return AdaptiveLimiterConfig().profile


def _scenarios() -> tuple[str, ...]:
    from .._simulation import SCENARIOS

    return ("demo", *SCENARIOS)


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``asyncretry`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="asyncretry",
        description="See what asyncretry does: a live demo, delay schedules, and simulations in virtual time.",
        epilog="Run 'asyncretry COMMAND --help' for a command's options.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="compare no retries, naive retries, standard and adaptive mode against a live local server",
        description=(
            "Start a local HTTP server (127.0.0.1) whose capacity changes over time, that throttles above it "
            "(429 + Retry-After), fails a few requests (503) and has a short outage; drive concurrent clients "
            "through asyncretry's httpx transport in each configuration in turn, and compare them."
        ),
        formatter_class=_Formatter,
    )
    demo.add_argument("--clients", type=integer(1, 500), default=50, help="concurrent clients")
    demo.add_argument("--duration", type=number(0.5, 600, unit="s"), default=12.0,
                      help="seconds per configuration")
    demo.add_argument("--rate", type=number(0.0, 50, low_open=True), default=2.0,
                      help="requests per second each client wants")
    demo.add_argument("--configs", type=choice_list(_CONFIGURATIONS), default=_DEFAULT_CONFIGURATIONS,
                      help="which configurations to run, comma-separated, from: " + ", ".join(_CONFIGURATIONS))
    # The demo shows the two presets (RetryPolicy.adaptive() and aws_adaptive()); other profiles on request.
    demo.add_argument("--profile", type=choice_list(_limiter_profiles()), default=("asyncretry", "aws"),
                      help="the adaptive limiter's profile(s), comma-separated, from: "
                      + ", ".join(_limiter_profiles()))
    demo.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="seed of the jitter and the failures")
    demo.add_argument("--breaker", action=argparse.BooleanOptionalAction, default=True,
                      help="give the standard, adaptive and budget configurations the demo's circuit breaker; "
                      "--no-breaker shows what the quota, the limiter or the budget alone do in an outage")
    demo.add_argument("--layout", choices=_LAYOUTS, default="shared",
                      help="shared: the clients share one retrying transport (one limiter); independent: one each")
    demo.add_argument("--plot", type=png_path, metavar="FILE.png",
                      help="also draw send rate, capacity and the limiter's fill rate over time (needs matplotlib)")
    demo.set_defaults(module="_demo", parser=demo)

    schedule = commands.add_parser(
        "schedule",
        help="print (and plot) the delays between retries of backoff strategies and presets",
        description=(
            "Print the delay before each retry of backoff strategies, the SNS delivery policy's four backoff "
            "functions and the AWS presets: the range jitter can pick from, and with --seed the delays drawn. "
            "POLICY names a strategy, a preset or a group (backoff, sns, aws, all)."
        ),
        formatter_class=_Formatter,
    )
    from ._policies import GROUPS, POLICY_NAMES

    schedule.add_argument("policies", nargs="*", metavar="POLICY", type=choice_list((*GROUPS, *POLICY_NAMES)),
                          help="what to show: " + ", ".join((*GROUPS, *POLICY_NAMES)) + " (default: all)")
    schedule.add_argument("--attempts", type=integer(1, 100), default=8,
                          help="show the delays after failed attempts 1..N")
    schedule.add_argument("--seed", type=integer(0, 2**32 - 1), action="append", default=[],
                          help="also draw the delays with this seed (repeatable)")
    group = schedule.add_argument_group("backoff parameters (exponential, decorrelated, fixed, linear)")
    group.add_argument("--initial", type=number(0, 3600, unit="s"), default=1.0,
                       help="exponential: the first cap; linear: the first delay")
    group.add_argument("--multiplier", type=number(1, 100), default=2.0, help="exponential growth factor")
    group.add_argument("--max-delay", type=number(0, 86400, low_open=True, unit="s"), default=20.0,
                       help="the largest delay")
    group.add_argument("--base", type=number(0, 3600, low_open=True, unit="s"), default=1.0,
                       help="decorrelated jitter: the smallest delay")
    group.add_argument("--increment", type=number(0, 3600, unit="s"), default=1.0, help="linear: the step")
    group.add_argument("--delay", type=number(0, 3600, unit="s"), default=1.0, help="fixed: the delay")
    sns = schedule.add_argument_group("SNS delivery policy parameters")
    sns.add_argument("--min-delay-target", type=number(1, 3600, unit="s"), default=1.0, help="minDelayTarget")
    sns.add_argument("--max-delay-target", type=number(1, 3600, unit="s"), default=60.0, help="maxDelayTarget")
    sns.add_argument("--num-retries", type=integer(0, 100), default=8, help="numRetries")
    sns.add_argument("--no-delay-retries", type=integer(0, 100), default=1, help="numNoDelayRetries")
    sns.add_argument("--min-delay-retries", type=integer(0, 100), default=1, help="numMinDelayRetries")
    sns.add_argument("--max-delay-retries", type=integer(0, 100), default=1, help="numMaxDelayRetries")
    sns.add_argument("--sns-json", metavar="JSON", help="an SNS delivery policy as JSON text, or @FILE to read one "
                     "(replaces the parameters above)")
    schedule.add_argument("--plot", type=png_path, metavar="FILE.png",
                          help="also draw the schedules (needs matplotlib)")
    schedule.set_defaults(module="_schedule", parser=schedule)

    simulate = commands.add_parser(
        "simulate",
        help="the demo's comparison in virtual time: minutes of traffic in seconds",
        description=(
            "Run the demo's clients and server logic in virtual time (no sockets, no waiting): minutes of "
            "traffic in seconds of compute, to choose settings before production. The server is the demo's "
            "(--scenario demo, scaled to the demand) or one of the adaptive-limiter scenarios, or --capacity."
        ),
        formatter_class=_Formatter,
    )
    simulate.add_argument("--scenario", choices=_scenarios(), default="demo", metavar="SCENARIO",
                          help="the server's capacity script, from: " + ", ".join(_scenarios()))
    simulate.add_argument("--capacity", type=capacity_schedule, metavar="START:RATE,...",
                          help="a capacity script instead of --scenario, e.g. 0:100,60:0,65:50 (rate 0: outage)")
    simulate.add_argument("--duration", type=number(1, 86400, unit="s"),
                          help="virtual seconds per configuration (default: the scenario's; 120 for demo)")
    simulate.add_argument("--clients", type=integer(1, 10_000), default=50, help="concurrent clients")
    simulate.add_argument("--rate", type=number(0.0, 1000, low_open=True), default=2.0,
                          help="requests per second each client wants")
    simulate.add_argument("--latency", type=number(0, 60, unit="s"), default=0.02,
                          help="the server's service time")
    simulate.add_argument("--transient", type=number(0, 1), default=0.03,
                          help="the fraction of served requests that fail with 503")
    simulate.add_argument("--configs", type=choice_list(_CONFIGURATIONS), default=_DEFAULT_CONFIGURATIONS,
                          help="which configurations to run, comma-separated, from: " + ", ".join(_CONFIGURATIONS))
    simulate.add_argument("--profile", type=choice_list(_limiter_profiles()), default=(_default_profile(),),
                          help="adaptive limiter profiles to compare, comma-separated, from: "
                          + ", ".join(_limiter_profiles()))
    simulate.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="seed of the jitter and the failures")
    simulate.add_argument("--breaker", action=argparse.BooleanOptionalAction, default=True,
                      help="give the standard, adaptive and budget configurations the demo's circuit breaker; "
                      "--no-breaker shows what the quota, the limiter or the budget alone do in an outage")
    simulate.add_argument("--slow", type=number(0, 1), default=0.0,
                          help="the fraction of served requests that take 20x the service time (a latency tail)")
    simulate.add_argument("--hedge", type=hedge_after, metavar="SECONDS|pNN",
                          help="also run each configuration that retries with hedged requests: a second send after "
                          "SECONDS without an answer, or after the NN-th percentile of recent latencies (p90); "
                          "at most 10%% extra requests")
    simulate.add_argument("--rate-limit", type=number(0.0, 100_000, low_open=True), metavar="RATE",
                          help="also run each configuration behind a fixed rate limit of RATE requests/s with a "
                          "burst of one call (per client with --layout independent), as a service that knows its "
                          "quota sets")
    simulate.add_argument("--layout", choices=_LAYOUTS, default="shared",
                          help="shared: the clients share one retrying transport (one limiter); independent: "
                          "one each, like separate processes")
    simulate.add_argument("--plot", type=png_path, metavar="FILE.png",
                          help="also draw send rate, capacity and the limiter's fill rate over time")
    simulate.set_defaults(module="_simulate", parser=simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``asyncretry`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # reported by the subcommand's parser, so that the usage shown is the subcommand's
            getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exit_:  # argparse exits for --help (0) and for bad arguments (2)
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.command == "schedule":
        args.policies = [name for names in args.policies for name in names]
    try:
        return _dispatch(args)
    except UsageError as error:
        sub: argparse.ArgumentParser = args.parser
        sub.print_usage(sys.stderr)
        print(f"{sub.prog}: error: {error}", file=sys.stderr)
        return 2
    except CommandError as error:
        print(f"asyncretry {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"asyncretry {args.command}: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    import importlib

    try:
        module: Any = importlib.import_module(f"{__name__}.{args.module}")
        from rich.console import Console
    except ImportError as error:
        top = (error.name or "").partition(".")[0]
        if top in _EXTRA_MODULES:
            extra = _EXTRA_MODULES[top]
            raise CommandError(
                f"needs {top}, which comes with the '{extra}' extra: pip install 'asyncretry[{extra}]'"
            ) from None
        raise
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 120  # piped or captured: rich would assume 80 columns and squeeze the tables
    status: int = module.run(args, console)
    return status
