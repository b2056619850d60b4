/**
 * Times the ledger's part of each settlement on the running system's own `Settlement` instance,
 * keyed by the transaction it returns, passing every call through unchanged:
 *
 * - `sendConfirm`: `completeSettlement` (send the signed transaction, wait for its confirmation,
 *   mark the row): the ledger's send + confirm;
 * - `settle`: the whole `settlePayment`, which adds `prepareSettlement` (two RPC reads, the
 *   payer's token balance and a recent blockhash, and the Postgres transaction that stores the
 *   signed transaction as pending before it is sent).
 */
import type { Settlement } from "../../api/gateway/settlement/index.js";

export interface LedgerTimer {
  /** `txHash` → ms spent sending and confirming it. */
  readonly sendConfirm: Map<string, number>;
  /** `txHash` → ms of its whole `settlePayment`. */
  readonly settle: Map<string, number>;
  restore(): void;
}

export function timeLedger(settlement: Settlement): LedgerTimer {
  const sendConfirm = new Map<string, number>();
  const settle = new Map<string, number>();
  const complete = settlement.completeSettlement;
  const settlePayment = settlement.settlePayment;
  settlement.completeSettlement = async function timedComplete(this: Settlement, ...args: Parameters<Settlement["completeSettlement"]>) {
    const started = performance.now();
    const result = await complete.apply(this, args);
    sendConfirm.set(result.txHash, performance.now() - started);
    return result;
  };
  settlement.settlePayment = async function timedSettle(this: Settlement, ...args: Parameters<Settlement["settlePayment"]>) {
    const started = performance.now();
    const result = await settlePayment.apply(this, args);
    settle.set(result.txHash, performance.now() - started);
    return result;
  };
  return {
    sendConfirm,
    settle,
    restore: () => {
      settlement.completeSettlement = complete;
      settlement.settlePayment = settlePayment;
    },
  };
}
