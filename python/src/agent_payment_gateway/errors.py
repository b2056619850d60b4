"""The client's error classes (spec 7), with the spec's names and hierarchy.

Every class derives from ``ServiceError`` and carries the gateway's stable ``code`` (the REST
problem ``code``), the HTTP ``status`` and the problem body (``detail``) when the failure came from
an answer, and the gateway's ``request_id`` when it sent one. The underlying failure, when there
is one, is the exception's ``__cause__`` (``raise ... from``).

============================  ==========================================  ========================
class                         raised when                                 fields
============================  ==========================================  ========================
PolicyViolationError          a spend policy rejected the payment          reason, reason_code
DailyBudgetExceededError      the daily budget is consumed                 (as above)
DomainNotAllowedError         not on the allowlist / on the blocklist      domain
BudgetExceededError           over an ``agents.invoke`` budget             reason
InsufficientFundsError        the wallet lacks the funds                   current_balance
PaymentProtocolError          a 402 in no protocol the client knows        endpoint
PaymentError                  failed after all retries, or definitively    message
AuthenticationError           API key invalid or missing
ApprovalRequiredError         the payment is held for a person, still     approval_id, expires_at
                              pending when the client stopped waiting
ServiceError                  any other problem (NOT_FOUND, ...)           code, status
============================  ==========================================  ========================
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Final, TypedDict

from .money import Usdc, usdc_from_wire

#: The gateway's stable error codes: a copy of the one registry (api/shared/errors.ts
#: ``ERROR_CODES``) in its order. A code is never reused for another meaning. The Python tests
#: compare this copy with the registry the running gateway was built from.
GATEWAY_ERROR_CODES: Final = (
    # Both surfaces.
    "AUTHENTICATION_ERROR",
    "BAD_USER_INPUT",
    "FORBIDDEN_SCOPE",
    "NOT_FOUND",
    "INVALID_JSON",
    "PAYLOAD_TOO_LARGE",
    "UNSUPPORTED_MEDIA_TYPE",
    # GraphQL only.
    "QUERY_TOO_DEEP",
    "GRAPHQL_PARSE_FAILED",
    "QUERY_TOO_COSTLY",
    "URI_TOO_LONG",
    # REST only.
    "METHOD_NOT_ALLOWED",
    "INVALID_IDEMPOTENCY_KEY",
    "IDEMPOTENCY_KEY_REUSED",
    "IDEMPOTENCY_IN_PROGRESS",
    "AGENT_EXISTS",
    "AGENT_ARCHIVED",
    "AGENT_NOT_EMPTY",
    "INVOCATION_NOT_FOUND",
    "APPROVAL_NOT_FOUND",
    "APPROVAL_ALREADY_DECIDED",
    "APPROVAL_DENIED",
    "APPROVAL_EXPIRED",
    "CONFLICT",
    "POLICY_VIOLATION",
    "LIMIT_EXCEEDED",
    "INVALID_WEBHOOK_URL",
    "INSUFFICIENT_FUNDS",
    "BUDGET_EXCEEDED",
    "PAYMENT_FAILED",
    "PAYEE_REFUSED",
    "SERVICE_UNAVAILABLE",
    "INTERNAL_SERVER_ERROR",
)

#: Codes this client sets on errors it builds itself (never a gateway code): the paid request failed
#: and releasing the reservation showed the payment is being settled (it may still land) or was
#: settled (the money moved, the answer was lost). Check ``transactions.list`` before paying again.
#: ``API_UNREACHABLE``: the paid API gave no answer to the unpaid first request (nothing was paid).
#: ``APPROVAL_PENDING``: the policy held the payment for a person and nobody decided within the
#: client's wait (``ApprovalRequiredError``; the gateway answered 202).
CLIENT_ERROR_CODES: Final = (
    "PAYMENT_OUTCOME_UNKNOWN",
    "PAYMENT_SETTLED_ANSWER_LOST",
    "API_UNREACHABLE",
    "APPROVAL_PENDING",
)

#: Every code an error of this client can carry: the gateway's, then the client's own.
ERROR_CODES: Final = GATEWAY_ERROR_CODES + CLIENT_ERROR_CODES


class ServiceError(Exception):
    """Base class of every error the client raises on purpose (spec 7)."""

    message: str
    #: The gateway's stable error code (``POLICY_VIOLATION``, ``NOT_FOUND``, ...), or the client's own.
    code: str | None
    #: The HTTP status of the answer that carried the error.
    status: int | None
    #: The problem body as received, for inspection.
    detail: object
    #: The gateway's ``x-request-id``, when it sent one.
    request_id: str | None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.detail = detail
        self.request_id = request_id

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        code = "" if self.code is None else f", code={self.code!r}"
        return f"{type(self).__name__}({self.message!r}{code})"


class PolicyViolationError(ServiceError):
    """A spend policy rejected the payment; nothing was paid."""

    #: ``<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`` (spec 7).
    reason: str
    #: The machine code before the colon, e.g. ``per_call_limit_exceeded``.
    reason_code: str

    def __init__(
        self,
        reason: str,
        *,
        reason_code: str | None = None,
        code: str | None = None,
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(reason, code=code, status=status, detail=detail, request_id=request_id)
        self.reason = reason
        self.reason_code = reason_code if reason_code is not None else _reason_code_of(reason)


class DailyBudgetExceededError(PolicyViolationError):
    """The daily budget is consumed; payments are rejected until the window resets."""


class DomainNotAllowedError(PolicyViolationError):
    """The endpoint's domain is not on the allowlist, or is on the blocklist."""

    domain: str

    def __init__(
        self,
        reason: str,
        domain: str,
        *,
        reason_code: str | None = None,
        code: str | None = None,
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(
            reason, reason_code=reason_code, code=code, status=status, detail=detail, request_id=request_id
        )
        self.domain = domain


class BudgetExceededError(PolicyViolationError):
    """A sub-agent's payment would exceed the budget of its ``agents.invoke`` invocation."""


class InsufficientFundsError(ServiceError):
    """The agent's wallet lacks the funds; ``current_balance`` is what it holds."""

    current_balance: Usdc

    def __init__(
        self,
        message: str,
        current_balance: Usdc,
        *,
        code: str | None = None,
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, detail=detail, request_id=request_id)
        self.current_balance = current_balance


class PaymentProtocolError(ServiceError):
    """A 402 answer names a payment protocol the client does not recognise."""

    endpoint: str

    def __init__(
        self,
        message: str,
        endpoint: str,
        *,
        code: str | None = None,
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, detail=detail, request_id=request_id)
        self.endpoint = endpoint


class PaymentError(ServiceError):
    """The payment failed: definitively, or after ``max_retries`` retries of a transient failure."""


class AuthenticationError(ServiceError):
    """The API key is invalid or missing (spec 5)."""


class ApprovalRequiredError(ServiceError):
    """The policy held the payment for a person (docs/policy.md "Approvals") and it was still
    pending when the client stopped waiting: nothing was signed or paid. ``pay`` again with the same
    idempotency key resumes it; ``approval_id`` follows it (``approvals.get``). A denied or expired
    approval is a ``PolicyViolationError`` instead (code ``APPROVAL_DENIED`` / ``APPROVAL_EXPIRED``).
    """

    approval_id: str
    #: ISO 8601: when the gateway's clock expires the approval if nobody decides.
    expires_at: str
    #: The Idempotency-Key ``pay`` sent (the caller's or the one it generated): ``pay`` again with it to resume.
    idempotency_key: str | None

    def __init__(
        self,
        message: str,
        approval_id: str,
        expires_at: str,
        *,
        code: str | None = "APPROVAL_PENDING",
        status: int | None = None,
        detail: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, status=status, detail=detail, request_id=request_id)
        self.approval_id = approval_id
        self.expires_at = expires_at
        self.idempotency_key = None


def approval_required_from(
    answer: object, status: int = 202, request_id: str | None = None
) -> ApprovalRequiredError | None:
    """The 202 answer of a held authorization (``{"approval": {"id", "status", "expiresAt", ...}}``)
    → ``ApprovalRequiredError``; ``None`` when the answer is not that shape."""
    approval = answer.get("approval") if isinstance(answer, Mapping) else None
    if not isinstance(approval, Mapping):
        return None
    approval_id = _text(approval, "id")
    expires_at = _text(approval, "expiresAt")
    if approval_id is None or expires_at is None:
        return None
    reason = _text(approval, "reason")
    message = f"payment held for approval {approval_id} until {expires_at}" + ("" if reason is None else f" ({reason})")
    return ApprovalRequiredError(message, approval_id, expires_at, status=status, detail=answer, request_id=request_id)


def is_service_error(error: BaseException, code: str | None = None) -> bool:
    """``is_service_error(e, "POLICY_VIOLATION")``: by class and, optionally, by code."""
    return isinstance(error, ServiceError) and (code is None or error.code == code)


class _Meta(TypedDict):
    code: str | None
    status: int | None
    detail: object
    request_id: str | None


def _reason_code_of(reason: str) -> str:
    colon = reason.find(":")
    return reason[:colon] if colon > 0 else reason


def _text(body: Mapping[str, object], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def _money(body: Mapping[str, object], key: str) -> Usdc:
    try:
        return usdc_from_wire(body.get(key), key)
    except (TypeError, ValueError):
        return Usdc(Decimal(0))


def error_from_problem(status: int, problem: object, request_id: str | None = None) -> ServiceError:
    """The gateway's RFC 9457 problem JSON → the client's class.

    ``errorClass`` decides when present (the gateway names the spec's class); otherwise the
    ``code`` and status do. An unknown shape is a plain ``ServiceError`` with the status, and an
    unknown code reaches the caller unchanged.
    """
    body: Mapping[str, object] = problem if isinstance(problem, Mapping) else {}
    code = _text(body, "code")
    error_class = _text(body, "errorClass")
    text = _text(body, "detail") or _text(body, "message") or _text(body, "title")
    message = text if text is not None else f"the gateway answered {status}{'' if code is None else ' ' + code}"

    def meta() -> _Meta:
        return {"code": code, "status": status, "detail": problem, "request_id": request_id}

    if status == 401 or code == "AUTHENTICATION_ERROR" or error_class == "AuthenticationError":
        return AuthenticationError(message, **meta())

    reason = _text(body, "reason") or message
    reason_code = _text(body, "reasonCode")
    if error_class == "PolicyViolationError":
        return PolicyViolationError(reason, reason_code=reason_code, **meta())
    if error_class == "DailyBudgetExceededError":
        return DailyBudgetExceededError(reason, reason_code=reason_code, **meta())
    if error_class == "DomainNotAllowedError":
        return DomainNotAllowedError(reason, _text(body, "domain") or "", reason_code=reason_code, **meta())
    if error_class == "BudgetExceededError":
        return BudgetExceededError(reason, reason_code=reason_code, **meta())
    if error_class == "InsufficientFundsError":
        return InsufficientFundsError(message, _money(body, "currentBalance"), **meta())
    if error_class == "PaymentProtocolError":
        return PaymentProtocolError(message, _text(body, "endpoint") or "", **meta())
    if error_class == "PaymentError":
        return PaymentError(message, **meta())

    if code in ("POLICY_VIOLATION", "APPROVAL_DENIED", "APPROVAL_EXPIRED"):
        return PolicyViolationError(reason, reason_code=reason_code, **meta())
    if code == "BUDGET_EXCEEDED":
        return BudgetExceededError(reason, reason_code=reason_code, **meta())
    if code == "INSUFFICIENT_FUNDS":
        return InsufficientFundsError(message, _money(body, "currentBalance"), **meta())
    if code == "PAYMENT_FAILED":
        return PaymentError(message, **meta())
    return ServiceError(message, **meta())
