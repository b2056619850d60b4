"""``policies.backtest`` in both clients, against a stand-in gateway (``httpx.MockTransport``):
what leaves the client (the route, the candidate in the spec's camelCase with exact amounts, the
window) and the typed answer read back. A bad window or limit is refused before anything is sent.
Then against the whole system: a real payment and a real refusal replayed under a candidate, and
the gateway's typed 400. The replay itself is tested in test/gateway/policy-backtest.test.ts and
api/shared/policy/backtest.fuzz.test.ts."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from agent_payment_gateway import (
    AsyncClient,
    Client,
    PaidResult,
    PolicyBacktest,
    PolicyViolationError,
    ServiceError,
    Usdc,
)

from .support.both import AnyClient, close, done
from .support.system import Ready

pytestmark = pytest.mark.anyio

_COUNT_ZERO = {"count": 0, "amount": "0.000000", "amountUnits": "0"}
ANSWER: dict[str, Any] = {
    "agentId": "shopper",
    "window": "30d",
    "from": "2026-01-30T12:00:00.000Z",
    "to": "2026-03-01T12:00:00.000Z",
    "truncated": False,
    "totals": {
        "attempts": 2,
        "passed": {"count": 1, "amount": "0.250000", "amountUnits": "250000"},
        "refused": {"count": 1, "amount": "0.500000", "amountUnits": "500000"},
        "needsApproval": _COUNT_ZERO,
        "changed": 1,
        "refusedByRule": [{"rule": "domain_blocked", "count": 1, "amount": "0.500000", "amountUnits": "500000"}],
        "refusedByDomain": [{"domain": "other.example.org", "count": 1, "amount": "0.500000", "amountUnits": "500000"}],
        "needsApprovalByRule": [],
    },
    "payments": [
        {
            "id": "reservation:1",
            "at": "2026-03-01T09:00:00.000Z",
            "endpoint": "https://api.example.com/v1/search",
            "domain": "api.example.com",
            "amount": "0.250000",
            "amountUnits": "250000",
            "protocol": "x402",
            "recorded": "pass",
            "outcome": "pass",
            "rule": None,
            "reason": None,
        },
        {
            "id": "reservation:2",
            "at": "2026-03-01T09:05:00.000Z",
            "endpoint": "https://other.example.org/v1/data",
            "domain": "other.example.org",
            "amount": "0.500000",
            "amountUnits": "500000",
            "protocol": "x402",
            "recorded": "pass",
            "outcome": "refuse",
            "rule": "domain_blocked",
            "reason": (
                "domain_blocked: other.example.org is blocked by the policy (blockedDomains entry other.example.org)"
            ),
        },
    ],
}


def _clients(sent: list[httpx.Request]) -> list[AnyClient]:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=ANSWER)

    options: dict[str, Any] = {"agent_id": "shopper", "api_key": "k" * 16, "max_retries": 0}
    return [
        Client(**options, http_client=httpx.Client(transport=httpx.MockTransport(handle))),
        AsyncClient(**options, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle))),
    ]


async def test_backtest_sends_the_candidate_and_reads_the_typed_answer() -> None:
    sent: list[httpx.Request] = []
    for client in _clients(sent):
        result = await done(
            client.policies.backtest(
                window="30d", per_call_limit=Decimal("0.3"), blocked_domains=["other.example.org"], limit=10
            )
        )
        request = sent[-1]
        assert (request.method, request.url.path) == ("POST", "/v1/policies/shopper/backtest")
        assert json.loads(request.content) == {
            "policy": {"perCallLimit": {"usdc": 0.3}, "blockedDomains": ["other.example.org"]},
            "window": "30d",
            "limit": 10,
        }
        assert isinstance(result, PolicyBacktest)
        assert (result.agent_id, result.window, result.attempts, result.changed, result.truncated) == (
            "shopper",
            "30d",
            2,
            1,
            False,
        )
        assert (result.refused.count, result.refused.amount) == (1, Usdc(Decimal("0.5")))
        assert [(e.key, e.count, e.amount) for e in result.refused_by_domain] == [
            ("other.example.org", 1, Usdc(Decimal("0.5")))
        ]
        assert [(p.outcome, p.rule, p.amount) for p in result.payments] == [
            ("pass", None, Usdc(Decimal("0.25"))),
            ("refuse", "domain_blocked", Usdc(Decimal("0.5"))),
        ]
        await close(client)
    assert len(sent) == 2


@pytest.mark.parametrize(
    ("window", "limit"), [("forever", None), ("30", None), ("0d", None), ("30d", -1), ("30d", 10_001)]
)
async def test_a_bad_window_or_limit_is_refused_before_any_request(window: str, limit: int | None) -> None:
    sent: list[httpx.Request] = []
    for client in _clients(sent):
        with pytest.raises(TypeError):
            await done(client.policies.backtest(window=window, limit=limit))
        await close(client)
    assert sent == []


async def test_a_real_payment_and_refusal_replayed_under_a_candidate(agent: Any, ready: Ready) -> None:
    client = await agent("py-backtest", "1")
    paid = await done(client.pay(f"{ready.paid_api}/x402/report-{client.agent_id}"))
    assert isinstance(paid, PaidResult)
    await done(client.policies.set(blocked_domains=["blocked.example"]))
    with pytest.raises(PolicyViolationError):
        await done(client.pay("https://api.blocked.example/x"))

    result = await done(client.policies.backtest(window="1h", per_call_limit=Decimal("0.01")))
    assert isinstance(result, PolicyBacktest)
    assert [(p.recorded, p.outcome, p.rule) for p in result.payments] == [
        ("pass", "refuse", "per_call_limit_exceeded"),
        ("refuse", "pass", None),
    ]
    assert (result.refused.count, result.refused.amount) == (1, Usdc(Decimal("0.03")))
    assert result.changed == 2
    # The candidate is only tried: the stored policy is as it was.
    assert (await done(client.policies.get())).per_call_limit is None

    with pytest.raises(ServiceError) as refused:
        await done(client.policies.backtest(window="91d"))
    assert refused.value.code == "BAD_USER_INPUT"
