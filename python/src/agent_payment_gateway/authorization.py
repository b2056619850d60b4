"""The gateway's payment authorization (``POST /v1/agents/{agentId}/payments/authorize``): the
policy check of spec 4.7 step 3, a reservation, and what the pay flow presents to the paid API
(signed x402 headers, an MPP submission, or a signed transfer for a real x402 / MPP server). The
answer is read defensively: a shape the client cannot use is a typed error, never a payment half
made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from .errors import PaymentProtocolError, ServiceError
from .money import Usdc, usdc_from_wire
from .receipts import TransferFormat

_FORMATS = ("x402-v2", "x402-v1", "mpp")


@dataclass(frozen=True, slots=True)
class X402Authorization:
    reservation_id: str
    amount: Usdc
    headers: dict[str, str]
    protocol: Literal["x402"] = "x402"
    #: The policy version the gateway authorized the payment under (None from a gateway that records none).
    policy_version: int | None = None


@dataclass(frozen=True, slots=True)
class MppAuthorization:
    reservation_id: str
    amount: Usdc
    method: str
    payment_endpoint: str
    submission: Any
    protocol: Literal["mpp"] = "mpp"
    #: The policy version the gateway authorized the payment under (None from a gateway that records none).
    policy_version: int | None = None


@dataclass(frozen=True, slots=True)
class TransferAuthorization:
    """A real x402 or MPP payment: a token transfer the gateway signed for the agent, which the
    payee's side co-signs and broadcasts; ``headers`` carry it."""

    reservation_id: str
    amount: Usdc
    protocol: Literal["x402", "mpp"]
    format: TransferFormat
    headers: dict[str, str]
    #: The policy version the gateway authorized the payment under (None from a gateway that records none).
    policy_version: int | None = None


Authorization = X402Authorization | MppAuthorization | TransferAuthorization


def _string_headers(value: dict[str, Any]) -> dict[str, str]:
    return {name: item for name, item in value.items() if isinstance(item, str)}


def parse_authorization(answer: object, endpoint: str) -> Authorization:
    if not isinstance(answer, dict):
        raise ServiceError("the gateway's payment authorization is not an object", detail=answer)
    reservation_id = answer.get("reservationId")
    if isinstance(reservation_id, bool) or not isinstance(reservation_id, (str, int)):
        raise ServiceError("the gateway's payment authorization is missing reservationId or amount", detail=answer)
    try:
        amount = usdc_from_wire(answer.get("amount"), "amount")
    except (TypeError, ValueError) as error:
        raise ServiceError(
            "the gateway's payment authorization is missing reservationId or amount", detail=answer
        ) from error
    reservation = str(reservation_id)
    version = answer.get("policyVersion")
    policy_version = version if isinstance(version, int) and not isinstance(version, bool) and version >= 0 else None
    protocol = answer.get("protocol")
    headers = answer.get("headers")
    transfer_format = answer.get("format")
    if transfer_format in _FORMATS and isinstance(headers, dict) and protocol in ("x402", "mpp"):
        return TransferAuthorization(
            reservation_id=reservation,
            amount=amount,
            protocol=cast(Literal["x402", "mpp"], protocol),
            format=cast(TransferFormat, transfer_format),
            headers=_string_headers(headers),
            policy_version=policy_version,
        )
    if protocol == "x402" and isinstance(headers, dict):
        return X402Authorization(
            reservation_id=reservation, amount=amount, headers=_string_headers(headers), policy_version=policy_version
        )
    payment_endpoint = answer.get("paymentEndpoint")
    if protocol == "mpp" and isinstance(payment_endpoint, str) and "submission" in answer:
        return MppAuthorization(
            reservation_id=reservation,
            amount=amount,
            method=str(answer.get("method")),
            payment_endpoint=payment_endpoint,
            submission=answer["submission"],
            policy_version=policy_version,
        )
    raise PaymentProtocolError(f"the gateway's payment authorization for {endpoint} names no usable protocol", endpoint)
