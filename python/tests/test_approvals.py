"""The Python client's approvals against the contract of docs/rest.md "Approvals", with both
clients, served by a real loopback HTTP server answering as the contract says (the gateway's
routes are tested against the same contract where they live; full flows come with them): the
requests ``approvals.*`` send, the long-poll's bounded wait, the ``approval`` policy field, and the
errors: APPROVAL_DENIED / APPROVAL_EXPIRED as ``PolicyViolationError``, a second decision as
APPROVAL_ALREADY_DECIDED, the 202 of a held payment as ``ApprovalRequiredError``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agent_payment_gateway import (
    CLIENT_ERROR_CODES,
    ApprovalRequiredError,
    ApprovalRule,
    AsyncClient,
    Client,
    InvalidInputError,
    PolicyViolationError,
    ServiceError,
    Usdc,
    approval_required_from,
    error_from_problem,
)
from agent_payment_gateway.effects import Sleep
from agent_payment_gateway.resources.approvals import ApprovalFlows

from .support.both import AnyClient, close, done

pytestmark = pytest.mark.anyio

ID = "6f1c2a3b-0000-4000-8000-00000000a001"
APPROVAL: dict[str, Any] = {
    "id": ID,
    "agentId": "researcher",
    "status": "pending",
    "amount": {"usdc": 6},
    "endpoint": "https://api.example.com/v1/report",
    "domain": "api.example.com",
    "rule": "above",
    "reason": "approval_required: 6 usdc is above the approval threshold of 5 usdc",
    "requestedAt": "2026-03-01T12:00:00.000Z",
    "expiresAt": "2026-03-01T12:15:00.000Z",
    "decidedAt": None,
    "decidedBy": None,
    "note": None,
    "outcome": None,
}

Reply = Callable[[dict[str, Any], int], tuple[int, Any]]


@dataclass
class Gateway:
    """Answers each request with ``reply(seen, index)``; records every request."""

    reply: Reply = lambda seen, index: (200, {})
    seen: list[dict[str, Any]] = field(default_factory=list)
    origin: str = ""


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    state = Gateway()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or "0")
            body = self.rfile.read(length).decode() if length else ""
            with lock:
                entry = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                state.seen.append(entry)
                status, payload = state.reply(entry, len(state.seen) - 1)
            content = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/problem+json" if status >= 400 else "application/json")
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = _answer  # noqa: N815 (http.server's naming)
        do_POST = _answer  # noqa: N815
        do_PUT = _answer  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.origin = f"http://127.0.0.1:{server.server_port}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest, gateway: Gateway) -> Iterator[Callable[..., AnyClient]]:
    made: list[AnyClient] = []

    def build(timeout: float = 30.0) -> AnyClient:
        kind = Client if request.param == "sync" else AsyncClient
        client = kind(
            agent_id="researcher",
            api_key="apg_test_key_0123456789",
            base_url=gateway.origin,
            timeout=timeout,
            max_retries=0,
        )
        made.append(client)
        return client

    yield build
    for client in made:
        if isinstance(client, Client):
            client.close()


async def test_list_sends_the_filters_and_reads_the_page(gateway: Gateway, make: Callable[..., AnyClient]) -> None:
    gateway.reply = lambda seen, index: (200, {"approvals": [APPROVAL], "nextCursor": "abc"})
    client = make()
    page = await done(client.approvals.list(status="pending", agent_id="researcher", limit=10, cursor="xyz"))
    assert page.next_cursor == "abc"
    assert [(a.id, a.agent_id, a.status, a.amount, a.rule) for a in page.approvals] == [
        (ID, "researcher", "pending", Usdc(Decimal(6)), "above")
    ]
    url = urlsplit(gateway.seen[0]["path"])
    assert (gateway.seen[0]["method"], url.path) == ("GET", "/v1/approvals")
    assert parse_qs(url.query) == {"status": ["pending"], "agentId": ["researcher"], "limit": ["10"], "cursor": ["xyz"]}
    await close(client)


async def test_bad_input_is_refused_before_any_request(gateway: Gateway, make: Callable[..., AnyClient]) -> None:
    client = make()
    for call in (
        lambda: client.approvals.list(status="maybe"),
        lambda: client.approvals.list(limit=0),
        lambda: client.approvals.get("../agents"),
        lambda: client.approvals.approve("nope"),
        lambda: client.approvals.deny(ID, note="x" * 501),
        lambda: client.approvals.get(ID, wait=-1),
    ):
        with pytest.raises(InvalidInputError):
            await done(call())
    assert gateway.seen == []
    await close(client)


async def test_get_long_polls_capped_at_60_s_and_below_the_timeout(
    gateway: Gateway, make: Callable[..., AnyClient]
) -> None:
    gateway.reply = lambda seen, index: (200, APPROVAL)
    assert (await done(make(timeout=120).approvals.get(ID, wait=300))).id == ID
    await done(make(timeout=10).approvals.get(ID, wait=30))
    await done(make().approvals.get(ID))
    assert [seen["path"] for seen in gateway.seen] == [
        f"/v1/approvals/{ID}?wait=60",
        f"/v1/approvals/{ID}?wait=9",
        f"/v1/approvals/{ID}",
    ]


async def test_wait_for_decision_repeats_the_long_poll_until_decided(
    gateway: Gateway, make: Callable[..., AnyClient]
) -> None:
    gateway.reply = lambda seen, index: (
        200,
        APPROVAL if index < 2 else {**APPROVAL, "status": "approved", "decidedBy": "42"},
    )
    decided = await done(make().approvals.wait_for_decision(ID, timeout=120))
    assert (decided.status, decided.decided_by) == ("approved", "42")
    assert len(gateway.seen) == 3
    assert all("?wait=" in seen["path"] for seen in gateway.seen)


def test_wait_for_decision_answers_pending_once_its_time_is_up() -> None:
    ticks = iter(range(0, 100, 2))

    class Transport:
        timeout = 30.0

        def request(self, method: str, path: str, **_: Any) -> Any:
            yield from ()
            return APPROVAL

    flows = ApprovalFlows(Transport(), clock=lambda: float(next(ticks)))  # type: ignore[arg-type]
    flow = flows.wait_for_decision(ID, 3)
    with pytest.raises(StopIteration) as stopped:
        next(flow)
    assert stopped.value.value.status == "pending"


def test_wait_for_decision_paces_its_polls_when_the_timeout_leaves_the_gateway_no_wait() -> None:
    now = [0.0]
    effects: list[Any] = []

    class Transport:
        timeout = 1.0  # a second of per-request timeout leaves the gateway no wait

        def request(self, method: str, path: str, **fields: Any) -> Any:
            effects.append(("request", fields.get("query")))
            yield from ()
            return APPROVAL

    flows = ApprovalFlows(Transport(), clock=lambda: now[0])  # type: ignore[arg-type]
    flow = flows.wait_for_decision(ID, 2.5)
    result: Any = None
    try:
        effect = next(flow)
        while True:
            assert isinstance(effect, Sleep)
            effects.append(("sleep", effect.seconds))
            now[0] += effect.seconds
            effect = flow.send(None)
    except StopIteration as stopped:
        result = stopped.value
    assert result.status == "pending"
    assert effects == [
        ("request", {}),
        ("sleep", 1.0),
        ("request", {}),
        ("sleep", 1.0),
        ("request", {}),
    ]


async def test_approve_and_deny_post_the_note_with_an_idempotency_key(
    gateway: Gateway, make: Callable[..., AnyClient]
) -> None:
    def reply(seen: dict[str, Any], index: int) -> tuple[int, Any]:
        status = "approved" if seen["path"].endswith("/approve") else "denied"
        return 200, {**APPROVAL, "status": status, "decidedBy": "42", "note": json.loads(seen["body"]).get("note")}

    gateway.reply = reply
    client = make()
    approved = await done(client.approvals.approve(ID, note="ok", idempotency_key="decide-1"))
    denied = await done(client.approvals.deny(ID))
    assert (approved.status, approved.note, denied.status, denied.note) == ("approved", "ok", "denied", None)
    assert [(s["method"], s["path"], json.loads(s["body"])) for s in gateway.seen] == [
        ("POST", f"/v1/approvals/{ID}/approve", {"note": "ok"}),
        ("POST", f"/v1/approvals/{ID}/deny", {}),
    ]
    headers = [{k.lower(): v for k, v in s["headers"].items()} for s in gateway.seen]
    assert headers[0]["idempotency-key"] == "decide-1"
    assert len(headers[1]["idempotency-key"]) == 36
    await close(client)


async def test_a_second_decision_is_approval_already_decided_and_not_retried(
    gateway: Gateway, make: Callable[..., AnyClient]
) -> None:
    gateway.reply = lambda seen, index: (
        409,
        {"code": "APPROVAL_ALREADY_DECIDED", "status": 409, "detail": "already decided"},
    )
    client = make()
    with pytest.raises(ServiceError) as raised:
        await done(client.approvals.approve(ID))
    assert not isinstance(raised.value, PolicyViolationError)
    assert (raised.value.code, raised.value.status) == ("APPROVAL_ALREADY_DECIDED", 409)
    assert len(gateway.seen) == 1
    await close(client)


async def test_policies_set_sends_the_approval_field_and_reads_it_back(
    gateway: Gateway, make: Callable[..., AnyClient]
) -> None:
    wire = {
        "above": {"usdc": 5},
        "domains": ["vendor.example"],
        "firstPaymentToDomain": True,
        "timeout": "15m",
        "onTimeout": "deny",
    }
    policy: dict[str, Any] = {
        "agentId": "researcher",
        "dailyBudget": None,
        "perCallLimit": None,
        "allowedDomains": None,
        "blockedDomains": [],
        "rateLimit": None,
        "protocolPreference": "auto",
        "usedToday": {"usdc": 0},
        "approval": wire,
    }
    gateway.reply = lambda seen, index: (200, policy)
    client = make()
    rule = ApprovalRule(timeout="15m", above=Usdc(Decimal(5)), domains=["vendor.example"], first_payment_to_domain=True)
    stored = await done(client.policies.set(approval=rule))
    assert json.loads(gateway.seen[0]["body"]) == {"approval": wire}
    assert stored.approval == rule
    assert "approval" not in stored.extra
    await done(client.policies.set(approval=None))
    assert json.loads(gateway.seen[1]["body"]) == {"approval": None}
    with pytest.raises(TypeError, match=r"approval\.timeout"):
        await done(client.policies.set(approval=ApprovalRule(timeout="soon")))
    assert len(gateway.seen) == 2
    await close(client)


@pytest.mark.parametrize("with_class", [True, False])
def test_denied_and_expired_are_policy_violations_with_their_reason_codes(with_class: bool) -> None:
    extra = {"errorClass": "PolicyViolationError"} if with_class else {}
    denied = error_from_problem(
        403,
        {
            "code": "APPROVAL_DENIED",
            "reasonCode": "approval_denied",
            "reason": f"approval_denied: {ID} denied",
            **extra,
        },
    )
    assert isinstance(denied, PolicyViolationError)
    assert (denied.code, denied.reason_code) == ("APPROVAL_DENIED", "approval_denied")
    expired = error_from_problem(
        403, {"code": "APPROVAL_EXPIRED", "reason": f"approval_expired: {ID} expired", **extra}
    )
    assert isinstance(expired, PolicyViolationError)
    assert (expired.code, expired.reason_code) == ("APPROVAL_EXPIRED", "approval_expired")


def test_approval_not_found_is_a_plain_service_error() -> None:
    error = error_from_problem(404, {"code": "APPROVAL_NOT_FOUND", "detail": f"approval {ID} not found"})
    assert type(error) is ServiceError
    assert error.code == "APPROVAL_NOT_FOUND"


def test_the_202_of_a_held_payment_is_approval_required_error() -> None:
    error = approval_required_from({"approval": APPROVAL}, 202, "req-1")
    assert isinstance(error, ApprovalRequiredError)
    assert isinstance(error, ServiceError)
    assert not isinstance(error, PolicyViolationError)
    assert (error.approval_id, error.expires_at, error.code, error.status, error.request_id) == (
        ID,
        APPROVAL["expiresAt"],
        "APPROVAL_PENDING",
        202,
        "req-1",
    )
    assert APPROVAL["reason"] in str(error)
    assert "APPROVAL_PENDING" in CLIENT_ERROR_CODES
    assert approval_required_from({"approval": {"id": ID}}) is None
    assert approval_required_from({"paid": True}) is None
