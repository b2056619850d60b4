/**
 * The sweeper's step for signed transfers (run by api/gateway/loops/sweeper.ts each pass):
 * every row still `signed` or `landed` is followed to its end, so no reservation stays open and
 * no transfer goes unrecorded, whatever crashed or failed half way (a client that never called
 * `complete`, a record that failed or whose outcome was unknown, a gateway restart):
 *
 * - `landed`: record it (landing.ts `recordLanded`: a new attempt only once the earlier ones
 *   failed; a pending one is waited for).
 * - `signed`: look for it on the ledger. Found and succeeded → landed, then recorded; found and
 *   failed → `failed`, reservation released (nothing moved). Not found: once the ledger's block
 *   height is past the transaction's last valid block height it can never land → `expired`,
 *   reservation released; before that, wait.
 *
 * Safe to run concurrently with itself and with `complete` (see landing.ts).
 */
import { COMMITMENT } from "../chain/ledger.js";
import { closeUnpaid, findTransfer, recordLanded, type TransferDeps } from "./landing.js";
import { openTransfers } from "./store.js";

export interface TransferSweepReport {
  readonly transfersRecorded: number;
  readonly transfersExpired: number;
  readonly transfersFailed: number;
}

export async function sweepTransfers(
  deps: TransferDeps,
  batch: number,
  onWarning?: (message: string, context: Record<string, unknown>) => void,
): Promise<TransferSweepReport> {
  const counts = { transfersRecorded: 0, transfersExpired: 0, transfersFailed: 0 };
  const rows = await openTransfers(deps.pool, batch);
  if (rows.length === 0) return counts;
  let blockHeight: number | null = null;
  for (const row of rows) {
    try {
      if (row.status === "landed" && row.settlementTx !== null) {
        if ((await recordLanded(deps, row, row.settlementTx)).outcome === "recorded") counts.transfersRecorded += 1;
        continue;
      }
      // Read before the search: a transfer not found by a search that started after this height
      // was reached can never land if this height is already past its last valid one.
      blockHeight ??= await deps.ledger.connection.getBlockHeight(COMMITMENT);
      const found = await findTransfer(deps, row);
      if (found !== null && !found.failed) {
        if ((await recordLanded(deps, row, found.signature)).outcome === "recorded") counts.transfersRecorded += 1;
      } else if (found !== null) {
        if (await closeUnpaid(deps, row, "failed", "the transfer failed on the ledger", found.signature)) counts.transfersFailed += 1;
      } else if (blockHeight > row.lastValidBlockHeight) {
        const expired = `not on the ledger at block height ${blockHeight}, past its last valid block height ${row.lastValidBlockHeight}`;
        if (await closeUnpaid(deps, row, "expired", expired, null)) counts.transfersExpired += 1;
      }
    } catch (error) {
      onWarning?.("signed transfer not resolved this pass", { paymentRef: row.paymentRef, err: error });
    }
  }
  return counts;
}
