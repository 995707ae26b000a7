"""What a retry transport reports on each response (:class:`RetryInfo`), and how it names requests and scopes."""

from __future__ import annotations

import httpx

from .. import Attempts, RetryHistory, SyncAttempts

__all__ = ["EXTENSION", "RetryInfo", "describe", "retry_info", "scope_by_origin"]

EXTENSION = "asyncretry"
"""The key of asyncretry's entry in ``request.extensions`` (overrides) and ``response.extensions`` (report)."""



_ORIGINS: dict[tuple[str, str, int | None], str] = {}


def scope_by_origin(request: httpx.Request) -> str:
    """The default scope of a request: its origin, ``scheme://host:port``."""
    url = request.url
    key = (url.scheme, url.host, url.port)
    origin = _ORIGINS.get(key)
    if origin is None:
        port = url.port or (443 if url.scheme == "https" else 80)
        origin = f"{url.scheme}://{url.host}:{port}"
        if len(_ORIGINS) >= 4096:  # a bounded cache: origins are few, but never let it grow without end
            _ORIGINS.clear()
        _ORIGINS[key] = origin
    return origin


def describe(request: httpx.Request) -> str:
    """What a log line or a span says of a request: its method and URL, without credentials or query."""
    url = request.url
    port = f":{url.port}" if url.port is not None else ""
    return f"{request.method} {url.scheme}://{url.host}{port}{url.path}"


class RetryInfo:
    """What the transport reports in ``response.extensions["asyncretry"]`` (read it with :func:`retry_info`).

    Attributes:
        attempts: attempts made (1 when the first one was final).
        total_delay: seconds slept between attempts.
        scope: the scope the request belonged to.
        gave_up: why retrying stopped on this (failed) response, or ``None``.
        history: the full record of the attempts (built when first read).
    """

    __slots__ = ("_call", "_history")

    def __init__(self, call: Attempts | SyncAttempts) -> None:
        # Made for every response, so it only keeps the finished call and reads it when asked.
        self._call = call
        self._history: RetryHistory | None = None

    @property
    def attempts(self) -> int:
        return self._call.number

    @property
    def total_delay(self) -> float:
        return self._call.total_delay

    @property
    def scope(self) -> str:
        return self._call.scope_key

    @property
    def gave_up(self) -> str | None:
        return self._call.gave_up

    @property
    def history(self) -> RetryHistory:
        if self._history is None:
            self._history = self._call.history()
        return self._history

    def __repr__(self) -> str:
        return (
            f"RetryInfo(attempts={self.attempts}, total_delay={self.total_delay:.3f}, scope={self.scope!r}, "
            f"gave_up={self.gave_up!r})"
        )


def retry_info(response: httpx.Response) -> RetryInfo:
    """The :class:`RetryInfo` of a response that came through a retry transport (typed).

    Raises:
        LookupError: the response did not come through :class:`AsyncRetryTransport` / :class:`RetryTransport`.
    """
    info = response.extensions.get(EXTENSION)
    if isinstance(info, RetryInfo):
        return info
    raise LookupError("this response did not come through an asyncretry transport (no RetryInfo)")
