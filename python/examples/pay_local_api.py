"""Pay a local paid API from an agent with the synchronous ``Client`` (python/README.md).

With ``npm start`` running and its printed key in ``API_KEY``::

    python python/examples/pay_local_api.py

It registers two agents (a buyer and a seller whose wallet receives the payments), funds the
buyer from the local treasury, sets its policy, starts a paid API on 127.0.0.1:8081 guarded by the
package's own x402 gate (standard library server, no framework), pays it, and prints what it got.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from decimal import Decimal
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from agent_payment_gateway import Client, PaidResult, PolicyViolationError
from agent_payment_gateway.server import GateAnswer, X402Gate, X402Options

API_KEY = os.environ["API_KEY"]
BASE_URL = os.environ.get("BASE_URL", "http://127.0.0.1:4000")
SUFFIX = uuid.uuid4().hex[:6]  # new agents each run


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise here
        pass


def paid_api(gate: X402Gate) -> Any:
    """A WSGI app: the gate decides before the handler runs."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        url = f"http://{environ['HTTP_HOST']}{environ['PATH_INFO']}"
        headers = {key[5:].replace("_", "-"): value for key, value in environ.items() if key.startswith("HTTP_")}
        result = gate.check(url, headers)
        if isinstance(result, GateAnswer):  # 402 (or 503): the handler does not run
            start_response(f"{result.status} Payment Required", list(result.headers.items()))
            return [result.content]
        body = json.dumps({"forecast": "sunny", "paid_by": result.payment.payer}).encode()
        start_response("200 OK", [("content-type", "application/json"), *result.headers.items()])
        return [body]

    return app


def main() -> None:
    buyer = f"researcher-{SUFFIX}"
    with Client(agent_id=buyer, api_key=API_KEY, base_url=BASE_URL) as client:
        client.agents.create(buyer)  # a taken id is ServiceError code AGENT_EXISTS
        seller = client.agents.create(f"weather-api-{SUFFIX}")  # its wallet receives the payments
        assert seller.address is not None
        gate = X402Gate(
            X402Options(amount="50000", token="usdc", pay_to=seller.address, facilitator_url=BASE_URL, api_key=API_KEY)
        )
        server = make_server("127.0.0.1", 8081, paid_api(gate), handler_class=QuietHandler)
        threading.Thread(target=server.serve_forever, daemon=True).start()

        client.wallet.fund(Decimal("5"))
        client.policies.set(daily_budget=Decimal("2"), per_call_limit=Decimal("0.5"))

        result = client.pay("http://127.0.0.1:8081/forecast")
        assert isinstance(result, PaidResult)
        print(result.status, result.protocol, result.amount_paid, result.tx_hash)  # 200 x402 0.05 usdc 2GZN...
        print(result.data)  # {'forecast': 'sunny', 'paid_by': '<the buyer wallet>'}
        print(result.solana_explorer)

        client.policies.set(per_call_limit=Decimal("0.01"))
        try:
            client.pay("http://127.0.0.1:8081/forecast")
        except PolicyViolationError as refused:
            print("refused:", refused.reason)  # per_call_limit_exceeded: requested 0.05 usdc, limit is 0.01 usdc
        print("balance:", client.wallet.balance())  # balance: 4.95 usdc
    server.shutdown()
    gate.close()


if __name__ == "__main__":
    main()
