/**
 * `cli spend [--agent] [--window 7d]` (spec 4.8): total spend, transaction count, the split by
 * protocol (amount and percent) and by domain, from GraphQL `spendSummary` (docs/api.md).
 */
import type { CommandContext } from "../context.js";
import { formatUnits, list, record, text, unitsFromText } from "../format.js";
import { dateTimeOption, oneOf } from "../input.js";
import { formatFields, formatTable } from "../table.js";
import { UsageError } from "../usage.js";
import { percentText } from "./policies.js";

export const SPEND_WINDOWS = ["1h", "24h", "7d", "30d"] as const;

export const SPEND_QUERY = `query CliSpend($agentId: ID, $window: String, $range: TimeRangeInput) {
  spendSummary(agentId: $agentId, window: $window, range: $range) {
    agentId window from to total totalUnits txCount
    byProtocol { protocol amount amountUnits percent txCount }
    byDomain { domain amount amountUnits percent txCount }
  }
}`;

export function spendVariables(options: CommandContext["options"]): Record<string, unknown> {
  const variables: Record<string, unknown> = {};
  if (options.agent !== undefined) variables.agentId = options.agent;
  if ((options.from === undefined) !== (options.to === undefined)) throw new UsageError("--from and --to go together (a custom range)");
  if (options.from !== undefined && options.to !== undefined) {
    if (options.window !== undefined && options.window !== "custom") throw new UsageError("give either --window or --from/--to");
    variables.range = { from: dateTimeOption(options.from, "from"), to: dateTimeOption(options.to, "to") };
    return variables;
  }
  variables.window = options.window === undefined ? "24h" : oneOf(options.window, "window", SPEND_WINDOWS);
  return variables;
}

export async function spend(context: CommandContext): Promise<void> {
  const variables = spendVariables(context.options);
  const data = await context.transport.graphql<{ spendSummary: unknown }>(SPEND_QUERY, variables);
  const summary = record(record(data, "data").spendSummary, "spendSummary");
  if (context.options.json === true) return context.json(summary);
  context.out(renderSpend(summary));
}

interface Share {
  readonly key: string;
  readonly units: bigint;
  readonly txCount: number;
}

function shares(rows: readonly Record<string, unknown>[], key: string, what: string): Share[] {
  return rows.map((row, index) => ({
    key: text(row[key]),
    units: unitsFromText(row.amountUnits, `${what}[${index}].amountUnits`),
    txCount: Number(row.txCount ?? 0),
  }));
}

function shareTable(header: string, rows: readonly Share[], totalUnits: bigint): string {
  return formatTable(
    [{ header }, { header: "AMOUNT", align: "right" }, { header: "PERCENT", align: "right" }, { header: "TXS", align: "right" }],
    rows.map((row) => [
      row.key,
      formatUnits(row.units),
      totalUnits === 0n ? "0.00%" : percentText(row.units, totalUnits),
      String(row.txCount),
    ]),
  );
}

export function renderSpend(summary: Record<string, unknown>): string {
  const totalUnits = unitsFromText(summary.totalUnits, "totalUnits");
  const byProtocol = shares(list(summary.byProtocol, "byProtocol"), "protocol", "byProtocol");
  // Both protocols are always listed, a protocol without spend as 0.
  for (const protocol of ["x402", "mpp"]) {
    if (!byProtocol.some((row) => row.key === protocol)) byProtocol.push({ key: protocol, units: 0n, txCount: 0 });
  }
  const byDomain = shares(list(summary.byDomain, "byDomain"), "domain", "byDomain");
  const lines = [
    formatFields([
      ["Agent", summary.agentId === null || summary.agentId === undefined ? "all agents" : text(summary.agentId)],
      ["Window", `${text(summary.window)} (${text(summary.from)} to ${text(summary.to)})`],
      ["Total spend", formatUnits(totalUnits)],
      ["Transactions", text(summary.txCount, "0")],
    ]),
    "",
    "By protocol",
    shareTable("PROTOCOL", byProtocol, totalUnits),
    "",
    "By domain",
    byDomain.length === 0 ? "(no spend)" : shareTable("DOMAIN", byDomain, totalUnits),
  ];
  // The gateway lists the largest domains only (at most 50): the rest is one more line, so the
  // rows always add up to the total.
  const domainSum = byDomain.reduce((sum, row) => sum + row.units, 0n);
  const domainTxs = byDomain.reduce((sum, row) => sum + row.txCount, 0);
  if (byDomain.length > 0 && domainSum < totalUnits) {
    const restTxs = Number(summary.txCount ?? 0) - domainTxs;
    const txs = restTxs > 0 ? ` in ${restTxs} transaction${restTxs === 1 ? "" : "s"}` : "";
    lines.push(
      `and more domains beyond these ${byDomain.length}: ${formatUnits(totalUnits - domainSum)}${txs} (${percentText(totalUnits - domainSum, totalUnits)})`,
    );
  } else if (domainSum > totalUnits) {
    lines.push(`warning: the domain split sums to ${formatUnits(domainSum)}, more than the total`);
  }
  // The parts must add up to the total; say so if the answer does not (never silently).
  const protocolSum = byProtocol.reduce((sum, row) => sum + row.units, 0n);
  if (protocolSum !== totalUnits) lines.push(`warning: the protocol split sums to ${formatUnits(protocolSum)}, not the total`);
  return lines.join("\n");
}
