"""``pay`` (spec 4.7, its seven steps) with both clients against the whole system: x402 and MPP APIs
built with the TypeScript middleware, and x402 APIs built with the Python helper (ASGI middleware,
plain async call, plain sync call under WSGI). Real payments on the local ledger: the seller's
wallet balance is read from the chain through the gateway before and after."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest

from agent_payment_gateway import Client, PaidResult, Usdc

from .support.both import done
from .support.python_api import PYTHON_PRICE_UNITS, Handled
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio

TX_HASH = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{64,90}$")
Agent = Callable[..., Any]


def paths_with(counters: dict[str, dict[str, int]], kind: str, prefix: str) -> int:
    return sum(count for path, count in counters[kind].items() if path.startswith(prefix))


async def test_pays_an_x402_api_built_with_the_typescript_middleware(agent: Agent, ready: Ready, rest: Rest) -> None:
    client = await agent("py-x402", "2")
    before = rest.seller_balance_units("x402")
    path = f"/x402/report-{client.agent_id}"

    result = await done(client.pay(f"{ready.paid_api}{path}"))

    assert isinstance(result, PaidResult)
    assert result.paid is True
    assert result.status == 200
    assert result.protocol == "x402"
    assert result.amount_paid == Usdc(Decimal("0.03"))
    assert TX_HASH.match(result.tx_hash)
    assert result.data == {"content": f"paid {path}", "method": "GET", "body": None, "txHash": result.tx_hash}
    assert "x-payment-response" in result.headers
    assert result.solana_explorer.startswith(f"https://explorer.solana.com/tx/{result.tx_hash}")
    assert result.session_id is None
    assert rest.seller_balance_units("x402") == before + 30_000
    assert await done(client.wallet.balance()) == Usdc(Decimal("1.97"))
    counters = rest.counters()
    # The original request, then the one retry carrying the signed payment; the handler ran once.
    assert counters["hits"][path] == 2
    assert counters["paymentAttempts"][path] == 1
    assert counters["served"][path] == 1


async def test_sends_the_method_headers_and_json_body(agent: Agent, ready: Ready) -> None:
    client = await agent("py-post", "1")
    result = await done(
        client.pay(
            f"{ready.paid_api}/x402/echo",
            method="post",
            headers={"X-Trace": "abc"},
            body={"question": "ledgers?", "budget": Decimal("0.5")},
        )
    )
    assert isinstance(result, PaidResult)
    assert result.data["method"] == "POST"
    assert result.data["body"] == {"question": "ledgers?", "budget": 0.5}


async def test_mpp_negotiates_a_session_once_and_reuses_it(agent: Agent, ready: Ready, rest: Rest) -> None:
    client = await agent("py-mpp", "1")
    path = f"/mpp/feed-{client.agent_id}"
    before = rest.seller_balance_units("mpp")

    first = await done(client.pay(f"{ready.paid_api}{path}"))
    second = await done(client.pay(f"{ready.paid_api}{path}"))

    assert isinstance(first, PaidResult)
    assert isinstance(second, PaidResult)
    assert (first.protocol, first.status, first.amount_paid) == ("mpp", 200, Usdc(Decimal("0.01")))
    assert first.session_id is not None
    assert second.protocol == "mpp"
    assert second.session_id == first.session_id
    assert second.amount_paid == Usdc(Decimal("0.01"))
    assert second.tx_hash != first.tx_hash
    assert "x-mpp-receipt" in second.headers
    assert rest.seller_balance_units("mpp") == before + 20_000
    counters = rest.counters()
    # First call: the 402, then the request with the new session; second call: the session only.
    assert counters["hits"][path] == 3
    assert counters["paymentAttempts"][path] == 2
    assert counters["served"][path] == 2


async def test_an_answer_other_than_402_passes_through_unpaid(agent: Agent, ready: Ready) -> None:
    client = await agent("py-free")
    result = await done(client.pay(f"{ready.paid_api}/free"))
    assert result.paid is False
    assert result.status == 200
    assert result.data == {"free": True}
    assert result.headers["x-free"] == "yes"
    assert await done(client.transactions.list(status="rejected")) == []


async def test_pays_an_api_built_with_the_python_asgi_middleware(
    agent: Agent, python_api: str, python_handled: Handled, rest: Rest
) -> None:
    client = await agent("py-asgi", "1")
    before = rest.seller_balance_units("python")

    result = await done(client.pay(f"{python_api}/py/x402/report", method="POST", body={"q": 1}))

    assert isinstance(result, PaidResult)
    assert (result.status, result.protocol) == (200, "x402")
    assert result.amount_paid == Usdc.from_units(PYTHON_PRICE_UNITS)
    assert result.data["content"] == "paid /py/x402/report"
    assert result.data["body"] == '{"q":1}'
    assert result.data["txHash"] == result.tx_hash
    wallet = await done(client.wallet.get())
    assert result.data["payer"] == wallet.address
    assert python_handled.count(result.tx_hash) == 1
    assert rest.seller_balance_units("python") == before + PYTHON_PRICE_UNITS


async def test_pays_through_the_plain_async_and_sync_gates(
    agent: Agent, python_api: str, python_wsgi_api: str, python_handled: Handled, rest: Rest
) -> None:
    client = await agent("py-plain", "1")
    before = rest.seller_balance_units("python")

    plain = await done(client.pay(f"{python_api}/py/plain/quote"))
    wsgi = await done(client.pay(f"{python_wsgi_api}/any/path?x=1"))

    assert isinstance(plain, PaidResult)
    assert isinstance(wsgi, PaidResult)
    assert plain.data == {"content": "paid /py/plain/quote", "txHash": plain.tx_hash}
    assert wsgi.data["txHash"] == wsgi.tx_hash
    assert "x-payment-response" in wsgi.headers
    assert python_handled.count(plain.tx_hash) == 1
    assert python_handled.count(wsgi.tx_hash) == 1
    assert rest.seller_balance_units("python") == before + 2 * PYTHON_PRICE_UNITS
    assert await done(client.wallet.balance()) == Usdc(Decimal("0.96"))


def test_one_sync_client_serves_several_threads(rest: Rest, ready: Ready) -> None:
    agent_id, _ = rest.register("py-threads")
    rest.fund(agent_id, "1")
    with Client(agent_id=agent_id, api_key=ready.buyer_key, base_url=ready.api_url, max_in_flight=4) as client:
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(lambda n: client.pay(f"{ready.paid_api}/x402/thread-{n}"), range(6)))
        assert all(isinstance(result, PaidResult) for result in results)
        assert len({result.tx_hash for result in results if isinstance(result, PaidResult)}) == 6
        assert client.wallet.balance() == Usdc(Decimal("0.82"))
