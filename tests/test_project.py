"""The project's promises about itself: CI runs the README's test command, the public API is tidy."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

import asyncretry

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    """.ci/run contains the README's test command character for character."""
    test_commands = [c for c in _readme_commands() if "pytest" in c]
    assert test_commands, "the README must show the test command"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_commands[0].replace(" -q", "") in ci.replace(" -q", "")


def test_public_names_are_sorted_and_complete() -> None:
    """__all__ is sorted and lists exactly the public names the package imports."""
    exported = asyncretry.__all__
    assert exported == sorted(exported)
    public = {
        name for name in vars(asyncretry)
        if not name.startswith("_") and not isinstance(getattr(asyncretry, name), type(asyncretry))
    } - {"annotations"}
    assert set(exported) == public


def test_the_command_prints_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`asyncretry --version` prints the installed distribution's version and exits 0."""
    from asyncretry._cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"asyncretry {importlib.metadata.version('asyncretry')}"


def test_the_package_version_is_the_distribution_version() -> None:
    """asyncretry.__version__ is the version the package was installed as."""
    assert asyncretry.__version__ == importlib.metadata.version("asyncretry")


def test_the_mit_license_text_ships_at_the_top() -> None:
    """The package declares MIT, and LICENSE holds the MIT license text."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
