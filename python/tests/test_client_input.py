"""What the Python clients refuse or set up themselves, sync and async:

- the text rule (text_input.py) and a property test: random Unicode in every text input never
  crashes the client with anything but its typed errors, and an unstorable value never reaches the
  network (a recording ``httpx.MockTransport`` stands in for the gateway there: only what leaves
  the client is under test);
- against the whole system: ``pay`` applies the domain rules before the first request leaves (a
  loopback server counts what arrives) and the gateway, asked after a local refusal, records it
  as a rejected payment or allows a host the policy no longer refuses; ``agents.create|get|archive`` with typed errors,
  ``wallet.withdraw`` answers its destination, ``protocol_preference`` defaults to ``auto``, and
  ``PaymentError.code`` when the paid API is unreachable.
"""

from __future__ import annotations

import inspect
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from agent_payment_gateway import (
    AsyncClient,
    Client,
    DomainNotAllowedError,
    InvalidInputError,
    MoneyFormatError,
    PaymentError,
    ServiceError,
)
from agent_payment_gateway.text_input import check_texts, find_unstorable

from .support.both import AnyClient, done
from .support.system import Rest

MakeClient = Callable[..., AnyClient]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("plain", None),
        ("émoji 😀 中文", None),
        ("\xa0 no-break space and \ufffd", None),
        ("c1\x85", "U+0085"),
        ("c1\x9f", "U+009F"),
        ("a\x00b", "U+0000"),
        ("tab\there", "U+0009"),
        ("del\x7f", "U+007F"),
        ("high\ud83d", "U+D83D"),
        ("\ude00low", "U+DE00"),
    ],
)
def test_find_unstorable(text: str, code: str | None) -> None:
    found = find_unstorable(text)
    if code is None:
        assert found is None
    else:
        assert found is not None
        assert code in found[1]


def test_nested_fields_are_named() -> None:
    with pytest.raises(InvalidInputError) as raised:
        check_texts("", {"allowedDomains": ["ok.com", "bad\x00.com"]})
    assert raised.value.field == "allowedDomains[1]"
    assert raised.value.code == "BAD_USER_INPUT"
    assert isinstance(raised.value, TypeError)


_PIECES = ["a", "é", "😀", "\x00", "\x1f", "\x7f", "\ud800", "\udfff", ".", "-", "/", "%", " "]


def _random_text(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return "x" * rng.randint(10_000, 100_000)
    return "".join(
        rng.choice(_PIECES) if rng.random() < 0.5 else chr(rng.randint(0, 0xFFFF)) for _ in range(rng.randint(0, 24))
    )


def test_random_unicode_never_crashes_and_unstorable_text_never_leaves() -> None:
    rng = random.Random(25)
    sent: list[httpx.Request] = []

    def stand_in(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(400, json={"code": "BAD_USER_INPUT", "detail": "refused by the stand-in"})

    http = httpx.Client(transport=httpx.MockTransport(stand_in))
    client = Client(agent_id="prop-agent", api_key="k" * 16, max_retries=0, http_client=http)
    operations: list[Callable[[str], object]] = [
        lambda text: client.agents.create(text),
        lambda text: client.agents.create("ok", name=text),
        lambda text: client.agents.get(text),
        lambda text: client.agents.archive(text),
        lambda text: client.policies.set(allowed_domains=[text]),
        lambda text: client.policies.set(blocked_domains=["ok.com", text]),
        lambda text: client.transactions.list(domain=text),
        lambda text: client.transactions.list(since=text),
        lambda text: client.transactions.get(text),
        lambda text: client.transactions.get_chain(text),
        lambda text: client.wallet.withdraw(to=text, usdc=Decimal(1)),
        lambda text: client.wallet.operation(text),
        lambda text: client.pay(f"https://api.example.com/{text}"),
        lambda text: client.pay(text),
        lambda text: client.pay("https://api.example.com/", headers={"x-note": text}),
        lambda text: client.pay("https://api.example.com/", method=text),
    ]
    for run in range(600):
        text = _random_text(rng)
        before = len(sent)
        error: BaseException | None = None
        try:
            operations[run % len(operations)](text)
        except (ServiceError, TypeError, ValueError, MoneyFormatError) as caught:
            error = caught
        if find_unstorable(text) is not None:
            assert len(sent) == before, f"run {run} sent {text[:40]!r}"
            assert isinstance(error, TypeError), f"run {run}: {error!r}"
    for request in sent:
        assert find_unstorable(str(request.url)) is None
        assert find_unstorable(request.content.decode("utf-8")) is None
    http.close()


# ------------------------------------------------------------------ after a local domain refusal
# A stand-in gateway (httpx.MockTransport): what the client sends and what it raises for each of the
# gateway's answers, sync and async. The real gateway's answers are tested below and in
# test/gateway/domain-check.test.ts.

_BLOCKED_REASON = "domain_blocked: blocked.example is blocked by the policy (blockedDomains entry blocked.example)"


def _stand_in_gateway(
    check: tuple[int, dict[str, Any]] | Exception,
) -> tuple[list[httpx.Request], Callable[..., httpx.Response]]:
    """The gateway's policy read, and ``domain-check`` answering ``check`` (status and body, or an error)."""
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path.endswith("/payments/domain-check"):
            if isinstance(check, Exception):
                raise check
            return httpx.Response(check[0], json=check[1])
        if request.url.path.startswith("/v1/policies/"):
            return httpx.Response(
                200, json={"agentId": "a1", "allowedDomains": None, "blockedDomains": ["blocked.example"]}
            )
        return httpx.Response(200, json={"free": True})

    return sent, handle


async def _pay_through(kind: str, handle: Callable[..., httpx.Response], endpoint: str) -> Any:
    if kind == "sync":
        client = Client(
            agent_id="a1",
            api_key="k" * 16,
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(handle)),
        )
        return client.pay(endpoint)
    async_client = AsyncClient(
        agent_id="a1",
        api_key="k" * 16,
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle)),
    )
    return await async_client.pay(endpoint)


