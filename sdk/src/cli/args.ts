/**
 * The command line → a command, its positionals and its options, with node:util parseArgs.
 * All options are parsed against one table (every option has one type everywhere), then each
 * command admits only its own: `cli spend --limit 3` is a usage error, not a silent no-op.
 */
import { parseArgs } from "node:util";
import { findUnstorable } from "../text-input.js";
import { UsageError } from "./usage.js";

const OPTIONS = {
  "api-key": { type: "string" },
  "base-url": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  "daily-budget": { type: "string" },
  "per-call-limit": { type: "string" },
  "allowed-domains": { type: "string" },
  "blocked-domains": { type: "string" },
  "rate-limit": { type: "string" },
  "protocol-preference": { type: "string" },
  agent: { type: "string" },
  limit: { type: "string" },
  protocol: { type: "string" },
  since: { type: "string" },
  domain: { type: "string" },
  after: { type: "string" },
  "max-depth": { type: "string" },
  print: { type: "boolean" },
  window: { type: "string" },
  from: { type: "string" },
  to: { type: "string" },
  type: { type: "string" },
  threshold: { type: "string" },
  notify: { type: "string" },
  name: { type: "string" },
  force: { type: "boolean" },
  "include-archived": { type: "boolean" },
  status: { type: "string" },
  note: { type: "string" },
  file: { type: "string" },
} as const;

export type OptionName = keyof typeof OPTIONS;
export type Options = { [K in OptionName]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

const GLOBAL: readonly OptionName[] = ["api-key", "base-url", "help"];

interface CommandSpec {
  /** Names of the positional arguments after the command words. */
  readonly positionals: readonly string[];
  readonly options: readonly OptionName[];
}

export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  "policies set": {
    positionals: ["agent"],
    options: ["daily-budget", "per-call-limit", "allowed-domains", "blocked-domains", "rate-limit", "protocol-preference", "json"],
  },
  "policies get": { positionals: ["agent"], options: ["json"] },
  "policies clear": { positionals: ["agent"], options: [] },
  "policies backtest": { positionals: ["agent"], options: ["file", "window", "limit", "json"] },
  "policies history": { positionals: ["agent"], options: ["limit", "json"] },
  "transactions list": { positionals: [], options: ["agent", "limit", "protocol", "since", "domain", "after", "json"] },
  "transactions inspect": { positionals: ["txHash"], options: ["json"] },
  "transactions tree": { positionals: ["rootTxHash"], options: ["max-depth", "json"] },
  "transactions explorer": { positionals: ["txHash"], options: ["print"] },
  spend: { positionals: [], options: ["agent", "window", "from", "to", "json"] },
  "alerts create": { positionals: [], options: ["agent", "type", "threshold", "window", "notify", "json"] },
  "alerts list": { positionals: [], options: ["agent", "json"] },
  "alerts delete": { positionals: ["alertId"], options: [] },
  "agents create": { positionals: ["agent"], options: ["name", "json"] },
  "agents list": { positionals: [], options: ["include-archived", "json"] },
  "agents get": { positionals: ["agent"], options: ["json"] },
  "agents archive": { positionals: ["agent"], options: ["force", "json"] },
  "approvals list": { positionals: [], options: ["status", "agent", "limit", "after", "json"] },
  "approvals approve": { positionals: ["approvalId"], options: ["note", "json"] },
  "approvals deny": { positionals: ["approvalId"], options: ["note", "json"] },
};

export interface ParsedCommand {
  /** `"policies set"`, `"spend"`, ...; null when only `--help` (or nothing) was given. */
  readonly command: string | null;
  readonly args: Readonly<Record<string, string>>;
  readonly options: Options;
}

/** A negative number given as an option's value (`--daily-budget -5`), which parseArgs takes for an option. */
const NEGATIVE_NUMBER = /^-\.?\d/;

/**
 * `--opt -5` → `--opt=-5` for a string option, so a negative amount reaches the option's own
 * check (and its message) instead of parseArgs' "argument is ambiguous".
 */
function joinNegativeValues(argv: readonly string[]): string[] {
  const joined: string[] = [];
  for (let index = 0; index < argv.length; index += 1) {
    const token = argv[index]!;
    const next = argv[index + 1];
    const name = token.startsWith("--") ? token.slice(2) : null;
    if (name !== null && next !== undefined && NEGATIVE_NUMBER.test(next) && OPTIONS[name as OptionName]?.type === "string") {
      joined.push(`${token}=${next}`);
      index += 1;
    } else {
      joined.push(token);
    }
  }
  return joined;
}

/** parseArgs' failure in the CLI's own words. */
function parseFailure(error: unknown): UsageError {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1] ?? "option";
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return new UsageError(`unknown option ${option}`);
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    return /does not take an argument/.test(message)
      ? new UsageError(`${option} takes no value`)
      : new UsageError(`${option} needs a value`);
  }
  return new UsageError(message.split("\n")[0]!);
}

export function parseCommandLine(argv: readonly string[]): ParsedCommand {
  let parsed;
  try {
    parsed = parseArgs({ args: joinNegativeValues(argv), options: OPTIONS, allowPositionals: true, strict: true, tokens: true });
  } catch (error) {
    throw parseFailure(error);
  }
  for (const token of parsed.tokens) {
    if (token.kind === "option" && typeof token.value === "string") {
      const bad = findUnstorable(token.value);
      if (bad !== null) throw new UsageError(`--${token.name} contains ${bad.character}, which is not allowed`);
    }
    if (token.kind === "positional") {
      const bad = findUnstorable(token.value);
      if (bad !== null) throw new UsageError(`argument ${token.index + 1} contains ${bad.character}, which is not allowed`);
    }
  }
  const options = parsed.values as Options;
  const words = parsed.positionals;
  if (words.length === 0) {
    if (options.help === true) return { command: null, args: {}, options };
    throw new UsageError("no command given");
  }
  if (options.help === true) {
    // `cli policies --help` shows the general help rather than failing on the missing subcommand.
    let helped: string | null = null;
    try {
      helped = resolveCommand(words);
    } catch {
      helped = null;
    }
    return { command: helped, args: {}, options };
  }
  const command = resolveCommand(words);
  const spec = COMMANDS[command]!;
  const rest = words.slice(command.split(" ").length);

  const allowed = new Set<string>([...GLOBAL, ...spec.options]);
  for (const token of parsed.tokens) {
    if (token.kind === "option" && !allowed.has(token.name)) throw new UsageError(`${command} takes no option --${token.name}`);
  }
  if (rest.length < spec.positionals.length) {
    throw new UsageError(`${command} needs <${spec.positionals[rest.length]}>`);
  }
  if (rest.length > spec.positionals.length) throw new UsageError(`unexpected argument "${rest[spec.positionals.length]}"`);
  const args: Record<string, string> = {};
  spec.positionals.forEach((name, index) => {
    const value = rest[index]!;
    if (value.trim() === "") throw new UsageError(`<${name}> must not be empty`);
    args[name] = value;
  });
  return { command, args, options };
}

function resolveCommand(words: readonly string[]): string {
  const first = words[0]!;
  if (first in COMMANDS) return first;
  const group = Object.keys(COMMANDS).filter((name) => name.startsWith(`${first} `));
  if (group.length === 0) throw new UsageError(`unknown command "${first}"`);
  const second = words[1];
  if (second === undefined) throw new UsageError(`${first} needs a subcommand: ${group.map((name) => name.split(" ")[1]).join(", ")}`);
  const command = `${first} ${second}`;
  if (!(command in COMMANDS)) throw new UsageError(`unknown command "${command}"`);
  return command;
}
