"""The ``asyncretry`` command: exit codes, messages that name the bad argument, and what each command shows."""

from __future__ import annotations

import asyncio
import io
import random
import re
import socket
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from rich.console import Console

from asyncretry import (
    GLOBAL_EVENTS,
    AdaptiveLimiterConfig,
    BreakerStateChanged,
    DeliveryPolicy,
    ExponentialBackoff,
    RetryPolicy,
)
from asyncretry._cli import build_parser, main
from asyncretry._cli._args import capacity_schedule
from asyncretry._cli._policies import GROUPS, option_names, resolve
from asyncretry._cli._possible import ideal_sends, possible_successes
from asyncretry._cli._report import live_progress
from asyncretry._cli._schedule import delays
from asyncretry._cli._server import DemoServer, demo_scenario, listening_socket
from asyncretry._cli._workload import RunResult, Tally, Workload, configurations, run_configuration
from asyncretry._simulation import Scenario, SimulatedServer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(params=[80, 200], ids=["80-columns", "200-columns"])
def width(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The terminal width the command sees: the tables must read the same at 80 columns as at 200."""
    columns: int = request.param
    monkeypatch.setenv("COLUMNS", str(columns))
    return columns


def row(out: str, label: str) -> list[str]:
    """The cells of the table row that starts with ``label`` (no cell holds a space but the label): the last
    such line, after the progress lines; lines that describe ``label:`` are not rows."""
    line = [
        line for line in out.splitlines()
        if line.strip().startswith(label) and not line.strip()[len(label):].startswith(":")
    ][-1]
    return [label, *line.strip()[len(label):].split()]


def assert_fits(out: str, width: int) -> None:
    """No line of the output is wider than the terminal."""
    assert max(len(line) for line in out.splitlines()) <= width


# --- exit codes and argument errors


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` of the command and of every subcommand exits with status 0 and names the subcommands."""
    status, out, _ = run(capsys, "--help")
    assert status == 0
    assert all(name in out for name in ("demo", "schedule", "simulate"))
    for command in ("demo", "schedule", "simulate"):
        assert run(capsys, command, "--help")[0] == 0


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a subcommand the command shows its help on stderr and exits with status 2."""
    status, out, err = run(capsys)
    assert status == 2
    assert "demo" in err
    assert out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--clients", "0"], "argument --clients: must be an integer from 1 to 500, got 0"),
        (["demo", "--clients", "many"], "argument --clients: expected an integer"),
        (["demo", "--duration", "0.1"], "argument --duration: must be a number >= 0.5 and <= 600 s"),
        (["demo", "--duration", "nan"], "argument --duration: must be a number"),
        (["demo", "--rate", "0"], "argument --rate: must be a number > 0"),
        (["demo", "--configs", "standard,bogus"], "argument --configs: unknown name(s) bogus"),
        (["demo", "--profile", "fast"], "argument --profile: unknown name(s) fast"),
        (["demo", "--plot", "out.jpg"], "argument --plot: expected a file name ending in .png"),
        (["demo", "--plot", "/no/such/dir/out.png"], "argument --plot: the directory '/no/such/dir' does not exist"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
        (["schedule", "nonsense"], "argument POLICY: unknown name(s) nonsense"),
        (["schedule", "--attempts", "0"], "argument --attempts: must be an integer from 1 to 100"),
        (["schedule", "--initial", "0"], "argument --initial: must be > 0"),
        (["schedule", "exponential", "--initial", "30"], "argument --max-delay: must be >= --initial (30 s)"),
        (["schedule", "sns", "--num-retries", "2"], "<= --num-retries (2)"),
        (["schedule", "sns", "--sns-json", "{not json"], "argument --sns-json: the delivery policy is not valid JSON"),
        (["schedule", "sns", "--sns-json", '{"x": 1}'], "argument --sns-json: unknown key"),
        (["simulate", "--scenario", "flat"], "argument --scenario: invalid choice: 'flat'"),
        (["simulate", "--capacity", "5:100"], "argument --capacity: the first start time must be 0, got 5"),
        (["simulate", "--capacity", "0:100,10:50,5:20"], "argument --capacity: start times must increase"),
        (["simulate", "--capacity", "0:-1"], "argument --capacity: expected START:RATE pairs"),
        (["simulate", "--capacity", "0:100,60:0", "--duration", "30"],
         "argument --duration: must be longer than the last change of --capacity (60 s), got 30"),
        (["simulate", "--scenario", "step-down", "--duration", "60"],
         "argument --duration: must be longer than the last change of --scenario step-down (60 s)"),
        (["simulate", "--hedge", "p100"], "argument --hedge: expected seconds (> 0 and <= 60) or a percentile"),
        (["simulate", "--hedge", "0"], "argument --hedge: must be a number > 0 and <= 60 s, got 0"),
        (["simulate", "--slow", "2"], "argument --slow: must be a number >= 0 and <= 1, got 2"),
        (["simulate", "--rate-limit", "0"], "argument --rate-limit: must be a number > 0 and <= 100000, got 0"),
        (["simulate", "--rate-limit", "fast"],
         "argument --rate-limit: expected a number > 0 and <= 100000, got 'fast'"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """A bad argument exits with status 2, prints the usage and a message that names the argument, runs nothing."""
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert message in err
    assert "error:" in err
    assert err.startswith(f"usage: asyncretry {argv[0]}")
    assert out == ""


def test_missing_plot_extra_exits_1_saying_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--plot`` without matplotlib fails before doing any work, with status 1 and the pip command to run."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, out, err = run(capsys, "schedule", "fixed", "--plot", str(tmp_path / "s.png"))
    assert status == 1
    assert "pip install 'asyncretry[plot]'" in err
    assert out == ""
    assert not (tmp_path / "s.png").exists()


def test_missing_cli_extra_exits_1_saying_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command whose libraries are missing exits with status 1 and names the extra to install."""
    for name in [n for n in sys.modules if n.startswith(("rich", "asyncretry._cli._"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)
    status, _, err = run(capsys, "schedule")
    assert status == 1
    assert "needs rich" in err
    assert "pip install 'asyncretry[cli]'" in err


# --- schedule


@pytest.mark.parametrize("command", ["schedule", "simulate", "demo"])
def test_help_wraps_to_the_terminal_and_never_inside_a_name(
    capsys: pytest.CaptureFixture[str], width: int, command: str
) -> None:
    """``--help`` fills the terminal's width (no line breaks written into the texts) and breaks lines at spaces
    only, so a name such as ``standard-2026-throttling`` stays whole."""
    status, out, _ = run(capsys, command, "--help")
    assert status == 0
    assert_fits(out, width)
    description = out.split("\n\n")[1]  # the paragraph after the usage
    lines = description.splitlines()
    assert all(len(line) > width - 25 for line in lines[:-1])  # filled, not wrapped at a fixed width
    words = set(out.split())
    if command == "schedule":
        assert {"standard-2026-throttling,", "sns-customer-managed,", "exponential-reduce,"} <= words
    assert not any(word.endswith("-") and len(word) > 1 for word in words)  # nothing broken after a hyphen


def test_schedule_most_in_all_sums_every_retry_the_policy_makes(capsys: pytest.CaptureFixture[str]) -> None:
    """"most in all" is the sum of every retry's longest delay, not of the columns shown: SNS's policy for AWS
    endpoints makes 100,015 retries, most of them 20 s apart."""
    status, out, _ = run(capsys, "schedule", "sns-aws-managed", "sns-linear", "exponential")
    assert status == 0
    aws = DeliveryPolicy.aws_managed_endpoints()
    assert row(out, "sns-aws-managed")[1] == "100,015"
    assert row(out, "sns-aws-managed")[-1] == f"{aws.total_delay():,.0f}"  # 2,000,159 s
    assert row(out, "exponential")[-1] == "91"  # no limit of its own: the 8 retries shown, 1+2+4+8+16+20+20+20


def test_configurations_without_the_breaker() -> None:
    """``breaker=False`` (``--no-breaker``) leaves the demo's breaker out of every configuration that has one."""
    names = ["standard", "adaptive", "budget"]
    assert all(c.policy.breaker is not None for c in configurations(names))
    assert all(c.policy.breaker is None for c in configurations(names, breaker=False))
    assert all("breaker" not in c.description for c in configurations(names, breaker=False))


def test_the_documented_quota_and_budget_comparison_tells_them_apart(capsys: pytest.CaptureFixture[str]) -> None:
    """The docs' ``--configs standard,budget --no-breaker`` run through an outage shows the quota and the budget
    apart: the budget keeps retrying (more sends per request) where the quota has run dry."""
    status, out, _ = run(
        capsys, "simulate", "--configs", "standard,budget", "--no-breaker", "--capacity", "0:40,10:0,20:40",
        "--duration", "30", "--clients", "20",
    )
    assert status == 0
    standard, budget = row(out, "standard"), row(out, "budget")
    assert standard[6] == budget[6] == "-"  # no breaker, no trips
    assert float(budget[5].rstrip("x")) > float(standard[5].rstrip("x"))


def test_schedule_shows_the_jitter_range_and_the_drawn_delays(capsys: pytest.CaptureFixture[str], width: int) -> None:
    """A row shows the range jitter draws from for each retry; ``--seed`` adds the delays the engine would draw."""
    status, out, _ = run(capsys, "schedule", "standard-2020", "--attempts", "4", "--seed", "7")
    assert status == 0
    assert_fits(out, width)
    # policy, retries, delays 1..4, total: standard mode makes 2 retries, so 3 and 4 are "-"
    assert row(out, "standard-2020") == ["standard-2020", "2", "0-1", "0-2", "-", "-", "3"]
    rng = random.Random(7).random
    first, second = rng() * 1.0, rng() * 2.0
    seeded = next(line for line in out.splitlines() if "seed 7" in line)
    assert f"{first:.3g}" in seeded
    assert f"{second:.3g}" in seeded
    assert "U(0,1) x min(2^(n-1), 20) s" in out


def test_schedule_all_shows_every_kind_preset_and_sns_function(capsys: pytest.CaptureFixture[str], width: int) -> None:
    """Without arguments, schedule shows the backoff kinds, SNS's four functions and presets, and the AWS presets,
    each delay whole on its line (a number never wraps)."""
    status, out, _ = run(capsys, "schedule", "--seed", "3")
    assert status == 0
    assert_fits(out, width)
    for name in GROUPS["all"]:
        assert name in out.replace("\n", "").replace(" ", "") or name in out
    assert row(out, "qldb")[1:] == ["4", ".01-.02", ".02-.04", ".04-.08", ".08-.16", "-", "-", "-", "-", "0.3"]
    assert "Backoff strategies" in out
    assert "SNS delivery policy" in out
    assert "AWS presets" in out


def test_schedule_rows_match_the_strategies() -> None:
    """The delays schedule shows are the strategies' own bounds and draws (the engine's sequence for a seed)."""
    from argparse import Namespace

    from asyncretry._cli import build_parser

    args: Namespace = build_parser().parse_args(["schedule"])
    rows = {s.name: s for s in resolve(["backoff", "sns"], args)}
    exponential = rows["exponential"]
    assert exponential.backoff == ExponentialBackoff(initial=1.0, multiplier=2.0, max_delay=20.0)
    assert delays(exponential, 3) == [(0.0, 1.0), (0.0, 2.0), (0.0, 4.0)]
    assert [d for d, _ in delays(exponential, 3, seed=3)] == exponential.backoff.schedule(3, random.Random(3).random)
    linear = rows["sns-linear"].backoff
    assert isinstance(linear, DeliveryPolicy)
    assert [d for _, d in delays(rows["sns-linear"], 100)] == linear.schedule(100)
    assert len(delays(rows["sns-linear"], 100)) == linear.num_retries  # never past the policy's retries
    functions = ("linear", "arithmetic", "geometric", "exponential")
    sns = [rows[f"sns-{f}"].backoff for f in functions]
    assert [p.backoff_function for p in sns if isinstance(p, DeliveryPolicy)] == list(functions)


def test_schedule_reads_an_sns_json_policy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--sns-json @FILE`` reads SNS's JSON delivery policy and shows its phases."""
    policy = tmp_path / "policy.json"
    policy.write_text(
        '{"healthyRetryPolicy": {"minDelayTarget": 2, "maxDelayTarget": 10, "numRetries": 4,'
        ' "numNoDelayRetries": 1, "backoffFunction": "linear"}}'
    )
    status, out, _ = run(capsys, "schedule", "sns-linear", "--sns-json", f"@{policy}", "--attempts", "5")
    assert status == 0
    assert row(out, "sns-linear")[:7] == ["sns-linear", "4", "0", "2", "6", "10", "-"]


def test_schedule_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``schedule --plot FILE.png`` writes a PNG image."""
    path = tmp_path / "schedule.png"
    status, out, _ = run(capsys, "schedule", "--seed", "1", "--plot", str(path))
    assert status == 0
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert f"Plot written to {path}" in out.replace("\n", "")


def test_option_names_rewrites_parameter_names() -> None:
    """Library validation messages are reworded to name the command-line options."""
    assert option_names("max_delay must be >= initial (30 s), got 20.0") == (
        "argument --max-delay: must be >= --initial (30 s), got 20.0"
    )


# --- simulate


def test_simulate_prints_the_comparison_table(capsys: pytest.CaptureFixture[str], tmp_path: Path, width: int) -> None:
    """simulate runs each configuration in virtual time and prints one table row each, with every column,
    within the terminal's width."""
    path = tmp_path / "sim.png"
    status, out, _ = run(
        capsys, "simulate", "--duration", "20", "--clients", "5", "--configs", "none,naive,standard,adaptive",
        "--profile", "aws", "--plot", str(path),
    )
    assert status == 0
    assert_fits(out, width)
    for header in ("configuration", "requests", "ok/s", "share", "429s", "sends/", "trips", "p50", "p99", "failed"):
        assert header in out
    rows = {label: row(out, label) for label in ("no retries", "naive retries", "standard", "aws adaptive")}
    assert all(len(cells) == 10 for cells in rows.values())
    none = rows["no retries"]
    assert none[5] == "1.00x"  # no retries: one send per request
    assert int(none[1]) == 20 * 5 * 2  # requests: 5 clients x 2/s x 20 s, each answered within the run
    assert "20 virtual s per configuration" in out.replace("\n", "")
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_simulate_runs_a_custom_capacity_script(capsys: pytest.CaptureFixture[str]) -> None:
    """``--capacity`` sets the server's capacity script; the run covers the given duration."""
    status, out, _ = run(
        capsys, "simulate", "--capacity", "0:20,5:0,7:20", "--duration", "10", "--clients", "4", "--configs", "standard"
    )
    assert status == 0
    assert "an outage (every request 503) from 5 s" in out.replace("\n", " ")
    assert "standard" in out


def test_simulate_compares_hedged_twins_against_a_slow_tail(capsys: pytest.CaptureFixture[str]) -> None:
    """--hedge p90 adds a hedged twin of each configuration that retries; against --slow 0.05 its p99 is shorter."""
    status, out, _ = run(
        capsys, "simulate", "--scenario", "steady", "--duration", "30", "--clients", "10", "--rate", "2",
        "--transient", "0", "--slow", "0.05", "--configs", "none,standard", "--hedge", "p90",
    )
    assert status == 0
    rows = {line.split("  ")[0].strip(): line.split() for line in out.splitlines()
            if line.strip().startswith(("no retries", "standard")) and line.rstrip().endswith(" 0")}  # table rows
    assert list(rows)[:3] == ["no retries", "standard", "standard + hedging"]  # "no retries" has none to spare
    assert "400ms" in rows["standard"]
    assert "40ms" in rows["standard + hedging"]  # a tenth of the p99 without hedging


def test_simulate_runs_each_configuration_behind_a_known_quota(
    capsys: pytest.CaptureFixture[str], width: int
) -> None:
    """--rate-limit adds, after each configuration, its twin behind a fixed rate limit at the server's 100/s
    (burst one call): with twice that demand, standard mode is throttled and the twin never is, one send per
    request, served at the quota."""
    status, out, _ = run(
        capsys, "simulate", "--scenario", "steady", "--duration", "10", "--clients", "50", "--rate", "4",
        "--transient", "0", "--configs", "standard", "--rate-limit", "100",
    )
    assert status == 0
    assert_fits(out, width)
    table = out[out.index("configuration"):]
    standard, limited = row(table, "standard "), row(table, "standard @ 100/s")
    assert table.index("standard @ 100/s") > table.index("standard ")
    assert standard[4] != "0%"  # 429s
    assert limited[4] == "0%"
    assert limited[5] == "1.00x"  # sends/req
    assert float(limited[2]) >= 99.0  # ok/s: the quota's



def test_simulate_names_the_rules_that_cut_each_adaptive_limiters_rate(
    capsys: pytest.CaptureFixture[str], width: int
) -> None:
    """Under the table, one line lists the cuts of each adaptive configuration's rate by rule (each count
    kept with its rule at any width); configurations without a limiter have none."""
    status, out, _ = run(
        capsys, "simulate", "--duration", "20", "--clients", "5", "--configs", "standard,adaptive",
        "--profile", "aws,fair",
    )
    assert status == 0
    assert_fits(out, width)
    flat = re.sub(r"[ \n]+", " ", out[out.index("The adaptive limiter's rate was cut by:"):])
    cuts = dict(re.findall(r"(\w+)\u00a0x(\d+)", flat))
    assert "aws adaptive: cubic_throttle\u00a0x" in flat
    assert "fair adaptive: decrease\u00a0x" in flat
    assert set(cuts) == {"cubic_throttle", "decrease"}
    assert all(int(n) > 0 for n in cuts.values())
    assert "standard:" not in flat


# --- the demo's parts


def test_demo_scenario_scales_with_demand() -> None:
    """The demo's capacity script: room to spare, a cut to half the demand, an outage, room again; scaled to the
    demand and the duration (2 s of outage in the default 12 s)."""
    scenario = demo_scenario(12.0, 100.0)
    assert scenario.schedule == ((0.0, 150.0), (3.0, 50.0), (6.0, 0.0), (8.0, 150.0))
    assert scenario.duration == 12.0
    with pytest.raises(ValueError, match="duration"):
        demo_scenario(0.0, 100.0)


@pytest.mark.anyio
async def test_demo_server_throttles_fails_and_has_an_outage() -> None:
    """The server admits its capacity, answers 429 + Retry-After above it, 503 during the outage."""
    scenario = Scenario(name="t", schedule=((0.0, 10.0), (1.0, 0.0), (2.0, 10.0)), duration=3.0)
    server = DemoServer(scenario, transient=0.0, latency=0.01, burst=0.5)
    server.start()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle), base_url="http://t") as client:
        first = [await client.get("/") for _ in range(6)]
        statuses = [r.status_code for r in first]
        assert statuses == [200] * 5 + [429]  # a bucket of 0.5 s x 10/s admits 5 at once
        assert first[-1].headers["retry-after"] == "1"
        import anyio

        await anyio.sleep(1.2 - 0.05)
        assert (await client.get("/")).status_code == 503  # the outage
        await anyio.sleep(1.0)
        assert (await client.get("/")).status_code == 200
    assert sum(server.trace.arrivals) == 8
    assert sum(server.trace.throttled) == 1
    assert sum(server.trace.failed) == 1


@pytest.mark.anyio
async def test_demo_server_fails_the_given_fraction_transiently() -> None:
    """With ``transient=1`` every admitted request fails with 503; with 0 none does."""
    scenario = Scenario(name="t", schedule=((0.0, 1000.0),), duration=1.0)
    for transient, status in ((1.0, 503), (0.0, 200)):
        server = DemoServer(scenario, transient=transient, latency=0.0)
        server.start()
        async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle), base_url="http://t") as client:
            assert {(await client.get("/")).status_code for _ in range(5)} == {status}


