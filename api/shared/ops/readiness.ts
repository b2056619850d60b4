/**
 * Readiness (`GET /readyz`): whether this process should get traffic now. Each check answers
 * within a bound; the answer lists every check, so an operator sees which one is red.
 * - database: the primary answers a query;
 * - rpc: the cluster answers (when the process has one);
 * - program config: the payment_ledger config account exists at the configured program;
 * - indexer lag: the indexer's checkpoint is within `maxIndexerLagSlots` of the cluster.
 */
import { type Connection, PublicKey } from "@solana/web3.js";
import type pg from "pg";
import { configPda } from "../../../programs/payment_ledger/ts/pda.js";
import { indexerSlotLag } from "./metrics.js";

/** About a minute of slots on a public cluster (400 ms each). */
export const DEFAULT_MAX_INDEXER_LAG_SLOTS = 150;
const CHECK_TIMEOUT_MS = 2_000;

export interface ReadinessOptions {
  readonly pool: pg.Pool;
  readonly connection?: Connection;
  readonly programId?: PublicKey;
  readonly maxIndexerLagSlots?: number;
}

export interface Readiness {
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, { readonly ok: boolean; readonly detail: string }>>;
}

function bounded<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

const failure = (error: unknown): { ok: false; detail: string } => ({
  ok: false,
  detail: error instanceof Error ? error.message : String(error),
});

export async function readiness(options: ReadinessOptions): Promise<Readiness> {
  const checks: Record<string, { ok: boolean; detail: string }> = {};
  const work: Promise<void>[] = [
    bounded(options.pool.query("SELECT 1")).then(
      () => void (checks.database = { ok: true, detail: "answers" }),
      (error) => void (checks.database = failure(error)),
    ),
  ];
  const { connection } = options;
  if (connection !== undefined) {
    work.push(
      bounded(connection.getSlot("confirmed")).then(
        (slot) => void (checks.rpc = { ok: true, detail: `slot ${slot}` }),
        (error) => void (checks.rpc = failure(error)),
      ),
    );
    if (options.programId !== undefined) {
      const config = configPda(new PublicKey(options.programId)).address;
      work.push(
        bounded(connection.getAccountInfo(config)).then(
          (account) =>
            void (checks.programConfig =
              account === null ? { ok: false, detail: `no config account ${config.toBase58()}` } : { ok: true, detail: config.toBase58() }),
          (error) => void (checks.programConfig = failure(error)),
        ),
      );
    }
    const bound = options.maxIndexerLagSlots ?? DEFAULT_MAX_INDEXER_LAG_SLOTS;
    work.push(
      bounded(indexerSlotLag(options.pool, connection)).then(
        (lag) =>
          void (checks.indexerLag =
            lag === null
              ? { ok: false, detail: "the indexer has no checkpoint yet" }
              : { ok: lag <= bound, detail: `${lag} slots behind (bound ${bound})` }),
        (error) => void (checks.indexerLag = failure(error)),
      ),
    );
  }
  await Promise.all(work);
  return { ready: Object.values(checks).every((check) => check.ok), checks };
}
