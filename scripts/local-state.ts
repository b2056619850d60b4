/**
 * The local system's durable state, all under `.data/` (git-ignored):
 *
 *   .data/localnet/    the local ledger: its write-ahead log and keypairs (scripts/localnet.ts)
 *   .data/postgres/    the embedded PostgreSQL's data directory, when DATABASE_URL is not set
 *   .data/keys.json    WALLET_ENCRYPTION_KEY and WEBHOOK_SECRETS_KEY made at the first start
 *                      (mode 0600), so wallets and webhook secrets sealed with them outlive a run
 *   .data/system.pid   the pid of the running `npm start`
 *
 * Ledger and database belong together: a reset removes both (and drops `apg_local` from the
 * server of DATABASE_URL when one is given); a start that finds them apart refuses
 * (scripts/system.ts, ChainMismatch).
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { generateWalletEncryptionKey } from "../api/gateway/wallets/index.js";
import { SecretBox } from "../api/shared/secret-box.js";
import { isAlive, stopServerOf } from "./embedded-postgres.js";
import { dropGivenLocalDatabase } from "./local-database.js";

export interface LocalState {
  readonly root: string;
  readonly ledgerDir: string;
  readonly postgresDir: string;
  readonly keysFile: string;
  readonly pidFile: string;
}

export const RESET_COMMAND = "npm run reset";

/** The layout under `APG_DATA_DIR` when set, else the repository's `.data/`. */
export function localState(env: Readonly<Record<string, string | undefined>> = {}): LocalState {
  const given = env.APG_DATA_DIR;
  const root = given === undefined || given === "" ? resolve(dirname(fileURLToPath(import.meta.url)), "..", ".data") : resolve(given);
  return {
    root,
    ledgerDir: join(root, "localnet"),
    postgresDir: join(root, "postgres"),
    keysFile: join(root, "keys.json"),
    pidFile: join(root, "system.pid"),
  };
}

/** A second system on the same `.data/`, refused. */
export class SystemRunning extends Error {
  constructor(readonly pid: number) {
    super(`the local system is already running (pid ${pid}); stop it first (Ctrl-C, or kill ${pid})`);
    this.name = "SystemRunning";
  }
}

/** The pid of a live `npm start` on this state, or null (a stale pid file is ignored). */
export async function runningSystem(state: LocalState): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(state.pidFile, "utf8");
  } catch {
    return null;
  }
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid) ? pid : null;
}

/** Marks this process as the running system; throws SystemRunning if another one is. */
export async function claimSystem(state: LocalState): Promise<() => Promise<void>> {
  const other = await runningSystem(state);
  if (other !== null) throw new SystemRunning(other);
  await mkdir(state.root, { recursive: true });
  await writeFile(state.pidFile, `${process.pid}\n`);
  return async () => {
    if ((await readFile(state.pidFile, "utf8").catch(() => "")).trim() === String(process.pid)) {
      await rm(state.pidFile, { force: true });
    }
  };
}

export interface LocalKeys {
  readonly WALLET_ENCRYPTION_KEY: string;
  readonly WEBHOOK_SECRETS_KEY: string;
}

/**
 * The encryption keys of the local system: from the environment when set there, else from
 * `.data/keys.json`, made (mode 0600) at the first start.
 */
export async function localKeys(state: LocalState, env: Readonly<Record<string, string | undefined>>): Promise<LocalKeys> {
  let stored: Partial<LocalKeys> = {};
  if (existsSync(state.keysFile)) {
    stored = JSON.parse(await readFile(state.keysFile, "utf8")) as Partial<LocalKeys>;
  }
  const keys: LocalKeys = {
    WALLET_ENCRYPTION_KEY: stored.WALLET_ENCRYPTION_KEY ?? generateWalletEncryptionKey(),
    WEBHOOK_SECRETS_KEY: stored.WEBHOOK_SECRETS_KEY ?? SecretBox.generateKey(),
  };
  if (stored.WALLET_ENCRYPTION_KEY === undefined || stored.WEBHOOK_SECRETS_KEY === undefined) {
    await mkdir(state.root, { recursive: true });
    await writeFile(state.keysFile, JSON.stringify(keys, null, 2), { mode: 0o600 });
  }
  return {
    WALLET_ENCRYPTION_KEY: env.WALLET_ENCRYPTION_KEY ?? keys.WALLET_ENCRYPTION_KEY,
    WEBHOOK_SECRETS_KEY: env.WEBHOOK_SECRETS_KEY ?? keys.WEBHOOK_SECRETS_KEY,
  };
}

/**
 * Wipes ledger and database together (and the keys sealed into that database). Refused while the
 * system runs. Returns what it removed, for the command to print.
 */
export async function resetLocalState(state: LocalState, env: Readonly<Record<string, string | undefined>>): Promise<string[]> {
  const running = await runningSystem(state);
  if (running !== null) throw new SystemRunning(running);
  // A server left behind by a SIGKILLed start must not run on a directory being removed.
  await stopServerOf(state.postgresDir);
  const removed: string[] = [];
  for (const path of [state.ledgerDir, state.postgresDir, state.keysFile]) {
    if (existsSync(path)) {
      await rm(path, { recursive: true, force: true });
      removed.push(path);
    }
  }
  if (await dropGivenLocalDatabase(env)) removed.push("database apg_local on DATABASE_URL's server");
  return removed;
}
