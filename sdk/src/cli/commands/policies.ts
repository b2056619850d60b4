/**
 * `cli policies set|get|clear <agent>` (spec 4.8) over `PUT|GET|DELETE /v1/policies/{agentId}`
 * (spec 4.1). `set` sends only the fields given (omitted fields keep their values); `none`
 * sends `null`, which removes that limit. `cli policies backtest <agent> --file policy.json
 * --window 30d` over `POST /v1/policies/{agentId}/backtest`: what the candidate would have done.
 * sends `null`, which removes that limit. `history` lists the policy's versions
 * (`GET /v1/policies/{agentId}/history`), newest first.
 */
import { readFile } from "node:fs/promises";
import type { CommandContext } from "../context.js";
import { endpointText, formatUnits, list, record, text, unitsFromText, unitsOf } from "../format.js";
import { amountOption, domainsOption, integerOption, oneOf } from "../input.js";
import { formatRateLimit, parseRateLimit } from "../rate-limit.js";
import { formatFields, formatTable } from "../table.js";
import { UsageError } from "../usage.js";

const PREFERENCES = ["auto", "x402", "mpp"] as const;

function policyPath(agent: string): string {
  return `/v1/policies/${encodeURIComponent(agent)}`;
}

/** The PUT body of spec 4.1 from the options; at least one field. */
export function policyPatch(options: CommandContext["options"]): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (options["daily-budget"] !== undefined) body.dailyBudget = amountOption(options["daily-budget"], "daily-budget");
  if (options["per-call-limit"] !== undefined) body.perCallLimit = amountOption(options["per-call-limit"], "per-call-limit");
  if (options["allowed-domains"] !== undefined) body.allowedDomains = domainsOption(options["allowed-domains"], "allowed-domains");
  if (options["blocked-domains"] !== undefined) {
    // The blocklist has no "unset" distinct from empty: none clears it.
    body.blockedDomains = domainsOption(options["blocked-domains"], "blocked-domains") ?? [];
  }
  if (options["rate-limit"] !== undefined) body.rateLimit = parseRateLimit(options["rate-limit"]);
  if (options["protocol-preference"] !== undefined) {
    body.protocolPreference = oneOf(options["protocol-preference"], "protocol-preference", PREFERENCES);
  }
  if (Object.keys(body).length === 0) {
    throw new UsageError(
      "policies set needs at least one of --daily-budget, --per-call-limit, --allowed-domains, --blocked-domains, --rate-limit, --protocol-preference",
    );
  }
  return body;
}

export async function policiesSet(context: CommandContext): Promise<void> {
  const body = policyPatch(context.options);
  const policy = await context.transport.request<unknown>("PUT", policyPath(context.args.agent!), { body });
  if (context.options.json === true) return context.json(policy);
  context.out(`Policy of ${context.args.agent} updated.`);
  context.out(renderPolicy(record(policy, "policy")));
}

export async function policiesGet(context: CommandContext): Promise<void> {
  const policy = await context.transport.request<unknown>("GET", policyPath(context.args.agent!));
  if (context.options.json === true) return context.json(policy);
  context.out(renderPolicy(record(policy, "policy")));
}

export async function policiesClear(context: CommandContext): Promise<void> {
  await context.transport.request<unknown>("DELETE", policyPath(context.args.agent!));
  context.out(`Every limit of ${context.args.agent} removed.`);
}

const BACKTEST_WINDOW = /^[1-9][0-9]{0,4}[mhd]$/;
const BACKTEST_LIST_DEFAULT = 50;
const BACKTEST_LIST_MAX = 10_000;

