"""The pay flow (spec 4.7 ``pay``, its seven steps) against an API answering 402 over x402 or MPP,
as one flow both clients run (effects.py). The same steps as the TypeScript client's ``pay/flow.ts``.

It never holds a key: the gateway checks the spend policy, reserves the amount and signs with the
agent's custodial wallet (``POST /v1/agents/{id}/payments/authorize``, steps 3-5); the flow
presents the signed payment to the paid API and closes the reservation with the ledger
transaction (step 6), or releases it when the paid request fails. In order:

1. ``_call_api``: the original request (or, with a known MPP session, the request with its token).
2. ``read_payment_offer``: the 402's x402 and MPP requirements, in the spec's formats and the real
   protocols' (x402 v2 ``PAYMENT-REQUIRED``, x402 v1 body, MPP ``WWW-Authenticate: Payment``).
3-5. ``_authorize``: the gateway's policy check, reservation and signature (authorization.py); a
   payment the policy held for a person (202, docs/rest.md "Approvals") is waited for by long-poll
   up to ``approval_timeout``, then authorized again under the same Idempotency-Key, which resumes
   it: signed once approved, ``APPROVAL_DENIED`` / ``APPROVAL_EXPIRED`` otherwise; still
   undecided, ``ApprovalRequiredError`` (``pay`` again with the same key resumes it);
   ``_pay_x402`` repeats the request with the payment headers, ``_pay_mpp`` confirms the MPP
   payment and opens a session, kept in ``MppSessions`` for the origin (step 4's reuse);
   ``_pay_transfer`` repeats the request with the signed transfer of a real x402 / MPP payment and
   hands the settlement transaction from its receipt to the gateway, which records it.
6. ``_complete`` (or ``_failed``, which releases and says whether money moved).
7. The paid API's answer as ``PaidResult``, with its explorer link.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from . import wire_json
from .api_call import ApiAnswer, ApiRequest, ApiUnreachableError, call_api, headers_dict
from .authorization import (
    Authorization,
    MppAuthorization,
    TransferAuthorization,
    X402Authorization,
    parse_authorization,
)
from .domain_rules import DomainRuleCache
from .effects import Flow, NetworkFailure
from .errors import (
    ApprovalRequiredError,
    InsufficientFundsError,
    PaymentError,
    PaymentProtocolError,
    ServiceError,
    approval_required_from,
    error_from_problem,
)
from .explorer_links import explorer_url
from .models import PaidResult, PaymentResult, ProtocolPreference, UnpaidResult
from .money import Usdc, decimal_text_to_units, usdc_from_wire
from .payment_required import PaymentOffer, read_payment_offer
from .receipts import (
    X_MPP_ERROR,
    X_MPP_SESSION,
    X_PAYMENT_ERROR,
    MppReceipt,
    read_mpp_receipt,
    read_payment_receipt,
    read_x402_receipt,
)
from .resources.approvals import ApprovalFlows
from .sessions import MppSession, MppSessions
from .text_input import InvalidInputError, check_text
from .transport import Transport, segment

_METHOD = re.compile(r"^[A-Z]{1,16}$")


class _Unknown:
    """Not looked up yet (a network name may be looked up and found to be None)."""


_UNKNOWN = _Unknown()


class PayShared:
    """What every copy of a client (``with_parent``) shares with its pay flow: one transport, one
    session store, and the explorer facts learned once."""

    def __init__(
        self,
        transport: Transport,
        *,
        protocol_preference: ProtocolPreference | None,
        explorer_rpc_url: str | None,
        approval_timeout: float | None = None,
    ) -> None:
        self.transport = transport
        #: How long ``pay`` waits for a held payment's decision (seconds); None: the transport's timeout.
        self.approval_timeout = None if approval_timeout is None else check_approval_timeout(approval_timeout)
        self.sessions = MppSessions()
        #: The agents' domain rules, checked before the first request to an endpoint leaves.
        self.domain_rules = DomainRuleCache(transport)
        self.protocol_preference = protocol_preference
        self.explorer_rpc_url = explorer_rpc_url
        self.network_name: str | _Unknown | None = _UNKNOWN
        #: The gateway's explorer link around a transaction hash, learned from its first ``complete`` answer.
        self.explorer_template: tuple[str, str] | None = None


def check_approval_timeout(value: object) -> float:
    """A wait for a person in seconds: a finite number, 0 or more (``TypeError`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TypeError(f"approval_timeout must be a number of seconds, 0 or more: {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class PayExtras:
    """What ``agents.invoke`` adds to a payment: the invocation's hard budget and x402 first."""

    invocation_budget: Usdc | None = None
    protocol_preference: ProtocolPreference | None = None


@dataclass(frozen=True, slots=True)
class _Context:
    request: ApiRequest
    endpoint: str
    origin: str
    #: The host the domain rules judge.
    host: str


def pay_request(
    endpoint: str,
    method: str,
    headers: Mapping[str, str] | None,
    body: object,
) -> _Context:
    """The caller's arguments, checked before anything is sent (``TypeError`` naming the field)."""
    if not isinstance(endpoint, str):
        raise InvalidInputError("endpoint", "is required")
    check_text("endpoint", endpoint)
    if isinstance(method, str):
        check_text("method", method)
    for name, value in (headers or {}).items():
        check_text(f"headers.{name}", str(name))
        check_text(f"headers.{name}", str(value))
    try:
        parts = urlsplit(endpoint)
        hostname = parts.hostname
        port = parts.port
    except ValueError as error:
        raise InvalidInputError("endpoint", f"is not a URL: {error}") from error
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not hostname:
        raise InvalidInputError("endpoint", f"must be an http(s) URL: {endpoint}")
    netloc = parts.netloc.lower() if "@" not in parts.netloc else parts.netloc
    normalized = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    origin = f"{scheme}://{_origin_host(scheme, hostname, port)}"
    upper = (method or "GET").upper()
    if not _METHOD.match(upper):
        raise TypeError(f"method is not an HTTP method: {method}")
    sent: dict[str, str] = {str(name).lower(): str(value) for name, value in (headers or {}).items()}
    content: bytes | None = None
    if body is not None:
        if upper in ("GET", "HEAD"):
            raise TypeError(f"a {upper} request has no body")
        if isinstance(body, bytes):
            content = body
        elif isinstance(body, str):
            content = body.encode("utf-8")
        else:
            content = wire_json.dumps(body).encode("utf-8")
        sent.setdefault("content-type", "application/json")
    sent.setdefault("accept", "application/json")
    host = f"[{hostname}]" if ":" in hostname else hostname
    return _Context(ApiRequest(normalized, upper, sent, content), normalized, origin, host)


def _origin_host(scheme: str, hostname: str, port: int | None) -> str:
    host = f"[{hostname}]" if ":" in hostname else hostname
    default = 443 if scheme == "https" else 80
    return host if port is None or port == default else f"{host}:{port}"


class PayFlow:
    """Spec 4.7 ``pay`` for one agent (and the invocation it pays under, if any)."""

    def __init__(self, agent_id: str, parent_tx_hash: str | None, shared: PayShared) -> None:
        self._agent_id = agent_id
        self._parent_tx_hash = parent_tx_hash
        self._shared = shared
        self._agent_path = f"/v1/agents/{segment(agent_id)}"

    @property
    def _session_scope(self) -> str:
        """Whose MPP sessions a call may reuse: the agent's own, or for a client scoped to an
        invocation the ones negotiated under that same parent (the gateway binds a session to the
        parent of the payment that established it, so its charges count against that budget)."""
        if self._parent_tx_hash is None:
            return self._agent_id
        return f"{self._agent_id}\x00{self._parent_tx_hash}"

    def pay(
        self,
        context: _Context,
        idempotency_key: str | None,
        extras: PayExtras,
        approval_timeout: float | None = None,
    ) -> Flow[PaymentResult]:
        """Steps 1-7; ``extras`` only from ``agents.invoke``. ``approval_timeout``: seconds to wait
        for a held payment's decision (default the client's ``approval_timeout``, else its ``timeout``).
        The Idempotency-Key is generated when absent: a held payment resumes only under its key."""
        if idempotency_key is None:
            idempotency_key = str(uuid.uuid4())
        if approval_timeout is None:
            approval_timeout = self._shared.approval_timeout
        wait = self._shared.transport.timeout if approval_timeout is None else check_approval_timeout(approval_timeout)
        # Spec 2.1's domain rules before anything is sent: a refused host receives nothing.
        yield from self._shared.domain_rules.check(self._agent_id, context.host, context.endpoint)
        sessions = self._shared.sessions
        scope = self._session_scope
        reusable = sessions.get(scope, context.origin) if extras.invocation_budget is None else None

        if reusable is not None:
            # Spec 4.4 step 5: a known session skips negotiation; a 402 means it is no longer valid.
            first = yield from self._call_api(context, {X_MPP_SESSION: reusable.token}, paid=False)
            if first.status != 402:
                receipt = read_mpp_receipt(first.headers, first.data)
                if receipt is not None:
                    return (yield from self._session_paid(context, first, reusable, receipt))
                if first.header(X_MPP_ERROR) is not None:
                    # The service refused the session without a new 402 (e.g. a charge the policy
                    # refused, answered as a problem with `errorClass`): the token is of no further use.
                    sessions.forget(scope, context.origin)
                    if isinstance(first.data, dict) and isinstance(first.data.get("errorClass"), str):
                        raise error_from_problem(first.status, first.data)
                return _unpaid(first)
        else:
            first = yield from self._call_api(context, {}, paid=False)
            if first.status != 402:
                return _unpaid(first)

        try:
            offer = read_payment_offer(first.data, context.endpoint, first.headers)
        except PaymentProtocolError:
            if reusable is not None:
                sessions.forget(scope, context.origin)
            raise
        # A 402 that offers MPP refuses the session; one that offers only x402 comes from an endpoint
        # of the same origin that does not take MPP at all: keep the session for its MPP endpoints.
        if reusable is not None and offer.mpp is not None:
            sessions.forget(scope, context.origin)
        authorization = yield from self._authorize(context, offer, idempotency_key, extras, wait)
        if isinstance(authorization, TransferAuthorization):
            return (yield from self._pay_transfer(context, authorization))
        if isinstance(authorization, X402Authorization):
            return (yield from self._pay_x402(context, authorization))
        if offer.mpp is not None:
            return (yield from self._pay_mpp(context, authorization, offer))
        raise PaymentProtocolError(f"the gateway chose mpp, which {context.endpoint} did not offer", context.endpoint)

    def _call_api(self, context: _Context, extra_headers: Mapping[str, str], *, paid: bool) -> Flow[ApiAnswer]:
        transport = self._shared.transport
        request = ApiRequest(
            context.request.url,
            context.request.method,
            {**context.request.headers, **{name.lower(): value for name, value in extra_headers.items()}},
            context.request.body,
        )
        try:
            return (
                yield from call_api(request, timeout=transport.timeout, retry=transport.retry, retry_server_errors=paid)
            )
        except ApiUnreachableError as error:
            raise PaymentError(str(error), code="API_UNREACHABLE") from error

    def _authorize(
        self, context: _Context, offer: PaymentOffer, idempotency_key: str, extras: PayExtras, approval_timeout: float
    ) -> Flow[Authorization]:
        preference = extras.protocol_preference or self._shared.protocol_preference
        body: dict[str, object] = {"endpoint": context.endpoint}
        if offer.x402 is not None:
            body["x402"] = offer.x402
        if offer.mpp is not None:
            body["mpp"] = offer.mpp
        if offer.x402v2 is not None:
            body["x402v2"] = offer.x402v2
        if offer.x402v1 is not None:
            body["x402v1"] = offer.x402v1
        if offer.mpp_challenges is not None:
            body["mppChallenges"] = offer.mpp_challenges
        if preference is not None:
            body["protocolPreference"] = preference
        if self._parent_tx_hash is not None:
            body["parentTxHash"] = self._parent_tx_hash
        if extras.invocation_budget is not None:
            body["invocationBudget"] = {"usdc": extras.invocation_budget.usdc}
        path = f"{self._agent_path}/payments/authorize"
        answer = yield from self._shared.transport.request("POST", path, body=body, idempotency_key=idempotency_key)
        held = _held(answer, idempotency_key)
        if held is not None:
            yield from self._await_decision(held, approval_timeout)
            # Decided: the same key answers the signed payment, or the denial / expiry / re-check's refusal.
            answer = yield from self._shared.transport.request("POST", path, body=body, idempotency_key=idempotency_key)
            still = _held(answer, idempotency_key)
            if still is not None:
                raise still
        return parse_authorization(answer, context.endpoint)

    def _await_decision(self, held: ApprovalRequiredError, timeout: float) -> Flow[None]:
        """Long-polls the held payment's approval (one request per wait) until it is decided; still
        pending after ``timeout`` seconds, the 202's ``ApprovalRequiredError``."""
        if timeout <= 0:
            raise held
        approval = yield from ApprovalFlows(self._shared.transport).wait_for_decision(held.approval_id, timeout)
        if approval.status == "pending":
            raise held

    def _pay_x402(self, context: _Context, authorization: X402Authorization) -> Flow[PaidResult]:
        try:
            paid = yield from self._call_api(context, authorization.headers, paid=True)
        except PaymentError as error:
            failure = yield from self._failed(
                authorization, context, f"the paid request to {context.endpoint} got no answer", error
            )
            raise failure from error
        receipt = read_x402_receipt(paid.headers)
        if receipt is None or not receipt.success:
            refusal = paid.header(X_PAYMENT_ERROR)
            why = " without a payment receipt" if refusal is None else f" {refusal}"
            failure = yield from self._failed(
                authorization, context, f"{context.endpoint} did not accept the payment: {paid.status}{why}", None
            )
            raise failure
        explorer = yield from self._complete(authorization.reservation_id, receipt.transaction)
        if explorer is None:
            explorer = yield from self._explorer(receipt.transaction, receipt.network)
        return PaidResult(
            status=paid.status,
            protocol="x402",
            amount_paid=authorization.amount,
            tx_hash=receipt.transaction,
            solana_explorer=explorer,
            data=paid.data,
            headers=headers_dict(paid.headers),
            policy_version=authorization.policy_version,
        )

    def _pay_mpp(self, context: _Context, authorization: MppAuthorization, offer: PaymentOffer) -> Flow[PaidResult]:
        transport = self._shared.transport
        submission = ApiRequest(
            authorization.payment_endpoint,
            "POST",
            {"content-type": "application/json", "accept": "application/json"},
            wire_json.dumps(authorization.submission).encode("utf-8"),
        )
        try:
            confirmation = yield from call_api(
                submission, timeout=transport.timeout, retry=transport.retry, retry_server_errors=True
            )
        except ApiUnreachableError as error:
            failure = yield from self._failed(
                authorization,
                context,
                f"the MPP payment endpoint {authorization.payment_endpoint} got no answer",
                error,
            )
            raise failure from error
        confirmed: dict[str, Any] = confirmation.data if isinstance(confirmation.data, dict) else {}
        tx_hash = confirmed.get("txHash") if isinstance(confirmed.get("txHash"), str) else None
        token = confirmation.header(X_MPP_SESSION)
        if not 200 <= confirmation.status <= 299 or tx_hash is None:
            error_text = confirmed.get("error")
            refusal = confirmation.header(X_MPP_ERROR) or (error_text if isinstance(error_text, str) else None)
            why = "" if refusal is None else f" {refusal}"
            failure = yield from self._failed(
                authorization, context, f"the MPP payment was not confirmed: {confirmation.status}{why}", None
            )
            raise failure
        # The money moved with the confirmation: close the reservation before using the session.
        explorer = yield from self._complete(authorization.reservation_id, tx_hash)
        if token is None:
            raise PaymentError(f"the MPP payment {tx_hash} was confirmed without an {X_MPP_SESSION} token")

        paid = yield from self._call_api(context, {X_MPP_SESSION: token}, paid=True)
        if paid.status == 402:
            refusal = paid.header(X_MPP_ERROR)
            why = "" if refusal is None else f": {refusal}"
            raise PaymentError(f"paid {tx_hash}, but {context.endpoint} refused the new session{why}")
        receipt = read_mpp_receipt(paid.headers, paid.data)
        confirmed_session = confirmed.get("sessionId")
        session_id = (receipt.session_id if receipt is not None else None) or (
            confirmed_session if isinstance(confirmed_session, str) else None
        )
        if offer.session_supported:
            self._shared.sessions.put(
                self._session_scope,
                context.origin,
                MppSession(
                    token=paid.header(X_MPP_SESSION) or token,
                    amount_units=authorization.amount.units,
                    session_id=session_id,
                ),
            )
        if explorer is None:
            explorer = yield from self._explorer(tx_hash, None)
        return PaidResult(
            status=paid.status,
            protocol="mpp",
            amount_paid=authorization.amount,
            tx_hash=tx_hash,
            solana_explorer=explorer,
            data=paid.data,
            headers=headers_dict(paid.headers),
            session_id=session_id,
            policy_version=authorization.policy_version,
        )

    def _pay_transfer(self, context: _Context, authorization: TransferAuthorization) -> Flow[PaidResult]:
        """A real x402 / MPP payment: the request again with the signed transfer; its receipt names
        the transfer's transaction, which the gateway checks on the ledger and records."""
        try:
            paid = yield from self._call_api(context, authorization.headers, paid=True)
        except PaymentError as error:
            failure = yield from self._failed(
                authorization, context, f"the paid request to {context.endpoint} got no answer", error
            )
            raise failure from error
        receipt = read_payment_receipt(authorization.format, paid.headers)
        if not 200 <= paid.status <= 299 or receipt is None or not receipt.success or receipt.transaction is None:
            reason = receipt.value.get("errorReason") if receipt is not None else None
            why = (
                " without a payment receipt" if receipt is None else (f" ({reason})" if isinstance(reason, str) else "")
            )
            failure = yield from self._failed(
                authorization,
                context,
                f"{context.endpoint} did not accept the {authorization.format} payment: {paid.status}{why}",
                None,
            )
            raise failure
        settlement_tx_hash = receipt.transaction
        recorded = yield from self._complete_transfer(authorization.reservation_id, settlement_tx_hash)
        tx_hash = recorded[0] if recorded is not None else settlement_tx_hash
        explorer = recorded[1] if recorded is not None else None
        if explorer is None:
            explorer = yield from self._explorer(tx_hash, None)
        return PaidResult(
            status=paid.status,
            protocol=authorization.protocol,
            amount_paid=authorization.amount,
            tx_hash=tx_hash,
            solana_explorer=explorer,
            data=paid.data,
            headers=headers_dict(paid.headers),
            settlement_tx_hash=settlement_tx_hash,
            format=authorization.format,
            receipt=receipt,
            policy_version=authorization.policy_version,
        )

    def _complete_transfer(self, reservation_id: str, settlement_tx_hash: str) -> Flow[tuple[str, str | None] | None]:
        """The record's transaction and explorer link, or None when not recorded yet (never raised:
        the payment happened, the gateway's sweeper records it anyway)."""
        try:
            answer = yield from self._shared.transport.request(
                "POST",
                f"{self._agent_path}/payments/{segment(reservation_id)}/complete",
                body={"txHash": settlement_tx_hash},
            )
        except (ServiceError, NetworkFailure):
            return None
        if not isinstance(answer, dict) or not isinstance(answer.get("txHash"), str):
            return None
        tx_hash: str = answer["txHash"]
        link = answer.get("solanaExplorer")
        return tx_hash, link if isinstance(link, str) and tx_hash in link else None

    def _session_paid(
        self, context: _Context, answer: ApiAnswer, session: MppSession, receipt: MppReceipt
    ) -> Flow[PaidResult]:
        """A call paid by an existing MPP session (no 402, no authorization round trip)."""
        refreshed = answer.header(X_MPP_SESSION)
        session_id = receipt.session_id or session.session_id
        if refreshed is not None and refreshed != session.token:
            self._shared.sessions.put(
                self._session_scope,
                context.origin,
                MppSession(token=refreshed, amount_units=session.amount_units, session_id=session_id),
            )
        amount_units = session.amount_units
        if receipt.charged is False:
            amount_units = 0
        elif receipt.amount is not None:
            amount_units = decimal_text_to_units(receipt.amount["value"])
        explorer = yield from self._explorer(receipt.tx_hash, None)
        return PaidResult(
            status=answer.status,
            protocol="mpp",
            amount_paid=Usdc.from_units(amount_units),
            tx_hash=receipt.tx_hash,
            solana_explorer=explorer,
            data=answer.data,
            headers=headers_dict(answer.headers),
            session_id=session_id,
        )

    def _complete(self, reservation_id: str, tx_hash: str) -> Flow[str | None]:
        """Step 6: the payment landed. The gateway's facilitator usually closed the reservation
        itself already (200 or 409 CONFLICT both mean done). Any other failure is not raised: the
        caller has paid and holds the answer, and raising would invite paying again. Answers the
        transaction's explorer link when the gateway gives one."""
        try:
            answer = yield from self._shared.transport.request(
                "POST", f"{self._agent_path}/payments/{segment(reservation_id)}/complete", body={"txHash": tx_hash}
            )
        except (ServiceError, NetworkFailure):
            return None
        link = answer.get("solanaExplorer") if isinstance(answer, dict) else None
        if not isinstance(link, str) or tx_hash not in link:
            return None
        at = link.index(tx_hash)
        if self._shared.explorer_template is None:
            self._shared.explorer_template = (link[:at], link[at + len(tx_hash) :])
        return link

    def _failed(
        self, authorization: Authorization, context: _Context, message: str, cause: BaseException | None
    ) -> Flow[ServiceError]:
        """The paid request failed definitively: release the reservation and build the error. If the
        gateway answers that the reservation was settled meanwhile, the money moved although the
        answer was lost; the error says so (do not pay again without checking transactions.list)."""
        reservation = authorization.reservation_id
        try:
            yield from self._shared.transport.request(
                "POST", f"{self._agent_path}/payments/{segment(reservation)}/release", body={}
            )
        except ServiceError as error:
            if error.code == "CONFLICT" and "being settled" in error.message:
                # The payee handed the payment to the facilitator: it may still land. Not paid again here.
                outcome = PaymentError(
                    f"{message}; reservation {reservation} is being settled: the payment may still land",
                    code="PAYMENT_OUTCOME_UNKNOWN",
                )
                outcome.__cause__ = cause or error
                return outcome
            if error.code == "CONFLICT" and "settled" in error.message:
                lost = PaymentError(
                    f"{message}; the gateway reports reservation {reservation} as settled: "
                    "the payment was made, the answer was lost",
                    code="PAYMENT_SETTLED_ANSWER_LOST",
                )
                lost.__cause__ = cause or error
                return lost
            return self._not_released(message, reservation, cause or error)
        except NetworkFailure as error:
            return self._not_released(message, reservation, cause or error)
        # The gateway does not hold funds at authorization; a settlement the ledger refused for want
        # of funds shows here as a wallet balance below the price (spec 7 InsufficientFundsError).
        balance = yield from self._balance_or_none()
        if balance is not None and balance.units < authorization.amount.units:
            short = InsufficientFundsError(
                f"insufficient funds: agent {self._agent_id} needs {authorization.amount.usdc} usdc for "
                f"{context.endpoint}, balance is {balance.usdc} usdc",
                balance,
                code="INSUFFICIENT_FUNDS",
            )
            short.__cause__ = cause
            return short
        failed = PaymentError(message)
        failed.__cause__ = cause
        return failed

    @staticmethod
    def _not_released(message: str, reservation: str, cause: BaseException) -> PaymentError:
        """The reservation could not be released (the gateway unreachable or failing): whoever holds
        the signed payment may still present it, so the outcome is unknown; "failed" would invite
        paying twice."""
        unknown = PaymentError(
            f"{message}; reservation {reservation} could not be released: the payment may still land",
            code="PAYMENT_OUTCOME_UNKNOWN",
        )
        unknown.__cause__ = cause
        return unknown

    def _balance_or_none(self) -> Flow[Usdc | None]:
        try:
            answer = yield from self._shared.transport.request("GET", f"{self._agent_path}/wallet/balance")
            return usdc_from_wire(answer, "balance")
        except (ServiceError, NetworkFailure, TypeError, ValueError):
            return None

    def _explorer(self, tx_hash: str, network: str | None) -> Flow[str]:
        template = self._shared.explorer_template
        if template is not None:
            return f"{template[0]}{segment(tx_hash)}{template[1]}"
        try:
            transaction = yield from self._shared.transport.request("GET", f"/v1/transactions/{segment(tx_hash)}")
            link = transaction.get("solanaExplorer") if isinstance(transaction, dict) else None
            if isinstance(link, str) and link != "":
                return link
        except (ServiceError, NetworkFailure):
            pass  # Not indexed yet (404) or unreachable: build the link from the network instead.
        if network is None:
            network = yield from self._network_name()
        return explorer_url(tx_hash, network, self._shared.explorer_rpc_url)

    def _network_name(self) -> Flow[str | None]:
        known = self._shared.network_name
        if not isinstance(known, _Unknown):
            return known
        name: str | None = None
        try:
            wallet = yield from self._shared.transport.request("GET", f"{self._agent_path}/wallet")
            network = wallet.get("network") if isinstance(wallet, dict) else None
            name = network if isinstance(network, str) else None
        except (ServiceError, NetworkFailure):
            name = None
        self._shared.network_name = name
        return name


def _held(answer: object, idempotency_key: str) -> ApprovalRequiredError | None:
    """The 202 of a held payment as the error to raise, carrying the key that resumes it."""
    held = approval_required_from(answer, 202)
    if held is not None:
        held.idempotency_key = idempotency_key
    return held


def _unpaid(answer: ApiAnswer) -> UnpaidResult:
    return UnpaidResult(status=answer.status, data=answer.data, headers=headers_dict(answer.headers))
