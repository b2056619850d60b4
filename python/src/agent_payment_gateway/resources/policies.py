"""The ``policies`` resource (spec 4.1, 4.7): the agent's spend policy (``/v1/policies/{agentId}``),
and ``backtest``: a candidate policy replayed over the agent's recorded payments of a window.

``set`` takes the spec 2.1 fields as keywords: an omitted field keeps its value, ``None`` removes
the limit. Amounts and the rate-limit count are checked here, before the request, so a caller's
mistake is a ``TypeError`` / ``MoneyFormatError`` naming the field rather than a round trip.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..effects import Flow
from ..models import (
    PROTOCOL_PREFERENCES,
    RATE_LIMIT_WINDOWS,
    ApprovalRule,
    EndpointBudget,
    Policy,
    PolicyBacktest,
    PolicyVersion,
    ProtocolPreference,
    RateLimit,
    backtest_from_wire,
    policy_from_wire,
    policy_version_from_wire,
)
from ..money import Usdc, UsdcAmount, to_units, units_to_usdc
from ..runner import AsyncRunner, SyncRunner
from ..transport import Transport

MAX_RATE_LIMIT_CALLS = 1_000_000


class Unset:
    """The default of ``policies.set`` fields: keep the current value (``None`` removes it)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset()

MoneyField = UsdcAmount | Usdc | None | Unset
DomainsField = Sequence[str] | None | Unset
RateLimitField = RateLimit | Mapping[str, object] | None | Unset
ApprovalField = ApprovalRule | None | Unset
#: Replaced whole; ``None`` (or ``[]``) removes every rule. A mapping takes ``match``, ``daily_budget``,
#: ``per_call_limit``, ``rate_limit`` (money as the other money fields, a rate limit as ``rate_limit``).
EndpointBudgetsField = Sequence[EndpointBudget | Mapping[str, object]] | None | Unset

_DURATION = re.compile(r"^[1-9][0-9]{0,9}[smhd]$")
_BACKTEST_WINDOW = re.compile(r"^[1-9][0-9]{0,4}[mhd]$")
BACKTEST_LIST_MAX = 10_000


def backtest_body(candidate: dict[str, object], window: str, limit: int | None) -> dict[str, object]:
    """``POST /v1/policies/{agentId}/backtest``'s body; raises before anything is sent."""
    if not isinstance(window, str) or not _BACKTEST_WINDOW.match(window):
        raise TypeError(f'window must be a duration such as "30d" (1h to 90d), got {window!r}')
    body: dict[str, object] = {"policy": candidate, "window": window}
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= BACKTEST_LIST_MAX:
            raise TypeError(f"limit must be an integer from 0 to {BACKTEST_LIST_MAX}, got {limit!r}")
        body["limit"] = limit
    return body


def policy_body(
    *,
    daily_budget: MoneyField,
    per_call_limit: MoneyField,
    allowed_domains: DomainsField,
    blocked_domains: DomainsField,
    rate_limit: RateLimitField,
    protocol_preference: ProtocolPreference | Unset,
    approval: ApprovalField = UNSET,
    endpoint_budgets: EndpointBudgetsField = UNSET,
) -> dict[str, object]:
    """The PUT body in the spec's camelCase, exact amounts; raises before anything is sent."""
    body: dict[str, object] = {}
    for name, value in (("dailyBudget", daily_budget), ("perCallLimit", per_call_limit)):
        if isinstance(value, Unset):
            continue
        body[name] = None if value is None else _money(value, name)
    for name, domains in (("allowedDomains", allowed_domains), ("blockedDomains", blocked_domains)):
        if isinstance(domains, Unset):
            continue
        if domains is None:
            body[name] = None
            continue
        if isinstance(domains, str) or not all(isinstance(domain, str) for domain in domains):
            raise TypeError(f"{name} must be a list of domains")
        body[name] = list(domains)
    if not isinstance(rate_limit, Unset):
        body["rateLimit"] = None if rate_limit is None else _rate_limit(rate_limit)
    if not isinstance(protocol_preference, Unset):
        if protocol_preference not in PROTOCOL_PREFERENCES:
            raise TypeError("protocol_preference must be auto, x402 or mpp")
        body["protocolPreference"] = protocol_preference
    if not isinstance(approval, Unset):
        body["approval"] = None if approval is None else _approval(approval)
    if not isinstance(endpoint_budgets, Unset):
        body["endpointBudgets"] = None if endpoint_budgets is None else _endpoint_budgets(endpoint_budgets)
    return body


