"""The two drivers, by the import path the engine has always used: :class:`Attempts` (hand-written, in
:mod:`._async._attempts`) and :class:`SyncAttempts` (generated from it, in :mod:`._sync._attempts`)."""

from __future__ import annotations

from ._async._attempts import Attempts
from ._sync._attempts import SyncAttempts

__all__ = ["Attempts", "SyncAttempts"]
