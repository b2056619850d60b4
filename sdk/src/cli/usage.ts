/**
 * Usage errors (exit 2) and the help texts. A usage error is found before any request is sent:
 * a mistyped amount or an unknown option never reaches the gateway.
 */
import { InvalidInputError } from "../text-input.js";

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export const EXIT_OK = 0;
/** The gateway answered with an error, or could not be reached. */
export const EXIT_API_ERROR = 1;
/** Bad command line: unknown command or option, bad value, missing argument. */
export const EXIT_USAGE = 2;

/**
 * The exit status of a failed command, from the error's class alone: a UsageError (found before
 * any request, like the client's own InvalidInputError) is 2; a ServiceError of the library (sdk/src/errors.ts, whatever its subclass or
 * gateway code) is 1, and so is anything else (a bug, a failure below the transport). Scripts tell
 * the gateway's refusals apart by the `[CODE]` on stderr, not by the status.
 */
export function exitStatusOf(error: unknown): number {
  return error instanceof UsageError || error instanceof InvalidInputError ? EXIT_USAGE : EXIT_API_ERROR;
}

export const GLOBAL_HELP = `Usage: cli <command> [options]

Commands:
  policies set <agent>             set spend policy fields (omitted fields keep their values)
  policies get <agent>             the policy with usedToday and the rate-limit usage
  policies clear <agent>           remove every limit of the agent
  policies backtest <agent>        what a candidate policy would have done to past payments
  policies history <agent>         the policy's versions: who changed it, when, its hash
  transactions list                recent transactions (newest first)
  transactions inspect <txHash>    one transaction
  transactions tree <rootTxHash>   the payment tree under a transaction, with its total
  transactions explorer <txHash>   open (or print) the public explorer entry
  spend                            total spend, by protocol and by domain
  alerts create                    create an alert rule
  alerts list                      the account's alert rules
  alerts delete <alertId>          delete an alert rule
  agents create <agent>            register an agent with a new custodial wallet
  agents list                      the account's agents with their balances
  agents get <agent>               one agent (archived ones too)
  agents archive <agent>           archive an agent (it can no longer pay or be funded)
  approvals list                   payments held for approval (newest first)
  approvals approve <approvalId>   approve a held payment (the policy is checked again)
  approvals deny <approvalId>      deny a held payment

Global options:
  --api-key <key>      API key (default: env APG_API_KEY)
  --base-url <url>     gateway URL (default: env APG_BASE_URL, else http://127.0.0.1:4000)
  --json               print the gateway's JSON instead of a table (read commands)
  -h, --help           show help ("cli <command> --help" for a command)

Exit status: 0 success, 1 the gateway answered an error (or was unreachable), 2 bad usage.`;