/** The candidate policy file: a JSON object (the gateway validates its fields). */
async function candidatePolicy(path: string | undefined): Promise<Record<string, unknown>> {
  if (path === undefined) throw new UsageError("policies backtest needs --file <policy.json>");
  let source: string;
  try {
    source = await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(`--file: cannot read ${path}: ${(error as Error).message}`);
  }
  let policy: unknown;
  try {
    policy = JSON.parse(source);
  } catch {
    throw new UsageError(`--file: ${path} is not JSON`);
  }
  if (typeof policy !== "object" || policy === null || Array.isArray(policy))
    throw new UsageError(`--file: ${path} must hold a JSON object`);
  return policy as Record<string, unknown>;
}

export async function policiesBacktest(context: CommandContext): Promise<void> {
  const policy = await candidatePolicy(context.options.file);
  const window = context.options.window ?? "30d";
  if (!BACKTEST_WINDOW.test(window)) throw new UsageError(`--window must be a duration from 1h to 90d such as 24h or 30d, got "${window}"`);
  const limit =
    context.options.limit === undefined ? BACKTEST_LIST_DEFAULT : integerOption(context.options.limit, "limit", 0, BACKTEST_LIST_MAX);
  const answer = await context.transport.request<unknown>("POST", `${policyPath(context.args.agent!)}/backtest`, {
    body: { policy, window, limit },
  });
  if (context.options.json === true) return context.json(answer);
  context.out(renderBacktest(record(answer, "backtest")));
}

const OUTCOME_TEXT: Readonly<Record<string, string>> = {
  pass: "would pass",
  refuse: "would refuse",
  needs_approval: "would need approval",
};

/** The totals, the refusals by rule and by domain, and the listed payments. */
export function renderBacktest(answer: Record<string, unknown>): string {
  const totals = record(answer.totals, "totals");
  const count = (name: string) => {
    const entry = record(totals[name], name);
    return `${text(entry.count)} (${formatUnits(unitsFromText(entry.amountUnits, name))})`;
  };
  const lines = [
    formatFields([
      ["Agent", text(answer.agentId)],
      ["Window", `${text(answer.window)} (${text(answer.from)} .. ${text(answer.to)})${answer.truncated === true ? ", truncated" : ""}`],
      ["Payments", text(totals.attempts)],
      ["Would pass", count("passed")],
      ["Would refuse", count("refused")],
      ["Would need approval", count("needsApproval")],
      ["Changed", text(totals.changed)],
    ]),
  ];
  const groups = (name: string, key: string, header: string) => {
    const entries = list(totals[name], name);
    if (entries.length === 0) return;
    const rows = entries.map((entry) => [text(entry[key]), text(entry.count), formatUnits(unitsFromText(entry.amountUnits, name))]);
    lines.push("", formatTable([{ header }, { header: "count", align: "right" }, { header: "amount", align: "right" }], rows));
  };
  groups("refusedByRule", "rule", "refused by rule");
  groups("refusedByDomain", "domain", "refused by domain");
  groups("needsApprovalByRule", "rule", "approval rule");
  const payments = list(answer.payments, "payments");
  if (payments.length > 0) {
    const rows = payments.map((p) => [
      text(p.at),
      endpointText(p.endpoint),
      formatUnits(unitsFromText(p.amountUnits, "amountUnits")),
      text(p.recorded),
      OUTCOME_TEXT[text(p.outcome)] ?? text(p.outcome),
      text(p.reason, ""),
    ]);
    const columns = [
      { header: "at" },
      { header: "endpoint" },
      { header: "amount", align: "right" as const },
      { header: "recorded" },
      { header: "backtest" },
      { header: "reason" },
    ];
    lines.push("", formatTable(columns, rows));
  }
  return lines.join("\n");
}

export async function policiesHistory(context: CommandContext): Promise<void> {
  const limit = context.options.limit === undefined ? 20 : integerOption(context.options.limit, "limit", 1, 100);
  const answer = record(
    await context.transport.request<unknown>("GET", `${policyPath(context.args.agent!)}/history?limit=${limit}`),
    "policy history",
  );
  if (context.options.json === true) return context.json(answer);
  const versions = (Array.isArray(answer.versions) ? answer.versions : []).map((v) => record(v, "policy version"));
  if (versions.length === 0) return context.out(`${context.args.agent} has no policy versions.`);
  const rows = versions.map((v) => [text(v.version), text(v.createdAt), text(v.createdBy), text(v.hash).slice(0, 12), summary(v.policy)]);
  context.out(
    formatTable(
      [{ header: "VERSION", align: "right" }, { header: "CREATED" }, { header: "BY" }, { header: "HASH" }, { header: "POLICY" }],
      rows,
    ),
  );
}

