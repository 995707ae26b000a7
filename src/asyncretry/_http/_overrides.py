"""Which requests of an HTTP integration are hedged: the one rule every client applies.

The per-request options themselves are checked by :func:`asyncretry.parse_overrides`; this module decides,
from the checked ``"hedge"`` option and the policy, whether a request runs twice at once.
"""

from __future__ import annotations

from .. import HedgingConfig, RetryPolicy

__all__ = ["choose_hedging"]


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
    raise ValueError(f"{where}['hedge'] is {asked!r}, but {what} cannot be hedged: {why_not}")