_PROBLEM = {
    "code": "POLICY_VIOLATION",
    "errorClass": "DomainNotAllowedError",
    "reasonCode": "domain_blocked",
    "reason": _BLOCKED_REASON,
    "detail": _BLOCKED_REASON,
    "domain": "blocked.example",
    "requested": None,
    "rejectionId": "7",
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_local_refusal_is_put_to_the_gateway_whose_refusal_is_raised(kind: str) -> None:
    sent, handle = _stand_in_gateway((403, _PROBLEM))
    with pytest.raises(DomainNotAllowedError) as raised:
        await _pay_through(kind, handle, "https://blocked.example/x?q=1")
    assert (raised.value.status, raised.value.reason_code, raised.value.domain) == (
        403,
        "domain_blocked",
        "blocked.example",
    )
    assert isinstance(raised.value.detail, dict)
    assert raised.value.detail["rejectionId"] == "7"
    assert [(r.method, r.url.path) for r in sent] == [
        ("GET", "/v1/policies/a1"),
        ("POST", "/v1/agents/a1/payments/domain-check"),
    ]
    assert json.loads(sent[1].read()) == {"endpoint": "https://blocked.example/x?q=1"}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_gateway_allowing_lets_the_call_go_on(kind: str) -> None:
    sent, handle = _stand_in_gateway((200, {"agentId": "a1", "allowed": True}))
    answer = await _pay_through(kind, handle, "https://blocked.example/x")
    assert answer.status == 200
    assert [(r.method, r.url.host) for r in sent][-1] == ("GET", "blocked.example")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    "check",
    [(503, {"code": "SERVICE_UNAVAILABLE"}), httpx.ConnectError("refused")],
    ids=["503", "no answer"],
)
async def test_without_the_gateways_answer_the_local_refusal_stands(
    kind: str, check: tuple[int, dict[str, Any]] | Exception
) -> None:
    sent, handle = _stand_in_gateway(check)
    with pytest.raises(DomainNotAllowedError) as raised:
        await _pay_through(kind, handle, "https://blocked.example/x")
    assert (raised.value.status, raised.value.reason) == (None, _BLOCKED_REASON)
    assert all(r.url.host != "blocked.example" for r in sent)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_another_4xx_is_raised_as_the_gateways(kind: str) -> None:
    _, handle = _stand_in_gateway((409, {"code": "AGENT_ARCHIVED", "detail": "agent a1 is archived"}))
    with pytest.raises(ServiceError) as raised:
        await _pay_through(kind, handle, "https://blocked.example/x")
    assert not isinstance(raised.value, DomainNotAllowedError)
    assert (raised.value.status, raised.value.code) == (409, "AGENT_ARCHIVED")


# ------------------------------------------------------------------ against the whole system


@pytest.fixture(scope="module")
def counted() -> Iterator[tuple[str, list[str]]]:
    """A loopback API answering 200 to anything, recording each request's path."""
    arrivals: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            arrivals.append(self.path)
            body = b'{"free": true}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", arrivals
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.anyio
async def test_a_blocked_host_receives_nothing(
    rest: Rest, make_client: MakeClient, counted: tuple[str, list[str]]
) -> None:
    origin, arrivals = counted
    agent_id, _ = rest.register("guarded")
    client = make_client(agent_id, max_retries=0)
    await done(client.policies.set(blocked_domains=["127.0.0.1"]))
    before = len(arrivals)
    with pytest.raises(DomainNotAllowedError) as raised:
        await done(client.pay(f"{origin}/data", method="POST", body={"secret": "x"}))
    assert raised.value.domain == "127.0.0.1"
    assert raised.value.reason_code == "domain_blocked"
    assert raised.value.reason == "domain_blocked: 127.0.0.1 is blocked by the policy (blockedDomains entry 127.0.0.1)"
    assert len(arrivals) == before
    # The gateway decided and recorded the refusal: listed as rejected, with no amount requested.
    assert isinstance(raised.value.detail, dict)
    assert raised.value.detail["requested"] is None
    assert isinstance(raised.value.detail["rejectionId"], str)
    rejected = await done(client.transactions.list(status="rejected"))
    assert [(tx.status, tx.agent_id, tx.endpoint) for tx in rejected] == [("rejected", agent_id, f"{origin[7:]}/data")]
    # Down: still the domain refusal, not PaymentError.
    with pytest.raises(DomainNotAllowedError):
        await done(client.pay(f"http://127.0.0.1:{_closed_port()}/gone"))
    assert len(await done(client.transactions.list(status="rejected"))) == 2
    # The policy changed through this client: the next call sees it at once.
    await done(client.policies.set(blocked_domains=[]))
    answer = await done(client.pay(f"{origin}/data"))
    assert answer.status == 200
    assert len(arrivals) == before + 1


