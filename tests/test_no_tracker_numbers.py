"""Code, docs, tests and benchmarks cite no issue numbers: users cannot see the project's tracker.

A reference to another project's tracker names that project (``encode/httpcore#1093``, ``httpcore #1093``),
so it reads as what it is; anything that looks like a citation of our own tracker fails this test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("src", "tests", "benchmarks", "docs", "tools", "examples")
TOP_FILES = ("README.md", "CHANGELOG.md", "mkdocs.yml", "pyproject.toml")
SUFFIXES = {".py", ".md", ".lua", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini"}

CITATIONS = re.compile(
    r"\b(?:issues?|pull requests?|PRs?|tickets?)[ \t]*(?:no\.?[ \t]*)?#?\d+"  # the word and a number
    r"|\b(?:see|fixes|fixed|closes|closed|resolves|per|cf\.?)[ \t]+#\d+"  # a verb and a bare #N
    r"|\(#\d+\)",  # a bare (#N)
    re.IGNORECASE,
)


def _files() -> list[Path]:
    found = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for folder in FOLDERS:
        found += [path for path in sorted((ROOT / folder).rglob("*"))
                  if path.is_file() and path.suffix in SUFFIXES and ".venv" not in path.parts]
    return [path for path in found if path != Path(__file__).resolve()]  # its own table holds examples


@pytest.mark.parametrize("path", _files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_file_cites_an_issue_number(path: Path) -> None:
    """No issue, pull-request or ticket number of our tracker appears in the file."""
    bad = [
        f"line {number}: {match.group(0)!r}"
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1)
        for match in CITATIONS.finditer(line)
    ]
    assert not bad, f"{path.relative_to(ROOT)} cites {bad}"


@pytest.mark.parametrize(
    ("text", "cites"),
    [
        ("Issue 17, a sixth look", True),
        ("fixed in issue #28", True),
        ("a regression (#31)", True),
        ("see #12 for the history", True),
        ("upstream: encode/httpcore#1093", False),
        ("attempt #2 answered first", False),
        ('"#1 ConnectionResetError, #2 ConnectionResetError"', False),
    ],
)
def test_the_pattern_tells_citations_from_attempt_numbers(text: str, cites: bool) -> None:
    """The check finds citations of our tracker and leaves attempt numbers and upstream references alone."""
    assert bool(CITATIONS.search(text)) is cites
