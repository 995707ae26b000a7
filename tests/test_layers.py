"""Imports flow one way: integrations -> engine -> primitives -> base (exceptions, events, validation)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "asyncretry"
INTEGRATIONS = ("httpx", "httpx2", "aiohttp", "redis", "grpc", "aws", "otel", "_cli", "_testserver", "_simulation")


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
        if name.split(".")[0] in ("httpx", "httpx2", "redis", "opentelemetry")
        or any(name.startswith(f"asyncretry.{part}") for part in INTEGRATIONS)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_core_imports_only_anyio() -> None:
    """`import asyncretry` pulls in no optional dependency (the core needs anyio only)."""
    import subprocess
    import sys

    code = (
        "import sys, asyncretry; "
        "print(sorted(m for m in ('httpx', 'httpx2', 'redis', 'opentelemetry', 'rich', 'uvicorn', 'matplotlib', "
        "'trio', 'grpc') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


# ------------------------------------------------------------------------- private names stay at home
def _package_of(path: Path) -> str:
    """The package a file belongs to: ``asyncretry`` for the base modules, else its subpackage."""
    parts = path.relative_to(PACKAGE).parts
    return "asyncretry" if len(parts) == 1 else f"asyncretry.{parts[0]}"


def _module_of(path: Path) -> str:
    return ".".join(("asyncretry", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


ALL_FILES = sorted(PACKAGE.rglob("*.py"))


def _defined_private_names(package: str) -> set[str]:
    """Every ``_name`` a package defines: functions, classes, attributes it assigns, slots."""
    names: set[str] = set()
    for path in ALL_FILES:
        if _package_of(path) != package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_"):
                names.add(node.value)  # __slots__ entries
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _module_of(path).split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_name_crosses_a_package_boundary(path: Path) -> None:
    """A `_name` (function, class, attribute) defined in one package is never imported or used by another:
    packages meet through public names only (the engine's documented integration API for the drivers)."""
    package = _package_of(path)
    own = _defined_private_names(package)
    bad: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(path, node)
            other = not (source == package or source.startswith(package + "."))
            if other and source.startswith("asyncretry"):
                bad += [f"imports {alias.name} from {source}" for alias in node.names
                        if alias.name.startswith("_") and not alias.name.startswith("__")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if node.attr not in own:
                bad.append(f"uses .{node.attr} (line {node.lineno}), not defined in {package}")
    assert not bad, f"{path.relative_to(PACKAGE)}: {bad}"


@pytest.mark.parametrize(
    "path", sorted(path for name in ("httpx", "httpx2", "grpc") for path in (PACKAGE / name).rglob("*.py")),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_the_httpx_transport_uses_the_public_engine_api(path: Path) -> None:
    """The httpx integration imports the engine and the primitives from `asyncretry` itself, never from
    their private modules: it is a driver over the documented integration API."""
    bad = sorted(
        name for name in _imports(path) if name.startswith(("asyncretry._engine", "asyncretry._primitives"))
    )
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", _files("_http"), ids=lambda p: p.name)
def test_the_shared_http_rules_import_no_http_client(path: Path) -> None:
    """The HTTP rules every integration shares import no client (httpx, aiohttp), no integration, and the
    parsers the engine uses (``_retry_after``, ``_body``) import nothing of asyncretry at all."""
    names = _imports(path)
    bad = {
        name for name in names
        if name.split(".")[0] in ("httpx", "httpx2", "aiohttp", "redis", "opentelemetry")
        or any(name.startswith(f"asyncretry.{part}") for part in (*INTEGRATIONS, "aiohttp"))
    }
    if path.name in ("_retry_after.py", "_body.py", "__init__.py"):
        bad |= {name for name in names if name.startswith("asyncretry")}
    assert not bad, f"{path.name} imports {sorted(bad)}"
