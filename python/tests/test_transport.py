"""The gateway transport's retry discipline against a real loopback HTTP server that answers a
script (statuses, bodies, headers, or a connection cut without an answer), with both drivers:
what is retried, how often, with which Idempotency-Key, and what is raised."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from agent_payment_gateway import AuthenticationError, PaymentError, ServiceError
from agent_payment_gateway.drivers import run_async, run_sync
from agent_payment_gateway.effects import Flow
from agent_payment_gateway.retry import RetryOptions
from agent_payment_gateway.transport import Transport

pytestmark = pytest.mark.anyio

DROP = "drop"


@dataclass
class Scripted:
    """Answers in order (the last one repeats); records every request."""

    answers: list[Any] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    origin: str = ""


@pytest.fixture
def server() -> Iterator[Scripted]:
    script = Scripted()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or "0")
            body = self.rfile.read(length).decode() if length else ""
            with lock:
                script.seen.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                index = min(len(script.seen), len(script.answers)) - 1
                answer = script.answers[index]
            if answer == DROP:
                self.close_connection = True
                self.connection.close()
                return
            status, payload, headers = answer
            content = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/problem+json" if status >= 400 else "application/json")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = _answer  # noqa: N815 (http.server's naming)
        do_POST = _answer  # noqa: N815

    http_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http_server.daemon_threads = True
    thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    script.origin = f"http://127.0.0.1:{http_server.server_port}"
    yield script
    http_server.shutdown()
    http_server.server_close()


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Any:
    """Performs a flow with the sync or the async driver."""

    async def perform(flow: Flow[Any]) -> Any:
        if request.param == "sync":
            with httpx.Client() as http:
                return run_sync(flow, http)
        async with httpx.AsyncClient() as http:
            return await run_async(flow, http)

    return perform


def transport(origin: str, max_retries: int = 3, base_delay: float = 0.01, timeout: float = 5.0) -> Transport:
    retry = RetryOptions(max_retries=max_retries, base_delay=base_delay, max_delay=20.0)
    return Transport(base_url=origin, api_key="apg_test_key", timeout=timeout, retry=retry)


def ok(body: Any = None) -> tuple[int, Any, dict[str, str]]:
    return (200, {"ok": True} if body is None else body, {})


def problem(status: int, code: str, **fields: Any) -> tuple[int, Any, dict[str, str]]:
    return (status, {"status": status, "code": code, "detail": f"{code} happened", **fields}, {})


async def test_5xx_and_dropped_connections_are_retried_with_the_same_idempotency_key(
    server: Scripted, run: Any
) -> None:
    server.answers = [problem(503, "SERVICE_UNAVAILABLE"), DROP, ok({"usdc": 1.25})]
    answer = await run(transport(server.origin).request("POST", "/v1/x", body={"usdc": Decimal("1.25")}))
    assert answer == {"usdc": Decimal("1.25")}
    assert len(server.seen) == 3
    keys = {seen["headers"]["idempotency-key"] for seen in server.seen}
    assert len(keys) == 1
    assert len(keys.pop()) == 36
    assert {seen["body"] for seen in server.seen} == {'{"usdc":1.25}'}
    assert server.seen[0]["headers"]["authorization"] == "Bearer apg_test_key"


async def test_the_callers_idempotency_key_is_sent_even_without_retries(server: Scripted, run: Any) -> None:
    server.answers = [ok()]
    await run(transport(server.origin, max_retries=0).request("POST", "/v1/x", body={}, idempotency_key="mine-1"))
    assert server.seen[0]["headers"]["idempotency-key"] == "mine-1"


async def test_a_get_carries_no_idempotency_key(server: Scripted, run: Any) -> None:
    server.answers = [ok()]
    await run(transport(server.origin).request("GET", "/v1/x", query={"limit": 5, "protocol": None, "flag": True}))
    assert "idempotency-key" not in server.seen[0]["headers"]
    assert server.seen[0]["path"] == "/v1/x?limit=5&flag=true"


@pytest.mark.parametrize(
    ("answer", "error_class"),
    [
        (problem(400, "BAD_USER_INPUT"), ServiceError),
        (problem(404, "NOT_FOUND"), ServiceError),
        (problem(409, "CONFLICT"), ServiceError),
        (problem(401, "AUTHENTICATION_ERROR"), AuthenticationError),
        (problem(502, "PAYMENT_FAILED", errorClass="PaymentError"), PaymentError),
        (problem(503, "SERVICE_UNAVAILABLE", retryable=False), ServiceError),
    ],
)
async def test_definite_answers_are_not_retried(
    server: Scripted, run: Any, answer: Any, error_class: type[ServiceError]
) -> None:
    server.answers = [answer, ok()]
    with pytest.raises(error_class) as raised:
        await run(transport(server.origin).request("POST", "/v1/x", body={}))
    assert len(server.seen) == 1
    assert raised.value.status == answer[0]
    assert raised.value.code == answer[1]["code"]


async def test_an_idempotency_key_in_progress_is_retried(server: Scripted, run: Any) -> None:
    server.answers = [problem(409, "IDEMPOTENCY_IN_PROGRESS", retryable=True), ok()]
    assert await run(transport(server.origin).request("POST", "/v1/x", body={})) == {"ok": True}
    assert len(server.seen) == 2


async def test_after_max_retries_the_last_failure_is_a_payment_error_from_it(server: Scripted, run: Any) -> None:
    server.answers = [problem(500, "INTERNAL_SERVER_ERROR")]
    with pytest.raises(PaymentError) as raised:
        await run(transport(server.origin, max_retries=2).request("GET", "/v1/x"))
    assert len(server.seen) == 3
    assert "failed after 3 attempts" in raised.value.message
    assert (raised.value.status, raised.value.code) == (500, "INTERNAL_SERVER_ERROR")
    assert isinstance(raised.value.__cause__, ServiceError)


async def test_retry_after_replaces_the_backoff(server: Scripted, run: Any) -> None:
    # A 30 s backoff ceiling, but the server says "now": the retry comes at once.
    server.answers = [(503, {"code": "SERVICE_UNAVAILABLE"}, {"retry-after": "0"}), ok()]
    started = time.monotonic()
    await run(transport(server.origin, base_delay=30.0).request("GET", "/v1/x"))
    assert time.monotonic() - started < 2.0
    assert len(server.seen) == 2


async def test_the_request_id_reaches_the_error(server: Scripted, run: Any) -> None:
    server.answers = [(404, {"code": "NOT_FOUND", "detail": "no such agent"}, {"x-request-id": "req-42"})]
    with pytest.raises(ServiceError) as raised:
        await run(transport(server.origin).request("GET", "/v1/x"))
    assert (raised.value.request_id, raised.value.message) == ("req-42", "no such agent")


def test_the_api_key_never_appears_in_the_repr() -> None:
    shown = repr(transport("http://127.0.0.1:1"))
    assert "apg_test_key" not in shown
    assert "127.0.0.1:1" in shown


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "ftp://x"}, "base_url"),
        ({"timeout": 0}, "timeout"),
        ({"retry": RetryOptions(max_retries=-1)}, "max_retries"),
    ],
)
def test_bad_options_are_refused_at_construction(options: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {
        "base_url": "http://127.0.0.1:1",
        "api_key": "k",
        "timeout": 1.0,
        "retry": RetryOptions(),
    }
    with pytest.raises(TypeError, match=message):
        Transport(**{**settings, **options})
