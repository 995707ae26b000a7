"""Every generated module is what its one hand-written source gives (``tools/generate.py``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "generate.py"


def test_every_generated_module_is_up_to_date() -> None:
    """``tools/generate.py --check`` passes: no generated twin was edited by hand or left behind its source."""
    done = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_generated_module_names_its_source() -> None:
    """Each generated file opens with the comment that sends its reader to the file to edit."""
    spec = importlib.util.spec_from_file_location("generate", TOOL)
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate", tool)  # (its dataclasses look their module up there)
    spec.loader.exec_module(tool)
    generated = tool.generate()
    assert generated, "tools/generate.py has no jobs"
    for path, text in generated.items():
        assert text.startswith("# Generated from src/asyncretry/"), path
