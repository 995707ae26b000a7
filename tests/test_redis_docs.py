"""The docs' Python examples that use Redis run as written against the test suite's server, so they cannot rot.

Each ```python block of docs/*.md that uses ``redis://localhost:6379/0`` runs in a fresh namespace with that URL
replaced by the test server's (tests/test_readme.py runs every other block).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest_redis import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

DOCS = Path(__file__).resolve().parent.parent / "docs"
URL = "redis://localhost:6379/0"


def blocks() -> list[tuple[str, int, str]]:
    """``(page, line, code)`` of every ```python block of docs/*.md that uses the Redis URL."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        found += [
            (f"docs/{page.name}", text.count("\n", 0, match.start()) + 2, match.group(1))
            for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
            if URL in match.group(1)
        ]
    return found


BLOCKS = blocks()


def test_the_page_has_a_runnable_example() -> None:
    """docs/redis.md shows at least one complete program (and so the test below runs something)."""
    assert any(page == "docs/redis.md" for page, _, _ in BLOCKS)


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS, ids=[f"{page}:{line}" for page, line, _ in BLOCKS])
def test_example_runs(page: str, line: int, code: str, redis_server: RedisServer) -> None:
    """The example runs to the end against a real server without an error."""
    code = code.replace(URL, redis_server.url)
    compiled = compile("\n" * (line - 1) + code, str(DOCS.parent / page), "exec")
    exec(compiled, {"__name__": f"example_{line}"})
