"""The README's and the docs' Python examples run as written, so they cannot rot.

Each ```python block is executed on its own, in a fresh namespace, offline (the examples talk to
in-memory servers). One liberty is taken: ``anyio.run`` on asyncio gets asyncretry's virtual-time event
loop unless the example chooses its own loop, so the examples' backoff sleeps take no real time. The
results do not change: virtual time is exactly what a real clock would show, without the waiting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncretry.testing import virtual_time_loop

ROOT = Path(__file__).resolve().parent.parent
# The pages whose examples are complete programs (the others hold fragments of their own).
PAGES = [
    "README.md",
    "docs/index.md",
    "docs/quickstart.md",
    "docs/token-bucket.md",
    "docs/retry-quota.md",
    "docs/adaptive-limiter.md",
    "docs/backoff.md",
    "docs/circuit-breaker.md",
    "docs/retry-engine.md",
    "docs/httpx.md",
    "docs/aws.md",
    "docs/testing.md",
    "docs/cli.md",
    "docs/hedging.md",
]


def _blocks(page: str) -> list[tuple[int, str]]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


EXAMPLES = [
    pytest.param(page, line, code, id=f"{page}:{line}")
    for page in PAGES
    if (ROOT / page).exists()
    for line, code in _blocks(page)
]


def test_the_readme_has_examples() -> None:
    """The README shows code (and so this test has something to run)."""
    assert len(_blocks("README.md")) >= 5


def test_the_readme_starts_with_the_two_commands() -> None:
    """The README's first section is "Two commands", and its first command installs and runs the demo."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_section = re.search(r"^## (.+)$", text, re.M)
    assert first_section is not None
    assert first_section.group(1) == "Two commands"
    first_command = re.search(r"```sh\n(.+?)\n```", text)
    assert first_command is not None
    assert first_command.group(1) == (
        'python3 -m venv .venv && .venv/bin/python -m pip install -q -e ".[cli,plot]" && .venv/bin/asyncretry demo'
    )


@pytest.mark.parametrize(("page", "line", "code"), EXAMPLES)
def test_example_runs(page: str, line: int, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example runs to the end without an error (its asserts state what it shows)."""
    real_run: Callable[..., Any] = anyio.run

    def virtual_run(func: Callable[..., Any], *args: Any, backend: str = "asyncio",
                    backend_options: dict[str, Any] | None = None) -> Any:
        options = dict(backend_options or {})
        if backend == "asyncio":
            options.setdefault("loop_factory", virtual_time_loop)
        return real_run(func, *args, backend=backend, backend_options=options)

    monkeypatch.setattr(anyio, "run", virtual_run)
    compiled = compile("\n" * (line - 1) + code, str(ROOT / page), "exec")
    exec(compiled, {"__name__": f"example_{line}"})