@pytest.mark.anyio
async def test_a_policy_changed_elsewhere_is_decided_by_the_gateway(
    rest: Rest, make_client: MakeClient, counted: tuple[str, list[str]]
) -> None:
    origin, arrivals = counted
    agent_id, _ = rest.register("stale-read")
    client = make_client(agent_id, max_retries=0)
    other = make_client(agent_id, max_retries=0)
    await done(client.policies.set(blocked_domains=["127.0.0.1"]))
    # A call to an allowed host caches the policy (2 s) that blocks 127.0.0.1.
    await done(client.pay(f"{origin.replace('127.0.0.1', 'localhost')}/data"))
    # Another client lifts the block: this one refuses from its cached read, asks the gateway,
    # which allows, and the request goes out once; nothing is recorded.
    await done(other.policies.set(blocked_domains=[]))
    before = len(arrivals)
    answer = await done(client.pay(f"{origin}/data"))
    assert answer.status == 200
    assert len(arrivals) == before + 1
    assert await done(client.transactions.list(status="rejected")) == []


@pytest.mark.anyio
async def test_a_host_off_the_allowlist_receives_nothing(
    rest: Rest, make_client: MakeClient, counted: tuple[str, list[str]]
) -> None:
    origin, arrivals = counted
    agent_id, _ = rest.register("listed")
    client = make_client(agent_id, max_retries=0)
    await done(client.policies.set(allowed_domains=["example.com"]))
    before = len(arrivals)
    with pytest.raises(DomainNotAllowedError) as raised:
        await done(client.pay(f"{origin}/data"))
    assert raised.value.reason_code == "domain_not_allowed"
    assert len(arrivals) == before
    await done(client.policies.set(allowed_domains=["localhost"]))
    answer = await done(client.pay(f"{origin.replace('127.0.0.1', 'localhost')}/data"))
    assert answer.status == 200
    assert len(arrivals) == before + 1


@pytest.mark.anyio
async def test_an_unreachable_api_is_a_payment_error_with_a_code(rest: Rest, make_client: MakeClient) -> None:
    agent_id, _ = rest.register("unreachable")
    client = make_client(agent_id, max_retries=0)
    with pytest.raises(PaymentError) as raised:
        await done(client.pay(f"http://127.0.0.1:{_closed_port()}/gone"))
    assert raised.value.code == "API_UNREACHABLE"


@pytest.mark.anyio
async def test_agents_create_get_archive(rest: Rest, make_client: MakeClient) -> None:
    client = make_client("account-ops")
    suffix = random.Random().getrandbits(32)
    agent_id = f"py-seller-{suffix}"
    created = await done(client.agents.create(agent_id, name="Weather API"))
    assert created.agent_id == agent_id
    assert created.name == "Weather API"
    assert created.balance is not None
    assert created.balance.units == 0
    assert created.address is not None
    assert created.archived_at is None
    fetched = await done(client.agents.get(agent_id))
    assert fetched.address == created.address
    with pytest.raises(ServiceError) as taken:
        await done(client.agents.create(agent_id))
    assert (taken.value.code, taken.value.status) == ("AGENT_EXISTS", 409)
    with pytest.raises(ServiceError) as missing:
        await done(client.agents.get(f"never-{suffix}"))
    assert missing.value.code == "NOT_FOUND"
    for bad in ["", "-dash", "has space", "a\x00b", "x" * 129, "lone\ud800"]:
        with pytest.raises(InvalidInputError) as refused:
            await done(client.agents.create(bad))
        assert refused.value.field == "agent_id"
    with pytest.raises(InvalidInputError) as named:
        await done(client.agents.create("ok-id", name="tab\there"))
    assert named.value.field == "name"
    archived = await done(client.agents.archive(agent_id))
    assert archived.archived_at is not None
    assert agent_id not in [agent.agent_id for agent in await done(client.agents.list())]
    assert (await done(client.agents.get(agent_id))).archived_at == archived.archived_at


@pytest.mark.anyio
async def test_withdraw_answers_its_destination(rest: Rest, agent: Callable[..., Any]) -> None:
    client = await agent("withdrawer", "1")
    to = rest.register("destination")[1]
    operation = await done(client.wallet.withdraw(to=to, usdc=Decimal("0.25")))
    assert operation.status == "confirmed"
    assert operation.to == to


def test_protocol_preference_defaults_to_auto() -> None:
    for kind in (Client, AsyncClient):
        assert inspect.signature(kind.__init__).parameters["protocol_preference"].default == "auto"
    client = Client(agent_id="a", api_key="k" * 16)
    assert client._shared.protocol_preference == "auto"
    client.close()
