"""The spec 2.1 domain rules, checked by ``pay`` before the first request to an endpoint leaves the
client, so a host on ``blockedDomains`` (or off ``allowedDomains``) receives nothing, not even the
unpaid first request. The gateway checks the same rules again when it authorizes a payment. The
TypeScript client's ``domain-rules.ts`` does the same.

1. an entry with a full subdomain (``api.example.com``) matches only that exact host;
2. an entry that is a bare registrable domain (``example.com``) matches it and its subdomains;
3. a host matched by ``blockedDomains`` is refused even when ``allowedDomains`` also matches it.

"Registrable" as the gateway decides it: two labels, or three under the second-level suffixes
below. Hosts are compared lower-cased in ASCII (IDNA) without a trailing dot. The policy is read
from the gateway (``GET /v1/policies/{agentId}``) and kept for ``POLICY_CACHE_SECONDS``, shared by
a client and its ``with_parent`` copies; ``policies.set`` through the same client forgets it. The
gateway has the last word: a host refused here is put to it (``DomainRuleCache.check``), and it
records the refusal as a rejected payment, as it does for an authorization's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .effects import Flow
from .errors import DomainNotAllowedError, ServiceError
from .transport import Transport, segment

MULTI_LABEL_SUFFIXES: frozenset[str] = frozenset(
    {
        "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk",
        "com.au", "net.au", "org.au", "edu.au", "gov.au",
        "co.nz", "org.nz", "net.nz",
        "co.jp", "ne.jp", "or.jp", "ac.jp",
        "com.br", "net.br", "org.br",
        "com.cn", "net.cn", "org.cn",
        "co.in", "net.in", "org.in",
        "co.za", "org.za",
        "com.mx", "com.ar", "com.tr", "com.sg", "com.hk", "com.tw",
        "co.kr", "or.kr", "co.il", "co.id",
    }
)  # fmt: skip

_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")

#: How long a fetched policy is trusted before it is read again.
POLICY_CACHE_SECONDS = 2.0


def normalize_host(host: str) -> str:
    """Lower-case ASCII (IDNA) without a trailing dot; a name IDNA refuses is kept lower-cased."""
    lower = host.lower().rstrip(".")
    if lower.isascii():
        return lower
    try:
        return lower.encode("idna").decode("ascii")
    except UnicodeError:
        return lower


def _registrable(entry: str) -> bool:
    if _IPV4.match(entry):
        return False
    labels = entry.split(".")
    if len(labels) == 2:
        return True
    return len(labels) == 3 and ".".join(labels[1:]) in MULTI_LABEL_SUFFIXES


def entry_matches(entry: str, host: str) -> bool:
    normalized = normalize_host(entry)
    return host == normalized or (_registrable(normalized) and host.endswith("." + normalized))


def find_match(entries: list[str], host: str) -> str | None:
    """The first entry of ``entries`` matching ``host``, or None."""
    return next((entry for entry in entries if entry_matches(entry, host)), None)


@dataclass(frozen=True, slots=True)
class DomainRules:
    #: None: any domain; an empty list allows none.
    allowed_domains: list[str] | None
    blocked_domains: list[str]


def domain_refusal(rules: DomainRules, host: str) -> DomainNotAllowedError | None:
    """The refusal for ``host`` under ``rules``, or None when it may be called."""
    blocked = find_match(rules.blocked_domains, host)
    if blocked is not None:
        reason = f"domain_blocked: {host} is blocked by the policy (blockedDomains entry {blocked})"
        return DomainNotAllowedError(reason, host, code="POLICY_VIOLATION", reason_code="domain_blocked")
    if rules.allowed_domains is not None and find_match(rules.allowed_domains, host) is None:
        reason = f"domain_not_allowed: {host} is not on the policy's allowedDomains"
        return DomainNotAllowedError(reason, host, code="POLICY_VIOLATION", reason_code="domain_not_allowed")
    return None


def _rules_of(policy: Any) -> DomainRules:
    record = policy if isinstance(policy, dict) else {}

    def strings(value: Any) -> list[str] | None:
        return [entry for entry in value if isinstance(entry, str)] if isinstance(value, list) else None

    return DomainRules(strings(record.get("allowedDomains")), strings(record.get("blockedDomains")) or [])


class DomainRuleCache:
    """The agents' domain rules as last read from the gateway, per agent, for a short time."""

    def __init__(self, transport: Transport, clock: Callable[[], float] = time.monotonic) -> None:
        self._transport = transport
        self._clock = clock
        self._entries: dict[str, tuple[float, DomainRules]] = {}

    def forget(self, agent_id: str) -> None:
        self._entries.pop(agent_id, None)

    def rules(self, agent_id: str) -> Flow[DomainRules]:
        cached = self._entries.get(agent_id)
        if cached is not None and self._clock() - cached[0] < POLICY_CACHE_SECONDS:
            return cached[1]
        policy = yield from self._transport.request("GET", f"/v1/policies/{segment(agent_id)}")
        rules = _rules_of(policy)
        self._entries[agent_id] = (self._clock(), rules)
        return rules

    def check(self, agent_id: str, host: str, endpoint: str) -> Flow[None]:
        """Raises ``DomainNotAllowedError`` when ``host`` (``endpoint``'s) may not be called by
        ``agent_id``. A local refusal is put to the gateway
        (``POST /v1/agents/{agentId}/payments/domain-check``), which decides on the policy as it
        stands: it records the refusal (a ``rejected`` transaction and ``policy.violation``) and
        answers the problem raised here, or, when the policy changed since it was read, allows the
        host and the payment goes on. Nothing is sent to the host before this returns."""
        local = domain_refusal((yield from self.rules(agent_id)), normalize_host(host))
        if local is None:
            return
        self.forget(agent_id)
        try:
            yield from self._transport.request(
                "POST", f"/v1/agents/{segment(agent_id)}/payments/domain-check", body={"endpoint": endpoint}
            )
        except ServiceError as error:
            # The gateway's answer (its DomainNotAllowedError, or a 4xx such as an archived agent)
            # is raised as it is; without one (unreachable, 5xx) the local refusal stands.
            if error.status is not None and error.status < 500:
                raise
            raise local from error
