"""The same scenario through the TypeScript client and the Python client (each clients' own agent,
the same system, the same paid APIs) gives the same outcomes step by step — the same payments and
the same errors with the same fields — and the same ledger records.

The scenario is written once, here, as data. The TypeScript side runs it in the system fixture
(``steps`` in test/python/system-fixture.ts, the real TypeScript ``Client``); this file runs it with
the Python clients. Why a pytest driving TypeScript rather than a vitest driving Python: the
fixture process already holds the system and the TypeScript client, so the comparison needs no
second system and no Python process started from Node; and the assertions live with the
Python suite that is the subject of this issue.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import anyio
import pytest

from agent_payment_gateway import (
    DomainNotAllowedError,
    InsufficientFundsError,
    PaidResult,
    PaymentProtocolError,
    PolicyViolationError,
    RateLimit,
    ServiceError,
)
from agent_payment_gateway.money import units_to_text

from .conftest import MakeClient
from .support.both import AnyClient, done
from .support.system import Rest, SystemProcess

pytestmark = pytest.mark.anyio
Step = dict[str, Any]
INDEX_DEADLINE_S = 30.0


def scenario(paid_api: str, python_api: str, payee: str) -> list[Step]:
    localhost = paid_api.replace("127.0.0.1", "localhost")
    return [
        {"do": "fund", "usdc": "1"},
        {
            "do": "setPolicy",
            "fields": {
                "perCallLimit": {"usdc": "0.1"},
                "dailyBudget": {"usdc": "0.2"},
                "blockedDomains": ["localhost"],
            },
        },
        {"do": "pay", "endpoint": f"{paid_api}/x402/cross"},
        {"do": "pay", "endpoint": f"{paid_api}/mpp/cross"},
        {"do": "pay", "endpoint": f"{paid_api}/mpp/cross"},
        {"do": "pay", "endpoint": f"{paid_api}/x402-dear/cross"},
        {"do": "pay", "endpoint": f"{localhost}/x402/cross"},
        {"do": "pay", "endpoint": f"{paid_api}/unknown"},
        {"do": "pay", "endpoint": f"{python_api}/py/x402/cross", "method": "POST", "body": {"n": 1}},
        {"do": "pay", "endpoint": f"{paid_api}/free"},
        {"do": "getPolicy"},
        {"do": "setPolicy", "fields": {"dailyBudget": {"usdc": "0.08"}}},
        {"do": "pay", "endpoint": f"{paid_api}/x402/cross"},
        {"do": "withdraw", "to": payee, "usdc": "100"},
        {"do": "balance"},
    ]


def text(amount: Decimal) -> str:
    return units_to_text(int(amount.scaleb(6)))


def describe_error(error: BaseException) -> dict[str, Any]:
    """As the fixture's ``describeError``: the class name and the spec 7 fields."""
    if not isinstance(error, ServiceError):
        return {"class": type(error).__name__, "message": str(error)}
    described: dict[str, Any] = {"class": type(error).__name__, "code": error.code, "status": error.status}
    if isinstance(error, PolicyViolationError):
        described["reason"] = error.reason
        described["reasonCode"] = error.reason_code
    if isinstance(error, DomainNotAllowedError):
        described["domain"] = error.domain
    if isinstance(error, InsufficientFundsError):
        described["currentBalance"] = text(error.current_balance.usdc)
    if isinstance(error, PaymentProtocolError):
        described["endpoint"] = error.endpoint
    return described


def money(fields: dict[str, Any], name: str) -> Decimal | None:
    value = fields.get(name)
    return None if value is None else Decimal(value["usdc"])


async def run_step(client: AnyClient, step: Step) -> Any:
    if step["do"] == "fund":
        operation = await done(client.wallet.fund(Decimal(step["usdc"])))
        return {"kind": operation.kind, "status": operation.status, "amount": text(operation.amount.usdc)}
    if step["do"] == "withdraw":
        operation = await done(client.wallet.withdraw(to=step["to"], usdc=Decimal(step["usdc"])))
        return {"kind": operation.kind, "status": operation.status, "amount": text(operation.amount.usdc)}
    if step["do"] == "balance":
        return text((await done(client.wallet.balance())).usdc)
    if step["do"] == "setPolicy":
        fields = step["fields"]
        arguments: dict[str, Any] = {}
        if "dailyBudget" in fields:
            arguments["daily_budget"] = money(fields, "dailyBudget")
        if "perCallLimit" in fields:
            arguments["per_call_limit"] = money(fields, "perCallLimit")
        if "blockedDomains" in fields:
            arguments["blocked_domains"] = fields["blockedDomains"]
        if "rateLimit" in fields:
            arguments["rate_limit"] = RateLimit(**fields["rateLimit"])
        await done(client.policies.set(**arguments))
        return None
    if step["do"] == "getPolicy":
        policy = await done(client.policies.get())
        return {
            "dailyBudget": None if policy.daily_budget is None else text(policy.daily_budget.usdc),
            "perCallLimit": None if policy.per_call_limit is None else text(policy.per_call_limit.usdc),
            "blockedDomains": policy.blocked_domains,
            "usedToday": text(policy.used_today.usdc),
        }
    assert step["do"] == "pay"
    result = await done(client.pay(step["endpoint"], method=step.get("method", "GET"), body=step.get("body")))
    if not isinstance(result, PaidResult):
        return {"paid": False, "status": result.status, "data": result.data}
    return {
        "paid": True,
        "status": result.status,
        "protocol": result.protocol,
        "amountPaid": text(result.amount_paid.usdc),
        "txHash": result.tx_hash,
        "sessionId": result.session_id,
        "data": result.data,
    }


