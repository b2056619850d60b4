/**
 * The `wallet` resource (spec 4.7): the agent's custodial wallet, its balance, and funding and
 * withdrawal through the gateway (`/v1/agents/{agentId}/wallet/...`). The gateway holds the key;
 * this module only asks.
 */
import { randomUUID } from "node:crypto";
import { moneyToUnits, type Usdc } from "../money.js";
import type { Transport } from "../transport.js";

export interface Wallet {
  agentId: string;
  address: string;
  balance: Usdc;
  network: string;
}

export interface WalletOperation {
  /** Always present: a pending (202) answer names its operation, to follow it up with `wallet.operation`. */
  operationId: string;
  kind: "fund" | "withdraw";
  agentId: string;
  amount: Usdc;
  /** `failed` only from `wallet.operation` (a POST answers a failure as PaymentError). */
  status: "confirmed" | "pending" | "failed" | string;
  txHash: string | null;
  /** A withdrawal's destination (from `wallet.withdraw` and `wallet.operation`). */
  to?: string;
  /** From `wallet.operation`: why a failed operation failed. */
  error?: string | null;
}

export class WalletOperations {
  constructor(
    private readonly transport: Transport,
    private readonly agentPath: string,
  ) {}

  get(): Promise<Wallet> {
    return this.transport.request<Wallet>("GET", `${this.agentPath}/wallet`);
  }

  balance(): Promise<Usdc> {
    return this.transport.request<Usdc>("GET", `${this.agentPath}/wallet/balance`);
  }

  /**
   * One operation as it stands now (a pending one is looked up on the chain by the gateway): how
   * a `pending` answer is followed up.
   */
  async operation(operationId: string): Promise<WalletOperation> {
    if (typeof operationId !== "string" || !/^[1-9][0-9]{0,18}$/.test(operationId))
      throw new TypeError("operationId must be a wallet operation id");
    return this.transport.request<WalletOperation>("GET", `${this.agentPath}/wallet/operations/${operationId}`);
  }

  /** Tops the wallet up from the account's funding source (spec 4.7). */
  async fund(amount: Usdc, options: { idempotencyKey?: string } = {}): Promise<WalletOperation> {
    const usdc = positiveUsdc(amount);
    return this.perform(`${this.agentPath}/wallet/fund`, { usdc }, options.idempotencyKey);
  }

  async withdraw(input: { to: string; usdc: number }, options: { idempotencyKey?: string } = {}): Promise<WalletOperation> {
    if (typeof input?.to !== "string" || !/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(input.to))
      throw new TypeError("to must be a base58 ledger address");
    const usdc = positiveUsdc({ usdc: input.usdc });
    const result = await this.perform(`${this.agentPath}/wallet/withdraw`, { to: input.to, usdc }, options.idempotencyKey);
    // The destination is the one asked for; a gateway answer without it is completed from the request.
    return { ...result, to: typeof result.to === "string" ? result.to : input.to };
  }

  /**
   * A pending answer (202: sent to the ledger, not yet confirmed) is asked again with the same
   * key, which resumes the same operation, a bounded number of times.
   */
  private async perform(path: string, body: Record<string, unknown>, idempotencyKey: string | undefined): Promise<WalletOperation> {
    const key = idempotencyKey ?? randomUUID();
    let result = await this.transport.request<WalletOperation>("POST", path, { body, idempotencyKey: key });
    for (let attempt = 0; result.status === "pending" && attempt < this.transport.maxRetries; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
      result = await this.transport.request<WalletOperation>("POST", path, { body, idempotencyKey: key });
    }
    return result;
  }
}

function positiveUsdc(amount: Usdc): number {
  const units = moneyToUnits(amount);
  if (units === 0n) throw new TypeError("usdc must be positive");
  return amount.usdc;
}
