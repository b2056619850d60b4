/**
 * The gateway's preflight (`api/gateway/main.ts --check`) against a local ledger started alone:
 * a configuration that matches the cluster passes and prints what it found; one pointing at the
 * wrong thing (another cluster, an unreachable endpoint, keys the program's config does not name,
 * a mint without a treasury account, an unfunded fee payer, a database that does not answer)
 * refuses with one exact line per failure, exit 2, and writes nothing to the database. PROGRAM_ID
 * may name any address: a program not deployed there is the preflight's refusal, not the config's.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Keypair } from "@solana/web3.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configPda } from "../../programs/payment_ledger/ts/index.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { testServerUrl } from "../support/database-server.js";
import { freePort, writeKeypairFile } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CONCURRENCY = 3;

let localnet: Localnet;
let dir: string;
let adminUrl: string;
let databaseName: string;
let databaseUrl: string;
let env: Record<string, string>;
const stranger = Keypair.generate();
const strangeMint = Keypair.generate().publicKey;
const strangeProgram = Keypair.generate().publicKey;
const otherGenesis = Keypair.generate().publicKey.toBase58();

interface Case {
  readonly name: string;
  readonly env: () => Record<string, string>;
  /** Exact lines, or a pattern for a line whose OS-given reason varies. */
  readonly lines: () => readonly (string | RegExp)[];
}

function run(args: readonly string[], childEnv: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "api/gateway/main.ts", ...args],
      { cwd: ROOT, env: childEnv, timeout: 90_000 },
      (error, stdout, stderr) => {
        resolveRun({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr });
      },
    );
  });
}

const ours = (text: string): string[] => text.split("\n").filter((line) => line.startsWith("gateway: "));

beforeAll(async () => {
  localnet = await startLocalnet();
  adminUrl = await testServerUrl();
  databaseName = `apg_preflight_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${databaseName}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${databaseName}`;
  databaseUrl = url.toString();
  dir = await mkdtemp(join(tmpdir(), "apg-preflight-"));
  env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    DATABASE_URL: databaseUrl,
    SOLANA_RPC_URL: localnet.rpcUrl,
    SOLANA_NETWORK: "solana-localnet",
    SOLANA_GENESIS_HASH: localnet.info.genesisHash,
    PROGRAM_ID: localnet.info.programId.toBase58(),
    SETTLEMENT_MINT: localnet.info.mint.toBase58(),
    SETTLEMENT_MINT_DECIMALS: String(localnet.info.decimals),
    LEDGER_AUTHORITY_KEYPAIR: await writeKeypairFile(dir, "authority", localnet.keypairs.authority),
    TREASURY_KEYPAIR: await writeKeypairFile(dir, "treasury", localnet.keypairs.treasury),
    WALLET_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    WEBHOOK_SECRETS_KEY: randomBytes(32).toString("base64"),
  };
  env.STRANGER_KEYPAIR = await writeKeypairFile(dir, "stranger", stranger);
});

afterAll(async () => {
  await localnet?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  if (databaseName !== undefined) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await admin.end();
  }
});

describe("indexer/cli.ts run", () => {
  const runIndexer = (args: readonly string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolveRun) => {
      execFile(
        process.execPath,
        ["--import", "tsx", "indexer/cli.ts", "run", ...args],
        { cwd: ROOT, env: { PATH: env.PATH!, HOME: env.HOME!, DATABASE_URL: databaseUrl, PROGRAM_ID: env.PROGRAM_ID! }, timeout: 60_000 },
        (error, _stdout, stderr) => resolveRun({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stderr }),
      );
    });

  it("refuses an RPC endpoint that does not answer before writing anything: one line, exit 2", async () => {
    const closedPort = await freePort();
    const result = await runIndexer(["--rpc-url", `http://127.0.0.1:${closedPort}`]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr.split("\n").filter((line) => line.startsWith("indexer: "))).toEqual([
      expect.stringMatching(
        new RegExp(
          `^indexer: SOLANA_RPC_URL: http://127\\.0\\.0\\.1:${closedPort} is not reachable \\(.+\\); expected the cluster's JSON-RPC endpoint$`,
        ),
      ),
      "indexer: 1 configuration problem(s); nothing was started (see .env.example, docs/deploy.md)",
    ]);
  });

  it("refuses a program address where no program is deployed: one line, exit 2", async () => {
    const result = await runIndexer(["--rpc-url", localnet.rpcUrl, "--program-id", strangeProgram.toBase58()]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr.split("\n").filter((line) => line.startsWith("indexer: "))).toEqual([
      `indexer: PROGRAM_ID: no executable program at ${strangeProgram.toBase58()} on ${localnet.rpcUrl}; expected the deployed payment_ledger program`,
      "indexer: 1 configuration problem(s); nothing was started (see .env.example, docs/deploy.md)",
    ]);
  });
});

