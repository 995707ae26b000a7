"""docs/api.md, the API reference, names every public module and every public name, so none goes undocumented."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import asyncretry

PAGE = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def _public_modules() -> list[str]:
    """``asyncretry`` and its submodules without a leading underscore anywhere in their path."""
    found = ["asyncretry"]
    for module in pkgutil.walk_packages(asyncretry.__path__, "asyncretry."):
        if not any(part.startswith("_") for part in module.name.split(".")[1:]):
            found.append(module.name)
    return found


def _documented() -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)\s*$", PAGE.read_text(encoding="utf-8"), re.M))


def test_the_public_modules_are_found() -> None:
    """The walk finds the public submodules users import by path (so the test below covers them)."""
    assert {"asyncretry.httpx", "asyncretry.redis", "asyncretry.otel", "asyncretry.testing"} <= set(_public_modules())


def test_every_public_module_and_name_is_in_the_api_reference() -> None:
    """Each name of each public module's ``__all__`` is rendered by docs/api.md (``::: module.Name``, or the whole
    module by ``::: module``), and nothing rendered there is missing from the code."""
    documented = _documented()
    missing = [
        f"{module}.{name}"
        for module in _public_modules()
        if module not in documented
        for name in importlib.import_module(module).__all__
        if f"{module}.{name}" not in documented and name != "__version__"
    ]
    assert missing == []
    for reference in documented:
        module, _, name = reference.rpartition(".")
        if reference in _public_modules():
            continue
        assert module in _public_modules(), reference
        assert name in importlib.import_module(module).__all__, reference
