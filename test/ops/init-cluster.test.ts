/**
 * `npm run admin -- init-cluster` on a cluster the program was just deployed on: the local ledger
 * started alone with no program config (`--uninitialized`), driven only through its RPC URL and an
 * env file, as an operator drives devnet. The first run calls `initialize` and prints the
 * variables; the gateway's preflight then passes with them; a second run says it is already
 * initialized and shows the same config; a configuration naming another treasury is refused.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Connection, Keypair } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configPda, decodeConfigAccount } from "../../programs/payment_ledger/ts/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { testServerUrl } from "../support/database-server.js";
import { writeKeypairFile } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

let localnet: Localnet;
let dir: string;
let envFile: string;
let env: Record<string, string>;

function run(
  entry: string,
  args: readonly string[],
  childEnv: Record<string, string> = env,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    execFile(
      process.execPath,
      ["--import", "tsx", entry, ...args],
      { cwd: ROOT, env: childEnv, timeout: 90_000 },
      (error, stdout, stderr) => {
        resolveRun({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr });
      },
    );
  });
}

beforeAll(async () => {
  localnet = await startLocalnet({ uninitialized: true });
  dir = await mkdtemp(join(tmpdir(), "apg-init-cluster-"));
  const authority = await writeKeypairFile(dir, "authority", localnet.keypairs.authority);
  const treasury = await writeKeypairFile(dir, "treasury", localnet.keypairs.treasury);
  envFile = join(dir, "cluster.env");
  await writeFile(
    envFile,
    [
      `SOLANA_RPC_URL=${localnet.rpcUrl}`,
      "SOLANA_NETWORK=solana-localnet",
      `SOLANA_GENESIS_HASH=${localnet.info.genesisHash}`,
      `PROGRAM_ID=${localnet.info.programId.toBase58()}`,
      `SETTLEMENT_MINT=${localnet.info.mint.toBase58()}`,
      `LEDGER_AUTHORITY_KEYPAIR=${authority}`,
      `TREASURY_KEYPAIR=${treasury}`,
      "",
    ].join("\n"),
  );
  env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", APG_DATA_DIR: join(dir, "state") };
});

afterAll(async () => {
  await localnet?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe("npm run admin -- init-cluster", () => {
  it("initializes the program config with the configured authority, mint and treasury, and prints the variables", async () => {
    const connection = new Connection(localnet.rpcUrl, "confirmed");
    const config = configPda(localnet.info.programId).address;
    expect(await connection.getAccountInfo(config)).toBeNull();

    const first = await run("scripts/admin.ts", ["init-cluster", "--env-file", envFile]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`^initialized: config ${config.toBase58()} created by \\w+$`, "m"));
    const state = decodeConfigAccount((await connection.getAccountInfo(config))!.data);
    expect([state.authority, state.settlementMint, state.treasury].map((key) => key.toBase58())).toEqual([
      localnet.info.authority.toBase58(),
      localnet.info.mint.toBase58(),
      localnet.info.treasury.toBase58(),
    ]);
    expect(state.decimals).toBe(localnet.info.decimals);
    for (const line of [
      `SOLANA_GENESIS_HASH=${localnet.info.genesisHash}`,
      `PROGRAM_ID=${localnet.info.programId.toBase58()}`,
      `SETTLEMENT_MINT=${localnet.info.mint.toBase58()}`,
      `SETTLEMENT_MINT_DECIMALS=${localnet.info.decimals}`,
    ]) {
      expect(first.stdout.split("\n")).toContain(line);
    }
  });

  it("leaves a cluster the gateway's preflight accepts", async () => {
    const database = await testServerUrl();
    const checked = await run("api/gateway/main.ts", ["--check", "--env-file", envFile], {
      ...env,
      DATABASE_URL: database,
      WALLET_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString("base64"),
      WEBHOOK_SECRETS_KEY: Buffer.alloc(32, 2).toString("base64"),
    });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stdout).toContain("gateway: preflight passed");
  });

  it("says it is already initialized on a second run, showing the same config", async () => {
    const second = await run("scripts/admin.ts", ["init-cluster", "--env-file", envFile]);
    expect(second.code, second.stderr).toBe(0);
    const lines = second.stdout.split("\n");
    expect(lines[0]).toBe(`already initialized: config ${configPda(localnet.info.programId).address.toBase58()} exists`);
    expect(lines.slice(1, 4)).toEqual([
      `  authority  ${localnet.info.authority.toBase58()}`,
      `  mint       ${localnet.info.mint.toBase58()} (${localnet.info.decimals} decimals)`,
      `  treasury   ${localnet.info.treasury.toBase58()}`,
    ]);
  });

  it("refuses a configuration whose treasury is not the config's: one line, exit 2", async () => {
    const other = Keypair.generate();
    const otherFile = await writeKeypairFile(dir, "other-treasury", other);
    const refused = await run("scripts/admin.ts", ["init-cluster", "--env-file", envFile], { ...env, TREASURY_KEYPAIR: otherFile });
    expect(refused.code).toBe(2);
    expect(refused.stderr.split("\n").filter((line) => line.startsWith("admin: "))).toEqual([
      `admin: TREASURY_KEYPAIR: ${other.publicKey.toBase58()} is not the config's treasury ${localnet.info.treasury.toBase58()}; expected ${localnet.info.treasury.toBase58()}`,
      "admin: 1 configuration problem(s); nothing was started (see .env.example, docs/deploy.md)",
    ]);
  });
});