def test_run_result_figures() -> None:
    """Amplification is sends per request, latency quantiles are nearest-rank, goodput is per second."""
    scenario = Scenario(name="t", schedule=((0.0, 10.0), (5.0, 0.0)), duration=10.0)
    server = DemoServer(scenario)
    result = RunResult(
        name="x", scenario=scenario, workload=Workload(clients=2, rate=10.0, duration=10.0), requests=4,
        succeeded=3, failures={"429": 1}, attempts=6, retries=2, throttled_attempts=3, breaker_trips=None,
        latencies=(0.1, 0.2, 0.3, 0.4), trace=server.trace, cuts={}, fill_rate=(), possible=4,
    )
    assert result.amplification == 1.5
    assert result.throttled_fraction == 0.5
    assert result.goodput == 0.3
    assert result.possible_goodput == 0.4
    assert result.share == 0.75
    assert result.latency(0.5) == 0.2
    assert result.latency(0.99) == 0.4
    assert result.failed == 1


def test_capacity_schedule_parses_pairs() -> None:
    """``START:RATE,...`` parses to (seconds, requests per second) pairs."""
    assert capacity_schedule("0:100, 60:0,65:50.5") == ((0.0, 100.0), (60.0, 0.0), (65.0, 50.5))


# --- the demo itself, on the real network (127.0.0.1)


