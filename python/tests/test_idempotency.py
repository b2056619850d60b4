"""The retry discipline with real dropped connections (a loopback proxy that forwards a request and
then cuts the connection instead of answering): the same Idempotency-Key on every retry, and no
retry ever pays or funds twice. Both clients."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from agent_payment_gateway import PaidResult, PaymentError, ServiceError, Usdc

from .conftest import MakeClient
from .support.both import done
from .support.servers import dropping_proxy
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]


async def test_a_funding_whose_answer_is_lost_is_retried_with_the_same_key_and_funds_once(
    rest: Rest, ready: Ready, make_client: MakeClient
) -> None:
    agent_id, _ = rest.register("py-fund-drop")

    def drop_first_fund(method: str, path: str, count: int) -> bool:
        return method == "POST" and path.endswith("/wallet/fund") and count == 1

    with dropping_proxy(ready.api_url, drop_first_fund) as proxy:
        client = make_client(agent_id, base_url=proxy.origin)
        operation = await done(client.wallet.fund(Decimal("2.5")))
        funds = [seen for seen in proxy.seen if seen.path.endswith("/wallet/fund")]

    assert operation.status == "confirmed"
    assert operation.amount == Usdc(Decimal("2.5"))
    assert [seen.dropped for seen in funds] == [True, False]
    assert len({seen.headers["idempotency-key"] for seen in funds}) == 1
    assert await done(make_client(agent_id).wallet.balance()) == Usdc(Decimal("2.5"))


async def test_a_pay_whose_authorization_answer_is_lost_reserves_and_pays_once(
    rest: Rest, ready: Ready, make_client: MakeClient
) -> None:
    agent_id, _ = rest.register("py-auth-drop")
    rest.fund(agent_id, "1")
    before = rest.seller_balance_units("x402")

    def drop_first_authorize(method: str, path: str, count: int) -> bool:
        return method == "POST" and path.endswith("/payments/authorize") and count == 1

    with dropping_proxy(ready.api_url, drop_first_authorize) as proxy:
        client = make_client(agent_id, base_url=proxy.origin)
        result = await done(client.pay(f"{ready.paid_api}/x402/auth-drop", idempotency_key=f"pay-{agent_id}"))
        authorizations = [seen for seen in proxy.seen if seen.path.endswith("/payments/authorize")]

    assert isinstance(result, PaidResult)
    assert [seen.headers["idempotency-key"] for seen in authorizations] == [f"pay-{agent_id}"] * 2
    assert rest.seller_balance_units("x402") == before + 30_000
    assert await done(make_client(agent_id).wallet.balance()) == Usdc(Decimal("0.97"))


async def test_a_pay_repeated_with_the_same_key_never_pays_twice(agent: Agent, ready: Ready, rest: Rest) -> None:
    client = await agent("py-pay-twice", "1")
    key = f"once-{client.agent_id}"
    before = rest.seller_balance_units("x402")
    first = await done(client.pay(f"{ready.paid_api}/x402/once", idempotency_key=key))
    assert isinstance(first, PaidResult)

    # The same key gets the same signed payment back, which the API refuses as already used; the
    # gateway reports the reservation settled: paid once, and the client says so. (When the 402's
    # MPP challenge was refreshed in between — its `expires` moves each second — the authorization
    # is a different request under the same key, and the gateway refuses the key instead.)
    with pytest.raises(ServiceError) as raised:
        await done(client.pay(f"{ready.paid_api}/x402/once", idempotency_key=key))

    assert raised.value.code in ("PAYMENT_SETTLED_ANSWER_LOST", "IDEMPOTENCY_KEY_REUSED")
    if raised.value.code == "PAYMENT_SETTLED_ANSWER_LOST":
        assert isinstance(raised.value, PaymentError)
    assert rest.seller_balance_units("x402") == before + 30_000
    assert await done(client.wallet.balance()) == Usdc(Decimal("0.97"))


async def test_a_paid_answer_lost_after_settlement_is_retried_with_the_same_payment_which_settles_once(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-drop-once", "1")
    # The paid API's handler cuts the connection the first time it runs for this path (the payment
    # settled, the answer is lost); the client retries the paid request with the same signed payment.
    path = f"/x402/drop-once/{client.agent_id}"
    before = rest.seller_balance_units("x402")

    with pytest.raises(ServiceError) as raised:
        await done(client.pay(f"{ready.paid_api}{path}"))

    assert raised.value.code == "PAYMENT_SETTLED_ANSWER_LOST"
    assert isinstance(raised.value, PaymentError)
    counters = rest.counters()
    assert counters["paymentAttempts"][path] >= 2
    assert counters["served"][path] == 1
    assert rest.seller_balance_units("x402") == before + 30_000
    assert await done(client.wallet.balance()) == Usdc(Decimal("0.97"))


async def test_an_idempotency_key_the_gateway_refuses_is_an_error_before_anything_is_sent(agent: Agent) -> None:
    client = await agent("py-badkey", "1")
    with pytest.raises(ServiceError) as raised:
        await done(client.wallet.fund(Decimal(1), idempotency_key="has spaces"))
    assert raised.value.code == "INVALID_IDEMPOTENCY_KEY"
    assert await done(client.wallet.balance()) == Usdc(Decimal(1))
