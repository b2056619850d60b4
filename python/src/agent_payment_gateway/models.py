"""What the client's operations return: typed, immutable objects with the spec's field names in
snake_case (spec 2.2-2.6, 2.3 ``pay``), read once from the gateway's JSON at the edge.

Money is ``Usdc`` (an exact ``Decimal``). Fields the gateway adds beyond the spec are kept, as
sent, in ``extra`` (camelCase keys), so nothing it answers is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .money import Usdc, usdc_from_wire
from .receipts import PaymentReceipt, TransferFormat

Protocol = Literal["x402", "mpp"]
ProtocolPreference = Literal["auto", "x402", "mpp"]
RateLimitWindow = Literal["1m", "5m", "15m", "1h", "24h"]
RATE_LIMIT_WINDOWS: tuple[RateLimitWindow, ...] = ("1m", "5m", "15m", "1h", "24h")
PROTOCOL_PREFERENCES: tuple[ProtocolPreference, ...] = ("auto", "x402", "mpp")


@dataclass(frozen=True, slots=True)
class PaidResult:
    """Spec 2.3: the paid API's answer and the payment that bought it."""

    #: HTTP status from the paid API.
    status: int
    protocol: Protocol
    amount_paid: Usdc
    #: The ledger transaction hash (payment_ledger's record).
    tx_hash: str
    #: Link to the on-chain record.
    solana_explorer: str
    #: The parsed response body (JSON), or its text.
    data: Any
    #: Response headers of the paid API (lower-case names).
    headers: dict[str, str]
    #: The MPP session id, if one was established or reused.
    session_id: str | None = None
    #: A real x402 / MPP server: the transfer transaction its facilitator or server broadcast.
    settlement_tx_hash: str | None = None
    #: A real x402 / MPP server: its wire format (``x402-v2``, ``x402-v1``, ``mpp``).
    format: TransferFormat | None = None
    #: A real x402 / MPP server: its receipt, decoded.
    receipt: PaymentReceipt | None = None
    #: The policy version the gateway authorized the payment under (docs/policy.md "Versions"; on a
    #: payment held for approval, the one the approval's re-check ran under). None for a payment
    #: without an authorization of its own (a held MPP session) and from a gateway without versions.
    policy_version: int | None = None
    paid: Literal[True] = True


@dataclass(frozen=True, slots=True)
class UnpaidResult:
    """The endpoint did not ask for payment (no 402): its answer as it came."""

    status: int
    data: Any
    headers: dict[str, str]
    paid: Literal[False] = False


PaymentResult = PaidResult | UnpaidResult


@dataclass(frozen=True, slots=True)
class Wallet:
    """Spec 2.4."""

    agent_id: str
    address: str
    balance: Usdc
    network: str


@dataclass(frozen=True, slots=True)
class WalletOperation:
    """A funding or a withdrawal: ``confirmed``, ``pending`` (follow it up with
    ``wallet.operation``) or, from ``wallet.operation``, ``failed`` with its ``error``."""

    operation_id: str
    kind: str
    agent_id: str
    amount: Usdc
    status: str
    tx_hash: str | None
    to: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RateLimit:
    calls: int
    window: RateLimitWindow


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """The policy's ``approval`` field (docs/policy.md "Approvals"): which payments are held for a
    person, and how long they wait (``timeout``: ``"90s"``, ``"15m"``, ``"1h"``, ``"7d"``; 1s to 7d)."""

    timeout: str
    #: Hold a payment strictly above this amount.
    above: Usdc | None = None
    #: Hold a payment to a host these entries match.
    domains: list[str] = field(default_factory=list)
    #: Hold the first payment to a host the agent never paid.
    first_payment_to_domain: bool = False
    on_timeout: Literal["deny"] = "deny"


@dataclass(frozen=True, slots=True)
class EndpointBudget:
    """One ``endpointBudgets`` rule (docs/policy.md "Endpoint budgets"): limits on the payments to a
    host, or a host and path prefix (``match``: ``"api.example.com/v1/search"``), on top of the
    agent's own; at least one limit, ``None`` is no limit."""

    match: str
    daily_budget: Usdc | None = None
    per_call_limit: Usdc | None = None
    rate_limit: RateLimit | None = None


ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
APPROVAL_STATUSES: tuple[ApprovalStatus, ...] = ("pending", "approved", "denied", "expired")


