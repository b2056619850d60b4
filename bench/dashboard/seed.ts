/**
 * 100,000 payments in the index for the dashboard bench, through the indexer's real path: each is
 * a PaymentRecorded event encoded by the IDL coder as the program emits it (emit_cpi! inner
 * instruction, as bench/indexer/synthetic.ts does), decoded by `decodeRawTransaction` and written
 * by `ingestBatch` (event store, every projection, checkpoint) in batches. Recording them on the
 * local ledger one by one would take about half an hour here.
 *
 * The payers are wallets registered as agents of one account (so the API shows them), the
 * endpoints are registered in `endpoints` with their domains (as the gateway does when it
 * settles), block times are spread evenly over the last 30 days, a third is MPP.
 * Deterministic apart from signatures (random, like real ones).
 */
import { randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { rememberEndpoint } from "../../api/gateway/cosigned/store.js";
import { internalAgentId } from "../../api/shared/agent-ids.js";
import { registerAgent } from "../../api/shared/keys.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import { ingestBatch } from "../../indexer/store/ingest.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import {
  EVENT_IX_TAG,
  endpointHash,
  eventAuthorityPda,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const discriminator = PAYMENT_LEDGER_IDL.events!.find((e) => e.name === "PaymentRecorded")!.discriminator;
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda().address.toBase58();
const BATCH = 2_000;
const SPAN_SECONDS = 30 * 86_400;
const DOMAINS = ["search.example.com", "llm.example.com", "maps.example.org", "quotes.example.net", "weather.example.io"];

export interface SeedShape {
  readonly payments: number;
  readonly agents: number;
}

export interface Seeded {
  readonly payments: number;
  readonly agentIds: readonly string[];
  readonly ms: number;
}

export async function seedPayments(pool: pg.Pool, accountId: string, shape: SeedShape): Promise<Seeded> {
  const started = performance.now();
  const agents = Array.from({ length: shape.agents }, (_, i) => ({
    id: `seeded-${String(i).padStart(2, "0")}`,
    key: Keypair.generate().publicKey,
  }));
  for (const agent of agents) {
    await registerAgent(pool, accountId, { agentId: internalAgentId(accountId, agent.id), walletAddress: agent.key.toBase58() });
  }
  const endpoints = DOMAINS.flatMap((domain) => [`${domain}/v1/query`, `${domain}/v2/stream`]);
  const hashes = endpoints.map((endpoint) => endpointHash(endpoint));
  for (const [i, endpoint] of endpoints.entries()) {
    await rememberEndpoint(pool, Buffer.from(hashes[i]!).toString("hex"), endpoint, endpoint.slice(0, endpoint.indexOf("/")));
  }
  const payee = Keypair.generate().publicKey;
  const mint = Keypair.generate().publicKey;
  const now = Math.floor(Date.now() / 1000);
  const firstSecond = now - SPAN_SECONDS;
  const raw = (i: number): RawTransaction => {
    const blockTime = firstSecond + Math.floor((i * SPAN_SECONDS) / shape.payments);
    const slot = 1 + Math.floor(i / 4);
    const body = coder.types.encode("PaymentRecorded", {
      payer: agents[i % agents.length]!.key,
      payee,
      payment_id: new BN(i + 1),
      amount: new BN(1_000 + ((i * 7_919) % 99_000)),
      mint,
      protocol: i % 3 === 0 ? { Mpp: {} } : { X402: {} },
      rail: { Stablecoin: {} },
      endpoint_hash: Array.from(hashes[(i * 7) % hashes.length]!),
      atomic: true,
      settlement_reference: null,
      parent: null,
      recorded_at: new BN(blockTime),
      slot: new BN(slot),
    });
    return {
      signature: bs58.encode(randomBytes(64)),
      slot: BigInt(slot),
      blockTime,
      indexInBlock: i % 4,
      commitment: "finalized",
      err: null,
      accountKeys: [agents[0]!.key.toBase58(), programId, authority],
      instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
      innerInstructions: [
        {
          index: 0,
          instructions: [
            { programIdIndex: 1, accounts: [2], data: new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...body]), stackHeight: 2 },
          ],
        },
      ],
      logs: null,
      preTokenBalances: [],
      postTokenBalances: [],
    };
  };
  for (let start = 0; start < shape.payments; start += BATCH) {
    const decoded = Array.from({ length: Math.min(BATCH, shape.payments - start) }, (_, k) => decodeRawTransaction(raw(start + k)));
    if (decoded.some((d) => d.outcome !== "indexed")) throw new Error("a seeded payment did not decode");
    await ingestBatch(
      pool,
      { transactions: decoded, checkpoint: { source: "bench-dashboard-seed", slot: decoded.at(-1)!.slot, blockhash: null } },
      {
        cluster: "devnet",
      },
    );
  }
  // Planner statistics for the new rows, as autovacuum gives them after a load like this one.
  await pool.query("ANALYZE");
  const { rows } = await pool.query<{ n: string }>("SELECT count(*)::text AS n FROM transactions");
  if (Number(rows[0]!.n) < shape.payments) throw new Error(`seeded ${rows[0]!.n} payments, expected ${shape.payments}`);
  return { payments: shape.payments, agentIds: agents.map((a) => a.id), ms: performance.now() - started };
}
