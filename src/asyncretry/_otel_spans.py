"""What :mod:`asyncretry.otel` adds to the current span besides its events: the call's target, and
``http.request.resend_count`` for a request that an httpx transport resent."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from ._events import AttemptFinished, Event, HedgeSent

__all__ = ["resend_count", "with_target"]


def with_target(target: str | None, attributes: dict[str, Any]) -> dict[str, Any]:
    """A span event's attributes, with what the call is (``asyncretry.target``: the httpx transport's
    method and URL without query string or credentials) when the integration said."""
    if target is not None:
        attributes["asyncretry.target"] = target
    return attributes


_RESEND_COUNT = "http.request.resend_count"


def resend_count(event: Event) -> None:
    """On an httpx transport's bus: a resent request sets ``http.request.resend_count`` on the current span.

    A hedge is a send too; an attempt that ends after a later one was sent (a hedged call's) never
    lowers the count.
    """
    kind = type(event)
    if (kind is AttemptFinished or kind is HedgeSent) and event.attempt > 1:  # type: ignore[attr-defined]
        span = trace.get_current_span()
        if span.is_recording():
            count = event.attempt - 1  # type: ignore[attr-defined]
            attributes = getattr(span, "attributes", None)  # an SDK span shows what it holds
            before = attributes.get(_RESEND_COUNT) if attributes is not None else None
            if not isinstance(before, int) or before < count:
                span.set_attribute(_RESEND_COUNT, count)
