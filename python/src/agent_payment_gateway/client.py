"""The clients (spec 4.6, 4.7): ``Client`` (synchronous) and ``AsyncClient`` (asynchronous).

Both take the options of spec 4.6 in snake_case and have every operation of 4.7 — ``pay``,
``wallet``, ``policies``, ``transactions``, and ``agents`` (which the spec lists for TypeScript
only) — with the same names, arguments and results; only ``await`` differs. Each operation is one
flow (effects.py) that ``Client`` runs with ``httpx.Client`` and ``AsyncClient`` with
``httpx.AsyncClient``, so their behaviour cannot drift apart.

Use them as context managers (``with Client(...) as client`` / ``async with AsyncClient(...)``) or
call ``close()`` / ``aclose()``: that closes their HTTP connections. An ``http_client`` passed in
is the caller's and is left open.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from .drivers import run_async, run_sync
from .effects import Flow
from .in_flight import AsyncInFlight, SyncInFlight
from .models import PROTOCOL_PREFERENCES, PaymentResult, ProtocolPreference
from .pay import PayExtras, PayFlow, PayShared, pay_request
from .resources.agents import AgentFlows, AgentsResource, AsyncAgentsResource
from .resources.approvals import ApprovalFlows, ApprovalsResource, AsyncApprovalsResource
from .resources.policies import AsyncPoliciesResource, PoliciesResource, PolicyFlows
from .resources.transactions import AsyncTransactionsResource, TransactionFlows, TransactionsResource, check_tx_hash
from .resources.wallet import AsyncWalletResource, WalletFlows, WalletResource
from .retry import RetryOptions
from .transport import Transport, segment

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:4000"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
_AGENT_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
DEFAULT_MAX_IN_FLIGHT = 32


def _check_in_flight(max_in_flight: object) -> int:
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or not 1 <= max_in_flight <= 1024:
        raise TypeError("max_in_flight must be an integer from 1 to 1024")
    return max_in_flight


def _limits(max_in_flight: int) -> httpx.Limits:
    """An owned HTTP client keeps as many connections as requests may be in flight: every request
    finds one at once (requests beyond the limit wait in the client's own queue, in_flight.py)."""
    return httpx.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight)


def _check_agent_id(agent_id: object) -> str:
    if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id):
        raise TypeError("agent_id must be the id of a registered agent (1-128 visible ASCII characters)")
    return agent_id


def _shared(
    *,
    api_key: str,
    base_url: str,
    timeout: float,
    max_retries: int,
    protocol_preference: ProtocolPreference,
    retry_base_delay: float,
    retry_max_delay: float,
    explorer_rpc_url: str | None,
    approval_timeout: float | None,
) -> PayShared:
    if protocol_preference not in PROTOCOL_PREFERENCES:
        raise TypeError("protocol_preference must be auto, x402 or mpp")
    retry = RetryOptions(max_retries=max_retries, base_delay=retry_base_delay, max_delay=retry_max_delay)
    transport = Transport(base_url=base_url, api_key=api_key, timeout=timeout, retry=retry)
    return PayShared(
        transport,
        protocol_preference=protocol_preference,
        explorer_rpc_url=explorer_rpc_url,
        approval_timeout=approval_timeout,
    )


class _Operations:
    """The flows of one agent (and parent), shared by both clients."""

    def __init__(self, agent_id: str, parent_tx_hash: str | None, shared: PayShared) -> None:
        transport = shared.transport
        agent_path = f"/v1/agents/{segment(agent_id)}"
        self.pay = PayFlow(agent_id, parent_tx_hash, shared)
        self.wallet = WalletFlows(transport, agent_path)
        self.policies = PolicyFlows(
            transport, f"/v1/policies/{segment(agent_id)}", lambda: shared.domain_rules.forget(agent_id)
        )
        self.transactions = TransactionFlows(transport, agent_id)
        self.agents = AgentFlows(transport, agent_id, self.pay)
        self.approvals = ApprovalFlows(transport)