@dataclass(frozen=True, slots=True)
class Approval:
    """A payment the policy held for a person (docs/rest.md "Approvals")."""

    id: str
    agent_id: str
    status: ApprovalStatus
    amount: Usdc
    endpoint: str
    domain: str
    #: The approval rule that held it: ``above``, ``domains`` or ``firstPaymentToDomain``.
    rule: str
    #: ``approval_required: ...``
    reason: str
    requested_at: str
    #: The gateway's clock expires it then if nobody decided (``onTimeout: deny``).
    expires_at: str
    decided_at: str | None = None
    #: The deciding API key's id, ``link``, or ``timeout``.
    decided_by: str | None = None
    note: str | None = None
    #: For an approval: ``authorized``, or ``refused`` when the re-run policy refused it.
    outcome: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ApprovalPage:
    approvals: list[Approval]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Policy:
    """Spec 2.1, as ``policies.get`` reads it (with ``used_today``)."""

    agent_id: str
    daily_budget: Usdc | None
    per_call_limit: Usdc | None
    #: None: any domain may be paid.
    allowed_domains: list[str] | None
    blocked_domains: list[str]
    rate_limit: RateLimit | None
    protocol_preference: ProtocolPreference
    used_today: Usdc
    extra: dict[str, Any] = field(default_factory=dict)
    #: Payments held for a person; None when the policy holds none.
    approval: ApprovalRule | None = None
    #: Limits per host or host and path prefix (empty: none, or a gateway that predates them).
    endpoint_budgets: list[EndpointBudget] = field(default_factory=list)


BacktestOutcome = Literal["pass", "refuse", "needs_approval"]


@dataclass(frozen=True, slots=True)
class BacktestCount:
    """A count of backtested payments and their amount."""

    count: int
    amount: Usdc
    #: ``refusedByRule`` / ``needsApprovalByRule``: the reason code or approval rule; ``refusedByDomain``: the host.
    key: str | None = None


@dataclass(frozen=True, slots=True)
class BacktestPayment:
    """What the candidate policy would have done to one recorded attempt (``recorded``: what happened then)."""

    id: str
    at: str
    endpoint: str
    domain: str
    amount: Usdc
    protocol: str | None
    recorded: BacktestOutcome
    outcome: BacktestOutcome
    #: The refusal's reason code or the approval rule; None for a pass.
    rule: str | None
    #: The engine's refusal or approval text.
    reason: str | None


@dataclass(frozen=True, slots=True)
class PolicyBacktest:
    """``policies.backtest``: a candidate policy replayed over the agent's recorded payments of a window."""

    agent_id: str
    window: str
    from_: str
    to: str
    #: More than 200,000 attempts in the window: the oldest 200,000 were replayed.
    truncated: bool
    attempts: int
    passed: BacktestCount
    refused: BacktestCount
    needs_approval: BacktestCount
    #: Attempts whose outcome differs from the recorded one.
    changed: int
    refused_by_rule: list[BacktestCount]
    refused_by_domain: list[BacktestCount]
    needs_approval_by_rule: list[BacktestCount]
    #: The decisions, oldest first (at most ``limit``).
    payments: list[BacktestPayment]


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    """One version of an agent's policy (``policies.history``, docs/policy.md "Versions")."""

    agent_id: str
    version: int
    created_at: str
    #: ``key:<api key id>``, ``admin`` or ``system``.
    created_by: str
    #: SHA-256 (hex) of the stored policy document.
    hash: str
    #: The whole policy, money in base units as decimal strings.
    policy: dict[str, Any]


def policy_version_from_wire(value: object) -> PolicyVersion:
    body = _object(value, "policy version")
    version = body.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise AnswerShapeError(f"version: unexpected {version!r}")
    return PolicyVersion(
        agent_id=_str(body, "agentId"),
        version=version,
        created_at=_str(body, "createdAt"),
        created_by=_str(body, "createdBy"),
        hash=_str(body, "hash"),
        policy=_object(body.get("policy"), "policy"),
    )


