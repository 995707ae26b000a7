"""Rewrite ``__all__`` in src/asyncretry/__init__.py from its ``import X as X`` lines, sorted.

Usage: python tools/sync_all.py
"""

from __future__ import annotations

import re
from pathlib import Path

INIT = Path(__file__).resolve().parent.parent / "src" / "asyncretry" / "__init__.py"


def main() -> None:
    text = INIT.read_text(encoding="utf-8")
    names = sorted(set(re.findall(r"^from \S+ import (\w+) as \1$", text, re.M)))
    block = "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n"
    text = re.sub(r"__all__ = \[\n.*?\]\n", lambda _: block, text, count=1, flags=re.S)
    INIT.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
