/**
 * Alert rules (spec 2.10, `cli alerts create`): per agent, one of
 *
 * - `budget_pct`       --threshold <percent>: the daily budget reaches that share (once per period);
 * - `spend_rate`       --threshold <usdc> --window <1h>: spend within the window exceeds the amount;
 * - `policy_violation` every rejected payment;
 * - `approval_requested` every payment held for a person, with its signed one-time decide link;
 *
 * each notifying `webhook:<url>` (Slack through its webhook URL) or `email:<address>`. A webhook
 * alert gets its own `whsec_…` signing secret, returned once by `createAlert`, stored encrypted.
 * The spec does not show the stored shape or the identifier: ours is a uuid.
 */
import type { Db } from "../../../indexer/db/database.js";
import { publicAgentId } from "../../shared/agent-ids.js";
import { ServiceError } from "../../shared/errors.js";
import { JsonNumber } from "../../shared/json-number.js";
import { formatUsdcShort } from "../../shared/money.js";
import { parseAmountInput } from "../../shared/policy/amounts.js";
import { percentText } from "../webhooks/payloads.js";
import { generateSigningSecret, type SecretBox } from "../../shared/secret-box.js";
import { formatNotifyTarget, parseNotifyTarget } from "../webhooks/targets.js";

export const ALERT_TYPES = ["budget_pct", "spend_rate", "policy_violation", "approval_requested"] as const;
export type AlertType = (typeof ALERT_TYPES)[number];

const MAX_WINDOW_MS = 30 * 24 * 3_600_000;
const WINDOW = /^([1-9]\d{0,3})(m|h|d)$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const PERCENT = /^(\d{1,3})(?:\.(\d{1,2}))?$/;
const MAX_LIST = 1_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A malformed alert rule: BAD_USER_INPUT with reason `invalid_alert`. */
export class InvalidAlertError extends ServiceError {
  declare readonly reason: "invalid_alert";

  constructor(message: string) {
    super("BAD_USER_INPUT", message, { reason: "invalid_alert" });
    this.name = "InvalidAlertError";
  }
}

/** The options of spec 2.10, as the cli or a route receives them. */
export interface AlertOptions {
  readonly agent: string;
  readonly type: string;
  /** Percent for budget_pct, usdc for spend_rate; a number or a decimal string. */
  readonly threshold?: number | string | null;
  readonly window?: string | null;
  readonly notify: string;
}

export type AlertRule =
  | { readonly type: "budget_pct"; readonly thresholdBp: number }
  | { readonly type: "spend_rate"; readonly thresholdUnits: bigint; readonly window: string; readonly windowMs: number }
  | { readonly type: "policy_violation" }
  | { readonly type: "approval_requested" };

export interface AlertInput {
  /** The public id, looked up within the account (api/shared/agent-ids.ts). */
  readonly agentId: string;
  readonly rule: AlertRule;
  /** `webhook:<url>` or `email:<address>`, normalized. */
  readonly notify: string;
}

export interface Alert {
  readonly id: string;
  readonly accountId: string;
  /** The public id. */
  readonly agentId: string;
  readonly type: AlertType;
  /**
   * Percent (budget_pct) or usdc amount (spend_rate) as the exact decimal (a JSON number token,
   * never a float); null for policy_violation and approval_requested.
   */
  readonly threshold: JsonNumber | null;
  readonly thresholdBp: number | null;
  readonly thresholdUnits: bigint | null;
  readonly window: string | null;
  readonly windowMs: number | null;
  readonly notify: string;
  readonly createdAt: Date;
}

export interface CreatedAlert {
  readonly alert: Alert;
  /** The `whsec_…` that signs the alert's webhook notifications; shown once. Null for e-mail. */
  readonly signingSecret: string | null;
}

interface AlertRow {
  id: string;
  account_id: string;
  agent_id: string;
  type: AlertType;
  threshold_bp: number | null;
  threshold_units: string | null;
  window_text: string | null;
  window_ms: string | null;
  notify: string;
  created_at: Date;
}

/** Validates the spec 2.10 options into a rule; throws `InvalidAlertError`. */
export function parseAlertOptions(options: AlertOptions): AlertInput {
  const agentId = options.agent;
  if (typeof agentId !== "string" || agentId.length === 0 || agentId.length > 128) throw new InvalidAlertError("--agent is required");
  let notify: string;
  try {
    notify = formatNotifyTarget(parseNotifyTarget(options.notify));
  } catch (error) {
    throw new InvalidAlertError(`--notify: ${(error as Error).message}`);
  }
  const threshold = options.threshold ?? null;
  const window = options.window ?? null;
  switch (options.type) {
    case "budget_pct":
      if (window !== null) throw new InvalidAlertError("--window applies to spend_rate only");
      return { agentId, notify, rule: { type: "budget_pct", thresholdBp: parsePercentBp(threshold) } };
    case "spend_rate": {
      if (window === null) throw new InvalidAlertError("spend_rate needs --window, e.g. 1h");
      const thresholdUnits = parseAmount(threshold);
      return { agentId, notify, rule: { type: "spend_rate", thresholdUnits, window, windowMs: parseAlertWindow(window) } };
    }
    case "policy_violation":
      if (threshold !== null || window !== null) throw new InvalidAlertError("policy_violation takes no --threshold or --window");
      return { agentId, notify, rule: { type: "policy_violation" } };
    case "approval_requested":
      if (threshold !== null || window !== null) throw new InvalidAlertError("approval_requested takes no --threshold or --window");
      return { agentId, notify, rule: { type: "approval_requested" } };
    default:
      throw new InvalidAlertError(`--type must be one of ${ALERT_TYPES.join(", ")}`);
  }
}

