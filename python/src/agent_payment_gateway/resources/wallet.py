"""The ``wallet`` resource (spec 4.7): the agent's custodial wallet, its balance, and funding and
withdrawal through the gateway (``/v1/agents/{agentId}/wallet/...``). The gateway holds the key;
this module only asks.

A funding or withdrawal the gateway answers 202 (``pending``: sent to the ledger, not confirmed
yet) is asked again with the same Idempotency-Key up to ``max_retries`` times, which resumes the
same operation; a still-pending answer is returned as it is, to follow up with ``operation``.
"""

from __future__ import annotations

import dataclasses
import re
import uuid

from ..effects import Flow, sleep
from ..models import Wallet, WalletOperation, operation_from_wire, wallet_from_wire
from ..money import Usdc, UsdcAmount, to_units, units_to_usdc, usdc_from_wire
from ..runner import AsyncRunner, SyncRunner
from ..transport import Transport

_ADDRESS = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")
_OPERATION_ID = re.compile(r"^[1-9][0-9]{0,18}$")
#: First wait before asking again about a pending operation (doubles each time).
PENDING_DELAY_SECONDS = 0.5


class WalletFlows:
    def __init__(self, transport: Transport, agent_path: str) -> None:
        self._transport = transport
        self._path = f"{agent_path}/wallet"

    def get(self) -> Flow[Wallet]:
        return wallet_from_wire((yield from self._transport.request("GET", self._path)))

    def balance(self) -> Flow[Usdc]:
        return usdc_from_wire((yield from self._transport.request("GET", f"{self._path}/balance")), "balance")

    def operation(self, operation_id: str) -> Flow[WalletOperation]:
        if not isinstance(operation_id, str) or not _OPERATION_ID.match(operation_id):
            raise TypeError("operation_id must be a wallet operation id")
        return operation_from_wire(
            (yield from self._transport.request("GET", f"{self._path}/operations/{operation_id}"))
        )

    def fund(self, usdc: UsdcAmount, idempotency_key: str | None) -> Flow[WalletOperation]:
        amount = _positive(usdc)
        return (yield from self._perform(f"{self._path}/fund", {"usdc": amount}, idempotency_key))

    def withdraw(self, to: str, usdc: UsdcAmount, idempotency_key: str | None) -> Flow[WalletOperation]:
        if not isinstance(to, str) or not _ADDRESS.match(to):
            raise TypeError("to must be a base58 ledger address")
        amount = _positive(usdc)
        result = yield from self._perform(f"{self._path}/withdraw", {"to": to, "usdc": amount}, idempotency_key)
        # The destination is the one asked for; a gateway answer without it is completed from the request.
        return result if result.to is not None else dataclasses.replace(result, to=to)

    def _perform(self, path: str, body: dict[str, object], idempotency_key: str | None) -> Flow[WalletOperation]:
        key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
        result = operation_from_wire((yield from self._transport.request("POST", path, body=body, idempotency_key=key)))
        attempt = 0
        while result.status == "pending" and attempt < self._transport.max_retries:
            yield from sleep(PENDING_DELAY_SECONDS * 2**attempt)
            result = operation_from_wire(
                (yield from self._transport.request("POST", path, body=body, idempotency_key=key))
            )
            attempt += 1
        return result


def _positive(usdc: UsdcAmount) -> object:
    units = to_units(usdc)
    if units == 0:
        raise ValueError("usdc must be positive")
    return units_to_usdc(units)


class WalletResource:
    """``client.wallet`` of the synchronous ``Client``."""

    def __init__(self, flows: WalletFlows, run: SyncRunner) -> None:
        self._flows = flows
        self._run = run

    def get(self) -> Wallet:
        """Spec 2.4: ``agent_id``, ``address``, ``balance``, ``network``."""
        return self._run(self._flows.get())

    def balance(self) -> Usdc:
        return self._run(self._flows.balance())

    def operation(self, operation_id: str) -> WalletOperation:
        """One funding or withdrawal as it stands now (how a ``pending`` answer is followed up)."""
        return self._run(self._flows.operation(operation_id))

    def fund(self, usdc: UsdcAmount, *, idempotency_key: str | None = None) -> WalletOperation:
        """Tops the wallet up from the account's funding source (spec 4.7)."""
        return self._run(self._flows.fund(usdc, idempotency_key))

    def withdraw(self, *, to: str, usdc: UsdcAmount, idempotency_key: str | None = None) -> WalletOperation:
        """Withdraws to the ledger address ``to``."""
        return self._run(self._flows.withdraw(to, usdc, idempotency_key))


class AsyncWalletResource:
    """``client.wallet`` of ``AsyncClient``: the same operations, awaited."""

    def __init__(self, flows: WalletFlows, run: AsyncRunner) -> None:
        self._flows = flows
        self._run = run

    async def get(self) -> Wallet:
        """Spec 2.4: ``agent_id``, ``address``, ``balance``, ``network``."""
        return await self._run(self._flows.get())

    async def balance(self) -> Usdc:
        return await self._run(self._flows.balance())

    async def operation(self, operation_id: str) -> WalletOperation:
        """One funding or withdrawal as it stands now (how a ``pending`` answer is followed up)."""
        return await self._run(self._flows.operation(operation_id))

    async def fund(self, usdc: UsdcAmount, *, idempotency_key: str | None = None) -> WalletOperation:
        """Tops the wallet up from the account's funding source (spec 4.7)."""
        return await self._run(self._flows.fund(usdc, idempotency_key))

    async def withdraw(self, *, to: str, usdc: UsdcAmount, idempotency_key: str | None = None) -> WalletOperation:
        """Withdraws to the ledger address ``to``."""
        return await self._run(self._flows.withdraw(to, usdc, idempotency_key))
