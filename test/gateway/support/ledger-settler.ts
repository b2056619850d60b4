/**
 * The `Settler` the protocol tests settle through: the REAL payment_ledger program on a local
 * ledger, driven by `scripts/agent-wallets.ts` (the gateway's own `api/gateway/settlement` is written in
 * parallel and deliberately not used here). Agents are registered with their wallets; payment ids
 * are allocated per payer in increasing order, as the program's replay window expects.
 */
import { PublicKey } from "@solana/web3.js";
import type { AgentDirectory, SettleRequest, SettleResult, Settler } from "../../../api/gateway/settlement/settler.js";
import { endpointHash } from "../../../programs/payment_ledger/ts/index.js";
import { type AgentWallet, type LedgerAccess, recordPayment } from "../../../scripts/agent-wallets.js";

export class LedgerSettler implements Settler, AgentDirectory {
  private readonly agents = new Map<string, AgentWallet>();
  private readonly byAddress = new Map<string, string>();
  private readonly payees = new Map<string, AgentWallet>();
  private readonly nextPaymentId = new Map<string, bigint>();
  /** Every request that reached the settler, in order (tests count settlements with it). */
  readonly requests: SettleRequest[] = [];
  /** When set, the next settlements throw this instead of touching the ledger. */
  failWith: Error | null = null;

  constructor(private readonly ledger: LedgerAccess) {}

  registerAgent(agentId: string, wallet: AgentWallet): void {
    this.agents.set(agentId, wallet);
    this.byAddress.set(wallet.publicKey.toBase58(), agentId);
  }

  registerPayee(wallet: AgentWallet): void {
    this.payees.set(wallet.publicKey.toBase58(), wallet);
  }

  async agentIdForAddress(address: string): Promise<string | null> {
    return this.byAddress.get(address) ?? null;
  }

  async settlePayment(request: SettleRequest): Promise<SettleResult> {
    this.requests.push(request);
    if (this.failWith !== null) throw this.failWith;
    const payer = this.agents.get(request.agentId);
    const payee = this.payees.get(request.payee);
    if (payer === undefined) throw new Error(`no wallet for agent ${request.agentId}`);
    if (payee === undefined) throw new Error(`unknown payee ${request.payee}`);
    const key = payer.publicKey.toBase58();
    const paymentId = this.nextPaymentId.get(key) ?? 1n;
    this.nextPaymentId.set(key, paymentId + 1n);
    const txHash = await recordPayment(
      this.ledger,
      payer,
      payee,
      {
        paymentId,
        amountUnits: request.amountUnits,
        protocol: request.protocol,
        rail: request.rail,
        endpointHash: endpointHash(request.endpoint),
        settlementReference: request.settlementReference ?? null,
      },
      request.invocation === undefined ? undefined : new PublicKey(request.invocation),
    );
    const status = await this.ledger.provider.connection.getSignatureStatus(txHash);
    return { txHash, slot: status.value?.slot ?? 0, paymentId };
  }
}
