"""``endpoint_budgets`` of ``policies.set`` / ``policies.backtest`` (docs/policy.md "Endpoint
budgets"), in both clients: the body sent (exact amounts, the spec's camelCase, ``None`` removes,
omitted keeps), bad input refused before any request, the rules read back typed. Then against the
whole system: rules stored and read back, a payment over a rule refused naming the rule, overlapping
rules a typed 400 that changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest

from agent_payment_gateway import (
    AsyncClient,
    Client,
    EndpointBudget,
    MoneyFormatError,
    PaidResult,
    PolicyViolationError,
    RateLimit,
    ServiceError,
    Usdc,
)
from agent_payment_gateway.resources.policies import UNSET, policy_body

from .support.both import AnyClient, close, done
from .support.system import Ready

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]

RULES_WIRE = [
    {"match": "api.example.com/v1/search", "dailyBudget": {"usdc": 1.000001}, "perCallLimit": None, "rateLimit": None},
    {
        "match": "example.org",
        "dailyBudget": None,
        "perCallLimit": {"usdc": 0.5},
        "rateLimit": {"calls": 3, "window": "1m"},
    },
]
POLICY: dict[str, Any] = {
    "agentId": "shopper",
    "dailyBudget": None,
    "perCallLimit": None,
    "allowedDomains": None,
    "blockedDomains": [],
    "rateLimit": None,
    "protocolPreference": "auto",
    "usedToday": {"usdc": 0},
    "approval": None,
    "endpointBudgets": RULES_WIRE,
}


def _body(**fields: Any) -> dict[str, object]:
    settings: dict[str, Any] = {
        "daily_budget": UNSET,
        "per_call_limit": UNSET,
        "allowed_domains": UNSET,
        "blocked_domains": UNSET,
        "rate_limit": UNSET,
        "protocol_preference": UNSET,
        **fields,
    }
    return policy_body(**settings)


def test_the_rules_go_out_in_camel_case_with_exact_amounts() -> None:
    body = _body(
        endpoint_budgets=[
            EndpointBudget(match="api.example.com/v1/search", daily_budget=Usdc(Decimal("1.000001"))),
            {"match": "example.org", "per_call_limit": "0.5", "rate_limit": RateLimit(3, "1m")},
            {"match": "shop.example", "daily_budget": Decimal("0.000001"), "rate_limit": {"calls": 2, "window": "1h"}},
        ]
    )
    assert body == {
        "endpointBudgets": [
            {"match": "api.example.com/v1/search", "dailyBudget": {"usdc": Decimal("1.000001")}},
            {
                "match": "example.org",
                "perCallLimit": {"usdc": Decimal("0.5")},
                "rateLimit": {"calls": 3, "window": "1m"},
            },
            {
                "match": "shop.example",
                "dailyBudget": {"usdc": Decimal("0.000001")},
                "rateLimit": {"calls": 2, "window": "1h"},
            },
        ]
    }
    assert _body(endpoint_budgets=None) == {"endpointBudgets": None}
    assert _body(endpoint_budgets=[]) == {"endpointBudgets": []}
    assert "endpointBudgets" not in _body(daily_budget=Decimal(1))


@pytest.mark.parametrize(
    ("rules", "error", "names"),
    [
        ("api.example.com", TypeError, "endpoint_budgets must be a list"),
        ({"match": "api.example.com"}, TypeError, "endpoint_budgets must be a list"),
        ([{"match": 42, "daily_budget": "1"}], TypeError, r"endpoint_budgets\[0\]\.match"),
        ([{"daily_budget": "1"}], TypeError, r"endpoint_budgets\[0\]\.match"),
        ([EndpointBudget(match=b"api.example.com", daily_budget=Usdc(Decimal(1)))], TypeError, r"\[0\]\.match"),  # type: ignore[arg-type]
        (["api.example.com"], TypeError, r"endpoint_budgets\[0\] must be an EndpointBudget"),
        ([{"match": "a.example", "dailyBudget": "1"}], TypeError, r"unknown field\(s\) dailyBudget"),
        ([{"match": "a.example"}, {"match": "b.example", "daily_budget": "0.0000001"}], MoneyFormatError, "decimal"),
        ([{"match": "a.example", "per_call_limit": True}], TypeError, r"endpoint_budgets\[0\]\.per_call_limit"),
        ([{"match": "a.example", "per_call_limit": "-1"}], MoneyFormatError, r"not a non-negative"),
        ([{"match": "a.example", "rate_limit": {"calls": 0, "window": "1m"}}], TypeError, r"\[0\]\.rate_limit\.calls"),
        (
            [{"match": "a.example", "rate_limit": {"calls": 1.5, "window": "1m"}}],
            TypeError,
            r"\[0\]\.rate_limit\.calls",
        ),
        ([{"match": "a.example", "rate_limit": "3/1m"}], TypeError, r"\[0\]\.rate_limit must be"),
    ],
)
def test_bad_rules_are_typed_errors_naming_the_field(rules: object, error: type[Exception], names: str) -> None:
    with pytest.raises(error, match=names):
        _body(endpoint_budgets=rules)


def _clients(sent: list[httpx.Request]) -> list[AnyClient]:
    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path.endswith("/backtest"):
            return httpx.Response(400, json={"code": "BAD_USER_INPUT", "detail": "stand-in"})
        return httpx.Response(200, json=POLICY)

    options: dict[str, Any] = {"agent_id": "shopper", "api_key": "k" * 16, "max_retries": 0}
    return [
        Client(**options, http_client=httpx.Client(transport=httpx.MockTransport(handle))),
        AsyncClient(**options, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle))),
    ]


async def test_set_and_backtest_send_the_rules_and_the_policy_reads_them_back() -> None:
    sent: list[httpx.Request] = []
    for client in _clients(sent):
        policy = await done(
            client.policies.set(endpoint_budgets=[{"match": "api.example.com/v1/search", "daily_budget": "1.000001"}])
        )
        # Exact on the wire: the amount's decimal text, not a float's.
        assert (
            sent[-1].content
            == b'{"endpointBudgets":[{"match":"api.example.com/v1/search","dailyBudget":{"usdc":1.000001}}]}'
        )
        assert policy.endpoint_budgets == [
            EndpointBudget(match="api.example.com/v1/search", daily_budget=Usdc(Decimal("1.000001"))),
            EndpointBudget(match="example.org", per_call_limit=Usdc(Decimal("0.5")), rate_limit=RateLimit(3, "1m")),
        ]
        assert "endpointBudgets" not in policy.extra
        with pytest.raises(ServiceError):
            await done(
                client.policies.backtest(window="1d", endpoint_budgets=[EndpointBudget("a.example", Usdc(Decimal(1)))])
            )
        assert json.loads(sent[-1].content)["policy"] == {
            "endpointBudgets": [{"match": "a.example", "dailyBudget": {"usdc": 1}}]
        }
        before = len(sent)
        with pytest.raises(TypeError):
            await done(client.policies.set(endpoint_budgets=[{"match": None, "daily_budget": "1"}]))
        with pytest.raises(MoneyFormatError):
            await done(
                client.policies.backtest(window="1d", endpoint_budgets=[{"match": "a.example", "daily_budget": "1e3"}])
            )
        assert len(sent) == before
        await close(client)
    assert len(sent) == 4


async def test_endpoint_budgets_against_the_gateway(agent: Agent, ready: Ready) -> None:
    client = await agent("py-endpoints", "1")
    capped = "127.0.0.1/x402/capped"
    rules = [
        EndpointBudget(match=capped, per_call_limit=Usdc(Decimal("0.01"))),
        EndpointBudget(
            match="127.0.0.1/x402/open", daily_budget=Usdc(Decimal("0.500001")), rate_limit=RateLimit(5, "1h")
        ),
    ]
    stored = await done(client.policies.set(daily_budget=Decimal(2), endpoint_budgets=rules))
    assert stored.endpoint_budgets == rules
    # Omitted keeps the rules.
    await done(client.policies.set(per_call_limit="0.5"))
    assert (await done(client.policies.get())).endpoint_budgets == rules

    paid = await done(client.pay(f"{ready.paid_api}/x402/open/report"))
    assert isinstance(paid, PaidResult)
    with pytest.raises(PolicyViolationError) as refused:
        await done(client.pay(f"{ready.paid_api}/x402/capped/report"))
    assert refused.value.reason_code == "per_call_limit_exceeded"
    assert refused.value.reason == (
        f"per_call_limit_exceeded: requested 0.03 usdc, limit is 0.01 usdc (endpointBudgets {capped})"
    )
    assert isinstance(refused.value.detail, dict)
    assert refused.value.detail["endpointRule"] == capped

    # Two rules with the same match overlap: a typed 400, nothing changes.
    with pytest.raises(ServiceError) as bad:
        await done(client.policies.set(endpoint_budgets=[{"match": capped, "daily_budget": 1}] * 2))
    assert (bad.value.code, bad.value.status) == ("BAD_USER_INPUT", 400)
    assert (await done(client.policies.get())).endpoint_budgets == rules
    history = await done(client.policies.history())
    assert [version.version for version in history] == [2, 1]

    removed = await done(client.policies.set(endpoint_budgets=None))
    assert removed.endpoint_budgets == []
    assert removed.daily_budget == Usdc(Decimal(2))
    paid = await done(client.pay(f"{ready.paid_api}/x402/capped/report"))
    assert isinstance(paid, PaidResult)
