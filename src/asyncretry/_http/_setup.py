"""The retrier an HTTP integration runs on: the one given, or one built from the options given."""

from __future__ import annotations

from .. import Clock, RandomSource, Retrier, RetryPolicy

__all__ = ["build_retrier"]


def build_retrier(
    *,
    policy: RetryPolicy | None,
    retrier: Retrier | None,
    clock: Clock | None,
    rng: RandomSource | None,
    name: str,
    max_scopes: int,
    scope_idle_timeout: float,
) -> Retrier:
    """``retrier`` if given (then none of ``policy``, ``clock``, ``rng``), else a new one from the options.

    Raises:
        TypeError: both a retrier and its options, or a retrier that is not a :class:`Retrier`.
    """
    if retrier is None:
        return Retrier(
            policy, name=name, clock=clock, rng=rng, max_scopes=max_scopes, scope_idle_timeout=scope_idle_timeout,
        )
    if policy is not None or clock is not None or rng is not None:
        raise TypeError("pass either retrier or policy/clock/rng, not both")
    if not isinstance(retrier, Retrier):
        raise TypeError(f"retrier must be a Retrier, got {retrier!r}")
    return retrier
