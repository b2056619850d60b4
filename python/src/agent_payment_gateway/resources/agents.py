"""The ``agents`` resource (spec 4.7; the spec marks it TypeScript only, this client has it too):
the account's agents (``/v1/agents``), archiving one, and ``invoke``, which pays a sub-agent's
endpoint under a hard budget and then reads from the gateway what the sub-agent spent under that
payment (``/v1/agents/{agentId}/invocations/{txHash}``)."""

from __future__ import annotations

import re
from typing import Any

from ..effects import Flow
from ..errors import ServiceError
from ..models import AgentEntry, InvocationResult, PaidResult, agent_from_wire
from ..money import Usdc, UsdcAmount, to_units, usdc_from_wire
from ..pay import PayExtras, PayFlow, pay_request
from ..runner import AsyncRunner, SyncRunner
from ..text_input import InvalidInputError, check_text
from ..transport import QueryValue, Transport, segment

_AGENT_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
#: The gateway's rule for a new agent's id (docs/rest.md): checked here, so a bad id is never sent.
_NEW_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
NAME_MAX = 200


def _agent_id(agent_id: object, pattern: re.Pattern[str], rule: str) -> str:
    if not isinstance(agent_id, str):
        raise InvalidInputError("agent_id", "must be a string")
    check_text("agent_id", agent_id)
    if not pattern.fullmatch(agent_id):
        raise InvalidInputError("agent_id", f"{agent_id!r} is not a valid agent id ({rule})")
    return agent_id


#: Page size ``agents.list`` asks for (the gateway's maximum).
AGENTS_PAGE = 500
#: Pages followed at most (500 000 agents): a gateway whose cursor never ends cannot loop forever.
MAX_PAGES = 1_000

AgentEntries = list[AgentEntry]


class AgentFlows:
    def __init__(self, transport: Transport, agent_id: str, pay: PayFlow) -> None:
        self._transport = transport
        self._agent_id = agent_id
        self._pay = pay

    def create(self, agent_id: str, name: str | None, idempotency_key: str | None) -> Flow[AgentEntry]:
        rule = "1-128 characters: a letter or digit, then letters, digits, _ . : -"
        checked = _agent_id(agent_id, _NEW_AGENT_ID, rule)
        body: dict[str, object] = {"agentId": checked}
        if name is not None:
            if not isinstance(name, str):
                raise InvalidInputError("name", "must be a string")
            check_text("name", name)
            if len(name) > NAME_MAX:
                raise InvalidInputError("name", f"at most {NAME_MAX} characters")
            body["name"] = name
        answer = yield from self._transport.request("POST", "/v1/agents", body=body, idempotency_key=idempotency_key)
        return agent_from_wire(answer)

    def get(self, agent_id: str) -> Flow[AgentEntry]:
        checked = _agent_id(agent_id, _AGENT_ID, "1-128 visible ASCII characters")
        return agent_from_wire((yield from self._transport.request("GET", f"/v1/agents/{segment(checked)}")))

    def list(self, include_archived: bool) -> Flow[AgentEntries]:
        if not isinstance(include_archived, bool):
            raise TypeError("include_archived must be a bool")
        agents: AgentEntries = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            query: dict[str, QueryValue] = {
                "limit": AGENTS_PAGE,
                "after": after,
                "includeArchived": "true" if include_archived else None,
            }
            page = yield from self._transport.request("GET", "/v1/agents", query=query)
            listed = page.get("agents") if isinstance(page, dict) else None
            if not isinstance(listed, list):
                raise ServiceError("the gateway's agents page has no agents list", detail=page)
            agents.extend(agent_from_wire(item) for item in listed)
            cursor = page.get("nextCursor")
            # A cursor that does not move would loop forever: only a later agent id continues.
            if not isinstance(cursor, str) or cursor == after:
                return agents
            after = cursor
        return agents

    def archive(self, agent_id: str, force: bool) -> Flow[AgentEntry]:
        _agent_id(agent_id, _AGENT_ID, "1-128 visible ASCII characters")
        if not isinstance(force, bool):
            raise TypeError("force must be a bool")
        query: dict[str, QueryValue] = {"force": "true" if force else None}
        return agent_from_wire(
            (yield from self._transport.request("DELETE", f"/v1/agents/{segment(agent_id)}", query=query))
        )

    def invoke(
        self, agent_endpoint: str, task: Any, budget: UsdcAmount | Usdc, idempotency_key: str | None
    ) -> Flow[InvocationResult]:
        budget_units = to_units(budget.usdc if isinstance(budget, Usdc) else budget, "budget")
        if budget_units == 0:
            raise ValueError("budget must be positive")
        context = pay_request(agent_endpoint, "POST", None, task if task is not None else {})
        extras = PayExtras(invocation_budget=Usdc.from_units(budget_units), protocol_preference="x402")
        result = yield from self._pay.pay(context, idempotency_key, extras)
        if not isinstance(result, PaidResult):
            return InvocationResult(output=result.data, total_cost=Usdc.from_units(0), payment_chain=[])
        try:
            invocation = yield from self._transport.request(
                "GET", f"/v1/agents/{segment(self._agent_id)}/invocations/{segment(result.tx_hash)}"
            )
        except ServiceError as error:
            # No invocation under this payment (the payee is not an agent of this gateway): the
            # payment itself is the whole cost.
            if error.status == 404:
                return InvocationResult(
                    output=result.data, total_cost=result.amount_paid, payment_chain=[result.tx_hash]
                )
            raise
        spent = invocation.get("spent") if isinstance(invocation, dict) else None
        spent_units = 0 if spent is None else usdc_from_wire(spent, "spent").units
        payments = invocation.get("payments") if isinstance(invocation, dict) else None
        chain = [item for item in payments if isinstance(item, str)] if isinstance(payments, list) else []
        return InvocationResult(
            output=result.data,
            total_cost=Usdc.from_units(result.amount_paid.units + spent_units),
            payment_chain=[result.tx_hash, *chain],
        )


