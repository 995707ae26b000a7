"""The docs' code blocks work as pasted: complete Python programs, each saying what it needs installed.

tests/test_readme.py executes every ```python block of the README and of docs/*.md (those that talk to
``redis://localhost:6379/0`` run in tests/test_redis_docs.py against the suite's own server). This file
pins what makes that possible and what a reader needs besides: no Python fragment in a fence that is not
run (```py), no top-level ``await``, and every package that does not come with asyncretry named in the
block (``# needs: pip install trio``), every extra on the page (``pip install 'asyncretry[httpx]'``).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs").glob("*.md"))]
REDIS_URL = "redis://localhost:6379/0"
"""Blocks that use this URL need a Redis server: tests/test_redis_docs.py runs them against the suite's own."""

# Fence languages that are not Python (shell commands, sample output, queries).
OTHER_LANGUAGES = {"sh", "text", "promql", "toml", "yaml", "json", "ini"}

# What a block's imports need beyond asyncretry and anyio: an extra of asyncretry (named on the page), or
# another distribution (named in the block itself).
EXTRAS = {"httpx": "httpx", "asyncretry.httpx": "httpx", "httpx2": "httpx2", "asyncretry.httpx2": "httpx2",
          "redis": "redis", "asyncretry.redis": "redis",
          "asyncretry.otel": "otel", "opentelemetry": "otel", "asyncretry.aiohttp": "aiohttp", "aiohttp": "aiohttp",
          "asyncretry.grpc": "grpc", "grpc": "grpc", "asyncretry.aws": "aws"}
OTHERS = {"trio": "trio", "pytest": "pytest", "prometheus_client": "prometheus-client",
          "opentelemetry.sdk": "opentelemetry-sdk", "opentelemetry.exporter.prometheus":
          "opentelemetry-exporter-prometheus", "botocore": "botocore", "aiobotocore": "aiobotocore",
          "respx": "respx", "fastapi": "fastapi", "uvicorn": "uvicorn", "openai": "openai",
          "anthropic": "anthropic"}


def _fences(page: str) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of every fenced block of the page."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1), match.group(2))
        for match in re.finditer(r"^```([\w-]*)\n(.*?)^```", text, re.S | re.M)
    ]


BLOCKS = [(page, line, language, code) for page in PAGES for line, language, code in _fences(page)]
PYTHON = [
    pytest.param(page, line, code, id=f"{page}:{line}")
    for page, line, language, code in BLOCKS if language == "python"
]


def _imports(code: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _needs(module: str, table: dict[str, str]) -> str | None:
    """The entry of ``table`` for ``module`` or its longest listed parent package."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in table:
            return table[name]
    return None


def test_every_block_is_python_that_runs_or_another_language() -> None:
    """Every fence names its language, and Python is always ```python (run by the tests), never a ```py fragment."""
    wrong = [f"{page}:{line} ```{language}" for page, line, language, _ in BLOCKS
             if language != "python" and language not in OTHER_LANGUAGES]
    assert wrong == []
    assert len(PYTHON) >= 40


@pytest.mark.parametrize(("page", "line", "code"), PYTHON)
def test_a_block_is_a_complete_program(page: str, line: int, code: str) -> None:
    """A block compiles as a module: no top-level ``await`` (it would fail as pasted into a file)."""
    compile("\n" * (line - 1) + code, str(ROOT / page), "exec", dont_inherit=True)


@pytest.mark.parametrize(("page", "line", "code"), PYTHON)
def test_a_block_says_what_it_needs_installed(page: str, line: int, code: str) -> None:
    """A package that does not come with asyncretry is named in the block (``# needs: pip install trio``), and
    an extra of asyncretry on the page (``pip install 'asyncretry[httpx]'``)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = []
    for module in sorted(_imports(code)):
        if module.partition(".")[0] in sys.stdlib_module_names:
            continue
        other = _needs(module, OTHERS)
        if other is not None:
            if not re.search(rf"# needs: pip install .*\b{re.escape(other)}\b", code):
                missing.append(f"{module}: say '# needs: pip install {other}' in the block")
            continue
        extra = _needs(module, EXTRAS)
        if extra is not None and not re.search(rf"asyncretry\[[\w,]*\b{extra}\b", text):
            missing.append(f"{module}: the page must say pip install 'asyncretry[{extra}]'")
    assert missing == []


def test_blocks_that_need_redis_are_run_against_a_server() -> None:
    """Blocks using the Redis URL are the ones tests/test_redis_docs.py runs (and test_readme.py leaves out)."""
    import test_readme
    import test_redis_docs

    with_redis = {(page, line) for page, line, language, code in BLOCKS if language == "python" and REDIS_URL in code}
    assert with_redis
    assert with_redis == {(page, line) for page, line, _ in test_redis_docs.BLOCKS}
    assert not with_redis & {(param.values[0], param.values[1]) for param in test_readme.EXAMPLES}
