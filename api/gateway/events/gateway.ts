/**
 * The two calls the gateway makes, in the transaction of each payment decision, so events and alert
 * notifications commit (or roll back) with the reservation or the rejection:
 *
 *   accepted: reserveInTransaction(...) then emitPaymentEvents(client, { agentId, decision, at })
 *   rejected: recordRejection(...)      then emitRejectionEvents(client, { agentId, decision, endpoint, at })
 */
import type pg from "pg";
import type { PolicyAllowed, PolicyRejected } from "../../shared/policy/engine.js";
import { WARNING_PERCENT } from "../../shared/policy/engine.js";
import { emitEvent } from "./events.js";
import { evaluateAlerts, type FiredAlert } from "./evaluate.js";
import { budgetWarningPayload, policyViolationPayload } from "../webhooks/payloads.js";

export interface EmittedForPayment {
  /** The spec 3 `budget.warning` event, when this payment crossed 80 %. */
  readonly budgetWarningEventId: string | null;
  readonly alerts: readonly FiredAlert[];
}

export interface EmittedForRejection {
  readonly policyViolationEventId: string;
  readonly alerts: readonly FiredAlert[];
}

export async function emitPaymentEvents(
  client: pg.ClientBase,
  input: { agentId: string; decision: PolicyAllowed; at: Date; policyVersion?: number | null },
): Promise<EmittedForPayment> {
  const { budget } = input.decision;
  let budgetWarningEventId: string | null = null;
  if (
    input.decision.warnings.includes("budget.warning") &&
    budget.limitUnits !== null &&
    budget.windowStart !== null &&
    budget.resetsAt !== null
  ) {
    const accountId = await accountOf(client, input.agentId);
    const payload = budgetWarningPayload({
      agentId: input.agentId,
      alertId: null,
      thresholdBp: Number(WARNING_PERCENT) * 100,
      usedUnits: budget.usedUnits,
      limitUnits: budget.limitUnits,
      windowStart: budget.windowStart,
      resetsAt: budget.resetsAt,
      at: input.at,
      policyVersion: input.policyVersion ?? null,
    });
    budgetWarningEventId = (await emitEvent(client, accountId, "budget.warning", payload)).id;
  }
  const alerts = await evaluateAlerts(client, { kind: "payment", agentId: input.agentId, budget, at: input.at });
  return { budgetWarningEventId, alerts };
}

export async function emitRejectionEvents(
  client: pg.ClientBase,
  input: { agentId: string; decision: PolicyRejected; endpoint: string; at: Date; policyVersion?: number | null },
): Promise<EmittedForRejection> {
  const accountId = await accountOf(client, input.agentId);
  const violation = policyViolationPayload({
    agentId: input.agentId,
    reasonCode: input.decision.reasonCode,
    reason: input.decision.reason,
    endpoint: input.endpoint,
    at: input.at,
    policyVersion: input.policyVersion ?? null,
  });
  const event = await emitEvent(client, accountId, "policy.violation", violation);
  const alerts = await evaluateAlerts(client, { kind: "rejection", agentId: input.agentId, violation, eventId: event.id, at: input.at });
  return { policyViolationEventId: event.id, alerts };
}

async function accountOf(client: pg.ClientBase, agentId: string): Promise<string> {
  const { rows } = await client.query<{ account_id: string }>("SELECT account_id FROM agents WHERE agent_id = $1", [agentId]);
  if (rows[0] === undefined) throw new Error(`agent ${agentId} is not registered`);
  return rows[0].account_id;
}
