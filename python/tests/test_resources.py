"""``wallet``, ``policies``, ``transactions`` and ``agents`` with both clients against the whole
system: exact amounts, the spec's field names, indexed payments read back."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, TypeVar

import anyio
import pytest

from agent_payment_gateway import PaidResult, RateLimit, ServiceError, Transaction, Usdc

from .support.both import done
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]
T = TypeVar("T")

#: How long the indexer may take to list a payment (it follows the ledger within ~0.2 s).
INDEX_DEADLINE_S = 20.0


async def poll_until(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = INDEX_DEADLINE_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        await anyio.sleep(0.1)


async def test_wallet_get_balance_fund_and_withdraw_move_exact_amounts(agent: Agent, ready: Ready, rest: Rest) -> None:
    client = await agent("py-treasurer", "3")
    wallet = await done(client.wallet.get())
    assert (wallet.agent_id, wallet.balance, wallet.network) == (client.agent_id, Usdc(Decimal(3)), ready.network)
    assert 32 <= len(wallet.address) <= 44

    funded = await done(client.wallet.fund(Decimal("1.000001")))
    assert (funded.kind, funded.status, funded.amount) == ("fund", "confirmed", Usdc(Decimal("1.000001")))
    assert funded.tx_hash is not None
    assert await done(client.wallet.balance()) == Usdc(Decimal("4.000001"))

    receiver_id, receiver = rest.register("py-receiver")
    withdrawn = await done(client.wallet.withdraw(to=receiver, usdc="0.5"))
    assert (withdrawn.kind, withdrawn.status) == ("withdraw", "confirmed")
    assert await done(client.wallet.balance()) == Usdc(Decimal("3.500001"))
    assert rest.call("GET", f"/v1/agents/{receiver_id}/wallet/balance", ready.buyer_key).json() == {"usdc": 0.5}

    operation = await done(client.wallet.operation(funded.operation_id))
    assert (operation.operation_id, operation.status, operation.kind) == (funded.operation_id, "confirmed", "fund")


async def test_the_same_idempotency_key_funds_once(agent: Agent) -> None:
    client = await agent("py-once")
    key = f"fund-{client.agent_id}"
    first = await done(client.wallet.fund(2, idempotency_key=key))
    again = await done(client.wallet.fund(2, idempotency_key=key))
    assert again.operation_id == first.operation_id
    assert await done(client.wallet.balance()) == Usdc(Decimal(2))


async def test_policies_set_keeps_omitted_fields_none_removes_and_clear_removes_all(agent: Agent, ready: Ready) -> None:
    client = await agent("py-governed", "1")
    policy = await done(
        client.policies.set(
            daily_budget=Decimal(5),
            per_call_limit="0.5",
            allowed_domains=["127.0.0.1", "example.com"],
            rate_limit=RateLimit(calls=10, window="1h"),
            protocol_preference="mpp",
        )
    )
    assert policy.daily_budget == Usdc(Decimal(5))
    assert policy.per_call_limit == Usdc(Decimal("0.5"))
    assert policy.rate_limit == RateLimit(10, "1h")
    assert policy.protocol_preference == "mpp"

    await done(client.policies.set(per_call_limit=None))
    read = await done(client.policies.get())
    assert read.daily_budget == Usdc(Decimal(5))
    assert read.per_call_limit is None
    assert read.used_today == Usdc(Decimal(0))
    assert sorted(read.allowed_domains or []) == ["127.0.0.1", "example.com"]
    assert read.extra["budgetState"] == "open"

    paid = await done(client.pay(f"{ready.paid_api}/x402/governed"))
    # protocol_preference mpp, but the API offers x402 only: x402 it is.
    assert isinstance(paid, PaidResult)
    assert (await done(client.policies.get())).used_today == Usdc(Decimal("0.03"))

    await done(client.policies.clear())
    cleared = await done(client.policies.get())
    assert (cleared.daily_budget, cleared.per_call_limit, cleared.rate_limit) == (None, None, None)
    assert cleared.blocked_domains == []

    # Every change was a version: two sets and the clearing, newest first, by this client's key.
    history = await done(client.policies.history())
    assert [version.version for version in history] == [3, 2, 1]
    assert all(version.created_by.startswith("key:") for version in history)
    assert history[2].policy["dailyBudgetUnits"] == "5000000"
    assert history[1].policy["perCallLimitUnits"] is None
    assert history[0].policy["dailyBudgetUnits"] is None
    assert len({version.hash for version in history}) == 3


async def test_transactions_list_get_and_get_chain_read_the_indexed_payments(agent: Agent, ready: Ready) -> None:
    client = await agent("py-reader", "1")
    x402 = await done(client.pay(f"{ready.paid_api}/x402/read"))
    mpp = await done(client.pay(f"{ready.paid_api}/mpp/read"))
    assert isinstance(x402, PaidResult)
    assert isinstance(mpp, PaidResult)

    async def both_listed() -> list[Transaction] | None:
        listed = await done(client.transactions.list(limit=50))
        return listed if len(listed) >= 2 else None

    listed = await poll_until(both_listed, "both payments to be indexed")
    assert sorted(tx.tx_hash or "" for tx in listed) == sorted([x402.tx_hash, mpp.tx_hash])
    assert [tx.tx_hash for tx in await done(client.transactions.list(protocol="x402"))] == [x402.tx_hash]
    assert [tx.tx_hash for tx in await done(client.transactions.list(protocol="mpp", since="24h"))] == [mpp.tx_hash]
    assert await done(client.transactions.list(domain="elsewhere.example")) == []

    one = await done(client.transactions.get(x402.tx_hash))
    assert (one.tx_hash, one.agent_id, one.protocol, one.parent_tx_hash) == (
        x402.tx_hash,
        client.agent_id,
        "x402",
        None,
    )
    assert one.amount_paid == Usdc(Decimal("0.03"))
    assert one.endpoint.endswith("/x402/read")
    assert "://" not in one.endpoint
    assert one.policy_check == "passed"
    assert one.solana_explorer is not None
    assert x402.tx_hash in one.solana_explorer
    assert one.timestamp.endswith("Z")

    chain = await done(client.transactions.get_chain(x402.tx_hash))
    assert [(tx.tx_hash, tx.depth) for tx in chain] == [(x402.tx_hash, 0)]

    with pytest.raises(ServiceError) as missing:
        await done(client.transactions.get("1" * 64))
    assert missing.value.code == "NOT_FOUND"
    with pytest.raises(TypeError):
        await done(client.transactions.get("not a hash"))


async def test_agents_list_shows_the_accounts_agents_with_balances_and_archive_hides_one(
    agent: Agent, rest: Rest, ready: Ready
) -> None:
    lister = await agent("py-lister", "1")
    idle_id, _ = rest.register("py-lister-idle")
    listed = {entry.agent_id: entry for entry in await done(lister.agents.list())}
    assert listed[lister.agent_id].balance == Usdc(Decimal(1))
    assert listed[idle_id].balance == Usdc(Decimal(0))

    archived = await done(lister.agents.archive(idle_id))
    assert archived.agent_id == idle_id
    assert archived.archived_at is not None
    assert idle_id not in {entry.agent_id for entry in await done(lister.agents.list())}
    assert idle_id in {entry.agent_id for entry in await done(lister.agents.list(include_archived=True))}
    with pytest.raises(ServiceError) as not_empty:
        await done(lister.agents.archive(lister.agent_id))
    assert not_empty.value.code == "AGENT_NOT_EMPTY"
