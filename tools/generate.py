"""Write the generated twins of hand-written modules, so that each rule has one source.

Two kinds of job, run in the order of ``JOBS`` (a later job reads what an earlier one wrote):

- ``Unasync``: the sync twin of every module in an ``_async`` folder, written to the ``_sync`` folder beside it,
  by `unasync <https://github.com/python-trio/unasync>`_ (``async def`` -> ``def``, ``await`` dropped,
  ``__aenter__`` -> ``__enter__``, plus the job's own name replacements).
- ``Rename``: a copy of a package with some names replaced token by token (tokenize-rt), such as the httpx
  integration served to httpx2, a package with the same API under another name. The same names are replaced
  as whole words in strings and comments too (docstrings, messages), so that the copy speaks of its own
  package; ``exclude`` leaves modules out of the copy.

Every generated file starts with a comment naming its source, and has its imports sorted by ruff.
``tests/test_generated.py`` runs ``python tools/generate.py --check``, which fails when a generated file is
not what its source gives.

Usage: python tools/generate.py [--check]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import tokenize_rt
import unasync

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "asyncretry"
HEADER = "# Generated from {source} by tools/generate.py:\n# edit that file, then run `python tools/generate.py`.\n"
_HEADER_LINES = HEADER.count("\n")


@dataclass(frozen=True)
class Unasync:
    """The sync twin of every module under ``package/_async``, written to ``package/_sync``."""

    package: str  # relative to src/asyncretry, e.g. "_engine"
    replacements: Mapping[str, str] = field(default_factory=dict)
    # Words replaced in strings and comments, where class names ``AsyncX`` then become ``X`` too (unasync leaves
    # docstrings and messages alone); none: strings and comments are left as unasync writes them.
    text_replacements: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rename:
    """A copy of package ``source`` as package ``target``, with the names in ``replacements`` replaced."""

    source: str
    target: str
    replacements: Mapping[str, str] = field(default_factory=dict)
    exclude: frozenset[str] = frozenset()  # paths relative to source, e.g. "_sync/_fetch.py"


JOBS: list[Unasync | Rename] = [
    # the driver and the executor: Attempts -> SyncAttempts
    Unasync("_engine", {"Attempts": "SyncAttempts", "AsyncWaits": "SyncWaits", "run_hedged": "refuse_hedging"}),
    # The sync httpx transport is the async one unasynced; where the two modes differ, the async source calls
    # the async function of a pair (httpx/_modes.py, _peek.py, _streams.py) and the sync twin calls the other.
    Unasync("httpx", {
        "AsyncRetryTransport": "RetryTransport",
        "AsyncBaseTransport": "BaseTransport",
        "AsyncHTTPTransport": "HTTPTransport",
        "AsyncRetryError": "AsyncRetryError",
        "handle_async_request": "handle_request",
        "aread": "read",
        "aclose": "close",
        "Attempts": "SyncAttempts",
        "attempts": "sync_attempts",
        "check_async_policy": "check_sync_policy",
        "send_hedged": "refuse_hedging",
        "async_sender": "sync_sender",
        "peek_async": "peek_sync",
        "discard": "discard_sync",
    }, text_replacements={
        "handle_async_request": "handle_request", "aclose": "close", "AsyncRetryError": "AsyncRetryError",
        "an async transport": "a sync transport",
    }),
    # The httpx2 integration is the httpx one with the package's name replaced: one source for both.
    Rename("httpx", "httpx2", {"httpx": "httpx2", "as_httpx_error": "as_httpx2_error"}),
]


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _with_header(text: str, source: Path) -> str:
    return _sort_imports(HEADER.format(source=_relative(source)) + text)


def _sort_imports(text: str) -> str:
    """``text`` with its imports sorted as ruff sorts them (a replaced name can move in its import list)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "I", "--fix", "--quiet", "--stdin-filename",
         str(SRC / "generated.py"), "-"],
        input=text, capture_output=True, text=True, check=False, cwd=ROOT,
    )
    if not done.stdout:
        raise RuntimeError(f"ruff could not sort the imports of a generated module: {done.stderr}")
    return done.stdout


