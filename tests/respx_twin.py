"""A respx-shaped router for httpx2, which respx cannot mock: the part of respx's ``MockRouter`` the httpx
integration's tests use (``route``/``get``/``post``/``put`` with ``mock(side_effect=, return_value=)``,
``call_count``, ``handler``/``async_handler`` for a ``MockTransport``), with respx's semantics: a list of
side effects is played in order, an exception (instance or class) is raised, a callable is called with
the request, and a reused response is cloned for each request. tests/conftest.py puts it in the place of
``respx`` when a test runs against httpx2 (tests using respx's global ``respx.mock`` stay on httpx).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import httpx2

__all__ = ["MockRouter", "Route"]


class Route:
    """One route: what it matches, and what it answers."""

    def __init__(self, method: str | None, url: str | None, url_regex: str | None) -> None:
        self.method = method.upper() if method else None
        self.url = httpx2.URL(url) if url is not None else None
        self.url_regex = re.compile(url_regex) if url_regex is not None else None
        self.return_value: httpx2.Response | None = None
        self.side_effect: Any = None
        self._effects: Iterator[Any] | None = None
        self.call_count = 0

    def mock(self, *, side_effect: Any = None, return_value: httpx2.Response | None = None) -> Route:
        self.side_effect, self.return_value = side_effect, return_value
        if isinstance(side_effect, (list, tuple)):
            self._effects = iter(side_effect)
        return self

    def matches(self, request: httpx2.Request) -> bool:
        if self.method is not None and request.method != self.method:
            return False
        if self.url_regex is not None:
            return self.url_regex.match(str(request.url)) is not None
        if self.url is None:
            return True
        url, want = request.url, self.url
        same = (url.scheme, url.host, url.port, url.path) == (want.scheme, want.host, want.port, want.path)
        return same and (not want.query or url.query == want.query)

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        self.call_count += 1
        result: Any = self.return_value
        effect = next(self._effects) if self._effects is not None else self.side_effect
        if isinstance(effect, Exception):
            raise effect
        if isinstance(effect, type) and issubclass(effect, Exception):
            raise effect("Mock Error", request=request) if issubclass(effect, httpx2.RequestError) else effect()
        if callable(effect):
            result = effect(request, route=self) if "route" in inspect.signature(effect).parameters else effect(request)
        elif effect is not None:
            result = effect
        if result is None:
            result = httpx2.Response(200)
        if isinstance(result, httpx2.Response) and result._request is None:
            result = httpx2.Response(  # a reused response, cloned for this request (as respx does)
                result.status_code, headers=result.headers, stream=result.stream, request=request,
                extensions=dict(result.extensions),
            )
        assert isinstance(result, httpx2.Response)
        return result


class MockRouter:
    """Routes requests to the first route that matches; an unmatched request is a test failure."""

    def __init__(self, assert_all_called: bool = True) -> None:
        self.routes: list[Route] = []

    def route(self, *, method: str | None = None, url: str | None = None, url__regex: str | None = None) -> Route:
        made = Route(method, url, url__regex)
        self.routes.append(made)
        return made

    def get(self, url: str | None = None, **options: Any) -> Route:
        return self.route(method="GET", url=url, **options)

    def post(self, url: str | None = None, **options: Any) -> Route:
        return self.route(method="POST", url=url, **options)

    def put(self, url: str | None = None, **options: Any) -> Route:
        return self.route(method="PUT", url=url, **options)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        for route in self.routes:
            if route.matches(request):
                return route.answer(request)
        raise AssertionError(f"no route matches {request.method} {request.url}")

    async def async_handler(self, request: httpx2.Request) -> httpx2.Response:
        return self.handler(request)
