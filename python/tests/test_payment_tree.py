"""A payment tree (spec 4.7 ``agents.invoke``, ``with_parent``, ``transactions.get_chain``) built
with both clients: an orchestrator invokes a sub-agent whose endpoint is built with the Python
server helper; inside the paid handler the sub-agent pays the TypeScript-middleware APIs with a
client bound to the invocation, until the invocation's budget refuses it (``BudgetExceededError``).
``get_chain`` then resolves the tree, and its totals equal what the TypeScript client adds up for
the same root, and what the gateway itself reports."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import anyio
import anyio.to_thread
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_payment_gateway import (
    AsyncClient,
    BudgetExceededError,
    Client,
    PaidResult,
    PolicyViolationError,
    ServiceError,
    Transaction,
    Usdc,
)
from agent_payment_gateway.server import X402Middleware, X402Options, X402Payment

from .support.both import AnyClient, done
from .support.servers import serve_asgi
from .support.system import Rest, SystemProcess

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]
INDEX_DEADLINE_S = 30.0
SUB_AGENT_PRICE_UNITS = 100_000  # 0.1 usdc


@dataclass
class SubAgentLog:
    parent_tx_hash: str | None = None
    paid: list[PaidResult] = field(default_factory=list)
    refusal: BaseException | None = None


def sub_agent_app(
    kind: str, settings: dict[str, Any], options: X402Options, endpoints: list[str], log: SubAgentLog
) -> Starlette:
    """The sub-agent's paid endpoint: paid first (the Python helper), then it works by paying
    ``endpoints`` in order under the invocation with its own client of ``kind``, bound to the
    invocation, stopping at the first refusal. (An AsyncClient is made inside the server's event
    loop, as a sub-agent process of its own would.)"""

    def work_sync(client: Client) -> None:
        for endpoint in endpoints:
            try:
                result = client.pay(endpoint)
            except PolicyViolationError as error:
                log.refusal = error
                return
            assert isinstance(result, PaidResult)
            log.paid.append(result)

    async def work_async(client: AsyncClient) -> None:
        for endpoint in endpoints:
            try:
                result = await client.pay(endpoint)
            except PolicyViolationError as error:
                log.refusal = error
                return
            assert isinstance(result, PaidResult)
            log.paid.append(result)

    async def task(request: Request) -> Response:
        payment: X402Payment = request.state.x402_payment
        log.parent_tx_hash = payment.tx_hash
        body = await request.json()
        if kind == "sync":
            with Client(**settings) as client:
                await anyio.to_thread.run_sync(work_sync, client.with_parent(payment.tx_hash))
        else:
            async with AsyncClient(**settings) as client:
                await work_async(client.with_parent(payment.tx_hash))
        return JSONResponse({"answer": 42, "task": body, "paidCalls": len(log.paid)})

    app = Starlette(routes=[Route("/task", task, methods=["POST"])])
    app.add_middleware(X402Middleware, options=options, paths=["/task"])
    return app


async def test_invoke_builds_a_tree_whose_chain_totals_equal_typescripts(
    agent: Agent, rest: Rest, system: SystemProcess, kind: str
) -> None:
    ready = system.ready
    orchestrator = await agent("py-orchestrator", "1")
    sub = await agent("py-sub-agent", "1")
    sub_address = (await done(sub.wallet.get())).address
    api = ready.paid_api
    # 0.03 + 0.01 + 0.03 = 0.07 under a 0.08 budget; the next 0.03 would make 0.10.
    endpoints = [f"{api}/x402/sub-1", f"{api}/mpp/sub-2", f"{api}/x402/sub-3", f"{api}/x402/sub-4"]
    log = SubAgentLog()
    options = X402Options(
        amount=SUB_AGENT_PRICE_UNITS,
        token="usdc",
        pay_to=sub_address,
        facilitator_url=ready.api_url,
        api_key=ready.buyer_key,
    )

    settings: dict[str, Any] = {
        "agent_id": sub.agent_id,
        "api_key": ready.buyer_key,
        "base_url": ready.api_url,
        "retry_base_delay": 0.01,
    }
    with serve_asgi(sub_agent_app(kind, settings, options, endpoints, log)) as origin:
        result = await done(
            orchestrator.agents.invoke(
                agent_endpoint=f"{origin}/task", task={"topic": "ledgers"}, budget=Decimal("0.08")
            )
        )

    assert isinstance(log.refusal, BudgetExceededError)
    assert isinstance(log.refusal, PolicyViolationError)
    assert [(paid.protocol, paid.amount_paid) for paid in log.paid] == [
        ("x402", Usdc(Decimal("0.03"))),
        ("mpp", Usdc(Decimal("0.01"))),
        ("x402", Usdc(Decimal("0.03"))),
    ]
    assert result.output == {"answer": 42, "task": {"topic": "ledgers"}, "paidCalls": 3}
    root = log.parent_tx_hash
    assert root is not None
    assert result.payment_chain[0] == root
    assert sorted(result.payment_chain[1:]) == sorted(paid.tx_hash for paid in log.paid)
    assert result.total_cost == Usdc(Decimal("0.17"))
    assert await done(orchestrator.wallet.balance()) == Usdc(Decimal("0.9"))
    assert await done(sub.wallet.balance()) == Usdc(Decimal("1.03"))

    chain = await indexed_chain(orchestrator, root, 4)
    assert [(tx.depth, tx.agent_id) for tx in chain if tx.depth == 0] == [(0, orchestrator.agent_id)]
    assert (
        sorted((tx.depth, tx.agent_id, tx.parent_tx_hash) for tx in chain if tx.depth == 1)
        == [(1, sub.agent_id, root)] * 3
    )
    # The chain's rows read their policy check as list and get do.
    assert {tx.policy_check for tx in chain} == {"passed"}
    assert (await done(orchestrator.transactions.get(root))).policy_check == "passed"
    python_totals = {
        "amount": str(sum((tx.amount_paid.usdc for tx in chain), Decimal(0))),
        "transactionCount": len(chain),
        "agentCount": len({tx.agent_id for tx in chain}),
    }
    assert python_totals == {"amount": "0.17", "transactionCount": 4, "agentCount": 2}

    typescript = system.typescript("chain", agentId=orchestrator.agent_id, txHash=root)
    assert typescript["totals"] == python_totals
    assert sorted((tx["txHash"], tx["depth"], tx["amountPaid"]) for tx in typescript["transactions"]) == sorted(
        (tx.tx_hash, tx.depth, str(tx.amount_paid.usdc)) for tx in chain
    )
    gateway = rest.call("GET", f"/v1/transactions/{root}/chain", ready.buyer_key).json()
    assert gateway["totals"] == {"amount": {"usdc": 0.17}, "transactionCount": 4, "agentCount": 2}


async def indexed_chain(client: AnyClient, root: str, size: int) -> list[Transaction]:
    deadline = time.monotonic() + INDEX_DEADLINE_S
    while True:
        chain: list[Transaction] = []
        # Not indexed yet: the root is 404 until the indexer has seen it.
        with contextlib.suppress(ServiceError):
            chain = await done(client.transactions.get_chain(root))
        if len(chain) >= size:
            return chain
        if time.monotonic() > deadline:
            raise AssertionError(f"the chain of {root} did not reach {size} transactions (last: {len(chain)})")
        await anyio.sleep(0.1)