def _unasync(job: Unasync, files: dict[Path, str]) -> dict[Path, str]:
    folder = SRC / job.package / "_async"
    sources = sorted(path for path in files if path.parent == folder and path.suffix == ".py")
    out: dict[Path, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        for path in sources:
            copy = base / "_async" / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(files[path], encoding="utf-8")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=dict(job.replacements))
        unasync.unasync_files([str(base / "_async" / p.name) for p in sources], rules=[rule])
        for path in sources:
            text = (base / "_sync" / path.name).read_text(encoding="utf-8")
            if job.text_replacements:  # a job that asks for it: its strings and comments too
                text = _unasync_text(text, job.text_replacements)
            out[folder.parent / "_sync" / path.name] = _with_header(text, path)
    return out


def _unasync_text(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with, in its strings and comments, ``AsyncX`` class names as ``X`` and ``replacements`` made."""
    words = _words([*map(re.escape, replacements), r"Async(?=[A-Z])\w+"])

    def sync(match: re.Match[str]) -> str:
        word = match.group(0)
        return replacements.get(word, word.removeprefix("Async"))

    tokens = tokenize_rt.src_to_tokens(text)
    return tokenize_rt.tokens_to_src(
        [token._replace(src=words.sub(sync, token.src)) if token.name in _TEXT_TOKENS else token for token in tokens]
    )


_TEXT_TOKENS = frozenset({"STRING", "COMMENT", "FSTRING_MIDDLE"})


def _words(patterns: Iterable[str]) -> re.Pattern[str]:
    """Any of ``patterns`` as a whole word: not a part of a longer name, nor of a hyphenated one
    ("httpx-retries")."""
    return re.compile(r"(?<![\w-])(?:" + "|".join(patterns) + r")(?![\w-])")


def _rename_token(token: tokenize_rt.Token, replacements: Mapping[str, str], words: re.Pattern[str]) -> str:
    """A token's text with the names replaced: the whole token for a name, whole words in strings and comments."""
    if token.name == "NAME":
        return str(replacements.get(token.src, token.src))
    if token.name in _TEXT_TOKENS:
        return words.sub(lambda match: replacements[match.group(0)], str(token.src))
    return str(token.src)


def _rename(job: Rename, files: dict[Path, str], origins: dict[Path, Path]) -> dict[Path, str]:
    source, target = SRC / job.source, SRC / job.target
    words = _words(map(re.escape, job.replacements))
    out: dict[Path, str] = {}
    for path in sorted(p for p in files if p.is_relative_to(source) and p.suffix == ".py"):
        if path.relative_to(source).as_posix() in job.exclude:
            continue
        text = files[path]
        if text.startswith("# Generated from "):  # a generated file (a sync twin): copied without its header
            text = text.split("\n", _HEADER_LINES)[_HEADER_LINES]
        tokens = tokenize_rt.src_to_tokens(text)
        renamed = [token._replace(src=_rename_token(token, job.replacements, words)) for token in tokens]
        copy = target / path.relative_to(source)
        origins[copy] = origins.get(path, path)
        out[copy] = _with_header(tokenize_rt.tokens_to_src(renamed), origins[copy])
    return out


def generate() -> dict[Path, str]:
    """Every generated file's path and text, computed from the sources in the tree."""
    files = {path: path.read_text(encoding="utf-8") for path in SRC.rglob("*.py")}
    generated: dict[Path, str] = {}
    origins: dict[Path, Path] = {}  # a generated file's hand-written source, the one to edit
    for job in JOBS:
        if isinstance(job, Unasync):
            made = _unasync(job, files)
            origins.update({path: SRC / job.package / "_async" / path.name for path in made})
        else:
            made = _rename(job, files, origins)
        files.update(made)
        generated.update(made)
    return generated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is out of date")
    args = parser.parse_args(argv)
    stale = []
    generated = generate()
    for path in sorted(SRC.rglob("*.py")):  # a generated file whose source is gone is stale too
        if path not in generated and path.read_text(encoding="utf-8").startswith("# Generated from "):
            stale.append(_relative(path))
            if not args.check:
                path.unlink()
    for path, text in generated.items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(_relative(path))
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("out of date (run `python tools/generate.py`): " + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote {name}" if (ROOT / name).exists() else f"removed {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

