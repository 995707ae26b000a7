"""The traced request's figures in docs/benchmarks.md are what ``benchmarks/trace_hops.py`` prints today.

The trace counts calls, not time, so it is exact on any machine: a change that adds work to a request's
path shows here, and the documented figure cannot go stale.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_trace_is_what_the_trace_prints() -> None:
    """Both lines the script prints (503, 503, 200 and a plain 200) stand verbatim in docs/benchmarks.md."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.trace_hops"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    lines = [line for line in done.stdout.splitlines() if "module switches" in line]
    assert len(lines) == 2
    docs = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for line in lines:
        assert line in docs, f"docs/benchmarks.md should show the trace's line {line.strip()!r}"


def test_a_503_503_200_stays_within_its_budget_of_calls() -> None:
    """Fewer than 133 asyncretry calls and 87 module switches carry a request through 503, 503, 200."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.trace_hops"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    found = re.search(r"503, 503, 200: (\d+) asyncretry calls, (\d+) module switches", done.stdout)
    assert found is not None
    assert int(found[1]) < 133
    assert int(found[2]) < 87
