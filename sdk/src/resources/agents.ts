/**
 * The `agents` resource (spec 4.7): the account's agents (`/v1/agents`), archiving one, and
 * `invoke`, which pays a sub-agent's endpoint under a hard budget and then reads from the gateway
 * what the sub-agent spent under that payment (`/v1/agents/{agentId}/invocations/{txHash}`).
 */
import { ServiceError } from "../errors.js";
import { moneyToUnits, unitsToUsdc, usdcToUnits, type Usdc } from "../money.js";
import type { PayExtras, PayOptions } from "../pay/call.js";
import type { PaymentResult } from "../pay/result.js";
import { checkText, InvalidInputError } from "../text-input.js";
import type { QueryValue, Transport } from "../transport.js";

export interface AgentEntry {
  agentId: string;
  /** The display name given at registration ("" when none). */
  name?: string;
  /** The agent's custodial wallet address (where payments to it arrive). */
  address?: string;
  network?: string;
  createdAt?: string;
  /** Spec 2.5; `{ usdc: 0 }` for a wallet never funded. Null only from a gateway that reads no chain. */
  balance: Usdc | null;
  /** ISO time the agent was archived (`agents.archive`); null while active. */
  archivedAt?: string | null;
  [more: string]: unknown;
}

export interface CreateAgentOptions {
  /** The new agent's id: 1-128 characters, a letter or digit first, then letters, digits, `_ . : -`. */
  agentId: string;
  /** A display name (at most 200 characters). */
  name?: string;
  /** Makes the registration idempotent across calls (a retried create registers once). */
  idempotencyKey?: string;
}

export interface AgentListOptions {
  /** Also list archived agents (left out by default). */
  includeArchived?: boolean;
}

export interface ArchiveOptions {
  /** Archive even while the wallet holds funds or payments are open (the funds stay withdrawable). */
  force?: boolean;
}

export interface InvokeOptions {
  agentEndpoint: string;
  task: unknown;
  budget: Usdc;
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Spec 2.6. */
export interface InvocationResult<T = unknown> {
  output: T;
  totalCost: Usdc;
  paymentChain: string[];
}

/** Page size `agents.list` asks for (the gateway's maximum). */
const AGENTS_PAGE = 500;
/** The gateway's agent id rule (docs/rest.md): checked here so a bad id never makes a round trip. */
const NEW_AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
/** An existing agent's id as the client accepts it in a path. */
const AGENT_ID = /^[\x21-\x7e]{1,128}$/;
const NAME_MAX = 200;

function checkAgentId(agentId: unknown, pattern: RegExp, rule: string): string {
  if (typeof agentId !== "string") throw new InvalidInputError("agentId", "must be a string");
  checkText("agentId", agentId);
  if (!pattern.test(agentId)) throw new InvalidInputError("agentId", `${JSON.stringify(agentId)} is not a valid agent id (${rule})`);
  return agentId;
}

export class AgentOperations {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
    /** The client's pay flow: an invocation is a payment with a budget (`PayExtras`). */
    private readonly pay: (options: PayOptions, extras: PayExtras) => Promise<PaymentResult>,
  ) {}

  /**
   * Registers an agent with a new custodial wallet (`POST /v1/agents`, 201). A taken id is a
   * `ServiceError` with code `AGENT_EXISTS` (status 409); an invalid id is an `InvalidInputError`
   * before any request.
   */
  async create(options: CreateAgentOptions): Promise<AgentEntry> {
    if (typeof options !== "object" || options === null) throw new InvalidInputError("agentId", "is required");
    const agentId = checkAgentId(options.agentId, NEW_AGENT_ID, "1-128 characters: a letter or digit, then letters, digits, _ . : -");
    const body: Record<string, unknown> = { agentId };
    if (options.name !== undefined) {
      if (typeof options.name !== "string") throw new InvalidInputError("name", "must be a string");
      checkText("name", options.name);
      if (options.name.length > NAME_MAX) throw new InvalidInputError("name", `at most ${NAME_MAX} characters`);
      body.name = options.name;
    }
    return this.transport.request<AgentEntry>("POST", "/v1/agents", {
      body,
      ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
    });
  }

