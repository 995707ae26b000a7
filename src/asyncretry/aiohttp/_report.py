"""What the middleware reports on each response (:func:`retry_info`), and how it names requests and scopes.

aiohttp's responses have no place for extras, so the report is kept beside each response (a weak
mapping: it goes when the response goes) and read with :func:`retry_info`.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from aiohttp import ClientRequest, ClientResponse

from .._http._report import RetryInfo, label_of, origin_of

__all__ = ["RetryInfo", "describe", "report", "retry_info", "scope_by_origin"]

_REPORTS: WeakKeyDictionary[ClientResponse, RetryInfo] = WeakKeyDictionary()


def scope_by_origin(request: ClientRequest) -> str:
    """The default scope of a request: its origin, ``scheme://host:port``."""
    url = request.url
    return origin_of(url.scheme, url.host or "", url.port)


def describe(request: ClientRequest) -> str:
    """What a log line or a span says of a request: its method and URL, without credentials or query."""
    url = request.url
    return label_of(request.method, url.scheme, url.host or "", url.explicit_port, url.path)


def report(response: ClientResponse, info: RetryInfo) -> None:
    """Keep ``info`` as the report of ``response``."""
    _REPORTS[response] = info


def retry_info(response: ClientResponse) -> RetryInfo:
    """The :class:`RetryInfo` of a response that came through a :class:`RetryMiddleware`.

    Raises:
        LookupError: the response did not come through a :class:`RetryMiddleware`.
    """
    info = _REPORTS.get(response)
    if info is None:
        raise LookupError("this response did not come through an asyncretry RetryMiddleware (no RetryInfo)")
    return info
