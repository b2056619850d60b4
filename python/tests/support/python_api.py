"""Paid APIs built with the Python server helper (agent_payment_gateway.server), settling through
the system's gateway with the seller account's key:

- a Starlette app: ``/py/x402/...`` behind ``X402Middleware`` (the ASGI way), ``/py/plain/...``
  calling ``AsyncX402Gate.check`` in its endpoint (the plain-call way);
- a WSGI app calling the synchronous ``X402Gate.check`` (any framework without async).

Every handler records the payment it ran for, so tests can check it ran once per payment.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_payment_gateway.server import (
    AsyncX402Gate,
    GateAnswer,
    X402Gate,
    X402Middleware,
    X402Options,
    X402Payment,
)

#: 0.02 usdc per call.
PYTHON_PRICE_UNITS = 20_000


@dataclass
class Handled:
    """The payments each handler ran for (a handler runs at most once per payment)."""

    payments: list[X402Payment] = field(default_factory=list)

    def count(self, tx_hash: str) -> int:
        return sum(1 for payment in self.payments if payment.tx_hash == tx_hash)


def options(api_url: str, seller_key: str, pay_to: str, amount: int = PYTHON_PRICE_UNITS) -> X402Options:
    return X402Options(amount=amount, token="usdc", pay_to=pay_to, facilitator_url=api_url, api_key=seller_key)


def starlette_app(gate_options: X402Options, handled: Handled) -> Starlette:
    plain_gate = AsyncX402Gate(gate_options)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await plain_gate.aclose()

    async def middleware_paid(request: Request) -> Response:
        payment: X402Payment = request.state.x402_payment
        handled.payments.append(payment)
        body = await request.body()
        return JSONResponse(
            {
                "content": f"paid {request.url.path}",
                "method": request.method,
                "body": body.decode() or None,
                "payer": payment.payer,
                "txHash": payment.tx_hash,
            }
        )

    async def plain_paid(request: Request) -> Response:
        result = await plain_gate.check(str(request.url), dict(request.headers))
        if isinstance(result, GateAnswer):
            return Response(result.content, status_code=result.status, headers=result.headers)
        handled.payments.append(result.payment)
        return JSONResponse(
            {"content": f"paid {request.url.path}", "txHash": result.payment.tx_hash}, headers=result.headers
        )

    app = Starlette(
        routes=[
            Route("/py/x402/{rest:path}", middleware_paid, methods=["GET", "POST"]),
            Route("/py/plain/{rest:path}", plain_paid, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(X402Middleware, options=gate_options, paths=["/py/x402"])
    return app


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def wsgi_app(gate_options: X402Options, handled: Handled) -> WsgiApp:
    gate = X402Gate(gate_options)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST") or f"{environ['SERVER_NAME']}:{environ['SERVER_PORT']}"
        query = f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
        url = f"{environ['wsgi.url_scheme']}://{host}{environ.get('PATH_INFO', '/')}{query}"
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        result = gate.check(url, headers)
        if isinstance(result, GateAnswer):
            start_response(f"{result.status} -", list(result.headers.items()))
            return [result.content]
        handled.payments.append(result.payment)
        body = f'{{"content":"paid by {result.payment.payer}","txHash":"{result.payment.tx_hash}"}}'.encode()
        start_response("200 OK", [("content-type", "application/json"), *result.headers.items()])
        return [body]

    return app