/** A version's policy in one line: the limits it sets. */
function summary(document: unknown): string {
  const policy = record(document, "policy");
  const parts: string[] = [];
  if (policy.dailyBudgetUnits != null) parts.push(`daily ${formatUnits(BigInt(String(policy.dailyBudgetUnits)))}`);
  if (policy.perCallLimitUnits != null) parts.push(`per call ${formatUnits(BigInt(String(policy.perCallLimitUnits)))}`);
  const rate = policy.rateLimit as { calls?: number; window?: string } | null | undefined;
  if (rate != null) parts.push(`${text(rate.calls)}/${text(rate.window)}`);
  const endpoints = Array.isArray(policy.endpointBudgets) ? policy.endpointBudgets.length : 0;
  if (endpoints > 0) parts.push(`${endpoints} endpoint rule${endpoints === 1 ? "" : "s"}`);
  return parts.length === 0 ? "no limits" : parts.join(", ");
}

/** `used * 100 / limit` with two decimals, in bigint (a percent of money is not a float). */
export function percentText(partUnits: bigint, wholeUnits: bigint): string {
  if (wholeUnits <= 0n) return "-";
  const hundredths = (partUnits * 10_000n) / wholeUnits;
  return `${hundredths / 100n}.${(hundredths % 100n).toString().padStart(2, "0")}%`;
}

export function renderPolicy(policy: Record<string, unknown>): string {
  const usedUnits = unitsOf(policy.usedToday, "usedToday");
  const budgetUnits = policy.dailyBudget === null || policy.dailyBudget === undefined ? null : unitsOf(policy.dailyBudget, "dailyBudget");
  const perCall = policy.perCallLimit === null || policy.perCallLimit === undefined ? null : unitsOf(policy.perCallLimit, "perCallLimit");
  const rateLimit = policy.rateLimit as { calls: number; window: string } | null | undefined;
  const rateUsage = (policy.rateUsage ?? {}) as { calls?: number; window?: string | null };
  const allowed = policy.allowedDomains as string[] | null | undefined;
  const blocked = (policy.blockedDomains ?? []) as string[];

  const budgetLine =
    budgetUnits === null
      ? `none (used today ${formatUnits(usedUnits)})`
      : `${formatUnits(budgetUnits)} (used today ${formatUnits(usedUnits)}, ${percentText(usedUnits, budgetUnits)}, ${text(policy.budgetState)})`;
  const fields: [string, string][] = [
    ["Agent", text(policy.agentId)],
    ["Daily budget", budgetLine],
  ];
  if (policy.windowResetsAt !== null && policy.windowResetsAt !== undefined)
    fields.push(["Budget window resets", text(policy.windowResetsAt)]);
  fields.push(
    ["Per-call limit", perCall === null ? "none" : formatUnits(perCall)],
    [
      "Allowed domains",
      allowed === null || allowed === undefined ? "any" : allowed.length === 0 ? "(none: no domain may be paid)" : allowed.join(", "),
    ],
    ["Blocked domains", blocked.length === 0 ? "none" : blocked.join(", ")],
    [
      "Rate limit",
      rateLimit === null || rateLimit === undefined
        ? "none"
        : `${formatRateLimit(rateLimit)} (${rateUsage.calls ?? 0} of ${rateLimit.calls} calls used in the current ${rateUsage.window ?? rateLimit.window})`,
    ],
    ["Protocol preference", text(policy.protocolPreference)],
  );
  return formatFields(fields);
}
