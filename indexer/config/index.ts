/**
 * The one configuration module of every entry point (api/gateway/main.ts, api/query/main.ts,
 * indexer/cli.ts, scripts/start.ts, scripts/admin.ts): the environment, optionally laid over an
 * env file (`--env-file PATH`), parsed and checked before anything touches the database or the
 * chain. A refused configuration prints one line per problem and exits 2, without a stack trace.
 */
import { readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import type { Env } from "./reader.js";
import type { Loaded } from "./services.js";

export * from "./reader.js";
export * from "./services.js";
export * from "./variables.js";

/** Exit code of a refused configuration (and of a failed preflight: the same operator fix). */
export const CONFIG_EXIT_CODE = 2;

export interface ConfigSource {
  readonly env: Env;
  /** The arguments without `--env-file PATH` / `--env-file=PATH`. */
  readonly argv: readonly string[];
}

/**
 * The environment with `--env-file`'s variables under it: a variable set in the process's own
 * environment wins over the file (as Node's own --env-file does). Problems reading the file are
 * returned as problem lines.
 */
export function configSource(argv: readonly string[], env: Env = process.env): ConfigSource | { readonly problems: readonly string[] } {
  const rest: string[] = [];
  let file: string | undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === "--env-file") {
      file = argv[i + 1];
      if (file === undefined) return { problems: ["--env-file: no path given; expected --env-file PATH"] };
      i += 1;
    } else if (arg.startsWith("--env-file=")) {
      file = arg.slice("--env-file=".length);
    } else {
      rest.push(arg);
    }
  }
  if (file === undefined) return { env, argv: rest };
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const issue = code === "ENOENT" ? "does not exist" : `cannot be read (${code ?? "error"})`;
    return { problems: [`--env-file: ${JSON.stringify(file)} ${issue}; expected a file of NAME=value lines`] };
  }
  return { env: { ...parseEnv(text), ...definedOnly(env) }, argv: rest };
}

function definedOnly(env: Env): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ""));
}

/** Prints the problems, one line each, to stderr, and exits 2. */
export function refuse(process_: string, problems: readonly string[]): never {
  const lines = problems.map((line) => `${process_}: ${line}`);
  lines.push(`${process_}: ${problems.length} configuration problem(s); nothing was started (see .env.example, docs/deploy.md)`);
  process.stderr.write(`${lines.join("\n")}\n`);
  process.exit(CONFIG_EXIT_CODE);
}

/** The parsed configuration of one entry point, or exit 2 with every problem. */
export function configOrExit<T>(
  process_: string,
  argv: readonly string[],
  load: (env: Env) => Loaded<T>,
): { readonly config: T; readonly argv: readonly string[] } {
  const source = configSource(argv);
  if ("problems" in source) refuse(process_, source.problems);
  const loaded = load(source.env);
  if (!loaded.ok) refuse(process_, loaded.problems);
  return { config: loaded.config, argv: source.argv };
}