def _money(value: object, name: str) -> dict[str, object]:
    """``{"usdc": <exact Decimal>}``; raises ``MoneyFormatError`` / ``TypeError`` naming ``name``."""
    amount = value.usdc if isinstance(value, Usdc) else value
    return {"usdc": units_to_usdc(to_units(amount, name))}


_ENDPOINT_BUDGET_KEYS = ("match", "daily_budget", "per_call_limit", "rate_limit")


def _endpoint_budgets(rules: object) -> list[dict[str, object]]:
    """The policy's ``endpointBudgets`` on the wire. Types and amounts are checked here; what a
    ``match`` may be, overlaps and the at-least-one-limit rule are the gateway's (a typed 400)."""
    if isinstance(rules, (str, bytes, Mapping)) or not isinstance(rules, Sequence):
        raise TypeError("endpoint_budgets must be a list of EndpointBudget (or mappings) or None")
    return [_endpoint_budget(rule, f"endpoint_budgets[{index}]") for index, rule in enumerate(rules)]


def _endpoint_budget(rule: object, where: str) -> dict[str, object]:
    if isinstance(rule, EndpointBudget):
        fields: dict[str, object] = {
            "match": rule.match,
            "daily_budget": rule.daily_budget,
            "per_call_limit": rule.per_call_limit,
            "rate_limit": rule.rate_limit,
        }
    elif isinstance(rule, Mapping):
        unknown = [str(key) for key in rule if key not in _ENDPOINT_BUDGET_KEYS]
        if unknown:
            raise TypeError(
                f"{where}: unknown field(s) {', '.join(unknown)}; expected {', '.join(_ENDPOINT_BUDGET_KEYS)}"
            )
        fields = dict(rule)
    else:
        raise TypeError(f"{where} must be an EndpointBudget or a mapping, got {type(rule).__name__}")
    match = fields.get("match")
    if not isinstance(match, str):
        raise TypeError(f"{where}.match must be a host or host/path, got {match!r}")
    body: dict[str, object] = {"match": match}
    for key, name in (("daily_budget", "dailyBudget"), ("per_call_limit", "perCallLimit")):
        value = fields.get(key)
        if value is not None:
            body[name] = _money(value, f"{where}.{key}")
    rate = fields.get("rate_limit")
    if rate is not None:
        if not isinstance(rate, (RateLimit, Mapping)):
            raise TypeError(f"{where}.rate_limit must be a RateLimit or a mapping, got {type(rate).__name__}")
        body["rateLimit"] = _rate_limit(rate, f"{where}.rate_limit")
    return body


def _approval(rule: ApprovalRule) -> dict[str, object]:
    """The policy's ``approval`` field on the wire; replaced whole by the gateway."""
    if not isinstance(rule, ApprovalRule):
        raise TypeError("approval must be an ApprovalRule or None")
    if not isinstance(rule.timeout, str) or not _DURATION.match(rule.timeout):
        raise TypeError(f'approval.timeout must be a duration such as "15m" (1s to 7d), got {rule.timeout!r}')
    domains: object = rule.domains
    if not isinstance(domains, list) or not all(isinstance(domain, str) for domain in domains):
        raise TypeError("approval.domains must be a list of domains")
    body: dict[str, object] = {
        "domains": list(domains),
        "firstPaymentToDomain": rule.first_payment_to_domain,
        "timeout": rule.timeout,
        "onTimeout": rule.on_timeout,
    }
    if rule.above is not None:
        body["above"] = {"usdc": units_to_usdc(to_units(rule.above.usdc, "approval.above"))}
    return body


