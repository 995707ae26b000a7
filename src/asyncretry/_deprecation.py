"""Old public names kept working for a while: a module ``__getattr__`` that serves each under its new name.

A renamed class or function leaves ``__all__`` and the module's namespace; reading the old name gives the
new object and a ``DeprecationWarning`` that says what to write instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed_names"]


def renamed_names(module: str, namespace: Mapping[str, Any], renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` that maps each old name of ``renames`` to its new name.

    Args:
        module: the public module's name (``"asyncretry.httpx"``), for the messages.
        namespace: the module's globals, where the new names are looked up when an old one is read.
        renames: old name -> new name.
    """

    def __getattr__(name: str) -> Any:
        new = renames.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated: use {module}.{new}, its new name", DeprecationWarning, stacklevel=2
        )
        return namespace[new]

    return __getattr__