/** `<n>m`, `<n>h` or `<n>d`, from one minute to 30 days. */
export function parseAlertWindow(text: string): number {
  const match = typeof text === "string" ? WINDOW.exec(text) : null;
  if (match === null) throw new InvalidAlertError("--window must look like 15m, 1h or 7d");
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (ms > MAX_WINDOW_MS) throw new InvalidAlertError("--window is at most 30d");
  return ms;
}

function parsePercentBp(value: number | string | null): number {
  const text = typeof value === "number" ? String(value) : value;
  const match = text === null ? null : PERCENT.exec(text);
  if (match === null) throw new InvalidAlertError("budget_pct needs --threshold, a percent such as 80 or 92.5");
  const bp = Number(match[1]) * 100 + Number((match[2] ?? "").padEnd(2, "0"));
  if (bp <= 0 || bp > 10_000) throw new InvalidAlertError("--threshold percent must be above 0 and at most 100");
  return bp;
}

function parseAmount(value: number | string | null): bigint {
  if (value === null) throw new InvalidAlertError("spend_rate needs --threshold, an amount in usdc");
  let units: bigint;
  try {
    units = parseAmountInput(value);
  } catch (error) {
    throw new InvalidAlertError(`--threshold: ${(error as Error).message}`);
  }
  if (units <= 0n) throw new InvalidAlertError("--threshold must be positive");
  return units;
}

/** Creates the rule for an agent of the account. Unknown agent (or another account's) → throws. */
export async function createAlert(db: Db, box: SecretBox, accountId: string, input: AlertInput): Promise<CreatedAlert> {
  const target = parseNotifyTarget(input.notify);
  const signingSecret = target.channel === "webhook" ? generateSigningSecret() : null;
  const rule = input.rule;
  const { rows } = await db.query<AlertRow>(
    `INSERT INTO alerts (account_id, agent_id, type, threshold_bp, threshold_units, window_text, window_ms, notify, secret_ciphertext)
     SELECT $1, agent_id, $3, $4, $5, $6, $7, $8, $9 FROM agents WHERE public_id = $2 AND account_id = $1
     RETURNING *`,
    [
      accountId,
      input.agentId,
      rule.type,
      rule.type === "budget_pct" ? rule.thresholdBp : null,
      rule.type === "spend_rate" ? rule.thresholdUnits.toString() : null,
      rule.type === "spend_rate" ? rule.window : null,
      rule.type === "spend_rate" ? rule.windowMs : null,
      formatNotifyTarget(target),
      signingSecret === null ? null : box.encrypt(signingSecret),
    ],
  );
  if (rows[0] === undefined) throw new InvalidAlertError(`no agent ${input.agentId} in this account`);
  return { alert: fromRow(rows[0]), signingSecret };
}

export async function listAlerts(db: Db, accountId: string, filter: { agentId?: string; limit?: number } = {}): Promise<Alert[]> {
  const limit = Math.min(Math.max(1, filter.limit ?? MAX_LIST), MAX_LIST);
  const { rows } = await db.query<AlertRow>(
    `SELECT * FROM alerts WHERE account_id = $1 AND deleted_at IS NULL
       AND ($2::text IS NULL OR agent_id = (SELECT agent_id FROM agents WHERE account_id = $1 AND public_id = $2))
     ORDER BY created_at, id LIMIT $3`,
    [accountId, filter.agentId ?? null, limit],
  );
  return rows.map(fromRow);
}

export async function getAlert(db: Db, accountId: string, alertId: string): Promise<Alert | null> {
  if (!UUID.test(alertId)) return null;
  const { rows } = await db.query<AlertRow>("SELECT * FROM alerts WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL", [
    alertId,
    accountId,
  ]);
  return rows[0] === undefined ? null : fromRow(rows[0]);
}

/** Stops the rule. Notifications already in the outbox are still delivered. */
export async function deleteAlert(db: Db, accountId: string, alertId: string): Promise<boolean> {
  if (!UUID.test(alertId)) return false;
  const result = await db.query("UPDATE alerts SET deleted_at = now() WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL", [
    alertId,
    accountId,
  ]);
  return (result.rowCount ?? 0) > 0;
}

function fromRow(row: AlertRow): Alert {
  const units = row.threshold_units === null ? null : BigInt(row.threshold_units);
  return {
    id: row.id,
    accountId: row.account_id,
    // The public id: an Alert is what the API answers (api/shared/agent-ids.ts).
    agentId: publicAgentId(row.agent_id),
    type: row.type,
    threshold:
      row.threshold_bp !== null
        ? new JsonNumber(percentText(row.threshold_bp))
        : units !== null
          ? new JsonNumber(formatUsdcShort(units))
          : null,
    thresholdBp: row.threshold_bp,
    thresholdUnits: units,
    window: row.window_text,
    windowMs: row.window_ms === null ? null : Number(row.window_ms),
    notify: row.notify,
    createdAt: row.created_at,
  };
}
