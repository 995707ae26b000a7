"""Per-request options of the HTTP integrations, checked in one place, and which requests may be hedged.

Each client takes them where its requests carry extras (httpx: ``request.extensions["asyncretry"]``;
aiohttp: the middleware's per-request form): the same keys, the same checks, the same errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import HedgingConfig, RetryPolicy

__all__ = ["OVERRIDE_KEYS", "Overrides", "choose_hedging", "read_overrides"]

OVERRIDE_KEYS = frozenset({"retry", "policy", "scope", "idempotent", "read_body", "hedge"})
"""The per-request options: ``retry`` (False: one attempt), ``policy``, ``scope``, ``idempotent``,
``read_body`` and ``hedge`` (True, False or a :class:`~asyncretry.HedgingConfig`)."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """A request's options, checked (``None``: not given)."""

    policy: RetryPolicy | None = None
    retry: bool = True
    scope: str | None = None
    idempotent: bool | None = None
    read_body: bool | None = None
    hedge: bool | HedgingConfig | None = None


NO_OVERRIDES = Overrides()


def read_overrides(overrides: object, where: str) -> Overrides:
    """The options ``overrides`` (a mapping with :data:`OVERRIDE_KEYS`) gives, checked.

    Args:
        overrides: what the request carries.
        where: how users wrote it, for the error messages (``request.extensions['asyncretry']``).

    Raises:
        TypeError: not a mapping, or an option of the wrong type.
        ValueError: an unknown key.
    """
    if not isinstance(overrides, Mapping):
        raise TypeError(f"{where} must be a mapping, got {overrides!r}")
    unknown = set(overrides) - OVERRIDE_KEYS
    if unknown:
        raise ValueError(f"{where} has unknown keys {sorted(unknown)}; allowed: {sorted(OVERRIDE_KEYS)}")
    policy = overrides.get("policy")
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise TypeError(f"the 'policy' override must be a RetryPolicy, got {policy!r}")
    scope = overrides.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise TypeError(f"the 'scope' override must be a str (a scope key), got {scope!r}")
    hedge = overrides.get("hedge")
    if hedge is not None and not isinstance(hedge, (bool, HedgingConfig)):
        raise TypeError(f"the 'hedge' override must be True, False or a HedgingConfig, got {hedge!r}")
    return Overrides(
        policy=policy,
        retry=_flag(overrides, "retry", True),
        scope=scope,
        idempotent=_flag(overrides, "idempotent", None),
        read_body=_flag(overrides, "read_body", None),
        hedge=hedge,
    )


def _flag(overrides: Mapping[Any, Any], key: str, default: bool | None) -> Any:
    value = overrides.get(key, default)
    if value is not default and type(value) is not bool:
        raise TypeError(f"the {key!r} override must be True or False, got {value!r}")
    return value


def choose_hedging(
    policy: RetryPolicy, asked: bool | HedgingConfig | None, why_not: str | None, what: str, where: str
) -> HedgingConfig | None:
    """The hedging of one request: ``asked`` (the ``"hedge"`` option: a config, True, False or None when
    not given), else the policy's; ``None`` when the request is not hedged.

    Args:
        policy: the request's policy.
        asked: the request's ``"hedge"`` option.
        why_not: why this request may not run twice at once (not idempotent, a body that cannot be
            sent twice at once), or ``None`` when it may.
        what: the request, for the error message (``"GET https://host/path"``).
        where: how users wrote the options, for the error messages.

    Raises:
        ValueError: hedging was asked for a request that cannot be hedged, or ``True`` without a config.
    """
    if asked is False:
        return None
    if asked is None or asked is True:
        config = policy.hedging
        if config is None:
            if asked is True:
                raise ValueError(
                    f"{where}['hedge'] is True but the policy has no hedging; "
                    "give a HedgingConfig instead, or a policy with hedging=HedgingConfig(...)"
                )
            return None
    else:
        config = asked
    if why_not is None:
        return config
    if asked is None:
        return None  # the policy hedges what it may; this request, like a retry of it, is not sent twice
    raise ValueError(f"{what} cannot be hedged: {why_not}")
