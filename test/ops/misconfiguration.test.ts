/**
 * Misconfigurations an operator makes, each run through the real entry point as its own process
 * (api/gateway/main.ts, api/query/main.ts, indexer/cli.ts, scripts/start.ts): the exact one-line
 * problem, exit code 2, no stack trace, and nothing written to the database the process was given
 * (an empty database stays empty: the configuration is checked before migrations).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Keypair } from "@solana/web3.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { testServerUrl } from "../support/database-server.js";
import { writeKeypairFile } from "../support/process-env.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** Child processes run at once: each spends ~3 s loading its modules on a busy machine. */
const CONCURRENCY = 3;

interface Case {
  readonly name: string;
  readonly entry: "api/gateway/main.ts" | "api/query/main.ts" | "indexer/cli.ts" | "scripts/start.ts";
  readonly args?: readonly string[];
  /** Changes to the valid environment: a value, or null to remove the variable. */
  readonly env: (files: Files) => Record<string, string | null>;
  /** Every problem line the process must print, in order (the summary line is checked apart). */
  readonly lines: (files: Files) => readonly string[];
}

interface Files {
  readonly dir: string;
  readonly authority: string;
  readonly treasury: string;
  readonly shortKey: string;
  readonly databaseUrl: string;
  readonly envFile: string;
}

let files: Files;
let adminUrl: string;
let databaseName: string;
let baseEnv: Record<string, string>;

const WALLET_KEY = randomBytes(32).toString("base64");

