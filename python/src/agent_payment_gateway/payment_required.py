"""Reading a 402 answer (spec 4.7 ``pay`` step 2), leniently, as ``sdk/src/payment-required.ts``.

Unknown fields are ignored and only the spec's own fields are forwarded to the gateway (whose
parsers refuse anything else). Besides the spec's bodies (2.7 x402, 2.9 MPP) the real protocols'
offers are read and forwarded as they came, for the gateway to judge:

- x402 v2: the ``PAYMENT-REQUIRED`` header (standard base64 of JSON; padding optional);
- x402 v1: a JSON body ``{x402Version: 1, accepts: [...]}`` (also ``x402Version: 2`` in a body);
- MPP: every ``Payment`` challenge of ``WWW-Authenticate`` (quoted-string aware), as parameters.

A 402 with none of these is a ``PaymentProtocolError``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import PaymentProtocolError

MPP_PROTOCOL = "mpp/1.0"
PAYMENT_REQUIRED = "PAYMENT-REQUIRED"
WWW_AUTHENTICATE = "WWW-Authenticate"
_MAX_HEADER_CHARS = 16_384
_MAX_CHALLENGES = 16
_MAX_METHODS = 32
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
_CHALLENGE_KEYS = ("id", "realm", "method", "intent", "request")
_OPTIONAL_KEYS = ("expires", "description", "digest", "opaque")


@dataclass(frozen=True, slots=True)
class PaymentOffer:
    """What a 402 offered, each part in the shape the gateway's authorization takes."""

    #: Spec 2.7.
    x402: dict[str, str] | None = None
    #: Spec 2.9.
    mpp: dict[str, Any] | None = None
    #: The decoded ``PAYMENT-REQUIRED`` header of an x402 v2 server.
    x402v2: dict[str, Any] | None = None
    #: The 402 body of an x402 v1 server.
    x402v1: dict[str, Any] | None = None
    #: The ``Payment`` challenges of ``WWW-Authenticate`` (MPP).
    mpp_challenges: list[dict[str, str]] | None = None

    @property
    def session_supported(self) -> bool:
        return self.mpp is not None and self.mpp.get("sessionSupported") is True


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def read_x402(value: object) -> dict[str, str] | None:
    if not isinstance(value, dict) or value.get("scheme") != "exact":
        return None
    fields = {name: _text(value.get(name)) for name in ("network", "token", "amount", "payTo", "resource")}
    if any(item is None for item in fields.values()):
        return None
    return {"scheme": "exact", **{name: item for name, item in fields.items() if item is not None}}


def read_mpp(value: object) -> dict[str, Any] | None:
    if not isinstance(value, dict) or value.get("protocol") != MPP_PROTOCOL:
        return None
    amount = value.get("amount")
    if not isinstance(amount, dict):
        return None
    amount_value, currency = _text(amount.get("value")), _text(amount.get("currency"))
    methods = value.get("paymentMethods")
    endpoint = _text(value.get("paymentEndpoint"))
    if amount_value is None or currency is None or endpoint is None:
        return None
    if not isinstance(methods, list) or not 0 < len(methods) <= _MAX_METHODS:
        return None
    if not all(_text(method) is not None for method in methods):
        return None
    return {
        "protocol": MPP_PROTOCOL,
        "amount": {"value": amount_value, "currency": currency},
        "paymentMethods": list(methods),
        "sessionSupported": value.get("sessionSupported") is True,
        "paymentEndpoint": endpoint,
    }


