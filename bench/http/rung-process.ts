/**
 * A rung of bench/http/rungs.ts as a child process (the ladder's rungs, bench/api's servers under
 * different Node options): resolves once it prints `port <n>`, with what it printed until then.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { TYPESCRIPT_LOADER } from "../../scripts/typescript/loader.js";

export interface RungProcess {
  readonly child: ChildProcess;
  readonly port: number;
  /** Its stdout up to the port line (the authorize rung prints its `caller` line before). */
  readonly output: string;
}

/**
 * `node [nodeOptions] --import <loader> bench/http/rungs.ts <rungArgs>` in `cwd` with `DATABASE_URL`:
 * the checkout's TypeScript loader as its services run (scripts/typescript/loader.ts), or tsx
 * for a `--baseline` checkout from before it had one.
 */
export function startRungProcess(
  rungArgs: readonly string[],
  options: { readonly cwd?: string; readonly databaseUrl: string; readonly nodeOptions?: readonly string[] },
): Promise<RungProcess> {
  const loader = existsSync(join(options.cwd ?? ".", TYPESCRIPT_LOADER[1])) ? TYPESCRIPT_LOADER : ["--import", "tsx"];
  const child = spawn(process.execPath, [...(options.nodeOptions ?? []), ...loader, "bench/http/rungs.ts", ...rungArgs], {
    cwd: options.cwd,
    env: { ...process.env, DATABASE_URL: options.databaseUrl },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let output = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /port (\d+)/.exec(output);
      if (match !== null) resolve({ child, port: Number(match[1]), output });
    });
    child.once("exit", (code) => reject(new Error(`rung ${rungArgs.join(" ")} exited ${code} before listening`)));
  });
}
