/**
 * Closing an authorized payment's reservation from the agent's side, when the payment was settled
 * elsewhere (a third-party facilitator: `complete` with its transaction) or given up (`release`),
 * for `POST /v1/agents/{agentId}/payments/{reservationId}/complete` and `.../release`. Both are
 * idempotent with the facilitator's own closing. `release` revokes the signed payment: once
 * released, no settler of this gateway moves its money (`payment_revoked`). A payment a settler
 * already took can be neither completed by the caller nor released (CONFLICT: its money may land;
 * it keeps counting until the outcome is known), so landed money always counts against the budget
 * and the rate limit. The reservation rows are the reservation ledger's (api/gateway/reservations/store.ts).
 */
import type { Db } from "../../../indexer/db/database.js";
import { httpError } from "../../shared/errors.js";
import { releaseReservation, reservationState, settleReservation } from "../reservations/store.js";
import type { AgentRow } from "../../shared/rows.js";

/** The agent's reservation `id` (a decimal id); NOT_FOUND when the agent has none by that id. */
export async function requireAgentReservation(db: Db, agent: Pick<AgentRow, "agent_id" | "public_id">, id: string): Promise<string> {
  if (!/^[1-9]\d{0,17}$/.test(id)) throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.public_id}`);
  if ((await reservationState(db, id, agent.agent_id)) === null) {
    throw httpError("NOT_FOUND", `no reservation ${id} of agent ${agent.public_id}`);
  }
  return id;
}

/** The payment landed elsewhere with `txHash`: the reservation counts, settled with it. */
export async function completeReservation(db: Db, id: string, txHash: string): Promise<void> {
  const done = await settleReservation(db, id, txHash);
  const row = (await reservationState(db, id))!;
  if (!done && row.status === "reserved") {
    // Our settler took the payment: it records the transaction it sent, not the caller's.
    throw httpError("CONFLICT", `reservation ${id} is being settled: the gateway records its transaction when the outcome is known`);
  }
  if (!done && !(row.status === "settled" && row.txHash === txHash)) throw httpError("CONFLICT", `reservation ${id} is ${row.status}`);
}

/** The agent gives the payment up: it stops counting and its signed payment is revoked. */
export async function releaseAgentReservation(db: Db, id: string): Promise<void> {
  const done = await releaseReservation(db, id);
  const status = (await reservationState(db, id))!.status;
  if (!done && status === "reserved") {
    // A settler took the payment first: its money may land, so it keeps counting.
    throw httpError("CONFLICT", `reservation ${id} is being settled: its payment may land and keeps counting until the outcome is known`);
  }
  if (!done && status !== "released") throw httpError("CONFLICT", `reservation ${id} is ${status}`);
}
