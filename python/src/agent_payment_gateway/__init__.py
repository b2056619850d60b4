"""``agent_payment_gateway``: the Python client of the Agent Payment Gateway (spec 4.6, 4.7).

``Client`` (synchronous) and ``AsyncClient`` (asynchronous) pay APIs that answer 402 over x402 or
MPP within the agent's spend policy, and read and manage its wallet, policies and transactions.
The error classes are spec 7's; amounts are exact ``Decimal`` (``Usdc``). The server helper, to
charge agents from your own API, is ``agent_payment_gateway.server``.
"""

from .client import DEFAULT_BASE_URL, AsyncClient, Client
from .errors import (
    CLIENT_ERROR_CODES,
    ERROR_CODES,
    GATEWAY_ERROR_CODES,
    ApprovalRequiredError,
    AuthenticationError,
    BudgetExceededError,
    DailyBudgetExceededError,
    DomainNotAllowedError,
    InsufficientFundsError,
    PaymentError,
    PaymentProtocolError,
    PolicyViolationError,
    ServiceError,
    approval_required_from,
    error_from_problem,
    is_service_error,
)
from .explorer_links import explorer_url
from .models import (
    AgentEntry,
    Approval,
    ApprovalPage,
    ApprovalRule,
    ApprovalStatus,
    BacktestCount,
    BacktestPayment,
    EndpointBudget,
    InvocationResult,
    PaidResult,
    PaymentResult,
    Policy,
    PolicyBacktest,
    PolicyVersion,
    Protocol,
    ProtocolPreference,
    RateLimit,
    RateLimitWindow,
    Transaction,
    UnpaidResult,
    Wallet,
    WalletOperation,
)
from .money import MoneyFormatError, Usdc, UsdcAmount
from .receipts import PaymentReceipt
from .resources.policies import UNSET
from .text_input import InvalidInputError

__version__ = "0.1.0"

__all__ = [
    "CLIENT_ERROR_CODES",
    "DEFAULT_BASE_URL",
    "ERROR_CODES",
    "GATEWAY_ERROR_CODES",
    "UNSET",
    "AgentEntry",
    "Approval",
    "ApprovalPage",
    "ApprovalRequiredError",
    "ApprovalRule",
    "ApprovalStatus",
    "AsyncClient",
    "AuthenticationError",
    "BacktestCount",
    "BacktestPayment",
    "BudgetExceededError",
    "Client",
    "DailyBudgetExceededError",
    "DomainNotAllowedError",
    "EndpointBudget",
    "InsufficientFundsError",
    "InvalidInputError",
    "InvocationResult",
    "MoneyFormatError",
    "PaidResult",
    "PaymentError",
    "PaymentProtocolError",
    "PaymentReceipt",
    "PaymentResult",
    "Policy",
    "PolicyBacktest",
    "PolicyVersion",
    "PolicyViolationError",
    "Protocol",
    "ProtocolPreference",
    "RateLimit",
    "RateLimitWindow",
    "ServiceError",
    "Transaction",
    "UnpaidResult",
    "Usdc",
    "UsdcAmount",
    "Wallet",
    "WalletOperation",
    "__version__",
    "approval_required_from",
    "error_from_problem",
    "explorer_url",
    "is_service_error",
]
