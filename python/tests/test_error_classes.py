"""Every spec 7 error class in its situation, with both clients, against the whole system: raised
in the same situations as the TypeScript client, with the spec's fields, and (rules 1-3) a policy
rejection comes before any payment attempt and moves no funds."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from agent_payment_gateway import (
    AsyncClient,
    AuthenticationError,
    Client,
    DailyBudgetExceededError,
    DomainNotAllowedError,
    InsufficientFundsError,
    MoneyFormatError,
    PaidResult,
    PaymentError,
    PaymentProtocolError,
    PolicyViolationError,
    ServiceError,
    Usdc,
)
from agent_payment_gateway.effects import NetworkFailure

from .conftest import MakeClient
from .support.both import done
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_a_per_call_limit_breach_is_a_policy_violation_before_any_payment_attempt(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-capped", "1")
    await done(client.policies.set(per_call_limit=Decimal("0.01")))
    path = f"/x402/capped-{client.agent_id}"
    before = rest.seller_balance_units("x402")

    with pytest.raises(PolicyViolationError) as raised:
        await done(client.pay(f"{ready.paid_api}{path}"))

    error = raised.value
    assert type(error) is PolicyViolationError
    assert error.reason == "per_call_limit_exceeded: requested 0.03 usdc, limit is 0.01 usdc"
    assert error.reason_code == "per_call_limit_exceeded"
    assert (error.code, error.status) == ("POLICY_VIOLATION", 403)
    assert isinstance(error, ServiceError)
    counters = rest.counters()
    assert counters["hits"][path] == 1
    assert path not in counters["paymentAttempts"]
    assert rest.seller_balance_units("x402") == before
    assert await done(client.wallet.balance()) == Usdc(Decimal(1))
    rejected = await done(client.transactions.list(status="rejected"))
    assert [(tx.status, tx.agent_id, tx.tx_hash) for tx in rejected] == [("rejected", client.agent_id, None)]
    assert rejected[0].amount_paid == Usdc(Decimal("0.03"))


async def test_the_daily_budget_consumed_is_a_daily_budget_exceeded_error(agent: Agent, ready: Ready) -> None:
    client = await agent("py-daily", "1")
    await done(client.policies.set(daily_budget=Decimal("0.05")))
    first = await done(client.pay(f"{ready.paid_api}/x402/daily"))
    assert isinstance(first, PaidResult)

    with pytest.raises(DailyBudgetExceededError) as raised:
        await done(client.pay(f"{ready.paid_api}/x402/daily"))

    assert isinstance(raised.value, PolicyViolationError)
    assert raised.value.reason == (
        "daily_budget_exceeded: requested 0.03 usdc, limit is 0.05 usdc (used 0.03 usdc, left 0.02 usdc)"
    )
    assert (await done(client.policies.get())).used_today == Usdc(Decimal("0.03"))
    assert await done(client.wallet.balance()) == Usdc(Decimal("0.97"))


async def test_a_blocked_or_unlisted_domain_is_a_domain_not_allowed_error_with_the_domain(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-domains", "1")
    await done(client.policies.set(blocked_domains=["127.0.0.1"]))
    path = f"/x402/blocked-{client.agent_id}"
    with pytest.raises(DomainNotAllowedError) as blocked:
        await done(client.pay(f"{ready.paid_api}{path}"))
    assert blocked.value.domain == "127.0.0.1"
    assert blocked.value.reason_code == "domain_blocked"
    assert isinstance(blocked.value, PolicyViolationError)

    await done(client.policies.set(blocked_domains=None, allowed_domains=["example.com"]))
    with pytest.raises(DomainNotAllowedError) as unlisted:
        await done(client.pay(f"{ready.paid_api}{path}"))
    assert unlisted.value.reason_code == "domain_not_allowed"
    assert unlisted.value.domain == "127.0.0.1"
    assert path not in rest.counters()["paymentAttempts"]
    # Refused before the first request: the blocked API received nothing.
    assert path not in rest.counters()["hits"]
    assert await done(client.wallet.balance()) == Usdc(Decimal(1))
    # The gateway, asked after each local refusal, recorded both (spec 3: listed as rejected).
    rejected = await done(client.transactions.list(status="rejected"))
    assert sorted(tx.extra.get("rejectionCode") or "" for tx in rejected) == ["domain_blocked", "domain_not_allowed"]


async def test_a_rate_limit_breach_is_a_policy_violation(agent: Agent, ready: Ready) -> None:
    client = await agent("py-rated", "1")
    await done(client.policies.set(rate_limit={"calls": 1, "window": "1h"}))
    assert isinstance(await done(client.pay(f"{ready.paid_api}/x402/rated")), PaidResult)
    with pytest.raises(PolicyViolationError) as raised:
        await done(client.pay(f"{ready.paid_api}/x402/rated"))
    assert raised.value.reason_code == "rate_limit_exceeded"


async def test_a_wallet_short_of_the_price_is_insufficient_funds_with_the_current_balance(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-poor", "0.01")
    before = rest.seller_balance_units("x402")
    with pytest.raises(InsufficientFundsError) as raised:
        await done(client.pay(f"{ready.paid_api}/x402/expensive"))
    assert raised.value.current_balance == Usdc(Decimal("0.01"))
    assert rest.seller_balance_units("x402") == before

    address = (await done(client.wallet.get())).address
    with pytest.raises(InsufficientFundsError) as withdraw:
        await done(client.wallet.withdraw(to=ready.sellers["x402"], usdc=Decimal(100)))
    assert withdraw.value.current_balance == Usdc(Decimal("0.01"))
    assert withdraw.value.code == "INSUFFICIENT_FUNDS"
    assert address != ready.sellers["x402"]


async def test_a_402_in_an_unknown_protocol_is_a_payment_protocol_error_naming_the_endpoint(
    agent: Agent, ready: Ready
) -> None:
    client = await agent("py-lightning", "1")
    endpoint = f"{ready.paid_api}/unknown"
    with pytest.raises(PaymentProtocolError) as raised:
        await done(client.pay(endpoint))
    assert raised.value.endpoint == endpoint
    assert "lightning/9" in raised.value.message
    # Refused before any authorization: nothing reserved, nothing rejected by the policy.
    assert await done(client.transactions.list(status="rejected")) == []
    assert await done(client.wallet.balance()) == Usdc(Decimal(1))


async def test_an_unreachable_api_is_a_payment_error_after_the_retries(agent: Agent) -> None:
    client = await agent("py-unreachable", "0", max_retries=2)
    with pytest.raises(PaymentError) as raised:
        await done(client.pay(f"http://127.0.0.1:{unused_port()}/gone"))
    assert "no answer after 3 attempt(s)" in raised.value.message
    assert isinstance(raised.value.__cause__, Exception)


async def test_a_paid_api_slower_than_the_timeout_is_a_payment_error_after_the_retries(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-slow", "0", timeout=0.4, max_retries=1)
    hits_before = rest.counters()["hits"].get("/slow", 0)
    started = time.monotonic()
    with pytest.raises(PaymentError) as raised:
        await done(client.pay(f"{ready.paid_api}/slow?ms=3000"))
    elapsed = time.monotonic() - started
    cause = raised.value.__cause__
    assert cause is not None
    assert isinstance(cause.__cause__, NetworkFailure)
    assert cause.__cause__.timed_out
    assert rest.counters()["hits"]["/slow"] == hits_before + 2
    # Two attempts of 0.4 s and a short backoff, nowhere near the server's 3 s.
    assert elapsed < 2.0


async def test_a_gateway_slower_than_the_timeout_is_a_payment_error(ready: Ready, make_client: MakeClient) -> None:
    # A loopback server that accepts and never answers stands in for a hung gateway.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        client = make_client("py-hung", base_url=f"http://127.0.0.1:{port}", timeout=0.3, max_retries=1)
        with pytest.raises(PaymentError) as raised:
            await done(client.wallet.balance())
    assert "failed after 2 attempts" in raised.value.message


async def test_a_bad_api_key_is_an_authentication_error_and_nothing_is_paid(
    rest: Rest, ready: Ready, make_client: MakeClient
) -> None:
    agent_id, _ = rest.register("py-keyless")
    rest.fund(agent_id, "1")
    client = make_client(agent_id, api_key="apg_not_a_real_key_000000000000000000000000")
    path = f"/x402/auth-{agent_id}"
    with pytest.raises(AuthenticationError) as raised:
        await done(client.wallet.balance())
    assert raised.value.status == 401
    with pytest.raises(AuthenticationError):
        await done(client.pay(f"{ready.paid_api}{path}"))
    assert path not in rest.counters()["paymentAttempts"]


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_a_missing_api_key_is_an_authentication_error_at_construction(client_class: type[Client | AsyncClient]) -> None:
    with pytest.raises(AuthenticationError):
        client_class(agent_id="anyone", api_key="")


async def test_another_accounts_or_an_unknown_agent_is_a_not_found_service_error(
    rest: Rest, ready: Ready, make_client: MakeClient
) -> None:
    theirs, _ = rest.register("py-theirs", key=ready.other_buyer_key)
    for agent_id in (theirs, "py-nobody-at-all"):
        with pytest.raises(ServiceError) as raised:
            await done(make_client(agent_id).wallet.get())
        assert type(raised.value) is ServiceError
        assert (raised.value.code, raised.value.status) == ("NOT_FOUND", 404)


async def test_bad_input_is_refused_before_anything_is_sent(agent: Agent) -> None:
    client = await agent("py-input")
    with pytest.raises(MoneyFormatError, match="decimal places"):
        await done(client.wallet.fund(0.1 + 0.2))
    with pytest.raises(MoneyFormatError, match="decimal places"):
        await done(client.policies.set(per_call_limit=Decimal("0.0000001")))
    with pytest.raises(TypeError, match=r"rate_limit\.calls"):
        await done(client.policies.set(rate_limit={"calls": 1.5, "window": "1h"}))
    with pytest.raises(TypeError, match="endpoint"):
        await done(client.pay("ftp://example.com/file"))
    with pytest.raises(TypeError, match="has no body"):
        await done(client.pay("http://127.0.0.1/x", body={"a": 1}))
    # The window list is the gateway's: an unknown one is its BAD_USER_INPUT.
    with pytest.raises(ServiceError) as raised:
        await done(client.policies.set(rate_limit={"calls": 1, "window": "2h"}))
    assert raised.value.code == "BAD_USER_INPUT"
