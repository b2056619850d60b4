/**
 * The `transactions` resource (spec 4.7): the agent's payments as the gateway indexed them
 * (`/v1/transactions`), one by hash, and the payment tree under an `agents.invoke` payment.
 */
import type { Usdc } from "../money.js";
import type { Protocol } from "../pay/result.js";
import type { QueryValue, Transport } from "../transport.js";

/** A ledger transaction hash (base58); also what `Client.withParent` takes. */
export const TX_HASH = /^[1-9A-HJ-NP-Za-km-z]{32,128}$/;

export interface Transaction {
  txHash: string | null;
  agentId: string;
  protocol: Protocol;
  amountPaid: Usdc;
  endpoint: string;
  policyCheck: string;
  parentTxHash: string | null;
  solanaExplorer: string | null;
  timestamp: string;
  depth: number;
  status: string;
  [more: string]: unknown;
}

export interface TransactionFilter {
  limit?: number;
  protocol?: Protocol;
  domain?: string;
  /** A window such as `24h`, or an ISO 8601 time. */
  since?: string;
  status?: "confirmed" | "finalized" | "rejected";
  /** Another agent of the account; default this client's agent. */
  agentId?: string;
}

export class TransactionOperations {
  constructor(
    private readonly transport: Transport,
    private readonly agentId: string,
  ) {}

  async list(filter: TransactionFilter = {}): Promise<Transaction[]> {
    if (filter.limit !== undefined && (!Number.isSafeInteger(filter.limit) || filter.limit < 1))
      throw new TypeError("limit must be a positive integer");
    const query: Record<string, QueryValue> = {
      agentId: filter.agentId ?? this.agentId,
      limit: filter.limit,
      protocol: filter.protocol,
      domain: filter.domain,
      since: filter.since,
      status: filter.status,
    };
    const page = await this.transport.request<{ transactions: Transaction[] }>("GET", "/v1/transactions", { query });
    return page.transactions;
  }

  async get(txHash: string): Promise<Transaction> {
    return this.transport.request<Transaction>("GET", `/v1/transactions/${encodeURIComponent(checkTxHash(txHash))}`);
  }

  /** The payment tree under `txHash`, each transaction with its `depth` (root 0). */
  async getChain(txHash: string): Promise<Transaction[]> {
    const chain = await this.transport.request<{ transactions: Transaction[] }>(
      "GET",
      `/v1/transactions/${encodeURIComponent(checkTxHash(txHash))}/chain`,
    );
    // A payment in a chain was recorded on the ledger, so its policy check passed: rows without
    // `policyCheck` read as list and get say it.
    return chain.transactions.map((tx) => ({
      ...tx,
      policyCheck: typeof tx.policyCheck === "string" && tx.policyCheck !== "" ? tx.policyCheck : "passed",
    }));
  }
}

function checkTxHash(txHash: string): string {
  if (typeof txHash !== "string" || !TX_HASH.test(txHash)) throw new TypeError("txHash must be a base58 transaction hash");
  return txHash;
}
