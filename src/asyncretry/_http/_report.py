"""What an HTTP integration reports on each response (:class:`RetryInfo`), and how it names requests and scopes.

The same for every client: each integration puts a :class:`RetryInfo` where its responses carry extras
(httpx: ``response.extensions["asyncretry"]``; aiohttp: ``asyncretry.aiohttp.retry_info(response)``).
"""

from __future__ import annotations

from .. import Attempts, RetryHistory, SyncAttempts

__all__ = ["RetryInfo", "label_of", "origin_of"]

_ORIGINS: dict[tuple[str, str, int | None], str] = {}


def origin_of(scheme: str, host: str, port: int | None) -> str:
    """A request's origin, ``scheme://host:port`` (the default scope): the port is the scheme's default
    (443 for https, else 80) when the URL names none."""
    key = (scheme, host, port)
    origin = _ORIGINS.get(key)
    if origin is None:
        origin = f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"
        if len(_ORIGINS) >= 4096:  # a bounded cache: origins are few, but never let it grow without end
            _ORIGINS.clear()
        _ORIGINS[key] = origin
    return origin


def label_of(method: str, scheme: str, host: str, port: int | None, path: str) -> str:
    """What a log line or a span says of a request: its method and URL, without credentials or query
    (``port``: the one the URL names, if any)."""
    shown = f":{port}" if port is not None else ""
    return f"{method} {scheme}://{host}{shown}{path}"


class RetryInfo:
    """What a retrying HTTP client reports on each response.

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
