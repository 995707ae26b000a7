"""Print one line per Python version the package claims (its classifiers) other than the running one.

Each line is ``VERSION INTERPRETER``, with INTERPRETER a path to a working interpreter of that version, or
``-`` when this machine has none: ``pythonX.Y`` on PATH if it runs (a pyenv shim may exist for a version
pyenv does not activate), else the newest pyenv installation of that version. .ci/run runs the test suite
on each one found.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def claimed_versions(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The ``X.Y`` versions named by the ``Programming Language :: Python :: X.Y`` classifiers, oldest first."""
    classifiers = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["classifiers"]
    found = (re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c) for c in classifiers)
    return sorted({m.group(1) for m in found if m}, key=lambda v: tuple(map(int, v.split("."))))


def _runs(command: str, version: str) -> bool:
    try:
        result = subprocess.run(
            [command, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and result.stdout.strip() == version


def interpreter(version: str) -> str | None:
    """A working interpreter of ``version`` on this machine, or None."""
    on_path = shutil.which(f"python{version}")
    if on_path and _runs(on_path, version):
        return on_path
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))
    candidates.sort(key=lambda path: [int(part) for part in re.findall(r"\d+", Path(path).parts[-3])], reverse=True)
    return next((path for path in candidates if _runs(path, version)), None)


def main() -> None:
    running = "{}.{}".format(*sys.version_info[:2])
    for version in claimed_versions():
        if version != running:
            print(version, interpreter(version) or "-")


if __name__ == "__main__":
    main()
