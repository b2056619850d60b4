"""The ``approvals`` resource: payments a policy held for a person (docs/policy.md "Approvals",
docs/rest.md "Approvals"). Listing and deciding need an admin or approver key; an agent key reads
its own agent's approvals by id. ``get(wait=...)`` long-polls the gateway (one request per wait,
never a busy loop); ``wait_for_decision`` repeats it up to a deadline, which is how ``pay`` waits.

Each operation is written once as a flow (effects.py) and run by ``ApprovalsResource`` (sync) and
``AsyncApprovalsResource`` (async), so both clients send the same requests.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from ..effects import Flow, sleep
from ..models import APPROVAL_STATUSES, Approval, ApprovalPage, approval_from_wire, approval_page_from_wire
from ..runner import AsyncRunner, SyncRunner
from ..text_input import InvalidInputError, check_text
from ..transport import QueryValue, Transport

#: The gateway's longest long-poll, in seconds.
MAX_WAIT_SECONDS = 60
NOTE_MAX = 500
_APPROVAL_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def check_approval_id(approval_id: object) -> str:
    if not isinstance(approval_id, str) or not _APPROVAL_ID.match(approval_id):
        raise InvalidInputError(
            "approval_id", f"{approval_id!r} is not an approval id (a UUID, as approvals.list returns it)"
        )
    return approval_id


class ApprovalFlows:
    def __init__(self, transport: Transport, clock: Callable[[], float] = time.monotonic) -> None:
        self._transport = transport
        self._clock = clock

    def list(
        self, status: str | None, agent_id: str | None, limit: int | None, cursor: str | None
    ) -> Flow[ApprovalPage]:
        if status is not None and status not in APPROVAL_STATUSES:
            raise InvalidInputError("status", f"must be one of {', '.join(APPROVAL_STATUSES)}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200):
            raise InvalidInputError("limit", "must be an integer from 1 to 200")
        query: dict[str, QueryValue] = {"status": status, "agentId": agent_id, "limit": limit, "cursor": cursor}
        return approval_page_from_wire((yield from self._transport.request("GET", "/v1/approvals", query=query)))

    def get(self, approval_id: str, wait: float | None) -> Flow[Approval]:
        path = f"/v1/approvals/{check_approval_id(approval_id)}"
        seconds = None if wait is None else self.wait_seconds(wait)
        query: dict[str, QueryValue] = {} if not seconds else {"wait": seconds}
        return approval_from_wire((yield from self._transport.request("GET", path, query=query)))

    def wait_for_decision(self, approval_id: str, timeout: float) -> Flow[Approval]:
        deadline = self._clock() + max(0.0, timeout)
        while True:
            left = math.floor(deadline - self._clock())
            approval = yield from self.get(approval_id, max(0, left))
            if approval.status != "pending" or left <= 0:
                return approval
            # A per-request timeout under 2 s leaves no wait to the gateway: pace the polls here instead.
            if self.wait_seconds(left) == 0:
                yield from sleep(min(1.0, max(0.0, deadline - self._clock())))

    def decide(self, approval_id: str, action: str, note: str | None, idempotency_key: str | None) -> Flow[Approval]:
        path = f"/v1/approvals/{check_approval_id(approval_id)}/{action}"
        body: dict[str, object] = {}
        if note is not None:
            if not isinstance(note, str):
                raise InvalidInputError("note", "must be a string")
            check_text("note", note)
            if len(note) > NOTE_MAX:
                raise InvalidInputError("note", f"is longer than {NOTE_MAX} characters")
            body["note"] = note
        answer = yield from self._transport.request("POST", path, body=body, idempotency_key=idempotency_key)
        return approval_from_wire(answer)

    def wait_seconds(self, wait: float) -> int:
        """``wait`` capped at 60 s and a second below the per-request timeout (left for the answer)."""
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
            raise InvalidInputError("wait", "must be a number of seconds, 0 or more")
        ceiling = max(0, min(MAX_WAIT_SECONDS, math.floor(self._transport.timeout) - 1))
        return min(math.floor(wait), ceiling)


class ApprovalsResource:
    """``client.approvals`` of the synchronous ``Client``."""

    def __init__(self, flows: ApprovalFlows, run: SyncRunner) -> None:
        self._flows = flows
        self._run = run

    def list(
        self,
        *,
        status: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ApprovalPage:
        """The account's approvals, newest first, one page (admin and approver keys)."""
        return self._run(self._flows.list(status, agent_id, limit, cursor))

    def get(self, approval_id: str, *, wait: float | None = None) -> Approval:
        """One approval; ``wait`` (seconds) long-polls until it is decided or the wait is over."""
        return self._run(self._flows.get(approval_id, wait))

    def wait_for_decision(self, approval_id: str, *, timeout: float) -> Approval:
        """Long-polls until decided, or answers it still pending after ``timeout`` seconds."""
        return self._run(self._flows.wait_for_decision(approval_id, timeout))

    def approve(self, approval_id: str, *, note: str | None = None, idempotency_key: str | None = None) -> Approval:
        return self._run(self._flows.decide(approval_id, "approve", note, idempotency_key))

    def deny(self, approval_id: str, *, note: str | None = None, idempotency_key: str | None = None) -> Approval:
        return self._run(self._flows.decide(approval_id, "deny", note, idempotency_key))


class AsyncApprovalsResource:
    """``client.approvals`` of ``AsyncClient``: the same operations, awaited."""

    def __init__(self, flows: ApprovalFlows, run: AsyncRunner) -> None:
        self._flows = flows
        self._run = run

    async def list(
        self,
        *,
        status: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ApprovalPage:
        return await self._run(self._flows.list(status, agent_id, limit, cursor))

    async def get(self, approval_id: str, *, wait: float | None = None) -> Approval:
        return await self._run(self._flows.get(approval_id, wait))

    async def wait_for_decision(self, approval_id: str, *, timeout: float) -> Approval:
        return await self._run(self._flows.wait_for_decision(approval_id, timeout))

    async def approve(
        self, approval_id: str, *, note: str | None = None, idempotency_key: str | None = None
    ) -> Approval:
        return await self._run(self._flows.decide(approval_id, "approve", note, idempotency_key))

    async def deny(self, approval_id: str, *, note: str | None = None, idempotency_key: str | None = None) -> Approval:
        return await self._run(self._flows.decide(approval_id, "deny", note, idempotency_key))
