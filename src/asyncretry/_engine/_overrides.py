"""Per-request overrides: the mapping a request carries, checked as strictly as the constructor arguments.

A request of an HTTP client (the httpx transports, and any integration that takes overrides) says how
it wants to be retried in a mapping (``request.extensions["asyncretry"]`` for httpx)::

    {"retry": False, "idempotent": True, "scope": "orders-table", "caller": "tenant-42"}

:func:`parse_overrides` turns that mapping into a frozen :class:`RequestOverrides`, or raises before anything is
sent: a value of the wrong type is a ``TypeError`` naming the key and the value (``{"idempotent": "false"}``
is a string, and a truthy one: taken as it is, it would make a POST retried), an out-of-range value a
``ValueError`` saying what is allowed, and an unknown key a ``ValueError`` with the closest known key.
It knows nothing of httpx: any HTTP integration parses its requests' overrides here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._primitives._turns import check_caller
from .._validate import check_bool, check_instance, check_str
from ._hedging import HedgingConfig
from ._policy import RetryPolicy

__all__ = ["RequestOverrides", "parse_overrides"]


def _scope(name: str, value: object) -> str:
    scope = check_str(name, value)
    if not scope:
        raise ValueError(f"{name} must be a non-empty string, got ''")
    return scope


def _idempotent(name: str, value: object) -> bool | None:
    return None if value is None else check_bool(name, value)


def _hedge(name: str, value: object) -> bool | HedgingConfig | None:
    if value is None or isinstance(value, HedgingConfig):
        return value
    if value is True or value is False:
        return value
    raise TypeError(
        f"{name} must be True, False or a HedgingConfig (True or None: the policy's hedging), "
        f"got {value!r} ({type(value).__name__})"
    )


def _policy(name: str, value: object) -> RetryPolicy:
    return check_instance(name, value, RetryPolicy)


#: every key, with the check its value must pass (a function ``(name, value) -> value``)
_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "retry": check_bool,
    "policy": _policy,
    "scope": _scope,
    "caller": check_caller,
    "idempotent": _idempotent,
    "read_body": check_bool,
    "hedge": _hedge,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestOverrides:
    """A request's overrides, checked; a field left ``None`` was not given.

    Made from the mapping a request carries by :func:`parse_overrides`; each field is checked as the
    constructor arguments of the transports are.

    Attributes:
        retry: ``False`` sends the request once (``True`` changes nothing).
        policy: the retry policy of this request (the scope's shared state still comes from the client's).
        scope: the scope of this request (its quota, limiter and breaker).
        caller: who the request is for (a tenant, a user, a job): its waits for the scope's rate limits take
            turns with other callers' (see :meth:`Retrier.attempts <asyncretry.Retrier.attempts>`).
        idempotent: whether the request may be sent again after it may have reached the server
            (``None``: decided by its method and its idempotency header).
        read_body: read the whole body of a success inside the attempt.
        hedge: ``True`` (the policy's hedging), ``False`` (none) or a :class:`HedgingConfig`.
    """

    retry: bool | None = None
    policy: RetryPolicy | None = None
    scope: str | None = None
    caller: str | None = None
    idempotent: bool | None = None
    read_body: bool | None = None
    hedge: bool | HedgingConfig | None = None

    def __post_init__(self) -> None:
        for key, check in _CHECKS.items():
            value = getattr(self, key)
            if value is not None:
                check(key, value)

    @classmethod
    def keys(cls) -> frozenset[str]:
        """The keys a request's overrides may hold."""
        return _KEYS


_KEYS = frozenset(_CHECKS)


def parse_overrides(overrides: object, where: str = "overrides") -> RequestOverrides:
    """Check a request's overrides and return them; ``where`` names the mapping in messages.

    Args:
        overrides: the mapping the request carries.
        where: how the user wrote it, such as ``"request.extensions['asyncretry']"`` (default ``"overrides"``).

    Raises:
        TypeError: ``overrides`` is not a mapping, or a value has the wrong type (``{"retry": 0}``,
            ``{"idempotent": "false"}``): the message names the key and the value.
        ValueError: an unknown key (with the closest known one), or a value out of range (an empty scope).
    """
    if not isinstance(overrides, Mapping):
        raise TypeError(
            f"{where} must be a mapping such as {{'retry': False}}, got {overrides!r} ({type(overrides).__name__})"
        )
    unknown = [key for key in overrides if key not in _CHECKS]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(_KEYS), n=1, cutoff=0.6)
            if close:
                hints.append(f"{key!r}: did you mean {close[0]!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        raise ValueError(
            f"{where} has unknown keys {sorted(unknown, key=repr)}{hint}; allowed: {sorted(_KEYS)}"
        )
    values = {key: _CHECKS[key](f"{where}[{key!r}]", value) for key, value in overrides.items()}
    return RequestOverrides(**values)
