"""The spec 7 classes: names, hierarchy, fields, and the mapping from the gateway's problem JSON
(``errorClass`` first, then ``code``), as the TypeScript client's ``errorFromProblem``."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent_payment_gateway import (
    CLIENT_ERROR_CODES,
    ERROR_CODES,
    GATEWAY_ERROR_CODES,
    AuthenticationError,
    BudgetExceededError,
    DailyBudgetExceededError,
    DomainNotAllowedError,
    InsufficientFundsError,
    PaymentError,
    PaymentProtocolError,
    PolicyViolationError,
    ServiceError,
    Usdc,
    error_from_problem,
    is_service_error,
)


def test_the_hierarchy_is_the_specs() -> None:
    for error_class in (
        PolicyViolationError,
        InsufficientFundsError,
        DomainNotAllowedError,
        PaymentProtocolError,
        PaymentError,
        AuthenticationError,
    ):
        assert issubclass(error_class, ServiceError)
    for policy_class in (DailyBudgetExceededError, DomainNotAllowedError, BudgetExceededError):
        assert issubclass(policy_class, PolicyViolationError)
    assert issubclass(ServiceError, Exception)


def test_a_policy_violation_carries_the_reason_text_and_its_code() -> None:
    problem = {
        "code": "POLICY_VIOLATION",
        "errorClass": "PolicyViolationError",
        "detail": "per_call_limit_exceeded: requested 0.6 usdc, limit is 0.5 usdc",
        "reason": "per_call_limit_exceeded: requested 0.6 usdc, limit is 0.5 usdc",
        "reasonCode": "per_call_limit_exceeded",
    }
    error = error_from_problem(403, problem, "req-1")
    assert type(error) is PolicyViolationError
    assert error.reason == "per_call_limit_exceeded: requested 0.6 usdc, limit is 0.5 usdc"
    assert error.reason_code == "per_call_limit_exceeded"
    assert (error.code, error.status, error.request_id, error.detail) == ("POLICY_VIOLATION", 403, "req-1", problem)
    assert str(error) == error.reason


@pytest.mark.parametrize(
    ("status", "problem", "expected"),
    [
        (
            403,
            {"code": "POLICY_VIOLATION", "errorClass": "DailyBudgetExceededError", "reason": "r"},
            DailyBudgetExceededError,
        ),
        (
            403,
            {"code": "POLICY_VIOLATION", "errorClass": "DomainNotAllowedError", "domain": "a.b"},
            DomainNotAllowedError,
        ),
        (422, {"code": "BUDGET_EXCEEDED"}, BudgetExceededError),
        (422, {"code": "INSUFFICIENT_FUNDS", "currentBalance": {"usdc": Decimal("0.5")}}, InsufficientFundsError),
        (
            400,
            {"code": "BAD_USER_INPUT", "errorClass": "PaymentProtocolError", "endpoint": "http://x/"},
            PaymentProtocolError,
        ),
        (502, {"code": "PAYMENT_FAILED"}, PaymentError),
        (422, {"code": "PAYEE_REFUSED", "errorClass": "PaymentError"}, PaymentError),
        (401, {}, AuthenticationError),
        (400, {"code": "AUTHENTICATION_ERROR"}, AuthenticationError),
        (404, {"code": "NOT_FOUND"}, ServiceError),
        (500, "not json", ServiceError),
    ],
)
def test_problems_map_to_the_specs_classes(status: int, problem: object, expected: type[ServiceError]) -> None:
    assert type(error_from_problem(status, problem)) is expected


def test_the_specs_fields_are_read() -> None:
    domain = error_from_problem(
        403, {"errorClass": "DomainNotAllowedError", "domain": "api.example.com", "reason": "x"}
    )
    assert isinstance(domain, DomainNotAllowedError)
    assert domain.domain == "api.example.com"
    funds = error_from_problem(422, {"code": "INSUFFICIENT_FUNDS", "currentBalance": {"usdc": Decimal("2.000001")}})
    assert isinstance(funds, InsufficientFundsError)
    assert funds.current_balance == Usdc(Decimal("2.000001"))
    protocol = error_from_problem(400, {"errorClass": "PaymentProtocolError", "endpoint": "http://api/x"})
    assert isinstance(protocol, PaymentProtocolError)
    assert protocol.endpoint == "http://api/x"


def test_an_unknown_code_reaches_the_caller_unchanged() -> None:
    error = error_from_problem(409, {"code": "A_CODE_FROM_A_NEWER_GATEWAY", "detail": "refused"})
    assert type(error) is ServiceError
    assert error.code == "A_CODE_FROM_A_NEWER_GATEWAY"
    assert is_service_error(error, "A_CODE_FROM_A_NEWER_GATEWAY")
    assert not is_service_error(error, "NOT_FOUND")
    assert "A_CODE_FROM_A_NEWER_GATEWAY" not in ERROR_CODES


def test_error_codes_are_the_gateways_then_the_clients_own() -> None:
    assert ERROR_CODES == GATEWAY_ERROR_CODES + CLIENT_ERROR_CODES
    assert not set(CLIENT_ERROR_CODES) & set(GATEWAY_ERROR_CODES)
