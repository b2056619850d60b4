#!/usr/bin/env node
/**
 * `cli` / `apg`: the Agent Payment Gateway's command-line tool (spec 4.8). `runCli(argv, io)`
 * runs one command and resolves to the exit status (0 ok, 1 the gateway answered an error or
 * could not be reached, 2 bad usage); run as a program it uses the process's streams and env.
 *
 * Configuration: `--api-key` / `APG_API_KEY`, `--base-url` / `APG_BASE_URL`
 * (default http://127.0.0.1:4000). The key is sent only as the Bearer header and never printed.
 */
import { AuthenticationError, ServiceError } from "../errors.js";
import { isMainModule } from "../is-main.js";
import { Transport } from "../transport.js";
import { parseCommandLine } from "./args.js";
import { InvalidInputError } from "../text-input.js";
import { agentsArchive, agentsCreate, agentsGet, agentsList } from "./commands/agents.js";
import { alertsCreate, alertsDelete, alertsList } from "./commands/alerts.js";
import { approvalsApprove, approvalsDeny, approvalsList } from "./commands/approvals.js";
import { policiesBacktest, policiesClear, policiesGet, policiesHistory, policiesSet } from "./commands/policies.js";
import { spend } from "./commands/spend.js";
import { transactionsExplorer, transactionsInspect, transactionsList, transactionsTree } from "./commands/transactions.js";
import { type CliIo, type Command, type CommandContext, redactingWriter } from "./context.js";
import { COMMAND_HELP, EXIT_API_ERROR, EXIT_OK, exitStatusOf, GLOBAL_HELP, UsageError } from "./usage.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:4000";

const COMMANDS: Readonly<Record<string, Command>> = {
  "policies set": policiesSet,
  "policies get": policiesGet,
  "policies clear": policiesClear,
  "policies backtest": policiesBacktest,
  "policies history": policiesHistory,
  "transactions list": transactionsList,
  "transactions inspect": transactionsInspect,
  "transactions tree": transactionsTree,
  "transactions explorer": transactionsExplorer,
  spend,
  "alerts create": alertsCreate,
  "alerts list": alertsList,
  "alerts delete": alertsDelete,
  "agents create": agentsCreate,
  "agents list": agentsList,
  "agents get": agentsGet,
  "agents archive": agentsArchive,
  "approvals list": approvalsList,
  "approvals approve": approvalsApprove,
  "approvals deny": approvalsDeny,
};

export interface RunOptions extends CliIo {
  /** Per-request timeout (ms); the client's default is 30000 (spec 4.6). */
  readonly timeoutMs?: number;
  /** Retries of transient failures; the client's default is 3 (spec 4.6). */
  readonly maxRetries?: number;
}

export async function runCli(argv: readonly string[], io: RunOptions): Promise<number> {
  // Until the command line is parsed, the env key is the one to keep out of the output.
  let out = redactingWriter(io.stdout, io.env.APG_API_KEY);
  let err = redactingWriter(io.stderr, io.env.APG_API_KEY);
  try {
    const parsed = parseCommandLine(argv);
    const apiKey = parsed.options["api-key"] ?? io.env.APG_API_KEY;
    out = redactingWriter(io.stdout, apiKey);
    err = redactingWriter(io.stderr, apiKey);
    if (parsed.options.help === true) {
      out(parsed.command === null ? GLOBAL_HELP : (COMMAND_HELP[parsed.command] ?? GLOBAL_HELP));
      return EXIT_OK;
    }
    const run = COMMANDS[parsed.command!]!;
    const baseUrl = parsed.options["base-url"] ?? nonEmpty(io.env.APG_BASE_URL) ?? DEFAULT_BASE_URL;
    let transport: Transport | undefined;
    const context: CommandContext = {
      // Made on first use, so a command's usage errors (exit 2) come before a missing key (exit 1).
      get transport(): Transport {
        transport ??= connect(baseUrl, apiKey, io);
        return transport;
      },
      args: parsed.args,
      options: parsed.options,
      env: io.env,
      out,
      err,
      json: (value) => out(JSON.stringify(value, null, 2)),
    };
    await run(context);
    return EXIT_OK;
  } catch (error) {
    return report(error, err);
  }
}

function connect(baseUrl: string, apiKey: string | undefined, io: RunOptions): Transport {
  if (apiKey === undefined || apiKey.trim() === "") throw new AuthenticationError("no API key: pass --api-key or set APG_API_KEY");
  try {
    return new Transport({
      baseUrl,
      apiKey,
      ...(io.timeoutMs === undefined ? {} : { timeout: io.timeoutMs }),
      ...(io.maxRetries === undefined ? {} : { maxRetries: io.maxRetries }),
    });
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(`--base-url: ${error.message}`);
    throw error;
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

/** The error as `Class: message` on stderr, and its exit status (`exitStatusOf`). */
function report(error: unknown, err: (text: string) => void): number {
  if (error instanceof UsageError || error instanceof InvalidInputError) {
    err(`error: ${error.message}`);
    err('Run "cli --help" for usage.');
  } else if (error instanceof ServiceError) {
    const code = error.code === undefined ? "" : ` [${error.code}]`;
    err(`${error.name}: ${error.message}${code}`);
  } else {
    // Not one of ours (a bug, or a failure below the transport): what is known.
    const name = error instanceof Error ? error.name : "Error";
    const message = error instanceof Error ? error.message : String(error);
    err(`${name}: ${message}`);
  }
  return exitStatusOf(error);
}

if (isMainModule(import.meta.url)) {
  runCli(process.argv.slice(2), { env: process.env, stdout: process.stdout, stderr: process.stderr }).then(
    (status) => {
      process.exitCode = status;
    },
    (error: unknown) => {
      process.stderr.write(`internal error: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = EXIT_API_ERROR;
    },
  );
}