@dataclass(frozen=True, slots=True)
class Transaction:
    """Spec 2.2; ``depth`` is 0 outside chains. A rejected payment has ``status`` ``rejected`` and no ``tx_hash``."""

    tx_hash: str | None
    agent_id: str
    protocol: Protocol | None
    amount_paid: Usdc
    endpoint: str
    policy_check: str
    parent_tx_hash: str | None
    solana_explorer: str | None
    timestamp: str
    depth: int
    status: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """Spec 2.5: ``balance`` is ``Usdc(0)`` for a wallet never funded."""

    agent_id: str
    balance: Usdc | None
    archived_at: str | None = None
    #: The display name given at registration ("" when none).
    name: str | None = None
    #: The agent's custodial wallet address (where payments to it arrive).
    address: str | None = None
    network: str | None = None
    created_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InvocationResult:
    """Spec 2.6."""

    output: Any
    total_cost: Usdc
    payment_chain: list[str]


# ------------------------------------------------------------------ reading the gateway's JSON


class AnswerShapeError(TypeError):
    """The gateway answered a shape this client cannot read."""


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise AnswerShapeError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _str(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise AnswerShapeError(f"{key}: expected a string, got {value!r}")
    return value


def _str_or_none(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def _money_or_none(body: dict[str, Any], key: str) -> Usdc | None:
    value = body.get(key)
    return None if value is None else usdc_from_wire(value, key)


def _extra(body: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in known}


def wallet_from_wire(value: object) -> Wallet:
    body = _object(value, "wallet")
    return Wallet(
        agent_id=_str(body, "agentId"),
        address=_str(body, "address"),
        balance=usdc_from_wire(body.get("balance"), "balance"),
        network=_str(body, "network"),
    )


def operation_from_wire(value: object) -> WalletOperation:
    body = _object(value, "wallet operation")
    operation_id = body.get("operationId")
    return WalletOperation(
        operation_id=str(operation_id),
        kind=_str(body, "kind"),
        agent_id=_str(body, "agentId"),
        amount=usdc_from_wire(body.get("amount"), "amount"),
        status=_str(body, "status"),
        tx_hash=_str_or_none(body, "txHash"),
        to=_str_or_none(body, "to"),
        error=_str_or_none(body, "error"),
    )


_POLICY_FIELDS = (
    "agentId",
    "dailyBudget",
    "perCallLimit",
    "allowedDomains",
    "blockedDomains",
    "rateLimit",
    "protocolPreference",
    "usedToday",
    "approval",
    "endpointBudgets",
)


def _domains(value: object, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AnswerShapeError(f"{key}: expected a list of domains, got {value!r}")
    return list(value)


def _rate_limit_from_wire(rate: object, key: str) -> RateLimit | None:
    if rate is None:
        return None
    calls = rate.get("calls") if isinstance(rate, dict) else None
    window = rate.get("window") if isinstance(rate, dict) else None
    if isinstance(calls, bool) or not isinstance(calls, int) or window not in RATE_LIMIT_WINDOWS:
        raise AnswerShapeError(f"{key}: unexpected {rate!r}")
    return RateLimit(calls=calls, window=window)


def endpoint_budgets_from_wire(value: object) -> list[EndpointBudget]:
    """The policy's ``endpointBudgets`` as the gateway echoes them; absent or null: none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnswerShapeError(f"endpointBudgets: expected a list, got {value!r}")
    rules: list[EndpointBudget] = []
    for index, item in enumerate(value):
        key = f"endpointBudgets[{index}]"
        body = _object(item, key)
        rules.append(
            EndpointBudget(
                match=_str(body, "match"),
                daily_budget=_money_or_none(body, "dailyBudget"),
                per_call_limit=_money_or_none(body, "perCallLimit"),
                rate_limit=_rate_limit_from_wire(body.get("rateLimit"), f"{key}.rateLimit"),
            )
        )
    return rules


def policy_from_wire(value: object) -> Policy:
    body = _object(value, "policy")
    rate_limit = _rate_limit_from_wire(body.get("rateLimit"), "rateLimit")
    preference = body.get("protocolPreference", "auto")
    if preference not in PROTOCOL_PREFERENCES:
        raise AnswerShapeError(f"protocolPreference: unexpected {preference!r}")
    return Policy(
        agent_id=_str(body, "agentId"),
        daily_budget=_money_or_none(body, "dailyBudget"),
        per_call_limit=_money_or_none(body, "perCallLimit"),
        allowed_domains=_domains(body.get("allowedDomains"), "allowedDomains"),
        blocked_domains=_domains(body.get("blockedDomains"), "blockedDomains") or [],
        rate_limit=rate_limit,
        protocol_preference=preference,
        used_today=usdc_from_wire(body.get("usedToday"), "usedToday"),
        extra=_extra(body, _POLICY_FIELDS),
        approval=approval_rule_from_wire(body.get("approval")),
        endpoint_budgets=endpoint_budgets_from_wire(body.get("endpointBudgets")),
    )


def approval_rule_from_wire(value: object) -> ApprovalRule | None:
    if value is None:
        return None
    body = _object(value, "approval")
    first = body.get("firstPaymentToDomain", False)
    on_timeout = body.get("onTimeout", "deny")
    if not isinstance(first, bool) or on_timeout != "deny":
        raise AnswerShapeError(f"approval: unexpected {body!r}")
    return ApprovalRule(
        timeout=_str(body, "timeout"),
        above=_money_or_none(body, "above"),
        domains=_domains(body.get("domains"), "approval.domains") or [],
        first_payment_to_domain=first,
    )


_APPROVAL_FIELDS = (
    "id",
    "agentId",
    "status",
    "amount",
    "endpoint",
    "domain",
    "rule",
    "reason",
    "requestedAt",
    "expiresAt",
    "decidedAt",
    "decidedBy",
    "note",
    "outcome",
)


def approval_from_wire(value: object) -> Approval:
    body = _object(value, "approval")
    # The gateway's GET and decisions wrap it: ``{"approval": {...}, "outcome"?: ...}``.
    inner = body.get("approval")
    if isinstance(inner, dict) and "id" not in body:
        body = {**inner, **{key: body[key] for key in ("outcome", "refusal") if key in body}}
    status = body.get("status")
    if status not in APPROVAL_STATUSES:
        raise AnswerShapeError(f"approval status: unexpected {status!r}")
    return Approval(
        id=_str(body, "id"),
        agent_id=_str(body, "agentId"),
        status=status,
        amount=usdc_from_wire(body.get("amount"), "amount"),
        endpoint=_str(body, "endpoint"),
        domain=_str(body, "domain"),
        rule=_str(body, "rule"),
        reason=_str(body, "reason"),
        requested_at=_str(body, "requestedAt"),
        expires_at=_str(body, "expiresAt"),
        decided_at=_str_or_none(body, "decidedAt"),
        decided_by=_str_or_none(body, "decidedBy"),
        note=_str_or_none(body, "note"),
        outcome=_str_or_none(body, "outcome"),
        extra=_extra(body, _APPROVAL_FIELDS),
    )


def approval_page_from_wire(value: object) -> ApprovalPage:
    body = _object(value, "approvals page")
    listed = body.get("approvals")
    if not isinstance(listed, list):
        raise AnswerShapeError("approvals: expected a list")
    return ApprovalPage(
        approvals=[approval_from_wire(item) for item in listed], next_cursor=_str_or_none(body, "nextCursor")
    )


_TRANSACTION_FIELDS = (
    "txHash",
    "agentId",
    "protocol",
    "amountPaid",
    "endpoint",
    "policyCheck",
    "parentTxHash",
    "solanaExplorer",
    "timestamp",
    "depth",
    "status",
)


#: A payment in a chain (a payment tree) was recorded on the ledger, so its policy check passed: the
#: tree's rows may come without ``policyCheck``, and read as ``list`` and ``get`` say it.
CHAIN_POLICY_CHECK = "passed"


def transaction_from_wire(value: object, default_policy_check: str = "") -> Transaction:
    body = _object(value, "transaction")
    protocol = body.get("protocol")
    depth = body.get("depth", 0)
    return Transaction(
        tx_hash=_str_or_none(body, "txHash"),
        agent_id=_str(body, "agentId"),
        protocol=protocol if protocol in ("x402", "mpp") else None,
        amount_paid=usdc_from_wire(body.get("amountPaid"), "amountPaid"),
        endpoint=_str(body, "endpoint"),
        policy_check=_str_or_none(body, "policyCheck") or default_policy_check,
        parent_tx_hash=_str_or_none(body, "parentTxHash"),
        solana_explorer=_str_or_none(body, "solanaExplorer"),
        timestamp=_str(body, "timestamp"),
        depth=depth if isinstance(depth, int) else 0,
        status=_str_or_none(body, "status") or "",
        extra=_extra(body, _TRANSACTION_FIELDS),
    )


def transactions_from_wire(value: object, what: str) -> list[Transaction]:
    body = _object(value, what)
    listed = body.get("transactions")
    if not isinstance(listed, list):
        raise AnswerShapeError(f"{what}: no transactions list")
    default = CHAIN_POLICY_CHECK if what == "chain" else ""
    return [transaction_from_wire(item, default) for item in listed]


def agent_from_wire(value: object) -> AgentEntry:
    body = _object(value, "agent")
    return AgentEntry(
        agent_id=_str(body, "agentId"),
        balance=_money_or_none(body, "balance"),
        archived_at=_str_or_none(body, "archivedAt"),
        name=_str_or_none(body, "name"),
        address=_str_or_none(body, "address"),
        network=_str_or_none(body, "network"),
        created_at=_str_or_none(body, "createdAt"),
        extra=_extra(body, ("agentId", "balance", "archivedAt", "name", "address", "network", "createdAt")),
    )


def _backtest_count(value: object, what: str, key: str | None = None) -> BacktestCount:
    body = _object(value, what)
    count = body.get("count")
    units = body.get("amountUnits")
    if not isinstance(count, int) or not isinstance(units, str) or not units.isdigit():
        raise AnswerShapeError(f"{what}: unexpected {body!r}")
    return BacktestCount(count=count, amount=Usdc.from_units(int(units)), key=None if key is None else _str(body, key))


def _backtest_outcome(body: dict[str, Any], key: str) -> BacktestOutcome:
    value = body.get(key)
    if value not in ("pass", "refuse", "needs_approval"):
        raise AnswerShapeError(f"{key}: unexpected {value!r}")
    return value  # type: ignore[no-any-return]


def _backtest_payment(value: object) -> BacktestPayment:
    body = _object(value, "payment")
    units = body.get("amountUnits")
    if not isinstance(units, str) or not units.isdigit():
        raise AnswerShapeError(f"amountUnits: unexpected {units!r}")
    return BacktestPayment(
        id=_str(body, "id"),
        at=_str(body, "at"),
        endpoint=_str(body, "endpoint"),
        domain=_str(body, "domain"),
        amount=Usdc.from_units(int(units)),
        protocol=_str_or_none(body, "protocol"),
        recorded=_backtest_outcome(body, "recorded"),
        outcome=_backtest_outcome(body, "outcome"),
        rule=_str_or_none(body, "rule"),
        reason=_str_or_none(body, "reason"),
    )


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise AnswerShapeError(f"{what}: expected a list")
    return value


def backtest_from_wire(value: object) -> PolicyBacktest:
    body = _object(value, "backtest")
    totals = _object(body.get("totals"), "totals")
    attempts, changed, truncated = totals.get("attempts"), totals.get("changed"), body.get("truncated")
    if not isinstance(attempts, int) or not isinstance(changed, int) or not isinstance(truncated, bool):
        raise AnswerShapeError("backtest: unexpected totals")
    return PolicyBacktest(
        agent_id=_str(body, "agentId"),
        window=_str(body, "window"),
        from_=_str(body, "from"),
        to=_str(body, "to"),
        truncated=truncated,
        attempts=attempts,
        passed=_backtest_count(totals.get("passed"), "passed"),
        refused=_backtest_count(totals.get("refused"), "refused"),
        needs_approval=_backtest_count(totals.get("needsApproval"), "needsApproval"),
        changed=changed,
        refused_by_rule=[
            _backtest_count(e, "refusedByRule", "rule") for e in _list(totals.get("refusedByRule"), "refusedByRule")
        ],
        refused_by_domain=[
            _backtest_count(e, "refusedByDomain", "domain")
            for e in _list(totals.get("refusedByDomain"), "refusedByDomain")
        ],
        needs_approval_by_rule=[
            _backtest_count(e, "needsApprovalByRule", "rule")
            for e in _list(totals.get("needsApprovalByRule"), "needsApprovalByRule")
        ],
        payments=[_backtest_payment(p) for p in _list(body.get("payments"), "payments")],
    )
