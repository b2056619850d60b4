/**
 * Times the ledger's part of each settlement: `Settlement.completeSettlement` (send the signed
 * transaction, wait for its confirmation, mark the row), keyed by the transaction it returns. It
 * wraps the running system's own instance and passes every call through unchanged, so the bench
 * can subtract the ledger's time from the gateway's routes.
 */
import type { Settlement } from "../../api/settlement/index.js";

export interface LedgerTimer {
  /** `txHash` → ms spent sending and confirming it. */
  readonly byTx: Map<string, number>;
  restore(): void;
}

export function timeLedger(settlement: Settlement): LedgerTimer {
  const byTx = new Map<string, number>();
  const original = settlement.completeSettlement;
  settlement.completeSettlement = async function timedCompleteSettlement(this: Settlement, ...args: Parameters<Settlement["completeSettlement"]>) {
    const started = performance.now();
    const result = await original.apply(this, args);
    byTx.set(result.txHash, performance.now() - started);
    return result;
  };
  return {
    byTx,
    restore: () => {
      settlement.completeSettlement = original;
    },
  };
}
