"""Statistics snapshots as plain JSON data, for health endpoints and status pages.

Every stateful object's ``statistics()`` returns a frozen dataclass: a consistent snapshot taken at
one instant, safe to keep and to hand to another thread. :func:`statistics_to_dict` turns one (or the
object itself) into the dicts, lists, strings, numbers and ``None`` that :func:`json.dumps` accepts.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["statistics_to_dict"]


def statistics_to_dict(source: object) -> dict[str, Any]:
    """Return a statistics snapshot as a JSON-ready dict.

    Nested snapshots (a retrier's scopes, each scope's quota, limiter and breaker) become nested dicts,
    tuples become lists, enums their values, and infinite or NaN floats ``None`` (JSON has no
    infinity: a breaker isolated by hand has ``retry_after=None``), so that ``json.dumps`` of the
    result always produces standard JSON.

    Args:
        source: a snapshot (``RetrierStatistics``, ``QuotaStatistics`` ...) or any object with a
            ``statistics()`` method returning one: a :class:`~asyncretry.Retrier`, an httpx transport,
            a :class:`~asyncretry.RetryQuota`, :class:`~asyncretry.AdaptiveRateLimiter`,
            :class:`~asyncretry.CircuitBreaker` or :class:`~asyncretry.TokenBucket`.

    Returns:
        The snapshot's fields by name.

    Raises:
        TypeError: ``source`` is neither a dataclass snapshot nor has ``statistics()`` returning one.
    """
    snapshot = source
    if not _is_snapshot(snapshot):
        method = None if isinstance(source, type) else getattr(source, "statistics", None)
        if not callable(method):
            raise TypeError(
                f"source must be a statistics snapshot or have a statistics() method, got {source!r}"
            )
        snapshot = method()
        if not _is_snapshot(snapshot):
            raise TypeError(f"{source!r}.statistics() returned {snapshot!r}, not a dataclass snapshot")
    converted = _plain(snapshot)
    assert isinstance(converted, dict)
    return converted


def _is_snapshot(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _plain(value: object) -> Any:
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if _is_snapshot(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return str(value)
