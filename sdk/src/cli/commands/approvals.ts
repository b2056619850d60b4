/**
 * `cli approvals list|approve|deny` over `/v1/approvals` (docs/rest.md "Approvals"): the queue of
 * payments the account's policies held for a person, and deciding one. Needs an admin or approver
 * key (an agent key is refused by the gateway, [FORBIDDEN_SCOPE]). Options are checked here first
 * (exit 2); the gateway checks them again.
 */
import { checkApprovalId } from "../../resources/approvals.js";
import { InvalidInputError } from "../../text-input.js";
import type { CommandContext } from "../context.js";
import { endpointText, formatUnits, list, record, text, unitsOf } from "../format.js";
import { integerOption, oneOf } from "../input.js";
import { formatFields, formatTable } from "../table.js";
import { UsageError } from "../usage.js";

export const APPROVAL_STATUSES = ["pending", "approved", "denied", "expired"] as const;
const NOTE_MAX = 500;

export async function approvalsList(context: CommandContext): Promise<void> {
  const { options } = context;
  const query = {
    status: options.status === undefined ? undefined : oneOf(options.status, "status", APPROVAL_STATUSES),
    agentId: options.agent,
    limit: options.limit === undefined ? undefined : integerOption(options.limit, "limit", 1, 200),
    cursor: options.after,
  };
  const answer = record(await context.transport.request<unknown>("GET", "/v1/approvals", { query }), "answer");
  if (options.json === true) return context.json(answer);
  const approvals = list(answer.approvals, "approvals");
  if (approvals.length === 0) return context.out("No approvals.");
  context.out(
    formatTable(
      [
        { header: "ID" },
        { header: "AGENT" },
        { header: "AMOUNT", align: "right" },
        { header: "ENDPOINT" },
        { header: "RULE" },
        { header: "STATUS" },
        { header: "EXPIRES" },
      ],
      approvals.map((approval) => [
        text(approval.id),
        text(approval.agentId),
        formatUnits(unitsOf(approval.amount, "amount")),
        endpointText(approval.endpoint),
        text(approval.rule),
        text(approval.status),
        text(approval.expiresAt),
      ]),
    ),
  );
  if (typeof answer.nextCursor === "string") context.out(`More: cli approvals list --after ${answer.nextCursor}`);
}

export const approvalsApprove = (context: CommandContext) => decide(context, "approve");
export const approvalsDeny = (context: CommandContext) => decide(context, "deny");

async function decide(context: CommandContext, action: "approve" | "deny"): Promise<void> {
  const id = approvalIdArgument(context.args.approvalId ?? "");
  const note = context.options.note;
  if (note !== undefined && note.length > NOTE_MAX) throw new UsageError(`--note is longer than ${NOTE_MAX} characters`);
  const body = note === undefined ? {} : { note };
  const decided = record(await context.transport.request<unknown>("POST", `/v1/approvals/${id}/${action}`, { body }), "approval");
  if (context.options.json === true) return context.json(decided);
  context.out(`Approval ${text(decided.id)} ${text(decided.status)}.`);
  context.out(renderApproval(decided));
  const refusal = decided.refusal;
  if (decided.outcome === "refused" && typeof refusal === "object" && refusal !== null) {
    context.err(`The re-run policy refused the payment: ${text((refusal as { reason?: unknown }).reason)}`);
  }
}

function approvalIdArgument(value: string): string {
  try {
    return checkApprovalId(value.trim());
  } catch (error) {
    if (error instanceof InvalidInputError) {
      throw new UsageError(`<approvalId> must be an approval id as "cli approvals list" prints it (a UUID), got "${value}"`);
    }
    throw error;
  }
}

export function renderApproval(approval: Record<string, unknown>): string {
  return formatFields([
    ["Agent", text(approval.agentId)],
    ["Amount", formatUnits(unitsOf(approval.amount, "amount"))],
    ["Endpoint", endpointText(approval.endpoint)],
    ["Reason", text(approval.reason)],
    ["Status", text(approval.status)],
    ["Expires", text(approval.expiresAt)],
    ["Decided", text(approval.decidedAt)],
    ["Decided by", text(approval.decidedBy)],
    ["Note", text(approval.note)],
    ["Outcome", text(approval.outcome)],
  ]);
}
