"""The project's promises about itself: CI runs the README's test command, the public API is tidy."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _ci_pythons() -> Any:
    spec = importlib.util.spec_from_file_location("ci_pythons", ROOT / ".ci" / "pythons.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ci_knows_every_claimed_python_version() -> None:
    """.ci/pythons.py reads the versions the classifiers claim, from requires-python's minimum up."""
    claimed = _ci_pythons().claimed_versions()
    assert claimed == ["3.11", "3.12", "3.13"]
    minimum = re.search(r'requires-python = ">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert minimum is not None
    assert claimed[0] == minimum.group(1)


def test_ci_finds_a_working_interpreter_or_none() -> None:
    """An interpreter is only reported if it runs and is the right version; a missing version is None."""
    pythons = _ci_pythons()
    running = "{}.{}".format(*sys.version_info[:2])
    assert pythons._runs(sys.executable, running)
    assert not pythons._runs(sys.executable, "3.99")
    assert pythons.interpreter("3.99") is None


def test_ci_runs_every_check_and_stops_at_the_first_failure() -> None:
    """.ci/run stops on any failure (even before the last "&&"), builds the docs strictly, tests every version."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci
    assert '.venv/bin/python -m pytest || exit $?' in ci
    for check in (".venv/bin/ruff check .", ".venv/bin/mypy --strict", "mkdocs build --strict", ".ci/pythons.py",
                  '"$venv/bin/python" -m pytest'):
        assert check in ci


def test_ci_stops_when_a_step_before_the_last_and_fails(tmp_path: Path) -> None:
    """The "|| exit" idiom that .ci/run uses makes bash stop where set -e alone would carry on."""
    script = tmp_path / "probe"
    script.write_text("set -euo pipefail\nfalse && true || exit $?\necho reached\n", encoding="utf-8")
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "reached" not in result.stdout


def test_the_docs_build_with_the_api_reference() -> None:
    """mkdocs.yml uses mkdocstrings, lists every page, and the API page names every public object."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "mkdocstrings" in config
    for page in (ROOT / "docs").glob("*.md"):
        assert f": {page.name}" in config, f"{page.name} is not in mkdocs.yml's nav"
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in asyncretry.__all__:
        assert f"::: asyncretry.{name}\n" in api, f"asyncretry.{name} is missing from docs/api.md"
    extras = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"mkdocstrings[python]' in extras
    dev = next(line for line in extras.splitlines() if line.strip().startswith('"asyncretry['))
    for extra in ("httpx", "aiohttp", "redis", "grpc", "aws", "otel", "cli", "plot", "docs"):
        assert extra in dev.split("[", 1)[1].split("]", 1)[0].split(","), f"the dev extra lacks {extra}"


def test_the_package_metadata_links_to_the_project() -> None:
    """pyproject's [project.urls] give the wheel its Project-URLs: the source (mkdocs.yml's repo_url), the docs,
    the issues and the changelog."""
    import tomllib

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    repo = re.search(r"^repo_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert repo is not None
    assert urls["Source"] == repo.group(1)
    assert all(url.startswith(repo.group(1)) for url in urls.values())
