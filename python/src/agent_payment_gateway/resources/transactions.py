"""The ``transactions`` resource (spec 4.7): the agent's payments as the gateway indexed them
(``/v1/transactions``), one by hash, and the payment tree under a root (``get_chain``)."""

from __future__ import annotations

import re

from ..effects import Flow
from ..models import Protocol, Transaction, transaction_from_wire, transactions_from_wire
from ..runner import AsyncRunner, SyncRunner
from ..transport import QueryValue, Transport, segment

#: A ledger transaction hash (base58); also what ``with_parent`` takes.
TX_HASH = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,128}$")


#: A list of transactions (named here because the resources' ``list`` method shadows the builtin).
Transactions = list[Transaction]


def check_tx_hash(tx_hash: str) -> str:
    if not isinstance(tx_hash, str) or not TX_HASH.match(tx_hash):
        raise TypeError("tx_hash must be a base58 transaction hash")
    return tx_hash


class TransactionFlows:
    def __init__(self, transport: Transport, agent_id: str) -> None:
        self._transport = transport
        self._agent_id = agent_id

    def list(
        self,
        limit: int | None,
        protocol: Protocol | None,
        domain: str | None,
        since: str | None,
        status: str | None,
        agent_id: str | None,
    ) -> Flow[Transactions]:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise TypeError("limit must be a positive integer")
        query: dict[str, QueryValue] = {
            "agentId": agent_id if agent_id is not None else self._agent_id,
            "limit": limit,
            "protocol": protocol,
            "domain": domain,
            "since": since,
            "status": status,
        }
        page = yield from self._transport.request("GET", "/v1/transactions", query=query)
        return transactions_from_wire(page, "transactions")

    def get(self, tx_hash: str) -> Flow[Transaction]:
        path = f"/v1/transactions/{segment(check_tx_hash(tx_hash))}"
        return transaction_from_wire((yield from self._transport.request("GET", path)))

    def get_chain(self, tx_hash: str) -> Flow[Transactions]:
        path = f"/v1/transactions/{segment(check_tx_hash(tx_hash))}/chain"
        return transactions_from_wire((yield from self._transport.request("GET", path)), "chain")


class TransactionsResource:
    """``client.transactions`` of the synchronous ``Client``."""

    def __init__(self, flows: TransactionFlows, run: SyncRunner) -> None:
        self._flows = flows
        self._run = run

    def list(
        self,
        *,
        limit: int | None = None,
        protocol: Protocol | None = None,
        domain: str | None = None,
        since: str | None = None,
        status: str | None = None,
        agent_id: str | None = None,
    ) -> Transactions:
        """The agent's transactions, newest first. ``since`` is a window (``24h``) or an ISO time;
        ``status`` one of ``confirmed``, ``finalized``, ``rejected``; ``agent_id`` another agent of
        the account (default this client's)."""
        return self._run(self._flows.list(limit, protocol, domain, since, status, agent_id))

    def get(self, tx_hash: str) -> Transaction:
        return self._run(self._flows.get(tx_hash))

    def get_chain(self, tx_hash: str) -> Transactions:
        """The payment tree under ``tx_hash``, each transaction with its ``depth`` (root 0)."""
        return self._run(self._flows.get_chain(tx_hash))


class AsyncTransactionsResource:
    """``client.transactions`` of ``AsyncClient``: the same operations, awaited."""

    def __init__(self, flows: TransactionFlows, run: AsyncRunner) -> None:
        self._flows = flows
        self._run = run

    async def list(
        self,
        *,
        limit: int | None = None,
        protocol: Protocol | None = None,
        domain: str | None = None,
        since: str | None = None,
        status: str | None = None,
        agent_id: str | None = None,
    ) -> Transactions:
        """The agent's transactions, newest first (see ``TransactionsResource.list``)."""
        return await self._run(self._flows.list(limit, protocol, domain, since, status, agent_id))

    async def get(self, tx_hash: str) -> Transaction:
        return await self._run(self._flows.get(tx_hash))

    async def get_chain(self, tx_hash: str) -> Transactions:
        """The payment tree under ``tx_hash``, each transaction with its ``depth`` (root 0)."""
        return await self._run(self._flows.get_chain(tx_hash))
