"""The x402 gate (spec 4.3, 4.5): what an API that charges agents answers, decided through the
gateway's facilitator before the handler runs. The counterpart of the TypeScript
``x402Middleware`` (``sdk/src/server/x402.ts``), with the same wire contract (docs/sdk-server.md):

- a request without payment headers gets 402 with exactly the spec 2.7 body;
- ``X-PAYMENT`` + ``X-PAYMENT-SIGNATURE`` are settled through ``POST /v1/x402/settle`` (which
  verifies the signature, the terms against THIS server's requirement, the nonce and the funds, and
  moves them on the ledger) before the handler may run; the paid answer carries
  ``X-PAYMENT-RESPONSE`` (base64 JSON ``{ success, transaction, network, payer }``);
- refused → 402, the same body, ``X-PAYMENT-ERROR: <reason>``; settlement still pending → 503
  ``settlement_pending`` (retrying the same payment resolves it: the settle call's Idempotency-Key is
  derived from the payment); gateway unreachable → 503; the key refused → 502.

The requirement is always built from the options, never read from the client, so a payment for
other terms (less money, another payee or token) is refused; a settle answer the gateway replays
means a payment already used, refused as ``nonce_reused``: the handler runs at most once per payment.

The gate is a flow (effects.py), performed by ``X402Gate`` (sync), ``AsyncX402Gate`` and the ASGI
``X402Middleware`` (gate.py, asgi.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from .. import wire_json
from ..effects import Flow, HttpRequest, NetworkFailure, send
from ..money import MAX_AMOUNT_UNITS, Usdc
from ..receipts import X_PAYMENT, X_PAYMENT_ERROR, X_PAYMENT_RESPONSE, X_PAYMENT_SIGNATURE

_ADDRESS = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")
_UNITS = re.compile(r"^[1-9]\d{0,19}$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_MAX_HEADER_CHARS = 8_192
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class X402Options:
    """Spec 4.5's options in snake_case, plus how to reach the gateway.

    ``amount`` is the price in base units (``"50000"`` or ``50000`` is 0.05 USDC); ``token`` is
    ``"usdc"`` (resolved to its mint through ``GET /v1/x402/supported``) or a token address;
    ``network`` defaults to the facilitator's own; ``pay_to`` is the receiving wallet.
    ``facilitator_url`` is the gateway's base URL and ``api_key`` a key of the seller's account.
    ``resource`` is the URL named in the 402 body (the request's absolute URL when absent);
    ``origin`` the public ``scheme://host[:port]`` behind a proxy.
    """

    amount: int | str
    token: str
    pay_to: str
    facilitator_url: str
    api_key: str = field(repr=False)
    network: str | None = None
    resource: str | None = None
    origin: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        amount_units(self.amount)
        if not isinstance(self.token, str) or self.token == "":
            raise TypeError("X402Options: token is required")
        if not isinstance(self.pay_to, str) or not _ADDRESS.match(self.pay_to):
            raise TypeError("X402Options: pay_to must be a base58 address")
        facilitator = urlsplit(self.facilitator_url) if isinstance(self.facilitator_url, str) else None
        if facilitator is None or facilitator.scheme not in ("http", "https") or not facilitator.netloc:
            raise TypeError("X402Options: facilitator_url must be an absolute http(s) URL")
        if not isinstance(self.api_key, str) or self.api_key == "":
            raise TypeError("X402Options: api_key is required")
        if self.origin is not None:
            parts = urlsplit(self.origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("",) or parts.query:
                raise TypeError("X402Options: origin must be scheme://host[:port] without a path")
        if self.resource is not None:
            parts = urlsplit(self.resource)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise TypeError("X402Options: resource must be an absolute http(s) URL")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0:
            raise TypeError("X402Options: timeout must be a positive number of seconds")


def amount_units(amount: object) -> int:
    """Base units: a positive ``int``, or a string of digits without leading zeros, within a u64."""
    if isinstance(amount, bool):
        raise TypeError("X402Options: amount must be base units (an int or a string of digits such as '50000')")
    if isinstance(amount, int):
        units = amount
    elif isinstance(amount, str) and _UNITS.match(amount):
        units = int(amount)
    else:
        raise TypeError("X402Options: amount must be base units (an int or a string of digits such as '50000')")
    if not 0 < units <= MAX_AMOUNT_UNITS:
        raise TypeError("X402Options: amount must be positive and fit in a u64")
    return units


@dataclass(frozen=True, slots=True)
class X402Payment:
    """What the handler learns about the payment that paid for this request."""

    tx_hash: str
    payer: str
    amount: Usdc
    network: str
    protocol: Literal["x402"] = "x402"

    @property
    def amount_units(self) -> int:
        return self.amount.units


@dataclass(frozen=True, slots=True)
class GateAnswer:
    """Answer this to the request; the handler does not run (402, 503, 502)."""

    status: int
    headers: dict[str, str]
    body: Any

    @property
    def content(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True, slots=True)
class GatePaid:
    """Paid: run the handler, and add ``headers`` (the receipt) to its answer."""

    payment: X402Payment
    headers: dict[str, str]


GateResult = GateAnswer | GatePaid


def answer(status: int, body: Any, headers: Mapping[str, str] | None = None) -> GateAnswer:
    return GateAnswer(
        status, {"content-type": "application/json", "cache-control": "no-store", **(headers or {})}, body
    )


def settlement_busy(error: str) -> GateAnswer:
    """503 while the gateway has not finished settling this payment; a retry resolves it."""
    return answer(503, {"error": error}, {X_PAYMENT_ERROR: error, "retry-after": "2"})


def _unavailable() -> GateAnswer:
    return answer(503, {"error": "facilitator_unavailable"}, {"retry-after": "5"})


class GatewayUnavailableError(Exception):
    """The gateway did not answer, answered 5xx or 429: the gate answers 503, the handler does not run."""


@dataclass(frozen=True, slots=True)
class _GatewayAnswer:
    status: int
    headers: httpx.Headers
    body: Any


def _call_gateway(
    options: X402Options, method: str, path: str, body: object = None, idempotency_key: str | None = None
) -> Flow[_GatewayAnswer]:
    headers = {"authorization": f"Bearer {options.api_key}", "accept": "application/json"}
    content: bytes | None = None
    if body is not None:
        headers["content-type"] = "application/json"
        content = wire_json.dumps(body).encode("utf-8")
    if idempotency_key is not None:
        headers["idempotency-key"] = idempotency_key
    url = options.facilitator_url.rstrip("/") + path
    try:
        raw = yield from send(HttpRequest(method, url, headers, content, options.timeout))
    except NetworkFailure as failure:
        raise GatewayUnavailableError(f"{method} {path}: {failure}") from failure
    if raw.status >= 500 or raw.status == 429:
        raise GatewayUnavailableError(f"{method} {path}: HTTP {raw.status}")
    try:
        parsed = None if raw.body == b"" else wire_json.loads(raw.body)
    except ValueError:
        parsed = None
    return _GatewayAnswer(raw.status, raw.headers, parsed)


@dataclass(slots=True)
class _Terms:
    network: str
    token: str


class TermsCache:
    """``token: "usdc"`` and the network, resolved once; a failed lookup is retried next request."""

    def __init__(self) -> None:
        self.known: _Terms | None = None

    def resolve(self, options: X402Options) -> Flow[_Terms]:
        if self.known is not None:
            return self.known
        if _ADDRESS.match(options.token) and options.network is not None:
            self.known = _Terms(options.network, options.token)
            return self.known
        supported = yield from _call_gateway(options, "GET", "/v1/x402/supported")
        body = supported.body
        tokens = body.get("tokens") if isinstance(body, dict) else None
        network = body.get("network") if isinstance(body, dict) else None
        if supported.status != 200 or not isinstance(tokens, dict) or not isinstance(network, str):
            raise GatewayUnavailableError(f"GET /v1/x402/supported answered {supported.status}")
        token = options.token if _ADDRESS.match(options.token) else tokens.get(options.token.lower())
        if not isinstance(token, str):
            raise TypeError(f'X402Options: the facilitator settles no token "{options.token}"')
        self.known = _Terms(options.network or network, token)
        return self.known


def _decode_payment(headers: Mapping[str, str]) -> tuple[dict[str, Any], str] | None:
    """Strict and total: any garbage is a refusal (None), never an exception."""
    encoded = headers.get(X_PAYMENT.lower())
    signature = headers.get(X_PAYMENT_SIGNATURE.lower())
    if encoded is None or signature is None:
        return None
    if len(encoded) > _MAX_HEADER_CHARS or len(encoded) % 4 != 0 or not _BASE64.match(encoded):
        return None
    try:
        payment = json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(payment, dict) or not isinstance(payment.get("payload"), dict):
        return None
    if not isinstance(payment.get("signature"), str) or payment["signature"] != signature.strip():
        return None
    return payment, encoded


def _base64_json(value: object) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode("utf-8")).decode("ascii")


def x402_gate(options: X402Options, terms: TermsCache, url: str, headers: Mapping[str, str]) -> Flow[GateResult]:
    """Decides one request: ``url`` is its absolute URL, ``headers`` its headers with lower-case names."""
    price = amount_units(options.amount)
    try:
        resolved = yield from terms.resolve(options)
    except GatewayUnavailableError:
        return _unavailable()
    requirement = {
        "scheme": "exact",
        "network": resolved.network,
        "token": resolved.token,
        "amount": str(price),
        "payTo": options.pay_to,
        "resource": options.resource or url,
    }

    def refuse(reason: str | None = None) -> GateAnswer:
        return answer(402, requirement, None if reason is None else {X_PAYMENT_ERROR: reason})

    if X_PAYMENT.lower() not in headers and X_PAYMENT_SIGNATURE.lower() not in headers:
        return refuse()
    decoded = _decode_payment(headers)
    if decoded is None:
        return refuse("malformed_headers")
    payment, header = decoded
    key = f"x402-settle:{hashlib.sha256(header.encode('ascii')).hexdigest()}"
    try:
        settled = yield from _call_gateway(
            options, "POST", "/v1/x402/settle", {"payment": payment, "requirement": requirement}, key
        )
    except GatewayUnavailableError:
        return _unavailable()
    body = settled.body if isinstance(settled.body, dict) else {}
    if settled.status == 200 and body.get("success") is True:
        # A replayed answer is a replayed payment: it paid for a request already served.
        if settled.headers.get("idempotent-replayed") == "true":
            return refuse("nonce_reused")
        tx_hash, payer = body.get("txHash"), body.get("payer")
        if not isinstance(tx_hash, str) or not isinstance(payer, str):
            return answer(502, {"error": "facilitator_error"})
        network = body.get("network") if isinstance(body.get("network"), str) else resolved.network
        receipt = {"success": True, "transaction": tx_hash, "network": network, "payer": payer}
        paid = X402Payment(tx_hash=tx_hash, payer=payer, amount=Usdc.from_units(price), network=str(network))
        return GatePaid(paid, {X_PAYMENT_RESPONSE: _base64_json(receipt)})
    if settled.status == 200 and body.get("success") is False and isinstance(body.get("reason"), str):
        return refuse(body["reason"])
    if settled.status == 202:
        return settlement_busy("settlement_pending")
    if settled.status == 409:
        return settlement_busy("settlement_in_progress")
    if settled.status == 422:
        return refuse("nonce_reused")
    if settled.status == 400:
        reason = body.get("reason")
        return refuse(reason if isinstance(reason, str) else "malformed_payload")
    # 401/403/404: this server's configuration, not the payment.
    return answer(502, {"error": "facilitator_error", "status": settled.status})
