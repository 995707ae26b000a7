# Generated from src/asyncretry/httpx/_report.py by tools/generate.py:
# edit that file, then run `python tools/generate.py`.
"""What a retry transport reports on each response (:class:`RetryInfo`, in ``response.extensions["asyncretry"]``),
and how it names requests and scopes."""

from __future__ import annotations

import httpx2

from .._http._report import RetryInfo, label_of, origin_of

__all__ = ["EXTENSION", "RetryInfo", "describe", "retry_info", "scope_by_origin"]

EXTENSION = "asyncretry"
"""The key of asyncretry's entry in ``request.extensions`` (overrides) and ``response.extensions`` (report)."""



def scope_by_origin(request: httpx2.Request) -> str:
    """The default scope of a request: its origin, ``scheme://host:port``."""
    url = request.url
    return origin_of(url.scheme, url.host, url.port)


def describe(request: httpx2.Request) -> str:
    """What a log line or a span says of a request: its method and URL, without credentials or query."""
    url = request.url
    return label_of(request.method, url.scheme, url.host, url.port, url.path)


def retry_info(response: httpx2.Response) -> RetryInfo:
    """The :class:`RetryInfo` of a response that came through a retry transport (typed).

    Raises:
        LookupError: the response did not come through :class:`AsyncRetryTransport` / :class:`RetryTransport`.
    """
    info = response.extensions.get(EXTENSION)
    if isinstance(info, RetryInfo):
        return info
    raise LookupError("this response did not come through an asyncretry transport (no RetryInfo)")