def _rate_limit(value: RateLimit | Mapping[str, object], where: str = "rate_limit") -> dict[str, object]:
    calls = value.calls if isinstance(value, RateLimit) else value.get("calls")
    window = value.window if isinstance(value, RateLimit) else value.get("window")
    # A count: a fraction, a bool or 10**21 would be refused by the gateway; say so here instead.
    if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= MAX_RATE_LIMIT_CALLS:
        raise TypeError(f"{where}.calls must be an integer from 1 to {MAX_RATE_LIMIT_CALLS}, got {calls!r}")
    if not isinstance(window, str):
        raise TypeError(f"{where}.window must be one of {', '.join(RATE_LIMIT_WINDOWS)}")
    # An unknown window is left to the gateway (BAD_USER_INPUT), which owns the list.
    return {"calls": calls, "window": window}


class PolicyFlows:
    def __init__(self, transport: Transport, path: str, changed: Callable[[], None] = lambda: None) -> None:
        self._transport = transport
        self._path = path
        #: Called after the policy changed through this client (its cached domain rules are stale).
        self._changed = changed

    def set(self, body: dict[str, object]) -> Flow[Policy]:
        try:
            return policy_from_wire((yield from self._transport.request("PUT", self._path, body=body)))
        finally:
            self._changed()

    def get(self) -> Flow[Policy]:
        return policy_from_wire((yield from self._transport.request("GET", self._path)))

    def backtest(self, body: dict[str, object]) -> Flow[PolicyBacktest]:
        return backtest_from_wire((yield from self._transport.request("POST", f"{self._path}/backtest", body=body)))

    def clear(self) -> Flow[None]:
        try:
            yield from self._transport.request("DELETE", self._path)
        finally:
            self._changed()

    def history(self, limit: int = 20) -> Flow[list[PolicyVersion]]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise TypeError(f"limit must be an integer from 1 to 100, got {limit!r}")
        answer = yield from self._transport.request("GET", f"{self._path}/history?limit={limit}")
        versions = answer.get("versions") if isinstance(answer, dict) else None
        if not isinstance(versions, list):
            raise TypeError("policy history: the answer has no versions list")
        return [policy_version_from_wire(version) for version in versions]


class PoliciesResource:
    """``client.policies`` of the synchronous ``Client``."""

    def __init__(self, flows: PolicyFlows, run: SyncRunner) -> None:
        self._flows = flows
        self._run = run

    def set(
        self,
        *,
        daily_budget: MoneyField = UNSET,
        per_call_limit: MoneyField = UNSET,
        allowed_domains: DomainsField = UNSET,
        blocked_domains: DomainsField = UNSET,
        rate_limit: RateLimitField = UNSET,
        protocol_preference: ProtocolPreference | Unset = UNSET,
        approval: ApprovalField = UNSET,
        endpoint_budgets: EndpointBudgetsField = UNSET,
    ) -> Policy:
        """Spec 4.1: omitted fields keep their current values; ``None`` removes a limit."""
        body = policy_body(
            daily_budget=daily_budget,
            per_call_limit=per_call_limit,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
            rate_limit=rate_limit,
            protocol_preference=protocol_preference,
            approval=approval,
            endpoint_budgets=endpoint_budgets,
        )
        return self._run(self._flows.set(body))

    def get(self) -> Policy:
        """The policy with ``used_today`` (spend in the current daily window)."""
        return self._run(self._flows.get())

    def clear(self) -> None:
        """Removes every spend policy of the agent."""
        self._run(self._flows.clear())

    def backtest(
        self,
        *,
        window: str,
        limit: int | None = None,
        daily_budget: MoneyField = UNSET,
        per_call_limit: MoneyField = UNSET,
        allowed_domains: DomainsField = UNSET,
        blocked_domains: DomainsField = UNSET,
        rate_limit: RateLimitField = UNSET,
        protocol_preference: ProtocolPreference | Unset = UNSET,
        approval: ApprovalField = UNSET,
        endpoint_budgets: EndpointBudgetsField = UNSET,
    ) -> PolicyBacktest:
        """What a candidate policy (the fields ``set`` takes, as a whole policy: an omitted field
        is no limit) would have done to the agent's recorded payments of ``window`` ("1h" to "90d").
        Reads only: nothing is stored, moved or counted."""
        candidate = policy_body(
            daily_budget=daily_budget,
            per_call_limit=per_call_limit,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
            rate_limit=rate_limit,
            protocol_preference=protocol_preference,
            approval=approval,
            endpoint_budgets=endpoint_budgets,
        )
        return self._run(self._flows.backtest(backtest_body(candidate, window, limit)))

    def history(self, limit: int = 20) -> list[PolicyVersion]:
        """The policy's versions, newest first: who changed it, when, the whole policy, its hash."""
        return self._run(self._flows.history(limit))