class Client:
    """The synchronous client. Thread-safe: one instance may serve several threads."""

    agent_id: str
    #: Set on a ``with_parent`` copy: its payments carry this ``parentTxHash``.
    parent_tx_hash: str | None
    wallet: WalletResource
    policies: PoliciesResource
    transactions: TransactionsResource
    agents: AgentsResource
    approvals: ApprovalsResource

    def __init__(
        self,
        *,
        agent_id: str,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        protocol_preference: ProtocolPreference = "auto",
        http_client: httpx.Client | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 20.0,
        explorer_rpc_url: str | None = None,
        approval_timeout: float | None = None,
    ) -> None:
        """``timeout`` is seconds per request attempt; ``max_retries`` retries of a transient failure
        before ``PaymentError``; ``protocol_preference`` (spec 4.6, default ``auto``: x402 first,
        else MPP) is sent with each payment authorization and overrides the agent's policy
        preference. ``http_client``: your own ``httpx.Client`` (proxies, TLS),
        left open on ``close()``. ``max_in_flight``: HTTP requests this client (and its
        ``with_parent`` copies) sends at once; more wait their turn. ``explorer_rpc_url``: the RPC
        URL for explorer links of a custom network (a local ledger) when the gateway has not
        indexed a transaction yet. ``approval_timeout``: seconds ``pay`` waits for a person to decide
        a payment the agent's policy held (docs/policy.md "Approvals"), long-polling the gateway;
        still undecided then, ``ApprovalRequiredError`` (default ``timeout``; 0 does not wait)."""
        self._setup(
            _check_agent_id(agent_id),
            None,
            _shared(
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
                protocol_preference=protocol_preference,
                retry_base_delay=retry_base_delay,
                retry_max_delay=retry_max_delay,
                explorer_rpc_url=explorer_rpc_url,
                approval_timeout=approval_timeout,
            ),
            http_client,
            SyncInFlight(_check_in_flight(max_in_flight)),
        )

    def _setup(
        self,
        agent_id: str,
        parent_tx_hash: str | None,
        shared: PayShared,
        http: httpx.Client | None,
        in_flight: SyncInFlight,
    ) -> None:
        self.agent_id = agent_id
        self.parent_tx_hash = parent_tx_hash
        self._shared = shared
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(limits=_limits(in_flight.size))
        self._in_flight = in_flight
        self._operations = _Operations(agent_id, parent_tx_hash, shared)
        self.wallet = WalletResource(self._operations.wallet, self._run)
        self.policies = PoliciesResource(self._operations.policies, self._run)
        self.transactions = TransactionsResource(self._operations.transactions, self._run)
        self.agents = AgentsResource(self._operations.agents, self._run)
        self.approvals = ApprovalsResource(self._operations.approvals, self._run)

    def _run(self, flow: Flow[T]) -> T:
        return run_sync(flow, self._http, self._in_flight)

    @property
    def transport(self) -> Transport:
        """The gateway transport (base URL, timeout, retries), for inspection."""
        return self._shared.transport

    def pay(
        self,
        endpoint: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        idempotency_key: str | None = None,
        approval_timeout: float | None = None,
    ) -> PaymentResult:
        """Spec 4.7 ``pay``: requests ``endpoint``; on a 402 pays it (x402 or MPP) within the
        agent's spend policy and returns the paid answer as ``PaidResult`` (spec 2.3), or the
        answer as ``UnpaidResult`` when the endpoint asked for no payment. ``body`` is sent as JSON
        (a ``str`` or ``bytes`` as it is). ``idempotency_key`` makes the payment authorization
        idempotent across calls: a repeated ``pay`` with the same key never pays twice. Before the
        first request leaves, the arguments are checked (``InvalidInputError``) and the agent's
        domain rules applied: a refused host gets nothing (``DomainNotAllowedError``). A payment the
        policy held for a person is waited for up to ``approval_timeout`` seconds (default the
        client's); still undecided, ``ApprovalRequiredError`` (``approval_id``, ``expires_at``,
        ``idempotency_key``): ``pay`` again with that key resumes it."""
        context = pay_request(endpoint, method, headers, body)
        return self._run(self._operations.pay.pay(context, idempotency_key, PayExtras(), approval_timeout))

    def with_parent(self, parent_tx_hash: str) -> Client:
        """A client for work done inside an invocation (``agents.invoke`` on the other side): its
        payments carry ``parentTxHash`` and count against that invocation's budget (else
        ``BudgetExceededError``). It shares this client's connections and session store, but reuses
        only MPP sessions negotiated under that same parent."""
        check_tx_hash(parent_tx_hash)
        copy = Client.__new__(Client)
        copy._setup(self.agent_id, parent_tx_hash, self._shared, self._http, self._in_flight)
        return copy

    def close(self) -> None:
        """Closes the HTTP connections this client opened (not an ``http_client`` you passed)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        # Never the key, never a session token.
        parent = "" if self.parent_tx_hash is None else f", parent_tx_hash={self.parent_tx_hash!r}"
        return f"Client(agent_id={self.agent_id!r}{parent}, transport={self._shared.transport!r})"


class AsyncClient:
    """The asynchronous client (asyncio or trio): every operation of ``Client``, awaited. Safe for
    many concurrent calls from one instance."""

    agent_id: str
    #: Set on a ``with_parent`` copy: its payments carry this ``parentTxHash``.
    parent_tx_hash: str | None
    wallet: AsyncWalletResource
    policies: AsyncPoliciesResource
    transactions: AsyncTransactionsResource
    agents: AsyncAgentsResource
    approvals: AsyncApprovalsResource

    def __init__(
        self,
        *,
        agent_id: str,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        protocol_preference: ProtocolPreference = "auto",
        http_client: httpx.AsyncClient | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 20.0,
        explorer_rpc_url: str | None = None,
        approval_timeout: float | None = None,
    ) -> None:
        """The options of ``Client``; ``http_client`` is an ``httpx.AsyncClient``."""
        self._setup(
            _check_agent_id(agent_id),
            None,
            _shared(
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
                protocol_preference=protocol_preference,
                retry_base_delay=retry_base_delay,
                retry_max_delay=retry_max_delay,
                explorer_rpc_url=explorer_rpc_url,
                approval_timeout=approval_timeout,
            ),
            http_client,
            AsyncInFlight(_check_in_flight(max_in_flight)),
        )

    def _setup(
        self,
        agent_id: str,
        parent_tx_hash: str | None,
        shared: PayShared,
        http: httpx.AsyncClient | None,
        in_flight: AsyncInFlight,
    ) -> None:
        self.agent_id = agent_id
        self.parent_tx_hash = parent_tx_hash
        self._shared = shared
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(limits=_limits(in_flight.size))
        self._in_flight = in_flight
        self._operations = _Operations(agent_id, parent_tx_hash, shared)
        self.wallet = AsyncWalletResource(self._operations.wallet, self._run)
        self.policies = AsyncPoliciesResource(self._operations.policies, self._run)
        self.transactions = AsyncTransactionsResource(self._operations.transactions, self._run)
        self.agents = AsyncAgentsResource(self._operations.agents, self._run)
        self.approvals = AsyncApprovalsResource(self._operations.approvals, self._run)

    async def _run(self, flow: Flow[T]) -> T:
        return await run_async(flow, self._http, self._in_flight)

    @property
    def transport(self) -> Transport:
        """The gateway transport (base URL, timeout, retries), for inspection."""
        return self._shared.transport

    async def pay(
        self,
        endpoint: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        idempotency_key: str | None = None,
        approval_timeout: float | None = None,
    ) -> PaymentResult:
        """Spec 4.7 ``pay`` (see ``Client.pay``)."""
        context = pay_request(endpoint, method, headers, body)
        return await self._run(self._operations.pay.pay(context, idempotency_key, PayExtras(), approval_timeout))

    def with_parent(self, parent_tx_hash: str) -> AsyncClient:
        """A client whose payments carry ``parentTxHash`` (see ``Client.with_parent``)."""
        check_tx_hash(parent_tx_hash)
        copy = AsyncClient.__new__(AsyncClient)
        copy._setup(self.agent_id, parent_tx_hash, self._shared, self._http, self._in_flight)
        return copy

    async def aclose(self) -> None:
        """Closes the HTTP connections this client opened (not an ``http_client`` you passed)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        parent = "" if self.parent_tx_hash is None else f", parent_tx_hash={self.parent_tx_hash!r}"
        return f"AsyncClient(agent_id={self.agent_id!r}{parent}, transport={self._shared.transport!r})"
