"""The same with ``AsyncClient``: ten concurrent payments from one client (python/README.md).

With ``npm start`` running and its printed key in ``API_KEY``::

    python python/examples/pay_local_api_async.py

The paid API is the synchronous example's (a WSGI app guarded by the package's x402 gate), served
from a thread on 127.0.0.1:8082.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from decimal import Decimal
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIServer, make_server

from pay_local_api import QuietHandler, paid_api

from agent_payment_gateway import AsyncClient, PaidResult, Usdc
from agent_payment_gateway.server import X402Gate, X402Options

API_KEY = os.environ["API_KEY"]
BASE_URL = os.environ.get("BASE_URL", "http://127.0.0.1:4000")


class ThreadingServer(ThreadingMixIn, WSGIServer):
    """One thread per request: ten payments arrive at once."""

    daemon_threads = True


async def main() -> None:
    suffix = uuid.uuid4().hex[:6]
    buyer = f"async-researcher-{suffix}"
    async with AsyncClient(agent_id=buyer, api_key=API_KEY, base_url=BASE_URL) as client:
        await client.agents.create(buyer)
        seller = await client.agents.create(f"async-weather-api-{suffix}")  # its wallet receives the payments
        assert seller.address is not None
        gate = X402Gate(
            X402Options(amount="20000", token="usdc", pay_to=seller.address, facilitator_url=BASE_URL, api_key=API_KEY)
        )
        server = make_server(
            "127.0.0.1", 8082, paid_api(gate), server_class=ThreadingServer, handler_class=QuietHandler
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()

        await client.wallet.fund(Decimal("1"))
        results = await asyncio.gather(*(client.pay(f"http://127.0.0.1:8082/forecast/{n}") for n in range(10)))
        paid = [result for result in results if isinstance(result, PaidResult)]
        total = Usdc.from_units(sum(result.amount_paid.units for result in paid))
        print(f"{len(paid)} paid, {total} in all")  # 10 paid, 0.2 usdc in all
        print("balance:", await client.wallet.balance())  # balance: 0.8 usdc
    server.shutdown()
    gate.close()


if __name__ == "__main__":
    asyncio.run(main())