@pytest.mark.real_time
def test_demo_runs_and_prints_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A tiny demo against the local server exits 0 and prints one row per configuration, and the plot."""
    path = tmp_path / "demo.png"
    status, out, err = run(
        capsys, "demo", "--duration", "1", "--clients", "3", "--configs", "none,adaptive", "--plot", str(path)
    )
    assert status == 0, err
    assert "server: http://127.0.0.1:" in out
    assert len(row(out, "no retries")) == len(row(out, "adaptive")) == 10
    for header in ("configuration", "requests", "ok/s", "share", "429s", "sends/", "trips", "p50", "p99", "failed"):
        assert header in out
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_simulate_compares_a_retry_budget_with_the_quota(capsys: pytest.CaptureFixture[str]) -> None:
    """--configs standard,budget runs standard mode with the quota and with a retry budget instead."""
    status, out, _ = run(capsys, "simulate", "--duration", "8", "--clients", "4", "--configs", "standard,budget")
    assert status == 0
    labels = [line.split()[0] for line in out.splitlines() if line.strip().startswith(("standard ", "budget "))]
    assert "standard" in labels
    assert "budget" in labels


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_live_progress_lines_are_never_cut_short_at_any_width(width: int) -> None:
    """Each configuration's progress line fits the terminal: every counter from 120 columns, the essential
    ones (successes, failures, the share throttled, the limiter's rate) below that; nothing ends in an ellipsis."""
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    configs = configurations(["none", "naive", "standard", "adaptive"])
    tally = Tally(elapsed=12.0, requests=11940, succeeded=11930, attempts=12940, throttled_attempts=4400,
                  fill_rate=1234.5)
    with live_progress(console, configs, 12.0) as tick_for:
        for index in range(len(configs)):
            tick_for(index)(tally)
    lines = [line for line in console.file.getvalue().splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert len(lines) >= len(configs)
    for line in lines[-len(configs):]:
        assert len(line) <= width
        assert "…" not in line
        assert all(figure in line for figure in ("11930", "34%", "1234"))
    assert any("requests" in line for line in lines) == (width >= 120)


def test_the_progress_lines_keep_their_labels_at_80_columns_on_a_terminal() -> None:
    """On an 80-column terminal every progress line keeps its name and each figure's label, the longest
    configuration name (adaptive with two profiles) included."""
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    configs = configurations(["none", "standard", "adaptive", "budget"], profiles=("aws", "asyncretry"))
    tally = Tally(elapsed=12.0, requests=99999, succeeded=99990, attempts=99999, throttled_attempts=4400,
                  fill_rate=1234.5)
    with live_progress(console, configs, 12.0) as tick_for:
        for index in range(len(configs)):
            tick_for(index)(tally)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", console.file.getvalue())  # type: ignore[attr-defined]
    final = [line for line in text.replace("\r", "\n").splitlines() if "12.0/12" in line][-len(configs):]
    for config, line in zip(configs, final, strict=True):
        assert len(line) <= 80
        assert line.startswith(config.name)
        assert all(label in line for label in ("ok 99990", "failed", "429", "limiter 1234/s"))


# --- the share's yardstick: what an ideal fleet of the same clients gets


def test_possible_successes_is_the_demand_when_capacity_is_to_spare() -> None:
    """With capacity to spare, the ideal fleet gets every request it wants: clients x rate x duration."""
    scenario = Scenario(name="t", schedule=((0.0, 100.0),), duration=10.0)
    assert possible_successes(scenario, clients=2, rate=10.0, burst=0.2, latency=0.01) == 2 * 10 * 10


def test_possible_successes_is_the_capacity_and_the_burst_when_capacity_is_short() -> None:
    """Below the demand, the ideal fleet gets the bucket's burst and then one request per token."""
    scenario = Scenario(name="t", schedule=((0.0, 10.0), (5.05, 0.0)), duration=10.0)
    # 2 tokens at the start (0.2 s of 10/s), one every 0.1 s until 5.05 s (50), nothing in the outage
    assert possible_successes(scenario, clients=4, rate=10.0, burst=0.2, latency=0.0) == 2 + 50


def test_possible_successes_counts_what_waited_for_a_rise() -> None:
    """Requests that waited while the capacity was short are served once it rises, on top of the demand: the
    capacity capped by the demand, stretch by stretch, is not an upper bound, the ideal fleet's count is."""
    scenario = Scenario(name="t", schedule=((0.0, 10.0), (5.0, 100.0)), duration=10.0)
    capped = sum(min(c, 40.0) * (end - start) for start, end, c in scenario.segments())  # 50 + 200
    possible = possible_successes(scenario, clients=20, rate=2.0, burst=0.2, latency=0.0)
    assert possible >= capped + 20  # each of the 20 clients had a request waiting at the rise


def test_the_ideal_fleet_is_never_throttled() -> None:
    """Replayed through the demo server's own token bucket, every send of the ideal fleet is admitted."""
    scenario = demo_scenario(12.0, 100.0)
    sends = ideal_sends(scenario, clients=50, rate=2.0, burst=0.2, latency=0.02)
    bucket = SimulatedServer(scenario, burst=0.2)
    assert len(sends) == possible_successes(scenario, clients=50, rate=2.0, burst=0.2, latency=0.02) > 800
    assert all(bucket.admit(sent) for sent in sends)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["none", "naive", "standard", "adaptive", "budget"])
async def test_no_configuration_beats_the_ideal_fleet(name: str) -> None:
    """On the demo's server (in virtual time), every configuration's successes stay within the possible ones."""
    result = await _demo_run(name, seed=1)
    assert 0.8 < result.share <= 1.0


@pytest.mark.anyio
@pytest.mark.parametrize("seed", [0, 3])
async def test_the_demo_breaker_trips_once_early_in_the_outage_and_closes_soon_after_it(seed: int) -> None:
    """The demo's breaker does the same at every seed: it trips within 0.3 s of the outage's start, stays open
    through it, closes within 0.5 s of its end and never trips elsewhere; adaptive's share is at least 90%."""
    events: list[BreakerStateChanged] = []
    undo = GLOBAL_EVENTS.subscribe(lambda e: events.append(e) if isinstance(e, BreakerStateChanged) else None)
    try:
        start = anyio.current_time()
        result = await _demo_run("adaptive", seed=seed)
    finally:
        undo()
    trips = [e.time - start for e in events if (e.old_state, e.new_state) == ("closed", "open")]
    closes = [e.time - start for e in events if e.new_state == "closed"]
    assert result.breaker_trips == len(trips) == 1
    assert 6.0 < trips[0] < 6.3  # the outage: 6 s to 8 s of 12
    assert len(closes) == 1
    assert 8.0 < closes[0] < 8.5
    assert result.share >= 0.9


def test_the_demo_shows_both_adaptive_presets_by_name() -> None:
    """By default the demo runs asyncretry's adaptive mode and the SDKs' exact one, each named as its preset."""
    args = build_parser().parse_args(["demo", "--configs", "standard,adaptive"])
    rows = configurations(args.configs, profiles=args.profile)
    assert [config.name for config in rows] == ["standard", "adaptive", "aws adaptive"]
    assert rows[1].policy.limiter_config == RetryPolicy.adaptive().limiter_config
    assert rows[2].policy.limiter_config == RetryPolicy.aws_adaptive().limiter_config


def test_the_demo_names_a_profile_other_than_the_presets_after_it() -> None:
    """--profile fair gives a row named "fair adaptive", not a second row named "adaptive"."""
    rows = configurations(["adaptive"], profiles=("asyncretry", "fair"))
    assert [config.name for config in rows] == ["adaptive", "fair adaptive"]
    assert rows[1].policy.limiter_config == AdaptiveLimiterConfig(profile="fair")


async def _demo_run(name: str, *, seed: int) -> RunResult:
    """One configuration of the default demo (50 clients, 2/s, 12 s) against the demo's server, in memory."""
    workload = Workload(clients=50, rate=2.0, duration=12.0, seed=seed)
    server = DemoServer(demo_scenario(12.0, workload.demand), rng=random.Random(seed).random)
    (configuration,) = configurations([name], profiles=("asyncretry",))
    return await run_configuration(configuration, workload, server, httpx.MockTransport(server.handle), "http://t")


@pytest.mark.real_time
def test_the_demo_server_turns_nagles_algorithm_off_on_its_connections() -> None:
    """Answers on kept-alive connections are not held back: every connection the demo server accepts has
    TCP_NODELAY (with Nagle's algorithm on, the body sent after the headers waits for the client's delayed ACK,
    about 40 ms, however fast the server is)."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        listening = listening_socket()
        server = await loop.create_server(Probe, sock=listening)
        try:
            _, writer = await asyncio.open_connection(*listening.getsockname())
            nodelay = await asyncio.wait_for(accepted, 10)
            writer.close()
        finally:
            server.close()
        return nodelay

    assert asyncio.run(main()) != 0
