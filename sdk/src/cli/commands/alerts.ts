/**
 * `cli alerts create` (spec 2.10, 4.8) over `POST /v1/alerts`, and `cli alerts list`. The
 * options are checked here first (exit 2); the gateway checks them again.
 */
import type { CommandContext } from "../context.js";
import { list, record, text } from "../format.js";
import { decimalNumberOption, durationOption, oneOf, percentOption } from "../input.js";
import { formatFields, formatTable } from "../table.js";
import { UsageError } from "../usage.js";

export const ALERT_TYPES = ["budget_pct", "spend_rate", "policy_violation", "approval_requested"] as const;

export function alertBody(options: CommandContext["options"]): Record<string, unknown> {
  if (options.agent === undefined || options.agent.trim() === "") throw new UsageError("alerts create needs --agent");
  if (options.type === undefined) throw new UsageError(`alerts create needs --type (${ALERT_TYPES.join(", ")})`);
  const type = oneOf(options.type, "type", ALERT_TYPES);
  if (options.notify === undefined) throw new UsageError("alerts create needs --notify webhook:<url> or email:<address>");
  const notify = options.notify.trim();
  if (!/^(webhook:https?:\/\/\S+|email:[^\s@]+@[^\s@]+)$/i.test(notify)) {
    throw new UsageError(`--notify must be webhook:<http(s) url> or email:<address>, got "${options.notify}"`);
  }
  const body: Record<string, unknown> = { agentId: options.agent, type, notify };
  switch (type) {
    case "budget_pct":
      if (options.threshold === undefined) throw new UsageError("budget_pct needs --threshold, a percent such as 80");
      if (options.window !== undefined) throw new UsageError("--window applies to spend_rate only");
      body.threshold = percentOption(options.threshold, "threshold");
      break;
    case "spend_rate":
      if (options.threshold === undefined) throw new UsageError("spend_rate needs --threshold, an amount in usdc");
      if (options.window === undefined) throw new UsageError("spend_rate needs --window, e.g. 1h");
      body.threshold = decimalNumberOption(options.threshold, "threshold");
      body.window = durationOption(options.window, "window");
      break;
    case "policy_violation":
    case "approval_requested":
      if (options.threshold !== undefined || options.window !== undefined) throw new UsageError(`${type} takes no --threshold or --window`);
      break;
  }
  return body;
}

export async function alertsCreate(context: CommandContext): Promise<void> {
  const body = alertBody(context.options);
  const created = await context.transport.request<unknown>("POST", "/v1/alerts", { body });
  if (context.options.json === true) return context.json(created);
  const alert = record(created, "alert");
  context.out(`Alert ${text(alert.id)} created.`);
  context.out(renderAlert(alert));
  if (typeof alert.signingSecret === "string") {
    context.out(`Signing secret (shown once; verify deliveries with it): ${alert.signingSecret}`);
  }
  for (const warning of warningsOf(alert)) context.err(`warning: ${warning}`);
}

/** The answer's `warnings` (e.g. an email alert while the server has no mail transport), as lines. */
export function warningsOf(answer: Record<string, unknown>): string[] {
  const warnings = answer.warnings;
  if (typeof warnings === "string") return [warnings];
  if (!Array.isArray(warnings)) return [];
  return warnings.map((warning) =>
    typeof warning === "string"
      ? warning
      : typeof warning === "object" && warning !== null && typeof (warning as { message?: unknown }).message === "string"
        ? String((warning as { message: string }).message)
        : JSON.stringify(warning),
  );
}

/** `cli alerts delete <id>`: `DELETE /v1/alerts/{alertId}`. */
export async function alertsDelete(context: CommandContext): Promise<void> {
  const alertId = context.args.alertId!.trim();
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(alertId)) {
    throw new UsageError(`<alertId> must be an alert id as "cli alerts list" prints it (a UUID), got "${alertId}"`);
  }
  await context.transport.request<void>("DELETE", `/v1/alerts/${encodeURIComponent(alertId)}`);
  context.out(`Alert ${alertId} deleted.`);
}

export function thresholdText(alert: Record<string, unknown>): string {
  if (alert.threshold === null || alert.threshold === undefined) return "-";
  return alert.type === "budget_pct" ? `${String(alert.threshold)}%` : `${String(alert.threshold)} USDC`;
}

export function renderAlert(alert: Record<string, unknown>): string {
  return formatFields([
    ["Agent", text(alert.agentId)],
    ["Type", text(alert.type)],
    ["Threshold", thresholdText(alert)],
    ["Window", text(alert.window)],
    ["Notify", text(alert.notify)],
    ["Created", text(alert.createdAt)],
  ]);
}

export async function alertsList(context: CommandContext): Promise<void> {
  const answer = await context.transport.request<unknown>("GET", "/v1/alerts", { query: { agentId: context.options.agent } });
  if (context.options.json === true) return context.json(answer);
  const alerts = list(record(answer, "answer").alerts, "alerts");
  if (alerts.length === 0) return context.out("No alerts.");
  context.out(
    formatTable(
      [
        { header: "ID" },
        { header: "AGENT" },
        { header: "TYPE" },
        { header: "THRESHOLD", align: "right" },
        { header: "WINDOW" },
        { header: "NOTIFY" },
        { header: "CREATED" },
      ],
      alerts.map((alert) => [
        text(alert.id),
        text(alert.agentId),
        text(alert.type),
        thresholdText(alert),
        text(alert.window),
        text(alert.notify),
        text(alert.createdAt),
      ]),
    ),
  );
}
