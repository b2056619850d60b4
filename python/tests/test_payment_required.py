"""Reading 402 answers (spec 2.7, 2.9 and the real protocols' offers) leniently, and receipts."""

from __future__ import annotations

import base64
import json
import random
import string

import httpx
import pytest

from agent_payment_gateway import PaymentProtocolError
from agent_payment_gateway.payment_required import read_payment_challenges, read_payment_offer
from agent_payment_gateway.receipts import read_mpp_receipt, read_payment_receipt, read_x402_receipt

X402 = {
    "scheme": "exact",
    "network": "solana-localnet",
    "token": "Mint111111111111111111111111111111111111111",
    "amount": "50000",
    "payTo": "Pay1111111111111111111111111111111111111111",
    "resource": "http://api.example/x",
}
MPP = {
    "protocol": "mpp/1.0",
    "amount": {"value": "0.05", "currency": "USDC"},
    "paymentMethods": ["stablecoin", "card"],
    "sessionSupported": True,
    "paymentEndpoint": "http://api.example/mpp/pay",
}


def b64(value: object) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def test_spec_bodies_are_read_with_unknown_fields_left_out() -> None:
    offer = read_payment_offer({**X402, "extra": 1}, "http://api.example/x")
    assert offer.x402 == X402
    assert offer.mpp is None
    offer = read_payment_offer({**MPP, "note": "hi"}, "http://api.example/x")
    assert offer.mpp == MPP
    assert offer.session_supported


def test_a_list_or_members_hold_both_protocols() -> None:
    assert read_payment_offer([X402, MPP], "e").x402 == X402
    both = read_payment_offer({"x402": X402, "mpp": MPP}, "e")
    assert (both.x402, both.mpp) == (X402, MPP)


def test_the_real_protocols_offers_are_forwarded_as_they_came() -> None:
    v2 = {"x402Version": 2, "accepts": [{"scheme": "exact"}], "resource": {"url": "u"}}
    header = b64(v2).rstrip("=")  # padding optional
    offer = read_payment_offer({}, "e", httpx.Headers({"PAYMENT-REQUIRED": header}))
    assert offer.x402v2 == v2
    v1 = {"x402Version": 1, "accepts": [{"scheme": "exact"}], "error": "pay"}
    assert read_payment_offer(v1, "e").x402v1 == v1


def test_payment_challenges_are_parsed_with_quoted_strings_and_other_schemes_skipped() -> None:
    header = (
        'Bearer realm="api", Payment id="c1", realm="api.example", method="solana", intent="charge", '
        'request="eyJhIjoxfQ", expires="2030-01-01T00:00:00Z", description="a \\"quoted\\" word, with comma", '
        "Payment id=c2, realm=r, method=m, intent=i"
    )
    challenges = read_payment_challenges(header)
    assert challenges == [
        {
            "id": "c1",
            "realm": "api.example",
            "method": "solana",
            "intent": "charge",
            "request": "eyJhIjoxfQ",
            "expires": "2030-01-01T00:00:00Z",
            "description": 'a "quoted" word, with comma',
        }
    ]
    offer = read_payment_offer(None, "e", httpx.Headers({"WWW-Authenticate": header}))
    assert offer.mpp_challenges == challenges


def test_a_402_in_no_known_protocol_is_a_payment_protocol_error() -> None:
    with pytest.raises(PaymentProtocolError) as raised:
        read_payment_offer({"protocol": "lightning/9", "invoice": "lnbc"}, "http://api/x")
    assert raised.value.endpoint == "http://api/x"
    assert '"lightning/9"' in raised.value.message
    bodies: list[object] = [None, "text", [], {"scheme": "exact"}, {**MPP, "paymentMethods": []}]
    for body in bodies:
        with pytest.raises(PaymentProtocolError):
            read_payment_offer(body, "e")


def test_the_challenge_reader_is_total_on_garbage() -> None:
    rng = random.Random(11)
    alphabet = string.printable + "é\u0000"
    for _ in range(3_000):
        garbage = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        challenges = read_payment_challenges("Payment " + garbage)
        assert all({"id", "realm", "method", "intent", "request"} <= set(c) for c in challenges)


def test_receipts_are_read_leniently() -> None:
    x402 = httpx.Headers({"X-PAYMENT-RESPONSE": b64({"success": True, "transaction": "tx1", "network": "n"})})
    receipt = read_x402_receipt(x402)
    assert receipt is not None
    assert (receipt.success, receipt.transaction, receipt.network, receipt.payer) == (True, "tx1", "n", None)
    assert read_x402_receipt(httpx.Headers({"X-PAYMENT-RESPONSE": "%%%"})) is None

    mpp_header = {"txHash": "tx2", "sessionId": "s", "amount": {"value": "0.01", "currency": "USDC"}, "charged": False}
    mpp = read_mpp_receipt(httpx.Headers({"X-MPP-Receipt": b64(mpp_header)}), None)
    assert mpp is not None
    assert (mpp.tx_hash, mpp.session_id, mpp.amount, mpp.charged) == (
        "tx2",
        "s",
        {"value": "0.01", "currency": "USDC"},
        False,
    )
    from_body = read_mpp_receipt(httpx.Headers(), {"txHash": "tx3", "sessionId": "s3"})
    assert from_body is not None
    assert (from_body.tx_hash, from_body.session_id) == ("tx3", "s3")

    encoded = (
        base64.urlsafe_b64encode(json.dumps({"status": "success", "reference": "tx4"}).encode()).decode().rstrip("=")
    )
    real = read_payment_receipt("mpp", httpx.Headers({"Payment-Receipt": encoded}))
    assert real is not None
    assert (real.header, real.success, real.transaction) == ("Payment-Receipt", True, "tx4")
