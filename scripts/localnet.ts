/**
 * Starts the local ledger (`scripts/localnet`, a LiteSVM with payment_ledger behind Solana
 * JSON-RPC and websocket) as a child process, and reads what it bootstrapped.
 *
 * The ledger persists in its directory (`chain.wal`, replayed at start: docs/ledger.md §3), so a
 * ledger directory given here resumes the same chain; without one, a fresh temporary directory
 * is used and removed on stop.
 *
 * Run directly (`npm run localnet`) it serves on 8899/8900 with its ledger in `.data/localnet`
 * until Ctrl-C.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Keypair, PublicKey } from "@solana/web3.js";

export interface LocalnetInfo {
  readonly rpcUrl: string;
  readonly wsUrl: string;
  readonly programId: PublicKey;
  /** The 6-decimal USDC-like settlement mint. */
  readonly mint: PublicKey;
  readonly decimals: number;
  /** `config.authority`: signs every record_payment and open_invocation. */
  readonly authority: PublicKey;
  readonly treasury: PublicKey;
  /** The treasury's token account of `mint`, funded at start. */
  readonly treasuryToken: PublicKey;
  readonly mintAuthority: PublicKey;
  /** Unique per ledger (derived from its genesis): tells a ledger apart from any other one. */
  readonly genesisHash: string;
  /** True when this start replayed an existing ledger directory, false for a new ledger. */
  readonly resumed: boolean;
  /** Transactions the start replayed (the bootstrap ones included); 0 for a new ledger. */
  readonly replayedTransactions: number;
  readonly replayMs: number;
  /** The slot the ledger served from at this start. */
  readonly startSlot: number;
}

export interface LocalnetKeypairs {
  readonly authority: Keypair;
  readonly treasury: Keypair;
  readonly mintAuthority: Keypair;
}

export interface Localnet {
  readonly rpcUrl: string;
  readonly wsUrl: string;
  readonly ledgerDir: string;
  readonly info: LocalnetInfo;
  readonly keypairs: LocalnetKeypairs;
  /** The ledger process (for a test that kills it as a crash would). */
  readonly pid: number;
  /**
   * Ends the process (SIGTERM, then SIGKILL after a grace period) and resolves once it is gone,
   * also when it was killed some other way. Safe to call twice.
   */
  stop(): Promise<void>;
}

export interface LocalnetOptions {
  /** Kept after stop when given; a fresh temporary directory (removed on stop) otherwise. */
  readonly ledgerDir?: string;
  readonly slotMs?: number;
  /** Free ports are picked when absent; the websocket port defaults to rpcPort + 1. */
  readonly rpcPort?: number;
  readonly wsPort?: number;
  readonly readyTimeoutMs?: number;
  /** Copy the ledger's stderr, and its stdout once ready, to ours (also with LOCALNET_LOG=1). */
  readonly inheritOutput?: boolean;
  /**
   * A new ledger without the program config (`--uninitialized`), as a cluster the program was
   * just deployed on: `npm run admin -- init-cluster` creates it. Default false.
   */
  readonly uninitialized?: boolean;
}

const READY = /^localnet ready (\S+)/;
/** Generous: a resumed ledger replays its log first (about 10k transactions per second here). */
const DEFAULT_READY_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 5_000;
const STDERR_TAIL_BYTES = 16_384;
const PORT_PICK_ATTEMPTS = 20;

export function localnetBinary(): string {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(homedir(), ".cache", "agent-payment-gateway", "target");
  return join(targetDir, "release", "localnet");
}

// ---- ports -----------------------------------------------------------------------------------

function listenOn(port: number): Promise<number | null> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once("error", () => resolvePort(null));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      const bound = address !== null && typeof address === "object" ? address.port : null;
      server.close(() => resolvePort(bound));
    });
  });
}

/** A free port whose successor is free too (the ledger does not accept port 0). */
export async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < PORT_PICK_ATTEMPTS; attempt += 1) {
    const port = await listenOn(0);
    if (port !== null && port < 65_535 && (await listenOn(port + 1)) !== null) return port;
  }
  throw new Error(`no free pair of adjacent ports after ${PORT_PICK_ATTEMPTS} attempts`);
}

// ---- info.json and keypair files (parsed once, here) -----------------------------------------