const CASES: readonly Case[] = [
  {
    name: "DATABASE_URL missing",
    entry: "api/gateway/main.ts",
    env: () => ({ DATABASE_URL: null }),
    lines: () => ["gateway: DATABASE_URL: not set; expected a postgres:// URL of the database"],
  },
  {
    name: "DATABASE_URL of another kind of database",
    entry: "api/gateway/main.ts",
    env: () => ({ DATABASE_URL: "mysql://db.internal/apg" }),
    lines: () => ['gateway: DATABASE_URL: "mysql://db.internal/apg" has scheme mysql; expected a postgres:// URL of the database'],
  },
  {
    name: "SOLANA_RPC_URL without a scheme",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_RPC_URL: "localhost:8899" }),
    lines: () => [
      'gateway: SOLANA_RPC_URL: "localhost:8899" has scheme localhost; expected an http(s):// URL of the cluster\'s JSON-RPC endpoint',
    ],
  },
  {
    name: "SOLANA_NETWORK missing (no silent devnet)",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_NETWORK: null }),
    lines: () => ["gateway: SOLANA_NETWORK: not set; expected one of solana-devnet, solana-mainnet, solana-testnet, solana-localnet"],
  },
  {
    name: "SOLANA_NETWORK with the explorer's name",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_NETWORK: "devnet" }),
    lines: () => [
      'gateway: SOLANA_NETWORK: "devnet" is not a known value; expected one of solana-devnet, solana-mainnet, solana-testnet, solana-localnet',
    ],
  },
  {
    name: "a custom cluster without its genesis hash",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_GENESIS_HASH: null }),
    lines: () => [
      "gateway: SOLANA_GENESIS_HASH: not set (required for the custom cluster solana-localnet); expected the cluster's genesis hash",
    ],
  },
  {
    name: "devnet with another cluster's genesis hash",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_NETWORK: "solana-devnet", SOLANA_GENESIS_HASH: "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuqCjd6DRS3A" }),
    lines: () => [
      "gateway: SOLANA_GENESIS_HASH: 5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuqCjd6DRS3A is not the genesis hash of solana-devnet; expected a hash starting EtWTRABZaYq6iMfeYKouRu166VU2xqa1, or unset",
    ],
  },
  {
    name: "PROGRAM_ID missing",
    entry: "api/gateway/main.ts",
    env: () => ({ PROGRAM_ID: null }),
    lines: () => ["gateway: PROGRAM_ID: not set; expected a base58 address (32 bytes)"],
  },
  {
    name: "PROGRAM_ID that is not an address",
    entry: "api/gateway/main.ts",
    env: () => ({ PROGRAM_ID: "payment_ledger" }),
    lines: () => ['gateway: PROGRAM_ID: "payment_ledger" is not base58; expected a base58 address (32 bytes)'],
  },
  {
    name: "the indexer without a program address",
    entry: "indexer/cli.ts",
    args: ["run"],
    env: () => ({ PROGRAM_ID: null }),
    lines: () => ["indexer: PROGRAM_ID: not set; expected a base58 address (32 bytes)"],
  },
  {
    name: "SETTLEMENT_MINT not base58",
    entry: "api/gateway/main.ts",
    env: () => ({ SETTLEMENT_MINT: "usdc-mint" }),
    lines: () => ['gateway: SETTLEMENT_MINT: "usdc-mint" is not base58; expected a base58 address (32 bytes)'],
  },
  {
    name: "SETTLEMENT_MINT_DECIMALS out of range",
    entry: "api/gateway/main.ts",
    env: () => ({ SETTLEMENT_MINT_DECIMALS: "19" }),
    lines: () => ['gateway: SETTLEMENT_MINT_DECIMALS: "19" is out of range; expected the mint\'s decimals, an integer 0..18'],
  },
  {
    name: "LEDGER_AUTHORITY_KEYPAIR pointing at no file",
    entry: "api/gateway/main.ts",
    env: (f) => ({ LEDGER_AUTHORITY_KEYPAIR: join(f.dir, "missing.json") }),
    lines: (f) => [
      `gateway: LEDGER_AUTHORITY_KEYPAIR: ${JSON.stringify(join(f.dir, "missing.json"))} does not exist; expected the path of a Solana CLI keypair file (a JSON array of 64 bytes)`,
    ],
  },
  {
    name: "TREASURY_KEYPAIR holding 32 bytes",
    entry: "api/gateway/main.ts",
    env: (f) => ({ TREASURY_KEYPAIR: f.shortKey }),
    lines: (f) => [
      `gateway: TREASURY_KEYPAIR: ${JSON.stringify(f.shortKey)} is not a JSON array of 64 bytes; expected the path of a Solana CLI keypair file (a JSON array of 64 bytes)`,
    ],
  },
  {
    name: "FEE_PAYER_KEYPAIR that is the authority",
    entry: "api/gateway/main.ts",
    env: (f) => ({ FEE_PAYER_KEYPAIR: f.authority }),
    lines: () => ["gateway: FEE_PAYER_KEYPAIR: is the LEDGER_AUTHORITY_KEYPAIR key; expected a dedicated key that holds only SOL"],
  },
  {
    name: "WALLET_ENCRYPTION_KEY missing",
    entry: "api/gateway/main.ts",
    env: () => ({ WALLET_ENCRYPTION_KEY: null }),
    lines: () => ["gateway: WALLET_ENCRYPTION_KEY: not set; expected 32 random bytes as base64 (openssl rand -base64 32)"],
  },
  {
    name: "WALLET_ENCRYPTION_KEY too short, its value not echoed",
    entry: "api/gateway/main.ts",
    env: () => ({ WALLET_ENCRYPTION_KEY: randomBytes(16).toString("base64") }),
    lines: () => [
      "gateway: WALLET_ENCRYPTION_KEY: the value does not decode to 32 bytes; expected 32 random bytes as base64 (openssl rand -base64 32)",
    ],
  },
  {
    name: "WEBHOOK_SECRETS_KEY reusing the wallet key",
    entry: "api/gateway/main.ts",
    env: () => ({ WEBHOOK_SECRETS_KEY: WALLET_KEY }),
    lines: () => ["gateway: WEBHOOK_SECRETS_KEY: is the same key as WALLET_ENCRYPTION_KEY; expected a key of its own"],
  },
  {
    name: "PORT not a number",
    entry: "api/gateway/main.ts",
    env: () => ({ PORT: "http" }),
    lines: () => ['gateway: PORT: "http" is not an integer; expected a TCP port, an integer 0..65535'],
  },
  {
    name: "MIN_FEE_PAYER_SOL in exponent notation",
    entry: "api/gateway/main.ts",
    env: () => ({ MIN_FEE_PAYER_SOL: "1e-3" }),
    lines: () => [
      'gateway: MIN_FEE_PAYER_SOL: "1e-3" is not a decimal amount with at most 9 decimals; expected an amount of SOL such as 0.05',
    ],
  },
  {
    name: "an --env-file whose RPC URL is the websocket one",
    entry: "api/gateway/main.ts",
    args: ["--env-file", "ENV_FILE"],
    env: () => ({ SOLANA_RPC_URL: null }),
    lines: () => [
      'gateway: SOLANA_RPC_URL: "ws://127.0.0.1:8900" has scheme ws; expected an http(s):// URL of the cluster\'s JSON-RPC endpoint',
    ],
  },
  {
    name: "several problems at once, every one listed",
    entry: "api/gateway/main.ts",
    env: () => ({ SOLANA_NETWORK: null, LOG_LEVEL: "verbose", SMTP_URL: "mail.internal:25" }),
    lines: () => [
      "gateway: SOLANA_NETWORK: not set; expected one of solana-devnet, solana-mainnet, solana-testnet, solana-localnet",
      'gateway: SMTP_URL: "mail.internal:25" has scheme mail.internal; expected an smtp:// or smtps:// URL',
      'gateway: LOG_LEVEL: "verbose" is not a known value; expected one of fatal, error, warn, info, debug, trace, silent',
    ],
  },
  {
    name: "the query service without DATABASE_URL",
    entry: "api/query/main.ts",
    env: () => ({ DATABASE_URL: null }),
    lines: () => ["query: DATABASE_URL: not set; expected a postgres:// URL of the database"],
  },
  {
    name: "the query service with half of the balance pair",
    entry: "api/query/main.ts",
    env: () => ({ SETTLEMENT_MINT: null }),
    lines: () => [
      "query: SETTLEMENT_MINT: not set while its pair is; expected both SOLANA_RPC_URL and SETTLEMENT_MINT (balances), or neither",
    ],
  },
  {
    name: "the indexer without an RPC endpoint",
    entry: "indexer/cli.ts",
    args: ["run"],
    env: () => ({ SOLANA_RPC_URL: null }),
    lines: () => ["indexer: SOLANA_RPC_URL: not set; expected an http(s):// URL of the cluster's JSON-RPC endpoint"],
  },
  {
    name: "the indexer with a malformed --program-id",
    entry: "indexer/cli.ts",
    args: ["run", "--program-id", "0xdeadbeef"],
    env: () => ({}),
    lines: () => ['indexer: PROGRAM_ID: "0xdeadbeef" is not base58; expected a base58 address (32 bytes)'],
  },
  {
    name: "the local system with a bad ledger port",
    entry: "scripts/start.ts",
    env: () => ({ LOCALNET_RPC_PORT: "65535" }),
    lines: () => ['start: LOCALNET_RPC_PORT: "65535" is out of range; expected the ledger\'s RPC port, an integer 1..65534'],
  },
];

