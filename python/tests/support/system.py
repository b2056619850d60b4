"""The whole system for the tests: ``test/python/system-fixture.ts`` as a child process (started
once per test session by conftest.py), its ready line, and its request channel to the
TypeScript client (one JSON line per request on its stdin, one per answer on its stdout)."""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import threading
import uuid
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from agent_payment_gateway import wire_json
from agent_payment_gateway.money import to_units

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "test" / "python" / "system-fixture.ts"
#: The system starts in ~10 s on a quiet machine (ledger, database, indexer, API); more when loaded.
READY_TIMEOUT_S = 240.0
ANSWER_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Ready:
    api_url: str
    rpc_url: str
    network: str
    token: str
    buyer_key: str
    other_buyer_key: str
    seller_key: str
    sellers: dict[str, str]
    paid_api: str
    error_codes: list[str]
    prices: dict[str, str]


class LineProcess:
    """A child process speaking JSON lines: a first line when ready, then one answer line (with the
    request's ``id``) per request line on its stdin. Closing stdin stops it."""

    def __init__(self, command: list[str], env: dict[str, str], what: str, ready_timeout: float) -> None:
        self._what = what
        self._process = subprocess.Popen(
            command,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # its logs go to this process's stderr
            text=True,
            bufsize=1,
            env={**os.environ, **env},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"{what}-stdout", daemon=True)
        self._reader.start()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._answers: dict[int, dict[str, Any]] = {}
        self.first: dict[str, Any] = json.loads(self._next_line(ready_timeout, f"{what} to be ready"))

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next_line(self, timeout: float, what: str) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"waited {timeout} s for {what}") from None
        if line is None:
            raise RuntimeError(f"{self._what} exited (code {self._process.poll()}) while waiting for {what}")
        return line

    def request(self, op: str, **fields: Any) -> Any:
        """One request; its result, or RuntimeError with the error it answered."""
        with self._lock:
            request_id = next(self._ids)
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps({"id": request_id, "op": op, **fields}) + "\n")
            self._process.stdin.flush()
            while request_id not in self._answers:
                answer = json.loads(self._next_line(ANSWER_TIMEOUT_S, f"the answer to {op}"))
                self._answers[answer["id"]] = answer
            answer = self._answers.pop(request_id)
        if not answer["ok"]:
            raise RuntimeError(f"{self._what} {op} failed: {answer['error']}")
        return answer["result"]

    def stop(self) -> None:
        """Closes stdin (the process stops itself); kills it if it hangs."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)


class SystemProcess(LineProcess):
    """The running system fixture; ``typescript(op, ...)`` drives its TypeScript client."""

    def __init__(self) -> None:
        super().__init__(
            ["npx", "tsx", str(FIXTURE)],
            {"LOG_LEVEL": os.environ.get("LOG_LEVEL", "silent")},
            "the system fixture",
            READY_TIMEOUT_S,
        )
        ready = self.first["ready"]
        self.ready = Ready(
            api_url=ready["apiUrl"],
            rpc_url=ready["rpcUrl"],
            network=ready["network"],
            token=ready["token"],
            buyer_key=ready["buyerKey"],
            other_buyer_key=ready["otherBuyerKey"],
            seller_key=ready["sellerKey"],
            sellers=ready["sellers"],
            paid_api=ready["paidApi"],
            error_codes=ready["errorCodes"],
            prices=ready["prices"],
        )

    def typescript(self, op: str, **fields: Any) -> Any:
        return self.request(op, **fields)


class Rest:
    """Plain REST calls on the gateway (what is not a client operation: registering agents)."""

    def __init__(self, ready: Ready) -> None:
        self.ready = ready
        self._http = httpx.Client(base_url=ready.api_url, timeout=30.0)

    def call(self, method: str, path: str, key: str, body: Any = None) -> httpx.Response:
        headers = {"authorization": f"Bearer {key}"}
        if method == "POST":
            headers["idempotency-key"] = str(uuid.uuid4())
        if body is None:
            return self._http.request(method, path, headers=headers)
        headers["content-type"] = "application/json"
        return self._http.request(method, path, headers=headers, content=wire_json.dumps(body))

    def register(self, prefix: str, key: str | None = None) -> tuple[str, str]:
        """A new agent of the buyer account (or ``key``'s): its id and wallet address."""
        agent_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
        created = self.call("POST", "/v1/agents", key or self.ready.buyer_key, {"agentId": agent_id})
        assert created.status_code == 201, created.text
        return agent_id, str(created.json()["address"])

    def fund(self, agent_id: str, usdc: str, key: str | None = None) -> None:
        funded = self.call(
            "POST", f"/v1/agents/{agent_id}/wallet/fund", key or self.ready.buyer_key, {"usdc": Decimal(usdc)}
        )
        assert funded.status_code == 200, funded.text

    def seller_balance_units(self, seller: str) -> int:
        """The seller agent's wallet balance in base units, as the gateway reads it from the chain."""
        answer = self.call("GET", f"/v1/agents/{seller}-seller/wallet/balance", self.ready.seller_key)
        assert answer.status_code == 200, answer.text
        return to_units(wire_json.loads(answer.text)["usdc"])

    def counters(self) -> dict[str, dict[str, int]]:
        answer = httpx.get(f"{self.ready.paid_api}/counters", timeout=10.0)
        counters: dict[str, dict[str, int]] = answer.json()
        return counters

    def close(self) -> None:
        self._http.close()