describe("api/gateway/main.ts --check", () => {
  it("passes on a configuration that matches the cluster, saying what it found", async () => {
    const result = await run(["--check"], env);
    expect(result.code, result.stderr).toBe(0);
    const lines = ours(result.stdout);
    const { info } = localnet;
    expect(lines).toEqual([
      expect.stringMatching(/^gateway: database: PostgreSQL \S+ answers$/),
      `gateway: cluster: solana-localnet, genesis ${info.genesisHash}, at ${localnet.rpcUrl}`,
      `gateway: program: ${info.programId.toBase58()} is deployed and executable`,
      `gateway: config: ${configPda(info.programId).address.toBase58()} names authority ${info.authority.toBase58()}, mint ${info.mint.toBase58()}, treasury ${info.treasury.toBase58()}`,
      `gateway: treasury token account: ${info.treasuryToken.toBase58()}`,
      expect.stringMatching(
        new RegExp(`^gateway: LEDGER_AUTHORITY_KEYPAIR: ${info.authority.toBase58()} holds [0-9.]+ SOL \\(floor 0\\.05\\)$`),
      ),
      "gateway: preflight passed",
    ]);
  });

  it("refuses a configuration pointing at the wrong thing: one line per failure, exit 2, nothing written", {
    timeout: 240_000,
  }, async () => {
    const closedPort = await freePort();
    const { info } = localnet;
    const cases: readonly Case[] = [
      {
        name: "an RPC endpoint that does not answer",
        env: () => ({ SOLANA_RPC_URL: `http://127.0.0.1:${closedPort}` }),
        lines: () => [
          new RegExp(
            `^gateway: SOLANA_RPC_URL: http://127\\.0\\.0\\.1:${closedPort} is not reachable \\(.+\\); expected the JSON-RPC endpoint of solana-localnet$`,
          ),
        ],
      },
      {
        // Any address is accepted as configuration; the preflight finds no program deployed there.
        name: "a PROGRAM_ID where no program is deployed",
        env: () => ({ PROGRAM_ID: strangeProgram.toBase58() }),
        lines: () => [
          `gateway: PROGRAM_ID: no account at ${strangeProgram.toBase58()} on solana-localnet; expected the deployed payment_ledger program`,
        ],
      },
      {
        name: "the genesis hash of another custom cluster",
        env: () => ({ SOLANA_GENESIS_HASH: otherGenesis }),
        lines: () => [
          `gateway: SOLANA_GENESIS_HASH: ${localnet.rpcUrl} serves the cluster ${info.genesisHash}, not ${otherGenesis}; expected the hash of the cluster it serves`,
        ],
      },
      {
        name: "devnet configured, the local ledger served",
        env: () => ({ SOLANA_NETWORK: "solana-devnet", SOLANA_GENESIS_HASH: "" }),
        lines: () => [
          `gateway: SOLANA_NETWORK: solana-devnet but ${localnet.rpcUrl} serves the cluster ${info.genesisHash}; expected an RPC endpoint of solana-devnet`,
        ],
      },
      {
        name: "an authority the program's config does not name (and unfunded)",
        env: () => ({ LEDGER_AUTHORITY_KEYPAIR: env.STRANGER_KEYPAIR! }),
        lines: () => [
          `gateway: LEDGER_AUTHORITY_KEYPAIR: ${stranger.publicKey.toBase58()} is not the config's authority ${info.authority.toBase58()}; expected ${info.authority.toBase58()}`,
          `gateway: LEDGER_AUTHORITY_KEYPAIR: ${stranger.publicKey.toBase58()} holds 0 SOL; expected at least 0.05 SOL (MIN_FEE_PAYER_SOL) for fees and rent`,
        ],
      },
      {
        name: "a treasury the config does not name, without a token account",
        env: () => ({ TREASURY_KEYPAIR: env.STRANGER_KEYPAIR! }),
        lines: () => [
          `gateway: TREASURY_KEYPAIR: ${stranger.publicKey.toBase58()} is not the config's treasury ${info.treasury.toBase58()}; expected ${info.treasury.toBase58()}`,
          `gateway: TREASURY_KEYPAIR: the treasury's token account ${getAssociatedTokenAddressSync(info.mint, stranger.publicKey, true).toBase58()} of SETTLEMENT_MINT does not exist; expected it created and funded (npm run admin -- init-cluster creates it)`,
        ],
      },
      {
        name: "a mint that does not exist",
        env: () => ({ SETTLEMENT_MINT: strangeMint.toBase58() }),
        lines: () => [
          `gateway: SETTLEMENT_MINT: no account at ${strangeMint.toBase58()} on solana-localnet; expected the settlement mint`,
          `gateway: SETTLEMENT_MINT: ${strangeMint.toBase58()} is not the config's settlement mint ${info.mint.toBase58()}; expected ${info.mint.toBase58()}`,
          `gateway: TREASURY_KEYPAIR: the treasury's token account ${getAssociatedTokenAddressSync(strangeMint, info.treasury, true).toBase58()} of SETTLEMENT_MINT does not exist; expected it created and funded (npm run admin -- init-cluster creates it)`,
        ],
      },
      {
        name: "decimals other than the config's",
        env: () => ({ SETTLEMENT_MINT_DECIMALS: "9" }),
        lines: () => ["gateway: SETTLEMENT_MINT_DECIMALS: 9 is not the config's decimals 6; expected 6"],
      },
      {
        name: "an unfunded fee payer",
        env: () => ({ FEE_PAYER_KEYPAIR: env.STRANGER_KEYPAIR! }),
        lines: () => [
          `gateway: FEE_PAYER_KEYPAIR: ${stranger.publicKey.toBase58()} holds 0 SOL; expected at least 0.05 SOL (MIN_FEE_PAYER_SOL) for fees and rent`,
        ],
      },
      {
        name: "a database server that does not answer",
        env: () => ({ DATABASE_URL: `postgres://apg:secret-password@127.0.0.1:${closedPort}/apg` }),
        lines: () => [
          new RegExp(
            `^gateway: DATABASE_URL: the server at 127\\.0\\.0\\.1:${closedPort} did not answer \\(.+\\); expected a reachable PostgreSQL server$`,
          ),
        ],
      },
    ];
    const results = new Map<string, Awaited<ReturnType<typeof run>>>();
    const queue = [...cases];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          results.set(next.name, await run([], { ...env, ...next.env() }));
        }
      }),
    );
    for (const c of cases) {
      const result = results.get(c.name)!;
      const expected = c.lines();
      expect({ case: c.name, code: result.code }, result.stderr).toEqual({ case: c.name, code: 2 });
      expect(ours(result.stderr), c.name).toEqual([
        ...expected.map((line) => (typeof line === "string" ? line : expect.stringMatching(line))),
        `gateway: ${expected.length} configuration problem(s); nothing was started (see .env.example, docs/deploy.md)`,
      ]);
      expect(result.stderr, c.name).not.toContain("secret-password");
      expect(result.stderr, `${c.name}: no stack trace`).not.toMatch(/\n\s+at /);
    }
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ n: string }>("SELECT count(*)::text AS n FROM pg_tables WHERE schemaname = 'public'");
    await client.end();
    expect(Number(rows[0]!.n)).toBe(0);
  });
});
