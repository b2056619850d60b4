"""``pay`` on a payment the policy holds for a person, with both clients, against the whole system
(``test/python/system-fixture.ts``: the real gateway with its approvals' timeout loop, and an x402
API at 0.03 usdc): waiting by long-poll and paid once a person approves, the typed error once
denied, ``ApprovalRequiredError`` when the client stops waiting, and resuming with the same
idempotency key (one approval, paid once). The person is a thread deciding through REST with the
account's key while ``pay`` waits; money is checked on the seller's wallet."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_payment_gateway import ApprovalRequiredError, PaidResult, PolicyViolationError

from .support.both import done
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio

Agent = Callable[..., Any]
PRICE_UNITS = 30_000


def hold_above_a_cent(rest: Rest, agent_id: str) -> None:
    answer = rest.call(
        "PUT",
        f"/v1/policies/{agent_id}",
        rest.ready.buyer_key,
        {"approval": {"above": {"usdc": "0.01"}, "timeout": "10m", "onTimeout": "deny"}},
    )
    assert answer.status_code == 200, answer.text


def approvals_of(rest: Rest, agent_id: str) -> list[dict[str, Any]]:
    answer = rest.call("GET", f"/v1/approvals?agentId={agent_id}", rest.ready.buyer_key)
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()["approvals"]
    return listed


class Person:
    """A thread that waits for the agent's first pending approval and decides it through REST."""

    def __init__(self, ready: Ready, agent_id: str, action: str) -> None:
        self.decided: dict[str, Any] | None = None
        self._rest = Rest(ready)
        self._agent_id = agent_id
        self._action = action
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pending = [a for a in approvals_of(self._rest, self._agent_id) if a["status"] == "pending"]
            if pending:
                path = f"/v1/approvals/{pending[0]['id']}/{self._action}"
                answer = self._rest.call("POST", path, self._rest.ready.buyer_key, {"note": "by the test"})
                assert answer.status_code == 200, answer.text
                self.decided = answer.json()
                return
            time.sleep(0.05)

    def join(self) -> None:
        self._thread.join(timeout=35)
        self._rest.close()


@pytest.fixture
def person(ready: Ready) -> Iterator[Callable[[str, str], Person]]:
    started: list[Person] = []

    def start(agent_id: str, action: str) -> Person:
        made = Person(ready, agent_id, action)
        started.append(made)
        return made

    yield start
    for made in started:
        made.join()


async def test_pay_waits_and_is_paid_once_a_person_approves(
    agent: Agent, ready: Ready, rest: Rest, person: Callable[[str, str], Person]
) -> None:
    client = await agent("py-held", "1")
    hold_above_a_cent(rest, client.agent_id)
    before = rest.seller_balance_units("x402")
    approver = person(client.agent_id, "approve")

    result = await done(client.pay(f"{ready.paid_api}/x402/held-{client.agent_id}", approval_timeout=30))

    approver.join()
    assert approver.decided is not None
    assert isinstance(result, PaidResult)
    assert result.status == 200
    # The receipt names the version the payment was decided under: the policy's current one.
    history = rest.call("GET", f"/v1/policies/{client.agent_id}/history", rest.ready.buyer_key)
    assert history.status_code == 200, history.text
    current = history.json()["versions"][0]["version"]
    assert current >= 1
    assert result.policy_version == current
    assert rest.seller_balance_units("x402") == before + PRICE_UNITS
    assert [a["status"] for a in approvals_of(rest, client.agent_id)] == ["approved"]


async def test_a_denial_while_pay_waits_is_approval_denied_and_nothing_is_paid(
    agent: Agent, ready: Ready, rest: Rest, person: Callable[[str, str], Person]
) -> None:
    client = await agent("py-denied", "1")
    hold_above_a_cent(rest, client.agent_id)
    before = rest.seller_balance_units("x402")
    denier = person(client.agent_id, "deny")

    with pytest.raises(PolicyViolationError) as raised:
        await done(client.pay(f"{ready.paid_api}/x402/denied-{client.agent_id}", approval_timeout=30))

    denier.join()
    assert raised.value.code == "APPROVAL_DENIED"
    assert rest.seller_balance_units("x402") == before


async def test_undecided_at_the_wait_is_approval_required_and_the_same_key_resumes(
    agent: Agent, ready: Ready, rest: Rest
) -> None:
    client = await agent("py-wait", "1")
    hold_above_a_cent(rest, client.agent_id)
    before = rest.seller_balance_units("x402")
    endpoint = f"{ready.paid_api}/x402/wait-{client.agent_id}"
    key = str(uuid.uuid4())

    started = time.monotonic()
    with pytest.raises(ApprovalRequiredError) as raised:
        await done(client.pay(endpoint, idempotency_key=key, approval_timeout=2))
    assert time.monotonic() - started >= 1
    held = raised.value
    assert held.code == "APPROVAL_PENDING"
    assert held.idempotency_key == key
    [pending] = approvals_of(rest, client.agent_id)
    assert pending["status"] == "pending"
    assert held.approval_id == pending["id"]
    assert held.expires_at == pending["expiresAt"]

    decided = await done(client.approvals.approve(held.approval_id, note="go"))
    assert decided.status == "approved"
    assert decided.outcome == "authorized"
    result = await done(client.pay(endpoint, idempotency_key=key, approval_timeout=0))

    assert isinstance(result, PaidResult)
    assert rest.seller_balance_units("x402") == before + PRICE_UNITS
    assert [a["status"] for a in approvals_of(rest, client.agent_id)] == ["approved"]


async def test_without_a_key_the_error_carries_the_generated_one(agent: Agent, ready: Ready, rest: Rest) -> None:
    client = await agent("py-genkey", "1", approval_timeout=0)
    hold_above_a_cent(rest, client.agent_id)
    endpoint = f"{ready.paid_api}/x402/genkey-{client.agent_id}"

    with pytest.raises(ApprovalRequiredError) as raised:
        await done(client.pay(endpoint))
    key = raised.value.idempotency_key
    assert key is not None
    assert len(key) == 36

    await done(client.approvals.approve(raised.value.approval_id))
    result = await done(client.pay(endpoint, idempotency_key=key))
    assert isinstance(result, PaidResult)
    assert len(approvals_of(rest, client.agent_id)) == 1


async def test_a_bad_approval_timeout_is_refused_before_anything_is_sent(agent: Agent, ready: Ready) -> None:
    client = await agent("py-badwait", "0")
    with pytest.raises(TypeError):
        await done(client.pay(f"{ready.paid_api}/x402/never", approval_timeout=-1))