function run(
  entry: string,
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolveRun) => {
    execFile(process.execPath, ["--import", "tsx", entry, ...args], { cwd: ROOT, env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolveRun({ code: error === null ? 0 : ((error as { code?: number }).code ?? null), stdout, stderr });
    });
  });
}

async function tablesIn(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>("SELECT count(*)::text AS n FROM pg_tables WHERE schemaname = 'public'");
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  adminUrl = await testServerUrl();
  databaseName = `apg_misconfig_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${databaseName}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${databaseName}`;
  const dir = await mkdtemp(join(tmpdir(), "apg-misconfig-"));
  const shortKey = join(dir, "short.json");
  await writeFile(shortKey, JSON.stringify(Array.from(randomBytes(32))));
  const envFile = join(dir, "gateway.env");
  await writeFile(envFile, "# the websocket URL by mistake\nSOLANA_RPC_URL=ws://127.0.0.1:8900\n");
  files = {
    dir,
    authority: await writeKeypairFile(dir, "authority", Keypair.generate()),
    treasury: await writeKeypairFile(dir, "treasury", Keypair.generate()),
    shortKey,
    databaseUrl: url.toString(),
    envFile,
  };
  // Only what the case sets: nothing inherited from this process but what node needs to run.
  baseEnv = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    DATABASE_URL: files.databaseUrl,
    SOLANA_RPC_URL: "http://127.0.0.1:9",
    SOLANA_NETWORK: "solana-localnet",
    SOLANA_GENESIS_HASH: Keypair.generate().publicKey.toBase58(),
    PROGRAM_ID: PAYMENT_LEDGER_PROGRAM_ID.toBase58(),
    SETTLEMENT_MINT: Keypair.generate().publicKey.toBase58(),
    LEDGER_AUTHORITY_KEYPAIR: files.authority,
    TREASURY_KEYPAIR: files.treasury,
    WALLET_ENCRYPTION_KEY: WALLET_KEY,
    WEBHOOK_SECRETS_KEY: randomBytes(32).toString("base64"),
    APG_DATA_DIR: join(dir, "state"),
  };
});

afterAll(async () => {
  if (files !== undefined) await rm(files.dir, { recursive: true, force: true });
  if (databaseName !== undefined) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await admin.end();
  }
});

describe("a misconfigured process refuses to start: every problem on one line, exit 2, nothing written", () => {
  it(`covers at least 15 misconfigurations (${CASES.length})`, () => {
    expect(CASES.length).toBeGreaterThanOrEqual(15);
  });

  it("each case", { timeout: 240_000 }, async () => {
    const results = new Map<string, Awaited<ReturnType<typeof run>>>();
    const queue = [...CASES];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          const env: Record<string, string> = { ...baseEnv };
          for (const [name, value] of Object.entries(next.env(files))) {
            if (value === null) delete env[name];
            else env[name] = value;
          }
          const args = (next.args ?? []).map((arg) => (arg === "ENV_FILE" ? files.envFile : arg));
          results.set(next.name, await run(next.entry, args, env));
        }
      }),
    );
    for (const c of CASES) {
      const result = results.get(c.name)!;
      const process_ =
        c.entry === "api/gateway/main.ts"
          ? "gateway"
          : c.entry === "api/query/main.ts"
            ? "query"
            : c.entry === "indexer/cli.ts"
              ? "indexer"
              : "start";
      // Our lines only: a dependency may print its own warning (bigint-buffer's bindings notice).
      const lines = result.stderr.split("\n").filter((line) => line.startsWith(`${process_}: `));
      const expected = c.lines(files);
      expect({ case: c.name, code: result.code }).toEqual({ case: c.name, code: 2 });
      expect(lines, c.name).toEqual([
        ...expected,
        `${process_}: ${expected.length} configuration problem(s); nothing was started (see .env.example, docs/deploy.md)`,
      ]);
      expect(result.stderr, `${c.name}: no stack trace`).not.toMatch(/\n\s+at /);
      expect(result.stdout, c.name).toBe("");
    }
    // The configuration is checked before migrations: the database the processes were given is empty.
    expect(await tablesIn(files.databaseUrl)).toBe(0);
  });
});
