"""The project's promises about itself: CI runs the README's test command, the public API is tidy."""

from __future__ import annotations

import re
from pathlib import Path

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
