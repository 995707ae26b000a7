"""Imports flow one way: integrations -> engine -> primitives -> base (exceptions, events, validation)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "asyncretry"
INTEGRATIONS = ("httpx", "redis", "otel", "_cli", "_testserver", "_simulation")


def _imports(path: Path) -> set[str]:
    """The absolute module names a file imports (relative imports resolved inside asyncretry)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("asyncretry", *path.relative_to(PACKAGE).with_suffix("").parts[:-1]))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join([*base, node.module] if node.module else base))
            elif node.module:
                found.add(node.module)
    return found


def _files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).glob("*.py"))


@pytest.mark.parametrize("path", _files("_primitives"), ids=lambda p: p.name)
def test_primitives_import_neither_the_engine_nor_integrations(path: Path) -> None:
    """A primitive knows nothing of the engine, HTTP, Redis or telemetry."""
    bad = {
        name for name in _imports(path)
        if name.startswith("asyncretry._engine") or name.split(".")[0] in ("httpx", "redis", "opentelemetry")
        or any(name.startswith(f"asyncretry.{part}") for part in INTEGRATIONS)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _files("_engine"), ids=lambda p: p.name)
def test_the_engine_imports_no_integration(path: Path) -> None:
    """The engine uses primitives and the base modules only: no httpx, Redis, OpenTelemetry or CLI."""
    bad = {
        name for name in _imports(path)
        if name.split(".")[0] in ("httpx", "redis", "opentelemetry")
        or any(name.startswith(f"asyncretry.{part}") for part in INTEGRATIONS)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_core_imports_only_anyio() -> None:
    """`import asyncretry` pulls in no optional dependency (the core needs anyio only)."""
    import subprocess
    import sys

    code = (
        "import sys, asyncretry; "
        "print(sorted(m for m in ('httpx', 'redis', 'opentelemetry', 'rich', 'uvicorn', 'matplotlib', 'trio') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