  /** One agent of the account, archived ones too (`GET /v1/agents/{agentId}`); unknown: `ServiceError` 404 `NOT_FOUND`. */
  async get(agentId: string): Promise<AgentEntry> {
    const id = checkAgentId(agentId, AGENT_ID, "1-128 visible ASCII characters");
    return this.transport.request<AgentEntry>("GET", `/v1/agents/${encodeURIComponent(id)}`);
  }

  /** Spec 4.7 `agents.list`: every agent of the account, following the gateway's pages. */
  async list(options: AgentListOptions = {}): Promise<AgentEntry[]> {
    if (options.includeArchived !== undefined && typeof options.includeArchived !== "boolean")
      throw new TypeError("includeArchived must be a boolean");
    const agents: AgentEntry[] = [];
    let after: string | undefined;
    for (;;) {
      const query: Record<string, QueryValue> = {
        limit: AGENTS_PAGE,
        after,
        includeArchived: options.includeArchived === true ? "true" : undefined,
      };
      const page = await this.transport.request<{ agents: AgentEntry[]; nextCursor?: string | null }>("GET", "/v1/agents", { query });
      agents.push(...page.agents);
      // A cursor that does not move would loop forever: only a later agent id continues.
      if (typeof page.nextCursor !== "string" || page.nextCursor === after) return agents;
      after = page.nextCursor;
    }
  }

  /**
   * Archives an agent (`DELETE /v1/agents/{agentId}`): it can no longer pay or be funded, leaves
   * `list()` and keeps its history. Refused (`ServiceError` code `AGENT_NOT_EMPTY`) while its wallet
   * holds funds or payments are open, unless `force`. Archiving an archived agent answers it again.
   */
  async archive(agentId: string, options: ArchiveOptions = {}): Promise<AgentEntry> {
    checkAgentId(agentId, AGENT_ID, "1-128 visible ASCII characters");
    if (options.force !== undefined && typeof options.force !== "boolean") throw new TypeError("force must be a boolean");
    const query: Record<string, QueryValue> = { force: options.force === true ? "true" : undefined };
    return this.transport.request<AgentEntry>("DELETE", `/v1/agents/${encodeURIComponent(agentId)}`, { query });
  }

  /** Spec 4.7 `agents.invoke`: pays the sub-agent's endpoint with `task`, under a hard `budget`. */
  async invoke<T = unknown>(options: InvokeOptions): Promise<InvocationResult<T>> {
    const budgetUnits = moneyToUnits(options.budget, "budget");
    if (budgetUnits === 0n) throw new TypeError("budget must be positive");
    const result = await this.pay(
      {
        endpoint: options.agentEndpoint,
        method: "POST",
        body: options.task ?? {},
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
      { invocationBudget: { usdc: unitsToUsdc(budgetUnits) }, protocolPreference: "x402" },
    );
    if (!result.paid) return { output: result.data as T, totalCost: { usdc: 0 }, paymentChain: [] };
    const paidUnits = usdcToUnits(result.amountPaid.usdc);
    try {
      const invocation = await this.transport.request<{ spent?: Usdc; payments?: unknown }>(
        "GET",
        `/v1/agents/${encodeURIComponent(this.agentId)}/invocations/${encodeURIComponent(result.txHash)}`,
      );
      const spentUnits = invocation.spent === undefined ? 0n : moneyToUnits(invocation.spent, "spent");
      const payments = Array.isArray(invocation.payments)
        ? invocation.payments.filter((hash): hash is string => typeof hash === "string")
        : [];
      return {
        output: result.data as T,
        totalCost: { usdc: unitsToUsdc(paidUnits + spentUnits) },
        paymentChain: [result.txHash, ...payments],
      };
    } catch (error) {
      // No invocation under this payment (the payee is not an agent of this gateway): the
      // payment itself is the whole cost.
      if (error instanceof ServiceError && error.status === 404) {
        return { output: result.data as T, totalCost: result.amountPaid, paymentChain: [result.txHash] };
      }
      throw error;
    }
  }
}
