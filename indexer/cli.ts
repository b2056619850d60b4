/**
 * indexer CLI (tsx indexer/cli.ts <command>):
 *   run                                 follow the chain live from the stored checkpoint
 *   backfill --from-slot N [--to-slot M] ingest a slot range
 *   rebuild                             rebuild every projection from the event store
 *   verify --from-slot N [--to-slot M]  compare Postgres with the chain; exit 1 on any difference
 * Options (each overrides its variable): --rpc-url (SOLANA_RPC_URL, required), --program-id
 * (PROGRAM_ID, required), --yellowstone-endpoint
 * (YELLOWSTONE_ENDPOINT; `run` then follows that gRPC feed, with the RPC source as fallback for
 * what it cannot replay) and --x-token (YELLOWSTONE_X_TOKEN), --cluster (EXPLORER_CLUSTER:
 * mainnet-beta | devnet | testnet | a custom RPC URL; default the RPC URL), --env-file PATH;
 * DATABASE_URL (required) for Postgres. The configuration is checked first (indexer/config: a
 * refused one exits 2 with one line per problem), then migrations are applied.
 */
import { parseArgs } from "node:util";
import { Connection } from "@solana/web3.js";
import { pino } from "pino";
import { configSource, indexerConfig, refuse } from "./config/index.js";
import { indexerPreflight } from "./config/preflight.js";
import { createPool, withTransaction } from "./db/database.js";
import { migrate } from "./db/migrate.js";
import { IngestPipeline } from "./pipeline.js";
import { RpcSource } from "./sources/rpc.js";
import { YellowstoneSource } from "./sources/yellowstone.js";
import { claimChain } from "./store/chain-identity.js";
import { rebuildProjections } from "./store/rebuild.js";
import { verifyChainAgainstStore, verifyProjections } from "./verify.js";

const USAGE = "usage: indexer <run | backfill --from-slot N [--to-slot M] | rebuild | verify --from-slot N [--to-slot M]>";

function slotArg(value: string | undefined, name: string): bigint | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new Error(`--${name} must be a slot number, got ${value}`);
  return BigInt(value);
}

export async function main(commandLine: readonly string[]): Promise<number> {
  const source = configSource(commandLine);
  if ("problems" in source) refuse("indexer", source.problems);
  const { positionals, values } = parseArgs({
    args: [...source.argv],
    allowPositionals: true,
    options: {
      "from-slot": { type: "string" },
      "to-slot": { type: "string" },
      "rpc-url": { type: "string" },
      "program-id": { type: "string" },
      cluster: { type: "string" },
      "yellowstone-endpoint": { type: "string" },
      "x-token": { type: "string" },
    },
  });
  const command = positionals[0];
  const flags: Record<string, string | undefined> = {
    SOLANA_RPC_URL: values["rpc-url"],
    PROGRAM_ID: values["program-id"],
    EXPLORER_CLUSTER: values.cluster,
    YELLOWSTONE_ENDPOINT: values["yellowstone-endpoint"],
    YELLOWSTONE_X_TOKEN: values["x-token"],
  };
  const given = Object.fromEntries(Object.entries(flags).filter((entry) => entry[1] !== undefined));
  const loaded = indexerConfig({ ...source.env, ...given });
  if (!loaded.ok) refuse("indexer", loaded.problems);
  const { rpcUrl, programId, explorerCluster: cluster, yellowstone } = loaded.config;
  const logger = pino({ name: "indexer", level: loaded.config.logLevel }, pino.destination(2));
  // Following the chain needs it reachable and the program there: checked before any write.
  if (command === "run" || command === "backfill") {
    const checked = await indexerPreflight(rpcUrl, programId);
    if (checked.problems.length > 0) refuse("indexer", checked.problems);
  }
  const pool = createPool(loaded.config.databaseUrl);
  try {
    await migrate(pool);
    const rpc = new RpcSource({ rpcUrl, programId });
    const pipeline = new IngestPipeline({
      pool,
      programId,
      cluster,
      logger,
      lookup: (signature) => rpc.transaction(signature),
    });
    const progress = (p: { transactions: number; events: number; slot: bigint }): void =>
      logger.info({ transactions: p.transactions, events: p.events, slot: p.slot.toString() }, "progress");

    // A database holds one chain's history: refuse to add another's (indexer/store/chain-identity.ts).
    if (command === "run" || command === "backfill") await claimChain(pool, await new Connection(rpcUrl, "confirmed").getGenesisHash());
    switch (command) {
      case "run": {
        const controller = new AbortController();
        process.once("SIGINT", () => controller.abort());
        process.once("SIGTERM", () => controller.abort());
        if (yellowstone === undefined) {
          await pipeline.run(rpc, controller.signal, progress);
          return 0;
        }
        const { endpoint, xToken } = yellowstone;
        const live = new YellowstoneSource({ endpoint, programId: programId.toBase58(), ...(xToken === undefined ? {} : { xToken }) });
        await pipeline.run(live, controller.signal, progress, { fallback: rpc });
        return 0;
      }
      case "backfill": {
        const fromSlot = slotArg(values["from-slot"], "from-slot") ?? 0n;
        const toSlot = slotArg(values["to-slot"], "to-slot");
        const done = await pipeline.backfill(rpc, { fromSlot, ...(toSlot === undefined ? {} : { toSlot }) }, progress);
        logger.info({ transactions: done.transactions, events: done.events }, "backfill done");
        return 0;
      }
      case "rebuild": {
        const replayed = await withTransaction(pool, (client) =>
          rebuildProjections(client, { cluster }, (p) => logger.info(p, "rebuild progress")),
        );
        logger.info({ events: replayed }, "rebuild done");
        return 0;
      }
      case "verify": {
        const fromSlot = slotArg(values["from-slot"], "from-slot") ?? 0n;
        const toSlot = slotArg(values["to-slot"], "to-slot") ?? (await rpc.currentSlot("confirmed"));
        const differences = [
          ...(await verifyChainAgainstStore(pool, rpc, pipeline, { fromSlot, toSlot }, (n) =>
            logger.info({ transactions: n }, "verify progress"),
          )),
          ...(await verifyProjections(pool, { cluster })),
        ];
        for (const d of differences) process.stdout.write(`${d.kind}\t${d.where}\t${d.detail}\n`);
        process.stdout.write(
          `verify slots ${fromSlot}..${toSlot}: ${differences.length === 0 ? "no differences" : `${differences.length} difference(s)`}\n`,
        );
        return differences.length === 0 ? 0 : 1;
      }
      default:
        process.stderr.write(`${USAGE}\n`);
        return 2;
    }
  } finally {
    await pool.end();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`indexer: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