class AsyncPoliciesResource:
    """``client.policies`` of ``AsyncClient``: the same operations, awaited."""

    def __init__(self, flows: PolicyFlows, run: AsyncRunner) -> None:
        self._flows = flows
        self._run = run

    async def set(
        self,
        *,
        daily_budget: MoneyField = UNSET,
        per_call_limit: MoneyField = UNSET,
        allowed_domains: DomainsField = UNSET,
        blocked_domains: DomainsField = UNSET,
        rate_limit: RateLimitField = UNSET,
        protocol_preference: ProtocolPreference | Unset = UNSET,
        approval: ApprovalField = UNSET,
        endpoint_budgets: EndpointBudgetsField = UNSET,
    ) -> Policy:
        """Spec 4.1: omitted fields keep their current values; ``None`` removes a limit."""
        body = policy_body(
            daily_budget=daily_budget,
            per_call_limit=per_call_limit,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
            rate_limit=rate_limit,
            protocol_preference=protocol_preference,
            approval=approval,
            endpoint_budgets=endpoint_budgets,
        )
        return await self._run(self._flows.set(body))

    async def get(self) -> Policy:
        """The policy with ``used_today`` (spend in the current daily window)."""
        return await self._run(self._flows.get())

    async def clear(self) -> None:
        """Removes every spend policy of the agent."""
        await self._run(self._flows.clear())

    async def backtest(
        self,
        *,
        window: str,
        limit: int | None = None,
        daily_budget: MoneyField = UNSET,
        per_call_limit: MoneyField = UNSET,
        allowed_domains: DomainsField = UNSET,
        blocked_domains: DomainsField = UNSET,
        rate_limit: RateLimitField = UNSET,
        protocol_preference: ProtocolPreference | Unset = UNSET,
        approval: ApprovalField = UNSET,
        endpoint_budgets: EndpointBudgetsField = UNSET,
    ) -> PolicyBacktest:
        """What a candidate policy (the fields ``set`` takes, as a whole policy: an omitted field
        is no limit) would have done to the agent's recorded payments of ``window`` ("1h" to "90d").
        Reads only: nothing is stored, moved or counted."""
        candidate = policy_body(
            daily_budget=daily_budget,
            per_call_limit=per_call_limit,
            allowed_domains=allowed_domains,
            blocked_domains=blocked_domains,
            rate_limit=rate_limit,
            protocol_preference=protocol_preference,
            approval=approval,
            endpoint_budgets=endpoint_budgets,
        )
        return await self._run(self._flows.backtest(backtest_body(candidate, window, limit)))

    async def history(self, limit: int = 20) -> list[PolicyVersion]:
        """The policy's versions, newest first: who changed it, when, the whole policy, its hash."""
        return await self._run(self._flows.history(limit))
