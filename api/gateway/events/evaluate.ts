/**
 * Alert evaluation, run by the gateway in the transaction of each accepted or rejected payment
 * (after the reservation or rejection is written, under the agent's policy lock), writing the
 * notifications it fires into the same outbox as the events:
 *
 * - `budget_pct` fires when the budget period's consumption is at or above the threshold and the
 *   rule has not fired in this period yet (`fired_window_start`): once per period, not per payment.
 * - `spend_rate` fires when the accepted spend (the reservation ledger, released rows excluded)
 *   within the window ending now exceeds the threshold, at most once per window length
 *   (`last_fired_at`), so a burst does not notify on every payment.
 * - `policy_violation` fires on every rejection, delivering the `policy.violation` event itself.
 * - `approval_requested` is not evaluated here: the hold (payments/approvals/hold.ts) delivers its
 *   `approval.requested` event to the targets `approvalAlertTargets` reads, in its transaction.
 *
 * The "has it fired" columns are claimed with a conditional UPDATE, so two transactions can never
 * both fire the same rule for the same period.
 */
import type pg from "pg";
import type { BudgetStatus } from "../../shared/policy/engine.js";
import type { AlertType } from "./alerts.js";
import { type DeliveryTarget, emitEvent, enqueueDelivery } from "./events.js";
import { budgetWarningPayload, type PolicyViolationPayload, spendRatePayload } from "../webhooks/payloads.js";
import { parseNotifyTarget } from "../webhooks/targets.js";

export type AlertTrigger =
  | {
      readonly kind: "payment";
      readonly agentId: string;
      /** The decision's budget after the payment (`PolicyAllowed.budget`). */
      readonly budget: BudgetStatus;
      readonly at: Date;
    }
  | {
      readonly kind: "rejection";
      readonly agentId: string;
      readonly violation: PolicyViolationPayload;
      /** The `policy.violation` event already emitted for it; omitted: one is written for the alerts. */
      readonly eventId?: string;
      readonly at: Date;
    };

export interface FiredAlert {
  readonly alertId: string;
  readonly type: AlertType;
  readonly eventId: string;
}

interface RuleRow {
  id: string;
  account_id: string;
  type: AlertType;
  threshold_bp: number | null;
  threshold_units: string | null;
  window_text: string | null;
  window_ms: string | null;
  notify: string;
  secret_ciphertext: Buffer | null;
}

const MAX_RULES_PER_AGENT = 100;

export async function evaluateAlerts(client: pg.ClientBase, trigger: AlertTrigger): Promise<FiredAlert[]> {
  const types: AlertType[] = trigger.kind === "payment" ? ["budget_pct", "spend_rate"] : ["policy_violation"];
  // Named (prepared once per connection): asked after every payment and every refusal.
  const { rows } = await client.query<RuleRow>({
    name: "alert-rules-of-agent",
    text: `SELECT id, account_id, type, threshold_bp, threshold_units, window_text, window_ms, notify, secret_ciphertext
     FROM alerts WHERE agent_id = $1 AND deleted_at IS NULL AND type = ANY ($2) ORDER BY created_at, id LIMIT $3`,
    values: [trigger.agentId, types, MAX_RULES_PER_AGENT],
  });
  if (rows.length === 0) return [];
  if (trigger.kind === "rejection") return notifyViolation(client, trigger, rows);
  const fired: FiredAlert[] = [];
  for (const rule of rows) {
    const event = rule.type === "budget_pct" ? await budgetRule(client, trigger, rule) : await spendRateRule(client, trigger, rule);
    if (event !== null) fired.push({ alertId: rule.id, type: rule.type, eventId: event });
  }
  return fired;
}

