"""The x402 gate as a plain call, usable from any framework (Flask, Django, aiohttp, a bare WSGI or
ASGI app): ``X402Gate`` (synchronous) and ``AsyncX402Gate``. Call ``check`` with the request's
method, absolute URL and headers before the handler; answer its ``GateAnswer`` as it is, or run
the handler and add the ``GatePaid`` headers (the receipt) to its answer::

    gate = X402Gate(X402Options(amount="50000", token="usdc", pay_to=WALLET,
                                facilitator_url=GATEWAY, api_key=SELLER_KEY))
    result = gate.check(request.url, request.headers)
    if isinstance(result, GateAnswer):
        return Response(result.content, status=result.status, headers=result.headers)
    response = handler(request, result.payment)
    response.headers.update(result.headers)
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from ..drivers import run_async, run_sync
from .x402 import GateResult, TermsCache, X402Options, x402_gate


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in headers.items()}


def public_url(options: X402Options, url: str) -> str:
    """The request's URL as clients see it: the ``origin`` option replaces scheme and host."""
    if options.origin is None:
        return url
    parts = urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return f"{options.origin}{parts.path or '/'}{query}"


class X402Gate:
    """The synchronous gate. Thread-safe; keeps one HTTP connection pool to the gateway."""

    def __init__(self, options: X402Options, *, http_client: httpx.Client | None = None) -> None:
        self.options = options
        self._terms = TermsCache()
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()

    def check(self, url: str, headers: Mapping[str, str]) -> GateResult:
        """``url``: the request's absolute URL; ``headers``: its headers (any case)."""
        return run_sync(
            x402_gate(self.options, self._terms, public_url(self.options, url), _lower(headers)), self._http
        )

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> X402Gate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncX402Gate:
    """The asynchronous gate (asyncio or trio)."""

    def __init__(self, options: X402Options, *, http_client: httpx.AsyncClient | None = None) -> None:
        self.options = options
        self._terms = TermsCache()
        self._owns_http = http_client is None
        self._http = http_client

    async def check(self, url: str, headers: Mapping[str, str]) -> GateResult:
        """``url``: the request's absolute URL; ``headers``: its headers (any case)."""
        if self._http is None:
            # Created on first use, inside the event loop that serves the requests.
            self._http = httpx.AsyncClient()
        flow = x402_gate(self.options, self._terms, public_url(self.options, url), _lower(headers))
        return await run_async(flow, self._http)

    async def aclose(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> AsyncX402Gate:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
