/**
 * The settler interface every protocol settles through: one call that moves (or, on the card rail,
 * only records) a payment through payment_ledger's `record_payment` and answers with the
 * transaction. `Settlement` (settlement.ts) implements it; the protocols depend on this interface
 * only, and the tests implement it over `scripts/agent-wallets.ts`.
 */
import type pg from "pg";
import type { Protocol, Rail } from "../../../programs/payment_ledger/ts/index.js";

export interface SettleRequest {
  /** The gateway's agent id; the settler finds its custodial wallet (the payer, who co-signs). */
  readonly agentId: string;
  /** Base58 address of the receiving service wallet. */
  readonly payee: string;
  readonly amountUnits: bigint;
  readonly protocol: Protocol;
  readonly rail: Rail;
  /** The paid endpoint; the program records sha256 of its host and path. */
  readonly endpoint: string;
  /** 64 bytes naming an off-ledger settlement (card rail: the processor's reference, see api/gateway/card). */
  readonly settlementReference?: Uint8Array;
  /** Base58 invocation account when paying under an `agents.invoke` budget. */
  readonly invocation?: string;
  /**
   * The signed payment this settles (`x402:<payer>:<nonce>`, `mpp:<payer>:<nonce>` or
   * `mpp-charge:<id>`, see api/gateway/reservations/store.ts), stored on the settlement row before anything is
   * sent: at most one settlement per reference, and a claim interrupted before it learned its
   * transaction is resolved through it (migrations/012, api/gateway/loops/sweeper.ts).
   */
  readonly paymentRef?: string;
  /**
   * Binds the caller's claim on the payment to its transaction, run inside the transaction that
   * commits the settlement as pending (before anything is sent); false when the claim was given
   * up meanwhile, and then nothing is committed or sent. So a claim with no transaction bound can
   * be failed at any time without failing a payment that moves (api/gateway/loops/sweeper.ts).
   */
  readonly bindClaim?: (db: pg.ClientBase, signature: string) => Promise<boolean>;
}

export interface SettleResult {
  /** Base58 signature of the ledger transaction that recorded (and on the stablecoin rail, moved) it. */
  readonly txHash: string;
  readonly slot: number;
  readonly paymentId: bigint;
}

export interface Settler {
  settlePayment(request: SettleRequest): Promise<SettleResult>;
}

/** Maps a wallet address to the gateway's agent id (x402 payloads name the payer by address). */
export interface AgentDirectory {
  agentIdForAddress(address: string): Promise<string | null>;
}

/**
 * A settler throws an error with `reason: "payment_pending"` and the transaction's `signature` when
 * the transaction was sent and its outcome is not known yet (api/gateway/wallets' PaymentPendingError):
 * the payment may still land, so it is neither a success nor a failure until reconciled.
 * Returns that signature, or null for any other error.
 */
export function pendingSettlementSignature(error: unknown): string | null {
  if (typeof error !== "object" || error === null) return null;
  const { reason, signature } = error as { reason?: unknown; signature?: unknown };
  return reason === "payment_pending" && typeof signature === "string" ? signature : null;
}