export const COMMAND_HELP: Readonly<Record<string, string>> = {
  "policies set": `Usage: cli policies set <agent> [options]

  --daily-budget <usdc|none>         rolling 24-hour budget, e.g. 50 or 12.5
  --per-call-limit <usdc|none>       cap on one payment
  --allowed-domains <a,b,...|none>   allowlist (none: any domain may be paid)
  --blocked-domains <a,b,...|none>   blocklist (wins over the allowlist)
  --rate-limit "<calls> per <unit>"  e.g. "100 per hour", "10 per 5m"; none removes it
                                     units: minute|1m, 5m, 15m, hour|1h, day|24h
  --protocol-preference <auto|x402|mpp>

Omitted options keep their current values; "none" removes that limit.`,
  "policies get": `Usage: cli policies get <agent> [--json]`,
  "policies clear": `Usage: cli policies clear <agent>`,
  "policies backtest": `Usage: cli policies backtest <agent> --file <policy.json> [--window 30d] [--limit n] [--json]

  --file <path>      the candidate policy: JSON as "PUT /v1/policies/{agent}" takes it,
                     e.g. {"dailyBudget":{"usdc":5},"blockedDomains":["example.org"]};
                     an omitted field is no limit
  --window <window>  how far back to replay, 1h to 90d (default 30d)
  --limit <n>        payments listed, 0-10000 (default 50); the totals cover every payment

Replays the agent's recorded payments of the window through the gateway's policy engine with
the candidate policy. Nothing is stored, moved or counted.`,
  "policies history": `Usage: cli policies history <agent> [--limit <1-100>] [--json]

Newest first: version, when, who (key:<id>, admin or system), the SHA-256 of the policy, its limits.`,
  "transactions list": `Usage: cli transactions list [options]

  --agent <id>              only this agent's transactions
  --limit <n>               at most n rows (1-200, default 20)
  --protocol <x402|mpp>     only this protocol
  --since <window>          only the last window, e.g. 15m, 24h, 7d
  --domain <domain>         only payments to this domain
  --after <cursor>          the next page (the cursor a previous listing printed)
  --json`,
  "transactions inspect": `Usage: cli transactions inspect <txHash> [--json]`,
  "transactions tree": `Usage: cli transactions tree <rootTxHash> [--max-depth <n>] [--json]`,
  "transactions explorer": `Usage: cli transactions explorer <txHash> [--print]

Opens the transaction's explorer entry in a browser when one is available (a desktop session);
otherwise, or with --print, prints the URL.`,
  spend: `Usage: cli spend [--agent <id>] [--window <1h|24h|7d|30d>] [--from <iso> --to <iso>] [--json]

Total spend, transaction count, and the split by protocol (amount and percent) and by domain.
Default window 24h; --from/--to give a custom range (ISO 8601 with a zone).`,
  "alerts create": `Usage: cli alerts create --agent <id> --type <type> --notify <target> [--threshold <n>] [--window <w>]

  --type budget_pct|spend_rate|policy_violation|approval_requested
  --threshold <n>        percent for budget_pct (e.g. 80); usdc amount for spend_rate
  --window <w>           spend_rate window, e.g. 15m, 1h, 7d
  --notify <target>      webhook:<url> or email:<address> (Slack: a webhook URL)
  --json`,
  "alerts list": `Usage: cli alerts list [--agent <id>] [--json]`,
  "alerts delete": `Usage: cli alerts delete <alertId>

Deletes the alert rule with that id (as "cli alerts list" prints it).`,
  "agents create": `Usage: cli agents create <agent> [--name <text>] [--json]

Registers the agent with a new custodial wallet. <agent>: 1-128 characters, a letter or digit
first, then letters, digits, _ . : -. A taken id fails with [AGENT_EXISTS].`,
  "agents list": `Usage: cli agents list [--include-archived] [--json]`,
  "agents get": `Usage: cli agents get <agent> [--json]`,
  "agents archive": `Usage: cli agents archive <agent> [--force] [--json]

Archives the agent: it can no longer pay or be funded and leaves "agents list"; its history stays.
Refused while its wallet holds funds or payments are open [AGENT_NOT_EMPTY], unless --force.`,
  "approvals list": `Usage: cli approvals list [options]

  --status <pending|approved|denied|expired>   only approvals in this state
  --agent <id>              only this agent's approvals
  --limit <n>               at most n rows (1-200, default 50)
  --after <cursor>          the next page (the cursor a previous listing printed)
  --json

Needs an admin or approver key.`,
  "approvals approve": `Usage: cli approvals approve <approvalId> [--note <text>] [--json]

Approves the held payment; the gateway checks the whole policy again (a budget lowered meanwhile
still refuses it). Needs an admin or approver key. Decided before: [APPROVAL_ALREADY_DECIDED].`,
  "approvals deny": `Usage: cli approvals deny <approvalId> [--note <text>] [--json]

Denies the held payment: nothing is paid, its reserved amount is given back. Needs an admin or
approver key. Decided before: [APPROVAL_ALREADY_DECIDED].`,
};
