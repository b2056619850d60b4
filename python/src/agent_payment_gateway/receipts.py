"""Receipts on a paid answer: the contract with the server middleware (docs/sdk.md "Receipts").

- x402: ``X-PAYMENT-RESPONSE`` = base64 JSON ``{ success, transaction, network, payer }``;
- MPP: ``X-MPP-Session`` (the token to keep, possibly refreshed) and ``X-MPP-Receipt`` = base64 JSON
  ``{ txHash, sessionId, amount: { value, currency }, method, charged }``; a service that sends no
  ``X-MPP-Receipt`` may put ``txHash`` / ``sessionId`` in its JSON body instead;
- real x402 v2: ``PAYMENT-RESPONSE``; real x402 v1: ``X-PAYMENT-RESPONSE`` (a SettleResponse);
- real MPP: ``Payment-Receipt`` = base64url JSON ``{ status, method, reference, timestamp }``.

Decoding is lenient (a malformed receipt reads as absent): the receipt is the server's statement,
the gateway validates the transaction when the reservation closes.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal

import httpx

X_PAYMENT = "X-PAYMENT"
X_PAYMENT_SIGNATURE = "X-PAYMENT-SIGNATURE"
X_PAYMENT_RESPONSE = "X-PAYMENT-RESPONSE"
X_PAYMENT_ERROR = "X-PAYMENT-ERROR"
X_MPP_SESSION = "X-MPP-Session"
X_MPP_RECEIPT = "X-MPP-Receipt"
X_MPP_ERROR = "X-MPP-Error"
PAYMENT_RESPONSE = "PAYMENT-RESPONSE"
PAYMENT_RECEIPT = "Payment-Receipt"

_MAX_RECEIPT_CHARS = 8_192

TransferFormat = Literal["x402-v2", "x402-v1", "mpp"]


@dataclass(frozen=True, slots=True)
class X402Receipt:
    success: bool
    transaction: str
    network: str | None = None
    payer: str | None = None


@dataclass(frozen=True, slots=True)
class MppReceipt:
    tx_hash: str
    session_id: str | None = None
    #: ``{ value, currency }`` as sent (``value`` a decimal string).
    amount: dict[str, str] | None = None
    method: str | None = None
    charged: bool | None = None


@dataclass(frozen=True, slots=True)
class PaymentReceipt:
    """The receipt of a real x402 / MPP payment, as the paid API sent it."""

    #: The header it came in: ``PAYMENT-RESPONSE``, ``X-PAYMENT-RESPONSE`` or ``Payment-Receipt``.
    header: str
    #: Whether the server says the payment succeeded.
    success: bool
    #: The settlement transaction it names (x402 ``transaction``, MPP ``reference``).
    transaction: str | None
    #: The decoded JSON, unchanged.
    value: dict[str, Any]


def decode_base64_json(header: str | None, *, url_safe: bool = False) -> dict[str, Any] | None:
    if header is None or len(header) > _MAX_RECEIPT_CHARS:
        return None
    text = header.strip()
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if url_safe else base64.b64decode(padded)
        parsed = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def read_x402_receipt(headers: httpx.Headers) -> X402Receipt | None:
    receipt = decode_base64_json(headers.get(X_PAYMENT_RESPONSE))
    transaction = None if receipt is None else _text(receipt.get("transaction"))
    if receipt is None or transaction is None:
        return None
    return X402Receipt(
        success=receipt.get("success") is not False,
        transaction=transaction,
        network=_text(receipt.get("network")),
        payer=_text(receipt.get("payer")),
    )


def read_mpp_receipt(headers: httpx.Headers, body: object) -> MppReceipt | None:
    """The MPP receipt header, completed from the JSON body's ``txHash`` / ``sessionId`` when absent."""
    header = decode_base64_json(headers.get(X_MPP_RECEIPT)) or {}
    from_body = body if isinstance(body, dict) else {}
    tx_hash = _text(header.get("txHash")) or _text(from_body.get("txHash"))
    if tx_hash is None:
        return None
    amount = header.get("amount")
    money: dict[str, str] | None = None
    if isinstance(amount, dict):
        value, currency = _text(amount.get("value")), _text(amount.get("currency"))
        if value is not None and currency is not None:
            money = {"value": value, "currency": currency}
    charged = header.get("charged")
    return MppReceipt(
        tx_hash=tx_hash,
        session_id=_text(header.get("sessionId")) or _text(from_body.get("sessionId")),
        amount=money,
        method=_text(header.get("method")),
        charged=charged if isinstance(charged, bool) else None,
    )


def read_payment_receipt(format: TransferFormat, headers: httpx.Headers) -> PaymentReceipt | None:
    """The receipt a real x402 (v2 or v1) or MPP server puts on a paid answer, by the payment's format."""
    header = {"x402-v2": PAYMENT_RESPONSE, "x402-v1": X_PAYMENT_RESPONSE, "mpp": PAYMENT_RECEIPT}[format]
    value = decode_base64_json(headers.get(header), url_safe=format == "mpp")
    if value is None:
        return None
    transaction = _text(value.get("reference") if format == "mpp" else value.get("transaction"))
    success = value.get("status") == "success" if format == "mpp" else value.get("success") is True
    return PaymentReceipt(header=header, success=success, transaction=transaction, value=value)