async def run_python(client: AnyClient, steps: list[Step]) -> list[dict[str, Any]]:
    outcomes: list[dict[str, Any]] = []
    for step in steps:
        try:
            outcomes.append({"ok": True, "value": await run_step(client, step)})
        except ServiceError as error:
            outcomes.append({"ok": False, "error": describe_error(error)})
    return outcomes


def comparable(outcome: dict[str, Any]) -> dict[str, Any]:
    """What must be equal across languages: everything but the transaction hashes, session ids and
    the payer addresses (two agents, two wallets), of which only the presence is compared."""
    if not outcome["ok"] or not isinstance(outcome["value"], dict) or "paid" not in outcome["value"]:
        return outcome
    value = dict(outcome["value"])
    for key in ("txHash", "sessionId"):
        if key in value:
            value[key] = value[key] is not None
    if isinstance(value.get("data"), dict):
        value["data"] = {key: item for key, item in value["data"].items() if key not in ("txHash", "payer")}
    return {"ok": True, "value": value}


def ledger_records(rest: Rest, agent_id: str, expected: int) -> list[tuple[Any, ...]]:
    """The agent's transactions as the gateway lists them (one reader for both languages)."""
    deadline = time.monotonic() + INDEX_DEADLINE_S
    while True:
        listed = rest.call("GET", f"/v1/transactions?agentId={agent_id}&limit=50", rest.ready.buyer_key).json()
        rows = listed["transactions"]
        if len(rows) >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return sorted(
        (
            # Null for the domain refusal: it came before any 402, so before a protocol was chosen.
            row["protocol"] or "",
            str(row["amountPaid"]["usdc"]),
            row["endpoint"],
            # Commitment moves on (confirmed, then finalized) at the ledger's pace, not the client's.
            "rejected" if row["status"] == "rejected" else "landed",
            row["policyCheck"],
            row["parentTxHash"],
            row["depth"],
            row["txHash"] is None,
        )
        for row in rows
    )


async def test_the_same_scenario_gives_the_same_outcomes_and_ledger_records_in_both_languages(
    system: SystemProcess, rest: Rest, make_client: MakeClient, python_api: str
) -> None:
    ready = system.ready
    steps = scenario(ready.paid_api, python_api, ready.sellers["x402"])
    typescript_agent, _ = rest.register("ts-cross")
    python_agent, _ = rest.register("py-cross")

    typescript = await anyio.to_thread.run_sync(
        lambda: system.typescript("steps", agentId=typescript_agent, steps=steps)
    )
    python = await run_python(make_client(python_agent), steps)

    assert len(typescript) == len(python) == len(steps)
    for step, ts_outcome, py_outcome in zip(steps, typescript, python, strict=True):
        assert comparable(py_outcome) == comparable(ts_outcome), step
    # The scenario says what it is meant to: four payments, then the spec 7 classes.
    errors = [outcome["error"]["class"] for outcome in python if not outcome["ok"]]
    assert errors == [
        "PolicyViolationError",
        "DomainNotAllowedError",
        "PaymentProtocolError",
        "DailyBudgetExceededError",
        "InsufficientFundsError",
    ]
    assert python[-1] == {"ok": True, "value": "0.93"}
    ts_mpp, py_mpp = typescript[4]["value"], python[4]["value"]
    assert ts_mpp["sessionId"] == typescript[3]["value"]["sessionId"]
    assert py_mpp["sessionId"] == python[3]["value"]["sessionId"]

    # 4 paid + 3 policy rejections (per-call, domain, daily budget) each: the blocked domain is
    # refused by both clients before any request and recorded by the gateway they then ask.
    assert ledger_records(rest, python_agent, 7) == ledger_records(rest, typescript_agent, 7)
    assert len(ledger_records(rest, python_agent, 7)) == 7
