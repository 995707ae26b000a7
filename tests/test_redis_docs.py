"""docs/redis.md's Python examples run as written against the test suite's server, so they cannot rot.

Each ```python block runs in a fresh namespace with the page's ``redis://localhost:6379/0`` replaced by the
test server's URL (```py blocks are fragments: the engine wiring, a cluster or sentinel address).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest_redis import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.real_time]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "redis.md"


def blocks() -> list[tuple[int, str]]:
    text = PAGE.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


def test_the_page_has_a_runnable_example() -> None:
    """docs/redis.md shows at least one complete program (and so the test below runs something)."""
    assert blocks()


@pytest.mark.parametrize(("line", "code"), blocks(), ids=[f"redis.md:{line}" for line, _ in blocks()])
def test_example_runs(line: int, code: str, redis_server: RedisServer) -> None:
    """The example runs to the end against a real server without an error."""
    code = code.replace("redis://localhost:6379/0", redis_server.url)
    compiled = compile("\n" * (line - 1) + code, str(PAGE), "exec")
    exec(compiled, {"__name__": f"example_{line}"})