class AgentsResource:
    """``client.agents`` of the synchronous ``Client``."""

    def __init__(self, flows: AgentFlows, run: SyncRunner) -> None:
        self._flows = flows
        self._run = run

    def create(self, agent_id: str, *, name: str | None = None, idempotency_key: str | None = None) -> AgentEntry:
        """Registers an agent with a new custodial wallet (``POST /v1/agents``). A taken id is a
        ``ServiceError`` with code ``AGENT_EXISTS`` (status 409); an invalid id an
        ``InvalidInputError`` naming ``agent_id``, before any request."""
        return self._run(self._flows.create(agent_id, name, idempotency_key))

    def get(self, agent_id: str) -> AgentEntry:
        """One agent of the account, archived ones too; an unknown id is ``ServiceError`` 404 ``NOT_FOUND``."""
        return self._run(self._flows.get(agent_id))

    def list(self, *, include_archived: bool = False) -> AgentEntries:
        """Spec 2.5: every agent of the account with its balance, following the gateway's pages."""
        return self._run(self._flows.list(include_archived))

    def archive(self, agent_id: str, *, force: bool = False) -> AgentEntry:
        """Archives an agent: it can no longer pay or be funded and keeps its history. Refused
        (``ServiceError`` code ``AGENT_NOT_EMPTY``) while it holds funds or payments are open, unless ``force``."""
        return self._run(self._flows.archive(agent_id, force))

    def invoke(
        self,
        *,
        agent_endpoint: str,
        task: Any,
        budget: UsdcAmount | Usdc,
        idempotency_key: str | None = None,
    ) -> InvocationResult:
        """Spec 4.7 ``agents.invoke``: pays the sub-agent's endpoint with ``task`` under a hard ``budget``."""
        return self._run(self._flows.invoke(agent_endpoint, task, budget, idempotency_key))


class AsyncAgentsResource:
    """``client.agents`` of ``AsyncClient``: the same operations, awaited."""

    def __init__(self, flows: AgentFlows, run: AsyncRunner) -> None:
        self._flows = flows
        self._run = run

    async def create(self, agent_id: str, *, name: str | None = None, idempotency_key: str | None = None) -> AgentEntry:
        """Registers an agent (see ``AgentsResource.create``)."""
        return await self._run(self._flows.create(agent_id, name, idempotency_key))

    async def get(self, agent_id: str) -> AgentEntry:
        """One agent of the account (see ``AgentsResource.get``)."""
        return await self._run(self._flows.get(agent_id))

    async def list(self, *, include_archived: bool = False) -> AgentEntries:
        """Spec 2.5: every agent of the account with its balance, following the gateway's pages."""
        return await self._run(self._flows.list(include_archived))

    async def archive(self, agent_id: str, *, force: bool = False) -> AgentEntry:
        """Archives an agent (see ``AgentsResource.archive``)."""
        return await self._run(self._flows.archive(agent_id, force))

    async def invoke(
        self,
        *,
        agent_endpoint: str,
        task: Any,
        budget: UsdcAmount | Usdc,
        idempotency_key: str | None = None,
    ) -> InvocationResult:
        """Spec 4.7 ``agents.invoke``: pays the sub-agent's endpoint with ``task`` under a hard ``budget``."""
        return await self._run(self._flows.invoke(agent_endpoint, task, budget, idempotency_key))
