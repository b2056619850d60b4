/**
 * Opening the invocation a settled payment starts (a payment whose reservation carries an
 * invocation budget: `POST .../payments/authorize` with `invocationBudget`). Opened right after the
 * payment settles (api/gateway/x402/facilitator.ts calls `openInvocationOfPayment`) and again by the
 * sweeper for any opening that failed (api/gateway/loops/sweeper.ts calls
 * `openMissingInvocations`): the reservation's `invocation` column stays NULL until one succeeds.
 */
import type pg from "pg";
import { type LinkedReservation, recordReservationInvocation, reservationsAwaitingInvocation } from "../reservations/store.js";
import type { AgentDirectory } from "../settlement/settler.js";
import type { Invocations } from "./ledger.js";

export interface InvocationOpening {
  readonly reservationId: string;
  readonly invokerAgentId: string;
  /** The invoked sub-agent's wallet (the payment's payee). */
  readonly payee: string;
  /** The invoking payment's transaction: the invocation's parent. */
  readonly txHash: string;
  readonly budgetUnits: bigint;
}

export interface InvocationOpeningDeps {
  readonly pool: pg.Pool;
  readonly agents: AgentDirectory;
  readonly invocations: Invocations | undefined;
  readonly onWarning?: ((message: string, context: Record<string, unknown>) => void) | undefined;
}

/**
 * Opens the invocation a settled payment starts and stores it on the reservation. Never throws:
 * the payment has settled whatever happens here; a failure is reported and the reservation keeps
 * `invocation` NULL for the sweeper to retry (the opening is idempotent for the same terms).
 * Returns the invocation address, or null when it is not open yet.
 */
export async function openLinkedInvocation(deps: InvocationOpeningDeps, opening: InvocationOpening): Promise<string | null> {
  const context = { reservationId: opening.reservationId, parentTxHash: opening.txHash };
  try {
    if (deps.invocations === undefined) throw new Error("no invocation service is configured");
    const subAgentId = await deps.agents.agentIdForAddress(opening.payee);
    if (subAgentId === null) throw new Error(`payee ${opening.payee} is not an agent wallet of this gateway`);
    const opened = await deps.invocations.openInvocation({
      invokerAgentId: opening.invokerAgentId,
      parentTxHash: opening.txHash,
      subAgentId,
      budgetUnits: opening.budgetUnits,
    });
    await recordReservationInvocation(deps.pool, opening.reservationId, opened.invocation);
    return opened.invocation;
  } catch (error) {
    deps.onWarning?.("invocation not opened yet; the sweeper retries", {
      ...context,
      error: error instanceof Error ? error.message : String(error),
    });
    return null;
  }
}

/**
 * After the payment of `reservation` settled with `settled.txHash`: opens the invocation it starts
 * when the reservation carries an invocation budget (else nothing to open, null). Never throws
 * (`openLinkedInvocation`).
 */
export async function openInvocationOfPayment(
  deps: InvocationOpeningDeps,
  reservation: Pick<LinkedReservation, "id" | "invocationBudgetUnits">,
  settled: { readonly invokerAgentId: string; readonly payee: string; readonly txHash: string },
): Promise<string | null> {
  if (reservation.invocationBudgetUnits === null) return null;
  return openLinkedInvocation(deps, {
    reservationId: reservation.id,
    invokerAgentId: settled.invokerAgentId,
    payee: settled.payee,
    txHash: settled.txHash,
    budgetUnits: reservation.invocationBudgetUnits,
  });
}

/**
 * The sweeper's retry: opens the invocations of up to `batch` settled payments whose opening
 * failed. Returns how many it opened.
 */
export async function openMissingInvocations(deps: InvocationOpeningDeps, batch: number): Promise<number> {
  let opened = 0;
  for (const waiting of await reservationsAwaitingInvocation(deps.pool, batch)) {
    const invocation = await openLinkedInvocation(deps, {
      reservationId: waiting.reservationId,
      invokerAgentId: waiting.agentId,
      payee: waiting.payee,
      txHash: waiting.txHash,
      budgetUnits: waiting.budgetUnits,
    });
    if (invocation !== null) opened += 1;
  }
  return opened;
}
