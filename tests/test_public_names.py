"""Public objects are found by their public paths without import-time tricks, and still pickle and type-check.

Nothing rewrites ``__module__`` or annotations when asyncretry is imported: every object says where it is
defined, our own reprs and messages name classes without their module, and the API reference points
mkdocstrings at the public paths (``::: asyncretry.RetryPolicy``).
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import re
import sys
import typing
from pathlib import Path

import pytest

import asyncretry
from asyncretry import (
    BreakerState,
    CircuitBreaker,
    CircuitBreakerConfig,
    ExponentialBackoff,
    OutcomeKind,
    Retrier,
    RetryPolicy,
    RetryQuota,
    RetryQuotaConfig,
)

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"

PUBLIC = [
    name for name in asyncretry.__all__
    if isinstance(getattr(asyncretry, name), type) or inspect.isfunction(getattr(asyncretry, name))
]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_objects_say_where_they_are_defined(name: str) -> None:
    """Every public class and function keeps the __module__ of the module that defines it."""
    obj = getattr(asyncretry, name)
    assert getattr(sys.modules[obj.__module__], obj.__qualname__) is obj


def test_the_package_does_not_rewrite_objects_at_import() -> None:
    """asyncretry/__init__.py assigns no __module__ or __annotations__ (nothing to go wrong at import)."""
    source = Path(asyncretry.__file__).read_text(encoding="utf-8")
    assert "__module__ =" not in source
    assert "__annotations__ =" not in source


def test_dataclass_reprs_name_the_class_only() -> None:
    """A configuration's repr is ClassName(field=value, ...), with no module path."""
    assert repr(RetryQuotaConfig()).startswith("RetryQuotaConfig(max_capacity=500, ")


@pytest.mark.parametrize(
    "value",
    [
        Retrier(RetryPolicy()),
        RetryPolicy(),
        CircuitBreaker(CircuitBreakerConfig()),
        RetryQuota(RetryQuotaConfig()),
        OutcomeKind.THROTTLING,
        BreakerState.HALF_OPEN,
    ],
)
def test_reprs_print_no_private_module_path(value: object) -> None:
    """The reprs users see in logs and debuggers never show asyncretry._private paths."""
    assert "asyncretry._" not in repr(value)


@pytest.mark.parametrize(
    "value",
    [
        RetryPolicy(),
        RetryPolicy.aws_adaptive(breaker=CircuitBreakerConfig()),
        RetryQuotaConfig.profile("2026"),
        ExponentialBackoff.aws_standard(),
        OutcomeKind.THROTTLING,
        BreakerState.HALF_OPEN,
    ],
)
def test_configurations_and_enums_pickle(value: object) -> None:
    """Configurations and enums survive a pickle round trip as equal values."""
    assert pickle.loads(pickle.dumps(value)) == value


CLASSES = [name for name in PUBLIC if isinstance(getattr(asyncretry, name), type)]
# Their annotations name a class whose module imports theirs (the engine's drivers and the retrier):
# those names are imported for type checkers only, so they resolve among the public names.
IN_AN_IMPORT_CYCLE = {"Attempt", "Attempts", "ScopeStatistics", "SyncAttempts"}


@pytest.mark.parametrize("name", sorted(set(CLASSES) - IN_AN_IMPORT_CYCLE))
def test_type_hints_resolve(name: str) -> None:
    """typing.get_type_hints works on every public class, in the module that defines it."""
    typing.get_type_hints(getattr(asyncretry, name))


@pytest.mark.parametrize("name", CLASSES)
def test_type_hints_resolve_among_the_public_names(name: str) -> None:
    """typing.get_type_hints works on every public class given the public namespace."""
    typing.get_type_hints(getattr(asyncretry, name), localns=vars(asyncretry))


def _documented() -> list[str]:
    return re.findall(r"^::: (\S+)$", API_PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)


@pytest.mark.parametrize("path", _documented())
def test_the_api_reference_documents_public_paths(path: str) -> None:
    """Every ``:::`` entry of docs/api.md is a public path (no ``_private`` part) that resolves."""
    assert not any(part.startswith("_") for part in path.split("."))
    try:
        importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name)
