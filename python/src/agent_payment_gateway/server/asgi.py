"""``X402Middleware``: the x402 gate for ASGI apps (Starlette, FastAPI, any ASGI framework), the
counterpart of the TypeScript ``x402Middleware`` (spec 4.5). Pure ASGI: it depends on no framework.

::

    app = Starlette(routes=[Route("/report", report)])
    app.add_middleware(X402Middleware, options=X402Options(...), paths=["/report"])

    async def report(request):
        payment = request.state.x402_payment        # X402Payment: tx_hash, payer, amount, network
        return JSONResponse({"paid_by": payment.payer})

Requests whose path starts with one of ``paths`` (all requests when ``paths`` is None) pass
through the gate before the app sees them: unpaid or refused ones are answered by the gate (402,
503, 502) and never reach the app; paid ones reach it with the payment in ``scope["state"]
["x402_payment"]`` (Starlette's ``request.state.x402_payment``), and the receipt header is added to
the app's answer. The gate's connections to the gateway close with the app's lifespan.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from .gate import AsyncX402Gate
from .x402 import GateAnswer, X402Options

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_log = logging.getLogger(__name__)
#: A Host header that can stand in a URL (as the TypeScript middleware accepts).
_HOST = re.compile(r"^[A-Za-z0-9.:\[\]-]{1,255}$")

#: Where the payment is put in the request's ``scope["state"]``.
STATE_KEY = "x402_payment"


class X402Middleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        options: X402Options,
        paths: Sequence[str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if paths is not None and (isinstance(paths, str) or not all(p.startswith("/") for p in paths)):
            raise TypeError("X402Middleware: paths must be a list of path prefixes such as ['/report']")
        self.app = app
        self.paths = None if paths is None else tuple(paths)
        self.gate = AsyncX402Gate(options, http_client=http_client)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, self._watch_shutdown(receive), send)
            return
        if scope["type"] != "http" or not self._gated(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        try:
            result = await self.gate.check(_url(scope), _headers(scope))
        except Exception:
            # A gate failure never runs the handler: logged with its traceback, answered 500.
            _log.exception("x402 gate failed for %s", scope.get("path"))
            await _send_answer(send, GateAnswer(500, {"content-type": "application/json"}, {"error": "internal_error"}))
            return
        if isinstance(result, GateAnswer):
            await _send_answer(send, result)
            return
        scope.setdefault("state", {})[STATE_KEY] = result.payment
        receipt = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in result.headers.items()]

        async def send_with_receipt(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *receipt]
            await send(message)

        await self.app(scope, receive, send_with_receipt)

    def _gated(self, path: str) -> bool:
        return self.paths is None or any(
            path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in self.paths
        )

    def _watch_shutdown(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                await self.gate.aclose()
            return message

        return watched


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _url(scope: Scope) -> str:
    """The request's absolute URL from the ASGI scope (Host header first, then the server address)."""
    scheme = "https" if scope.get("scheme") == "https" else "http"
    host = _headers(scope).get("host")
    if host is None or not _HOST.match(host):
        # No usable Host header: the server's own address (never the client's text, unchecked).
        server = scope.get("server")
        host = "localhost" if not server else f"{server[0]}:{server[1]}"
    # The decoded path, quoted again where it holds what a URL cannot (spaces, non-ASCII).
    path = quote(str(scope.get("root_path", "")) + str(scope.get("path", "/")), safe="/:@!$&'()*+,;=-._~%")
    query = scope.get("query_string", b"")
    return f"{scheme}://{host}{path}" + (f"?{query.decode('latin-1')}" if query else "")


async def _send_answer(send: Send, result: GateAnswer) -> None:
    content = result.content
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in result.headers.items()]
    headers.append((b"content-length", str(len(content)).encode("ascii")))
    await send({"type": "http.response.start", "status": result.status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
