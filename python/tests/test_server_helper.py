"""The Python server helper's wire contract (docs/sdk-server.md, shared with the TypeScript
``x402Middleware``) against the whole system: the 402 body, refusals with ``X-PAYMENT-ERROR``, a
replayed or foreign payment never runs the handler, and an unreachable or misconfigured gateway
is answered without running it either."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent_payment_gateway import PaidResult
from agent_payment_gateway.server import X402Options

from .support.both import done
from .support.python_api import PYTHON_PRICE_UNITS, Handled, options, starlette_app
from .support.servers import serve_asgi
from .support.system import Ready, Rest

pytestmark = pytest.mark.anyio
Agent = Callable[..., Any]
PAYMENT_HEADERS = ("x-payment", "x-payment-signature")


def test_an_unpaid_request_gets_402_with_exactly_the_spec_2_7_body(python_api: str, ready: Ready) -> None:
    answer = httpx.get(f"{python_api}/py/x402/report?x=1")
    assert answer.status_code == 402
    assert answer.headers["cache-control"] == "no-store"
    assert answer.json() == {
        "scheme": "exact",
        "network": ready.network,
        "token": ready.token,
        "amount": str(PYTHON_PRICE_UNITS),
        "payTo": ready.sellers["python"],
        "resource": f"{python_api}/py/x402/report?x=1",
    }
    # The same fields as the TypeScript middleware's 402.
    typescript = httpx.get(f"{ready.paid_api}/x402/report").json()
    assert set(typescript) == set(answer.json())


def test_malformed_payment_headers_are_refused_as_such(python_api: str) -> None:
    for headers in (
        {"x-payment": "not base64!"},
        {"x-payment": base64.b64encode(b'{"payload":{}}').decode(), "x-payment-signature": "other"},
        {"x-payment-signature": "only half"},
    ):
        answer = httpx.get(f"{python_api}/py/x402/report", headers=headers)
        assert answer.status_code == 402
        assert answer.headers["x-payment-error"] == "malformed_headers"


async def test_a_replayed_payment_is_refused_and_the_handler_ran_once(
    agent: Agent, python_api: str, python_handled: Handled, kind: str
) -> None:
    captured: list[dict[str, str]] = []

    def capture(request: httpx.Request) -> None:
        if "x-payment" in request.headers:
            captured.append({name: request.headers[name] for name in PAYMENT_HEADERS})

    async def capture_async(request: httpx.Request) -> None:
        capture(request)

    http: httpx.Client | httpx.AsyncClient
    if kind == "sync":
        http = httpx.Client(event_hooks={"request": [capture]})
    else:
        http = httpx.AsyncClient(event_hooks={"request": [capture_async]})
    client = await agent("py-replayer", "1", http_client=http)
    result = await done(client.pay(f"{python_api}/py/x402/replay"))
    assert isinstance(result, PaidResult)
    assert len(captured) == 1

    replay = httpx.get(f"{python_api}/py/x402/replay", headers=captured[0])

    assert replay.status_code == 402
    assert replay.headers["x-payment-error"] == "nonce_reused"
    assert python_handled.count(result.tx_hash) == 1
    if isinstance(http, httpx.Client):
        http.close()
    else:
        await http.aclose()


async def test_a_payment_signed_for_another_apis_terms_is_refused(
    agent: Agent, ready: Ready, python_api: str, python_handled: Handled, rest: Rest
) -> None:
    # A real payment the gateway signed for the TypeScript API (0.03 to another wallet), presented
    # to the Python API (0.02 to the python seller): the facilitator checks it against THIS
    # server's requirement, so it is refused and the handler never runs.
    client = await agent("py-foreign", "1")
    unpaid = httpx.get(f"{ready.paid_api}/x402/foreign")
    authorization = rest.call(
        "POST",
        f"/v1/agents/{client.agent_id}/payments/authorize",
        ready.buyer_key,
        {"endpoint": f"{ready.paid_api}/x402/foreign", "x402": unpaid.json()},
    )
    assert authorization.status_code == 200, authorization.text
    payment = authorization.json()["headers"]
    handled_before = len(python_handled.payments)
    before = rest.seller_balance_units("python")

    answer = httpx.get(f"{python_api}/py/x402/foreign", headers=payment)

    assert answer.status_code == 402
    assert answer.headers["x-payment-error"] in ("amount_mismatch", "pay_to_mismatch", "resource_mismatch")
    assert len(python_handled.payments) == handled_before
    assert rest.seller_balance_units("python") == before


def test_an_unreachable_gateway_is_503_and_a_refused_key_502_without_running_the_handler(ready: Ready) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    handled = Handled()
    unreachable = options(dead, ready.seller_key, ready.sellers["python"])
    with serve_asgi(starlette_app(unreachable, handled)) as origin:
        answer = httpx.get(f"{origin}/py/x402/x")
        assert (answer.status_code, answer.json()) == (503, {"error": "facilitator_unavailable"})
        assert answer.headers["retry-after"] == "5"

    refused = X402Options(
        amount=PYTHON_PRICE_UNITS,
        token=ready.token,
        network=ready.network,
        pay_to=ready.sellers["python"],
        facilitator_url=ready.api_url,
        api_key="apg_not_a_real_key_000000000000000000000000",
    )
    with serve_asgi(starlette_app(refused, handled)) as origin:
        payment = base64.b64encode(json.dumps({"payload": {"nonce": "n"}, "signature": "s"}).encode()).decode()
        answer = httpx.get(f"{origin}/py/x402/x", headers={"x-payment": payment, "x-payment-signature": "s"})
        assert answer.status_code == 502
        assert answer.json()["error"] == "facilitator_error"
    assert handled.payments == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("amount", "0", "amount"),
        ("amount", "1.5", "amount"),
        ("amount", True, "amount"),
        ("pay_to", "not-an-address", "pay_to"),
        ("facilitator_url", "gateway", "facilitator_url"),
        ("api_key", "", "api_key"),
        ("origin", "https://api.example.com/path", "origin"),
        ("token", "", "token"),
    ],
)
def test_options_are_checked_at_construction(field: str, value: object, message: str) -> None:
    settings: dict[str, Any] = {
        "amount": "50000",
        "token": "usdc",
        "pay_to": "9fDQdGqidPjdn4xw9Zbb1DeLSwXaNcHsYMGaR23mARUy",
        "facilitator_url": "http://127.0.0.1:4000",
        "api_key": "apg_key",
        field: value,
    }
    with pytest.raises(TypeError, match=message):
        X402Options(**settings)


def test_the_api_key_is_not_in_the_options_repr() -> None:
    shown = repr(
        X402Options(
            amount=1,
            token="usdc",
            pay_to="9fDQdGqidPjdn4xw9Zbb1DeLSwXaNcHsYMGaR23mARUy",
            facilitator_url="http://127.0.0.1:4000",
            api_key="apg_secret",
        )
    )
    assert "apg_secret" not in shown