def read_x402_v2_header(header: str | None) -> dict[str, Any] | None:
    """The decoded ``PAYMENT-REQUIRED`` header: an object with ``x402Version`` 2, else None."""
    if header is None or len(header) > _MAX_HEADER_CHARS:
        return None
    text = header.strip()
    if not _BASE64.match(text):
        return None
    try:
        value = json.loads(base64.b64decode(text + "=" * (-len(text) % 4)).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if isinstance(value, dict) and value.get("x402Version") == 2 and isinstance(value.get("accepts"), list):
        return value
    return None


def read_payment_challenges(header: str | None) -> list[dict[str, str]]:
    """The ``Payment`` challenges of a ``WWW-Authenticate`` value (RFC 9110 §11.6.1).

    Challenges are comma-separated, each a scheme followed by ``name=value`` parameters (tokens or
    quoted strings with backslash escapes). Other schemes are skipped; a challenge without ``id``,
    ``realm``, ``method``, ``intent`` or ``request`` is not one.
    """
    if header is None or len(header) > _MAX_HEADER_CHARS:
        return []
    challenges: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    at, end = 0, len(header)

    def skip_separators(position: int) -> int:
        while position < end and (header[position].isspace() or header[position] == ","):
            position += 1
        return position

    at = skip_separators(at)
    while at < end:
        token_match = _TOKEN.match(header, at)
        if token_match is None:
            break
        token = token_match.group(0)
        at = token_match.end()
        while at < end and header[at] == " ":
            at += 1
        if at >= end or header[at] != "=":
            current = {} if token.lower() == "payment" else None
            if current is not None:
                challenges.append(current)
            at = skip_separators(at)
            continue
        at += 1
        while at < end and header[at] == " ":
            at += 1
        value = ""
        if at < end and header[at] == '"':
            at += 1
            while at < end and header[at] != '"':
                if header[at] == "\\":
                    at += 1
                if at < end:
                    value += header[at]
                at += 1
            at += 1
        else:
            start = at
            while at < end and not (header[at].isspace() or header[at] == ","):
                at += 1
            value = header[start:at]
        if current is not None:
            current[token.lower()] = value
        at = skip_separators(at)
    read: list[dict[str, str]] = []
    for params in challenges[:_MAX_CHALLENGES]:
        if any(_text(params.get(key)) is None for key in _CHALLENGE_KEYS):
            continue
        challenge = {key: params[key] for key in _CHALLENGE_KEYS}
        challenge.update({key: params[key] for key in _OPTIONAL_KEYS if _text(params.get(key)) is not None})
        read.append(challenge)
    return read


def read_payment_offer(
    body: object, endpoint: str, headers: httpx.Headers | Mapping[str, str] | None = None
) -> PaymentOffer:
    """The offers of a 402: the body as spec 2.7 or 2.9 (or a list of such bodies, or an object
    holding them under ``x402`` / ``mpp``), an x402 v1 body, and from ``headers`` the x402 v2
    ``PAYMENT-REQUIRED`` header and the MPP ``WWW-Authenticate: Payment`` challenges."""
    header_map = httpx.Headers(headers or {})
    candidates: list[object] = list(body[:16]) if isinstance(body, list) else [body]
    if isinstance(body, dict):
        candidates += [body.get("x402"), body.get("mpp")]
    x402: dict[str, str] | None = None
    mpp: dict[str, Any] | None = None
    for candidate in candidates:
        x402 = x402 or read_x402(candidate)
        mpp = mpp or read_mpp(candidate)
    x402v2 = read_x402_v2_header(header_map.get(PAYMENT_REQUIRED))
    if (
        x402v2 is None
        and isinstance(body, dict)
        and body.get("x402Version") == 2
        and isinstance(body.get("accepts"), list)
    ):
        x402v2 = body
    x402v1 = (
        body
        if isinstance(body, dict) and body.get("x402Version") == 1 and isinstance(body.get("accepts"), list)
        else None
    )
    challenges = read_payment_challenges(header_map.get(WWW_AUTHENTICATE)) or None
    offer = PaymentOffer(x402=x402, mpp=mpp, x402v2=x402v2, x402v1=x402v1, mpp_challenges=challenges)
    if offer == PaymentOffer():
        named = ""
        if isinstance(body, dict) and isinstance(body.get("protocol"), str):
            named = f" (protocol {json.dumps(body['protocol'][:40])})"
        raise PaymentProtocolError(
            f"{endpoint} answered 402 with no recognised payment requirement{named}: neither x402 (spec 2.7, "
            "x402 v1 body, x402 v2 PAYMENT-REQUIRED header) nor MPP (mpp/1.0 spec 2.9, WWW-Authenticate: Payment)",
            endpoint,
        )
    return offer
