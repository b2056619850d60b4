/**
 * The services of the operator suites as an orchestrator runs them: each entry point a child
 * process started from one env file (`--env-file`) with nothing of the test's environment but
 * PATH and HOME, its output kept for the failure message, up once `/healthz` answers.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Localnet } from "../../../scripts/localnet.js";
import { TYPESCRIPT_LOADER } from "../../../scripts/typescript/loader.js";
import { pollUntil } from "../../support/poll.js";
import { writeKeypairFile } from "../../support/process-env.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const HOST = "127.0.0.1";
const START_TIMEOUT_MS = 60_000;
/** The output kept per service: its last lines are what a failure message needs. */
const OUTPUT_CHARS = 20_000;

export interface Service {
  readonly name: string;
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}

/** PATH and HOME only: what a service reads comes from its env file. */
export const baseEnv = (): Record<string, string> => ({ PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" });

/** Starts `node <TYPESCRIPT_LOADER> <args> --env-file <envFile>` and adds it to `services` (the suite stops them all). */
export function startService(
  services: Service[],
  envFile: string,
  name: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Service {
  const child = spawn(process.execPath, [...TYPESCRIPT_LOADER, ...args, "--env-file", envFile], {
    cwd: ROOT,
    env: { ...baseEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const service: Service = { name, child, output: "", exited: new Promise((done) => child.once("exit", (code) => done(code))) };
  const collect = (chunk: Buffer): void => {
    service.output = (service.output + chunk.toString("utf8")).slice(-OUTPUT_CHARS);
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  services.push(service);
  return service;
}

/** Waits for the service's `/healthz`; fails at once, with its output, when it exited. */
export async function healthy(service: Service, port: number): Promise<void> {
  await pollUntil(
    async () => {
      if (service.child.exitCode !== null) throw new Error(`${service.name} exited ${service.child.exitCode}:\n${service.output}`);
      return fetch(`http://${HOST}:${port}/healthz`).then(
        (response) => response.status === 200,
        () => false,
      );
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 200, what: () => `${service.name} /healthz; its output:\n${service.output}` },
  );
}

/** Runs an entry point to its end (a one-shot command such as init-cluster or `--check`). */
export function runEntry(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [...TYPESCRIPT_LOADER, ...args],
      { cwd: ROOT, env: { ...baseEnv(), ...env }, timeout: 90_000 },
      (error, stdout, stderr) => done({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr }),
    );
  });
}

/** The env file of docs/deploy.md for a local ledger treated as a remote cluster; its path. */
export async function writeEnvFile(
  dir: string,
  target: { readonly databaseUrl: string; readonly rpcUrl: string; readonly localnet: Localnet; readonly logLevel: string },
): Promise<string> {
  const { localnet } = target;
  const envFile = join(dir, "apg.env");
  await writeFile(
    envFile,
    [
      `DATABASE_URL=${target.databaseUrl}`,
      `SOLANA_RPC_URL=${target.rpcUrl}`,
      "SOLANA_NETWORK=solana-localnet",
      `PROGRAM_ID=${localnet.info.programId.toBase58()}`,
      `SETTLEMENT_MINT=${localnet.info.mint.toBase58()}`,
      `LEDGER_AUTHORITY_KEYPAIR=${await writeKeypairFile(dir, "authority", localnet.keypairs.authority)}`,
      `TREASURY_KEYPAIR=${await writeKeypairFile(dir, "treasury", localnet.keypairs.treasury)}`,
      `WALLET_ENCRYPTION_KEY=${randomBytes(32).toString("base64")}`,
      `WEBHOOK_SECRETS_KEY=${randomBytes(32).toString("base64")}`,
      `HOST=${HOST}`,
      `LOG_LEVEL=${target.logLevel}`,
      "",
    ].join("\n"),
  );
  return envFile;
}
