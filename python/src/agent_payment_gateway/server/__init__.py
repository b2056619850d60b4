"""``agent_payment_gateway.server``: charge agents from your own Python API (spec 4.5, x402).

- ``X402Middleware``: ASGI middleware (Starlette, FastAPI, ...); the payment reaches the handler
  as ``request.state.x402_payment``.
- ``X402Gate`` / ``AsyncX402Gate``: the same gate as a plain call for any framework.

The payment is verified and settled through the gateway's facilitator before the handler runs,
at most once per payment. Wire contract: docs/sdk-server.md (the TypeScript middleware's, shared).
"""

from .asgi import STATE_KEY, X402Middleware
from .gate import AsyncX402Gate, X402Gate
from .x402 import GateAnswer, GatePaid, GateResult, X402Options, X402Payment

__all__ = [
    "STATE_KEY",
    "AsyncX402Gate",
    "GateAnswer",
    "GatePaid",
    "GateResult",
    "X402Gate",
    "X402Middleware",
    "X402Options",
    "X402Payment",
]
