"""The README's and every docs page's Python examples run as written, so they cannot rot.

Each ```python block is executed on its own, in a fresh namespace, offline (the examples talk to
in-memory servers). One liberty is taken: ``anyio.run`` on asyncio gets a virtual-time event loop unless
the example chooses its own loop, so the examples' backoff sleeps take no real time. So that an example
cannot depend on virtual time's exactness (which a user running it would not have), that loop fires every
timer late by a random 0 to 2 ms, as a real event loop does.
"""

from __future__ import annotations

import random
import re
import selectors
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncretry.testing import VirtualTimeEventLoop

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs").glob("*.md"))]
REDIS_URL = "redis://localhost:6379/0"
"""Examples that use this URL need a Redis server: tests/test_redis_docs.py runs them against the suite's own."""


class _LateSelector:
    """Wraps the virtual loop's selector: each jump to a timer lands 0 to 2 ms late, like a real loop's wakeups."""

    def __init__(self, inner: selectors.BaseSelector, loop: VirtualTimeEventLoop, rng: random.Random) -> None:
        self._inner = inner
        self._loop = loop
        self._rng = rng

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        before = self._loop.time()
        ready = self._inner.select(timeout)
        if self._loop.time() > before:
            self._loop._virtual_now += self._rng.uniform(0.0, 0.002)
        return ready

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def late_virtual_time_loop() -> VirtualTimeEventLoop:
    """asyncretry's virtual-time loop, with timers that fire a little late as in real time."""
    loop = VirtualTimeEventLoop(start=1000.0)
    loop._selector = _LateSelector(loop._selector, loop, random.Random(0))  # type: ignore[attr-defined]
    return loop


def _blocks(page: str) -> list[tuple[int, str]]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


EXAMPLES = [
    pytest.param(page, line, code, id=f"{page}:{line}")
    for page in PAGES
    for line, code in _blocks(page)
    if REDIS_URL not in code
]


def test_every_docs_page_is_covered() -> None:
    """Every page of docs/ is in the list of pages whose examples run."""
    assert {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")} <= set(PAGES)
    assert len(EXAMPLES) >= 20


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
            options.setdefault("loop_factory", late_virtual_time_loop)
        return real_run(func, *args, backend=backend, backend_options=options)

    monkeypatch.setattr(anyio, "run", virtual_run)
    compiled = compile("\n" * (line - 1) + code, str(ROOT / page), "exec")
    exec(compiled, {"__name__": f"example_{line}"})
