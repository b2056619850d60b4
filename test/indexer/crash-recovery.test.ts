/**
 * The indexer process killed with SIGKILL at random points while it ingests more than 20,000
 * events must, once restarted, hold exactly the read models of a clean run: no event missing,
 * none twice, every projection equal. Real local ledger, real program, real Postgres, the real
 * `indexer run` process.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { homedir } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { join, resolve } from "node:path";
import { PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IngestPipeline } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import { withTransaction } from "../../indexer/db/database.js";
import { projectFinality } from "../../indexer/store/projections.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { mulberry32 } from "../support/random.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { eventKeys, projectionSnapshot, snapshotDifference } from "./read-models.js";
import { pollUntil } from "../support/poll.js";

const PAYMENTS = 20_000;
const KILLS = 20;
const ROOT = resolve(import.meta.dirname, "../..");
const TARGET_DIR = process.env.CARGO_TARGET_DIR ?? join(homedir(), ".cache/agent-payment-gateway/target");
const LEDGER_LOAD = join(TARGET_DIR, "release/ledger-load");

interface LoadSummary {
  readonly payments: number;
  readonly invocations: number;
  readonly lastSlot: number;
}

let localnet: Localnet;
let load: LoadSummary;
let crashed: FreshDatabase;
let clean: FreshDatabase;

function startIndexer(database: FreshDatabase): ChildProcess {
  // One process (node with tsx's loader), so SIGKILL hits the indexer itself: the `tsx` binary
  // would run it in a child that survives the kill.
  return spawn(
    process.execPath,
    ["--import", "tsx", "indexer/cli.ts", "run", "--rpc-url", localnet.rpcUrl, "--program-id", localnet.info.programId.toBase58()],
    {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: database.url },
      // Nobody reads its output: an unread pipe would block the child once full.
      stdio: "ignore",
    },
  );
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => child.once("exit", () => done()));
}

async function eventCount(database: FreshDatabase): Promise<number> {
  const result = await database.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM chain_events");
  return Number(result.rows[0]?.n ?? 0);
}

beforeAll(async () => {
  localnet = await startLocalnet();
  const result = spawnSync(LEDGER_LOAD, ["--ledger-dir", localnet.ledgerDir, "--payments", String(PAYMENTS)], {
    encoding: "utf8",
    timeout: 300_000,
  });
  if (result.status !== 0) throw new Error(`ledger-load failed: ${result.stderr}`);
  load = JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "{}") as LoadSummary;
  [crashed, clean] = await Promise.all([createFreshDatabase(), createFreshDatabase()]);
}, 600_000);

afterAll(async () => {
  await Promise.all([crashed?.drop(), clean?.drop()]);
  await localnet?.stop();
});

describe("indexer crash recovery", () => {
  it("an indexer killed 20 times mid-ingest ends with every event exactly once and the read models of a clean run", async () => {
    // The clean run: one uninterrupted backfill of the same chain into its own database.
    const programId = new PublicKey(localnet.info.programId);
    const source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId });
    const pipeline = new IngestPipeline({ pool: clean.pool, programId, cluster: localnet.rpcUrl, lookup: (s) => source.transaction(s) });
    await pipeline.backfill(source, { fromSlot: 0n, toSlot: BigInt(load.lastSlot) });
    const expected = await eventCount(clean);
    expect(expected).toBeGreaterThanOrEqual(PAYMENTS + load.invocations);

    // The crashing run: SIGKILL at random points, restart, until the store is complete.
    const seed = Number(process.env.CRASH_SEED ?? Date.now() % 2 ** 31);
    // Deterministic pseudo-random delays, so a failing run can be replayed by seed.
    const next = mulberry32(seed);
    const countsAtKill: number[] = [];
    for (let kill = 0; kill < KILLS; kill++) {
      const before = await eventCount(crashed);
      const child = startIndexer(crashed);
      // Start-up (loader, migrations, first RPC page) takes seconds, more on a busy machine: wait
      // for this process's first commit, then kill at a random point of the ingest after it.
      if (before < expected) {
        await pollUntil(async () => (await eventCount(crashed)) !== before, {
          timeoutMs: 120_000,
          intervalMs: 25,
          what: `indexer run #${kill} to commit something (seed ${seed})`,
        });
      }
      await sleep(Math.floor(next() * 1_500)); // a random point of the ingest on purpose: where the kill lands is the test
      child.kill("SIGKILL");
      await exited(child);
      countsAtKill.push(await eventCount(crashed));
    }
    const survivor = startIndexer(crashed);
    // Let the ledger finalize the whole load (32 slots) while the survivor catches up.
    try {
      await pollUntil(async () => (await eventCount(crashed)) >= expected, {
        timeoutMs: 300_000,
        intervalMs: 250,
        what: `the survivor to store all ${expected} events (seed ${seed})`,
      });
    } finally {
      survivor.kill("SIGTERM");
      await exited(survivor);
    }

    const killedMidIngest = countsAtKill.filter((n) => n > 0 && n < expected).length;
    expect(killedMidIngest, `seed ${seed}: counts at each kill ${countsAtKill.join(",")}`).toBeGreaterThanOrEqual(KILLS / 2);

    // No missing and no duplicate event: the same natural keys, each once.
    const [crashedKeys, cleanKeys] = await Promise.all([eventKeys(crashed.pool), eventKeys(clean.pool)]);
    expect(crashedKeys.length, `seed ${seed}`).toBe(expected);
    expect(new Set(crashedKeys).size).toBe(crashedKeys.length);
    expect(crashedKeys).toEqual(cleanKeys);

    // Finality is the chain's, not the run's: bring both to the ledger's finalized slot first
    // (the live run finalizes as it goes, the clean backfill never does).
    const finalized = await source.currentSlot("finalized");
    expect(finalized).toBeGreaterThanOrEqual(BigInt(load.lastSlot));
    for (const database of [crashed, clean]) {
      await withTransaction(database.pool, (client) => projectFinality(client, finalized));
    }

    // Every projection equals the clean run's (event ids are per database, so compared without
    // them), and equals a rebuild from its own event store.
    expect(
      snapshotDifference(
        await projectionSnapshot(crashed.pool, { portable: true }),
        await projectionSnapshot(clean.pool, { portable: true }),
      ),
      `seed ${seed}`,
    ).toEqual({});
    const crashedModels = await projectionSnapshot(crashed.pool);
    await withTransaction(crashed.pool, (client) => rebuildProjections(client, { cluster: localnet.rpcUrl }));
    expect(snapshotDifference(await projectionSnapshot(crashed.pool), crashedModels), `seed ${seed}: rebuild`).toEqual({});
  }, 900_000);
});
