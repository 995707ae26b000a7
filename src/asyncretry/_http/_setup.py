"""What every integration sets up alike: its retrier (given, or built from the options), its classifier, its
checked options, and how long it waits for an error body (the HTTP integrations; the gRPC interceptors build
their retrier and check their classifier here too)."""

from __future__ import annotations

from typing import TypeVar

from .. import Clock, RandomSource, Retrier, RetryPolicy
from .._validate import check_bool, check_seconds

__all__ = ["build_retrier", "check_options", "checked_classifier", "error_body_budget"]

C = TypeVar("C")


def build_retrier(
    *,
    policy: RetryPolicy | None,
    retrier: Retrier | None,
    clock: Clock | None,
    rng: RandomSource | None,
    name: str,
    max_scopes: int = 10_000,
    scope_idle_timeout: float = 600.0,
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


def checked_classifier(classifier: C | None, kind: type[C], shown: str) -> C:
    """``classifier``, or a new ``kind()`` when it is ``None``.

    Raises:
        TypeError: ``classifier`` is not a ``kind`` (the message names it as ``shown``).
    """
    if classifier is None:
        return kind()
    if not isinstance(classifier, kind):
        raise TypeError(f"classifier must be {shown}, got {classifier!r}")
    return classifier


def check_options(
    *, read_body: object, error_body_timeout: float, scope_key: object, wall_clock: object
) -> tuple[bool, float]:
    """``read_body`` and ``error_body_timeout`` (seconds) checked, and the hooks given callable.

    Raises:
        TypeError, ValueError: an option of the wrong type or out of range, named in the message.
    """
    for what, value in (("scope_key", scope_key), ("wall_clock", wall_clock)):
        if value is not None and not callable(value):
            raise TypeError(f"{what} must be callable, got {value!r}")
    return check_bool("read_body", read_body), check_seconds("error_body_timeout", error_body_timeout)


def error_body_budget(timeout: float, remaining: float | None) -> float:
    """How long to wait for an error body: ``timeout``, and never more than half of what the deadline
    leaves (``remaining``, ``None`` when unbounded), to leave time to judge and answer."""
    return timeout if remaining is None else min(timeout, remaining / 2)