function requireString(raw: Record<string, unknown>, key: string, file: string): string {
  const value = raw[key];
  if (typeof value !== "string" || value.length === 0) throw new Error(`${file}: "${key}" must be a non-empty string`);
  return value;
}

function requireCount(raw: Record<string, unknown>, key: string, file: string): number {
  const value = raw[key];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${file}: "${key}" must be a non-negative integer`);
  }
  return value;
}

function requirePubkey(raw: Record<string, unknown>, key: string, file: string): PublicKey {
  const text = requireString(raw, key, file);
  try {
    return new PublicKey(text);
  } catch {
    throw new Error(`${file}: "${key}" is not a base58 public key: ${text}`);
  }
}

export function parseLocalnetInfo(json: unknown, file = "info.json"): LocalnetInfo {
  if (json === null || typeof json !== "object" || Array.isArray(json)) throw new Error(`${file}: expected an object`);
  const raw = json as Record<string, unknown>;
  const decimals = raw.decimals;
  if (typeof decimals !== "number" || !Number.isInteger(decimals) || decimals < 0 || decimals > 18) {
    throw new Error(`${file}: "decimals" must be an integer 0..18`);
  }
  return {
    rpcUrl: requireString(raw, "rpcUrl", file),
    wsUrl: requireString(raw, "wsUrl", file),
    programId: requirePubkey(raw, "programId", file),
    mint: requirePubkey(raw, "mint", file),
    decimals,
    authority: requirePubkey(raw, "authority", file),
    treasury: requirePubkey(raw, "treasury", file),
    treasuryToken: requirePubkey(raw, "treasuryToken", file),
    mintAuthority: requirePubkey(raw, "mintAuthority", file),
    genesisHash: requireString(raw, "genesisHash", file),
    resumed: requireBoolean(raw, "resumed", file),
    replayedTransactions: requireCount(raw, "replayedTransactions", file),
    replayMs: requireCount(raw, "replayMs", file),
    startSlot: requireCount(raw, "startSlot", file),
  };
}

function requireBoolean(raw: Record<string, unknown>, key: string, file: string): boolean {
  const value = raw[key];
  if (typeof value !== "boolean") throw new Error(`${file}: "${key}" must be true or false`);
  return value;
}

/** A Solana CLI keypair file: a JSON array of the 64 secret-key bytes. */
export async function readKeypairFile(file: string): Promise<Keypair> {
  const json: unknown = JSON.parse(await readFile(file, "utf8"));
  const valid =
    Array.isArray(json) &&
    json.length === 64 &&
    json.every((byte) => typeof byte === "number" && Number.isInteger(byte) && byte >= 0 && byte <= 255);
  if (!valid) throw new Error(`${file}: expected a JSON array of 64 bytes`);
  return Keypair.fromSecretKey(Uint8Array.from(json as number[]));
}

function expectSame(what: string, fromFile: PublicKey, fromKeypair: Keypair): void {
  if (!fromFile.equals(fromKeypair.publicKey)) {
    throw new Error(`info.json ${what} ${fromFile.toBase58()} is not the key in ${what} keypair file`);
  }
}

// ---- the process -----------------------------------------------------------------------------

/** Resolves with the RPC URL of the ready line, rejects if the process ends or time runs out. */
function waitForReady(child: ChildProcess, timeoutMs: number, stderrTail: () => string): Promise<string> {
  return new Promise((resolveReady, rejectReady) => {
    const lines = createInterface({ input: child.stdout! });
    const fail = (reason: string): void => {
      cleanup();
      rejectReady(new Error(`${reason}\n--- localnet stderr (tail) ---\n${stderrTail()}`));
    };
    const onLine = (line: string): void => {
      const match = READY.exec(line);
      if (match === null) return;
      cleanup();
      resolveReady(match[1]!);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
      fail(`localnet exited before it was ready (code ${code}, signal ${signal})`);
    const onError = (error: Error): void => fail(`localnet failed to start: ${error.message}`);
    const timer = setTimeout(() => fail(`localnet not ready after ${timeoutMs} ms`), timeoutMs);
    function cleanup(): void {
      clearTimeout(timer);
      lines.off("line", onLine);
      child.off("exit", onExit);
      child.off("error", onError);
    }
    lines.on("line", onLine);
    child.once("exit", onExit);
    child.once("error", onError);
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolveStop) => {
    const force = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    child.once("exit", () => {
      clearTimeout(force);
      resolveStop();
    });
    child.kill("SIGTERM");
  });
}

export async function startLocalnet(options: LocalnetOptions = {}): Promise<Localnet> {
  const binary = localnetBinary();
  if (!existsSync(binary)) {
    throw new Error(`no localnet binary at ${binary}: run \`npm run build:ledger\` first`);
  }
  const ownsLedgerDir = options.ledgerDir === undefined;
  const ledgerDir = options.ledgerDir ?? (await mkdtemp(join(tmpdir(), "apg-localnet-")));
  await mkdir(ledgerDir, { recursive: true });
  const rpcPort = options.rpcPort ?? (await freePortPair());
  const wsPort = options.wsPort ?? rpcPort + 1;
  // The ledger ends with this process, however this process ends (even SIGKILL).
  const args = [
    "--rpc-port",
    String(rpcPort),
    "--ws-port",
    String(wsPort),
    "--ledger-dir",
    ledgerDir,
    "--exit-with-parent",
    String(process.pid),
  ];
  if (options.slotMs !== undefined) args.push("--slot-ms", String(options.slotMs));
  if (options.uninitialized === true) args.push("--uninitialized");

  const inheritOutput = options.inheritOutput ?? process.env.LOCALNET_LOG === "1";
  // Its own process group: a Ctrl-C in the terminal reaches the system, which stops the ledger
  // after everything that uses it.
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    if (inheritOutput) process.stderr.write(chunk);
    stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
  });
  // A test runner that dies must not leave a ledger running.
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);

  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      await stopChild(child);
      process.off("exit", killOnExit);
      if (ownsLedgerDir) await rm(ledgerDir, { recursive: true, force: true });
    })();
    return stopped;
  };

  try {
    const readyUrl = await waitForReady(child, options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS, () => stderr);
    const infoFile = join(ledgerDir, "info.json");
    const info = parseLocalnetInfo(JSON.parse(await readFile(infoFile, "utf8")), infoFile);
    const keypairs: LocalnetKeypairs = {
      authority: await readKeypairFile(join(ledgerDir, "authority.json")),
      treasury: await readKeypairFile(join(ledgerDir, "treasury.json")),
      mintAuthority: await readKeypairFile(join(ledgerDir, "mint-authority.json")),
    };
    expectSame("authority", info.authority, keypairs.authority);
    expectSame("treasury", info.treasury, keypairs.treasury);
    expectSame("mintAuthority", info.mintAuthority, keypairs.mintAuthority);
    if (readyUrl !== info.rpcUrl) throw new Error(`ready line says ${readyUrl} but info.json says ${info.rpcUrl}`);
    // Keep draining stdout so a chatty ledger never blocks on a full pipe.
    if (inheritOutput) child.stdout!.pipe(process.stdout);
    else child.stdout!.resume();
    return { rpcUrl: info.rpcUrl, wsUrl: info.wsUrl, ledgerDir, info, keypairs, pid: child.pid!, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

// ---- `npm run localnet` ----------------------------------------------------------------------

async function main(): Promise<void> {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const ledgerDir = join(root, ".data", "localnet");
  console.log(`starting ${localnetBinary()} on 8899/8900, ledger in ${ledgerDir}`);
  const localnet = await startLocalnet({ ledgerDir, rpcPort: 8899, wsPort: 8900, inheritOutput: true });
  const { info } = localnet;
  console.table({
    rpcUrl: info.rpcUrl,
    wsUrl: info.wsUrl,
    programId: info.programId.toBase58(),
    mint: `${info.mint.toBase58()} (${info.decimals} decimals)`,
    authority: info.authority.toBase58(),
    treasury: info.treasury.toBase58(),
    treasuryToken: info.treasuryToken.toBase58(),
    mintAuthority: info.mintAuthority.toBase58(),
    genesisHash: info.genesisHash,
    resumed: info.resumed ? `yes: ${info.replayedTransactions} transactions replayed in ${info.replayMs} ms` : "no: a new ledger",
  });
  console.log(`keypairs: ${ledgerDir}/{authority,treasury,mint-authority}.json — Ctrl-C to stop`);
  await new Promise<void>((resolveSignal) => {
    process.once("SIGINT", () => resolveSignal());
    process.once("SIGTERM", () => resolveSignal());
  });
  await localnet.stop();
  console.log("localnet stopped");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