async function budgetRule(
  client: pg.ClientBase,
  trigger: Extract<AlertTrigger, { kind: "payment" }>,
  rule: RuleRow,
): Promise<string | null> {
  const { limitUnits, usedUnits, windowStart, resetsAt } = trigger.budget;
  const bp = rule.threshold_bp!;
  if (limitUnits === null || windowStart === null || resetsAt === null) return null;
  if (usedUnits * 10_000n < limitUnits * BigInt(bp)) return null;
  const claimed = await client.query(`UPDATE alerts SET fired_window_start = $2 WHERE id = $1 AND fired_window_start IS DISTINCT FROM $2`, [
    rule.id,
    windowStart,
  ]);
  if ((claimed.rowCount ?? 0) === 0) return null;
  const payload = budgetWarningPayload({
    agentId: trigger.agentId,
    alertId: rule.id,
    thresholdBp: bp,
    usedUnits,
    limitUnits,
    windowStart,
    resetsAt,
    at: trigger.at,
  });
  const event = await emitEvent(client, rule.account_id, "budget.warning", payload, {
    alertId: rule.id,
    toEndpoints: false,
    targets: [target(rule)],
  });
  return event.id;
}

async function spendRateRule(
  client: pg.ClientBase,
  trigger: Extract<AlertTrigger, { kind: "payment" }>,
  rule: RuleRow,
): Promise<string | null> {
  const windowMs = Number(rule.window_ms);
  const since = new Date(trigger.at.getTime() - windowMs);
  const { rows } = await client.query<{ spent: string }>(
    `SELECT coalesce(sum(amount_units), 0)::text AS spent FROM spend_reservations
     WHERE agent_id = $1 AND status <> 'released' AND created_at > $2 AND created_at <= $3`,
    [trigger.agentId, since, trigger.at],
  );
  const spent = BigInt(rows[0]!.spent);
  const threshold = BigInt(rule.threshold_units!);
  if (spent <= threshold) return null;
  const claimed = await client.query(
    `UPDATE alerts SET last_fired_at = $2 WHERE id = $1 AND (last_fired_at IS NULL OR last_fired_at <= $3)`,
    [rule.id, trigger.at, since],
  );
  if ((claimed.rowCount ?? 0) === 0) return null;
  const payload = spendRatePayload({
    agentId: trigger.agentId,
    alertId: rule.id,
    window: rule.window_text!,
    thresholdUnits: threshold,
    spentUnits: spent,
    at: trigger.at,
  });
  const event = await emitEvent(client, rule.account_id, "spend_rate.exceeded", payload, {
    alertId: rule.id,
    toEndpoints: false,
    targets: [target(rule)],
  });
  return event.id;
}

async function notifyViolation(
  client: pg.ClientBase,
  trigger: Extract<AlertTrigger, { kind: "rejection" }>,
  rules: readonly RuleRow[],
): Promise<FiredAlert[]> {
  const targets = rules.map(target);
  let eventId = trigger.eventId;
  if (eventId === undefined) {
    const event = await emitEvent(client, rules[0]!.account_id, "policy.violation", trigger.violation, { toEndpoints: false, targets });
    eventId = event.id;
  } else {
    for (const one of targets) await enqueueDelivery(client, eventId, one);
  }
  const id = eventId;
  return rules.map((rule) => ({ alertId: rule.id, type: rule.type, eventId: id }));
}

/** The targets of the agent's `approval_requested` rules (agentId: the internal key). */
export async function approvalAlertTargets(client: pg.ClientBase, agentId: string): Promise<DeliveryTarget[]> {
  const { rows } = await client.query<RuleRow>(
    `SELECT id, account_id, type, threshold_bp, threshold_units, window_text, window_ms, notify, secret_ciphertext
     FROM alerts WHERE agent_id = $1 AND deleted_at IS NULL AND type = 'approval_requested' ORDER BY created_at, id LIMIT $2`,
    [agentId, MAX_RULES_PER_AGENT],
  );
  return rows.map(target);
}

function target(rule: RuleRow): DeliveryTarget {
  return { ...parseNotifyTarget(rule.notify), alertId: rule.id, secretCiphertext: rule.secret_ciphertext };
}
