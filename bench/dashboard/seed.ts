/**
 * An account at scale for the dashboard's bench and browser tests: many agents (some with
 * 128-character ids), payments, runs, rejections, daily budgets in every state and failing webhook
 * deliveries.
 *
 * Payments are PaymentRecorded events encoded as the program emits them, then decoded and ingested
 * by the indexer's own path (`decodeRawTransaction`, `ingestBatch`) in batches: the read models are
 * the indexer's, in seconds rather than the half hour the ledger would take. Every 100th payment
 * roots a run (three agents.invoke budgets, three child payments). Rejections, budgets and webhook
 * deliveries go through the gateway's own functions and tables, so their states are the engine's.
 * Endpoints include the maximum lengths (a 253-character domain, a 2,048-character endpoint); block
 * times spread over the last `days` days; a third is MPP.
 */
import { randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { rememberEndpoint } from "../../api/gateway/cosigned/store.js";
import { recordRejection } from "../../api/gateway/payments/rejections.js";
import { internalAgentId } from "../../api/shared/agent-ids.js";
import { registerAgent } from "../../api/shared/keys.js";
import { putPolicy } from "../../api/shared/policy/index.js";
import { reserveWithinPolicy } from "../../api/gateway/reservations/store.js";
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
const discriminatorOf = (name: string): number[] => PAYMENT_LEDGER_IDL.events!.find((e) => e.name === name)!.discriminator;
const PAYMENT_RECORDED = discriminatorOf("PaymentRecorded");
const INVOCATION_OPENED = discriminatorOf("InvocationOpened");
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();
const BATCH = 2_000;
const RUN_EVERY = 100;
const RUN_CHILDREN = 3;
const INVOCATION_BUDGET = 500_000n;
const DOMAINS = ["search.example.com", "llm.example.com", "maps.example.org", "quotes.example.net", "weather.example.io"];

/** The API's maximum agent id length (api/shared/validation.ts parseAgentId). */
export const AGENT_ID_MAX = 128;
/** A domain name of the maximum length (253), of 63-character labels. */
export const LONG_DOMAIN = `${"d".repeat(63)}.${"e".repeat(63)}.${"f".repeat(63)}.${"g".repeat(57)}.example`;
/** An endpoint of the maximum length the API takes (2,048 characters). */
export const LONG_ENDPOINT = `${LONG_DOMAIN}/v1/${"segment-".repeat(300)}`.slice(0, 2048);
export const REASON_CODES = [
  "daily_budget_exceeded",
  "per_call_limit_exceeded",
  "domain_not_allowed",
  "domain_blocked",
  "rate_limit_exceeded",
] as const;

export interface SeedShape {
  readonly payments: number;
  readonly agents: number;
  /** Agents whose id is AGENT_ID_MAX characters long (the first ones). */
  readonly longIds?: number;
  /** Rejected payments, spread over the last day; a tenth of them in the last hour. */
  readonly rejections?: number;
  /** Agents given a daily budget (a third in warning, a third exhausted, a third open). */
  readonly budgets?: number;
  /** Spread of block times back from now. */
  readonly days?: number;
}

export interface Seeded {
  readonly payments: number;
  readonly agentIds: readonly string[];
  readonly longAgentIds: readonly string[];
  readonly runRoots: number;
  readonly ms: number;
}

/** A 128-character id: readable words, then the number that tells it apart (so its end matters). */
export function longAgentId(n: number): string {
  const tail = `-${String(n).padStart(4, "0")}`;
  return `${"orchestrator.research-team.europe-west.".repeat(4)}`.slice(0, AGENT_ID_MAX - tail.length) + tail;
}

function eventData(discriminator: number[], type: string, fields: Record<string, unknown>): Uint8Array {
  return new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...coder.types.encode(type, fields)]);
}

export async function seedScale(pool: pg.Pool, accountId: string, shape: SeedShape): Promise<Seeded> {
  const started = performance.now();
  const longIds = shape.longIds ?? 0;
  const agents = Array.from({ length: shape.agents }, (_, i) => ({
    id: i < longIds ? longAgentId(i) : `agent-${String(i).padStart(4, "0")}`,
    key: Keypair.generate().publicKey,
  }));
  for (let start = 0; start < agents.length; start += 50) {
    await Promise.all(
      agents
        .slice(start, start + 50)
        .map((agent) =>
          registerAgent(pool, accountId, { agentId: internalAgentId(accountId, agent.id), walletAddress: agent.key.toBase58() }),
        ),
    );
  }
  const endpoints = [...DOMAINS.flatMap((domain) => [`${domain}/v1/query`, `${domain}/v2/stream`]), LONG_ENDPOINT, `${LONG_DOMAIN}/v2/x`];
  const hashes = endpoints.map((endpoint) => endpointHash(endpoint));
  for (const [i, endpoint] of endpoints.entries()) {
    await rememberEndpoint(pool, Buffer.from(hashes[i]!).toString("hex"), endpoint, endpoint.slice(0, endpoint.indexOf("/")));
  }

  const payee = Keypair.generate().publicKey;
  const mint = Keypair.generate().publicKey;
  const now = Math.floor(Date.now() / 1000);
  const span = (shape.days ?? 30) * 86_400;
  const firstSecond = now - span;
  const signatures = Array.from({ length: shape.payments }, () => randomBytes(64));
  const payerOf = (i: number): PublicKey => agents[i % agents.length]!.key;
  // The invocation accounts of a run root (one per child), made up as the program's PDAs would be: unique keys.
  const invocations = new Map<number, PublicKey[]>();
  const rootOf = (i: number): number | null => {
    const offset = i % RUN_EVERY;
    return offset >= 1 && offset <= RUN_CHILDREN && i - offset + RUN_CHILDREN < shape.payments ? i - offset : null;
  };
  let runRoots = 0;

  const raw = (i: number): RawTransaction => {
    const blockTime = firstSecond + Math.floor((i * span) / shape.payments);
    const slot = 1 + Math.floor(i / 4);
    const amount = 1_000 + ((i * 7_919) % 99_000);
    const root = rootOf(i);
    let parent: Record<string, unknown> | null = null;
    if (root !== null) {
      parent = {
        invocation: invocations.get(root)![i - root - 1]!,
        parent_signature: Array.from(signatures[root]!),
        budget: new BN(INVOCATION_BUDGET.toString()),
        spent: new BN(amount),
      };
    }
    const events: Uint8Array[] = [
      eventData(PAYMENT_RECORDED, "PaymentRecorded", {
        payer: payerOf(i),
        payee,
        payment_id: new BN(i + 1),
        amount: new BN(amount),
        mint,
        protocol: i % 3 === 0 ? { Mpp: {} } : { X402: {} },
        rail: { Stablecoin: {} },
        endpoint_hash: Array.from(hashes[(i * 7) % hashes.length]!),
        atomic: true,
        settlement_reference: null,
        parent,
        recorded_at: new BN(blockTime),
        slot: new BN(slot),
      }),
    ];
    if (i % RUN_EVERY === 0 && i + RUN_CHILDREN < shape.payments) {
      runRoots += 1;
      const keys = Array.from({ length: RUN_CHILDREN }, () => Keypair.generate().publicKey);
      invocations.set(i, keys);
      for (const [k, invocation] of keys.entries()) {
        events.push(
          eventData(INVOCATION_OPENED, "InvocationOpened", {
            invocation,
            invoker: payerOf(i),
            sub_agent: payerOf(i + k + 1),
            parent_signature: Array.from(signatures[i]!),
            budget: new BN(INVOCATION_BUDGET.toString()),
            opened_at: new BN(blockTime),
            slot: new BN(slot),
          }),
        );
      }
    }
    return {
      signature: bs58.encode(signatures[i]!),
      slot: BigInt(slot),
      blockTime,
      indexInBlock: i % 4,
      commitment: "finalized",
      err: null,
      accountKeys: [payerOf(i).toBase58(), programId, authority],
      instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
      innerInstructions: [{ index: 0, instructions: events.map((data) => ({ programIdIndex: 1, accounts: [2], data, stackHeight: 2 })) }],
      logs: null,
      preTokenBalances: [],
      postTokenBalances: [],
    };
  };
  // Batches are ingested in order, one at a time; the next batch is encoded and decoded while
  // the database writes the previous one.
  let writing: Promise<unknown> = Promise.resolve();
  for (let start = 0; start < shape.payments; start += BATCH) {
    const decoded = Array.from({ length: Math.min(BATCH, shape.payments - start) }, (_, k) =>
      decodeRawTransaction(raw(start + k), PAYMENT_LEDGER_PROGRAM_ID),
    );
    if (decoded.some((d) => d.outcome !== "indexed")) throw new Error("a seeded payment did not decode");
    await writing;
    writing = ingestBatch(
      pool,
      { transactions: decoded, checkpoint: { source: "seed-scale", slot: decoded.at(-1)!.slot, blockhash: null } },
      { cluster: "devnet" },
    );
  }
  await writing;

  // Rejections through the gateway's writer: every reason, on ordinary and long ids and endpoints.
  const rejections = shape.rejections ?? 0;
  for (let start = 0; start < rejections; start += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, rejections - start) }, (_, k) => {
        const n = start + k;
        const reasonCode = REASON_CODES[n % REASON_CODES.length]!;
        const endpoint = n % 7 === 0 ? LONG_ENDPOINT : endpoints[n % 10]!;
        // A tenth in the last hour (five in a row: every reason), the rest over the day before.
        const ageMs = Math.floor(n / 5) % 10 === 0 ? 60_000 + ((n * 9_973) % 3_000_000) : 3_600_000 + ((n * 7_919_000) % 82_800_000);
        return recordRejection(pool, {
          agentId: internalAgentId(accountId, agents[(n * 13) % agents.length]!.id),
          amountUnits: 250_000n + BigInt(n),
          endpoint,
          domain: endpoint.slice(0, endpoint.indexOf("/")),
          protocol: reasonCode.startsWith("domain") ? null : "x402",
          reasonCode,
          reason:
            reasonCode === "rate_limit_exceeded"
              ? `${reasonCode}: requested 61 calls/1h, limit is 60 calls/1h`
              : `${reasonCode}: requested 0.25 USDC, limit is 0.10 USDC`,
          at: new Date(Date.now() - ageMs),
        });
      }),
    );
  }

  // Daily budgets of 10 USDC: reservations of 9 (warning) or 10 (exhausted) USDC, or 1 (open).
  const budgets = Math.min(shape.budgets ?? 0, agents.length);
  const nowDate = new Date();
  for (let n = 0; n < budgets; n += 1) {
    const key = internalAgentId(accountId, agents[n]!.id);
    await putPolicy(pool, key, { dailyBudgetUnits: 10_000_000n }, nowDate);
    const used = n % 3 === 0 ? 9_000_000n : n % 3 === 1 ? 10_000_000n : 1_000_000n;
    const reservation = await reserveWithinPolicy(
      pool,
      key,
      { endpoint: "https://search.example.com/v1/query", amountUnits: used },
      nowDate,
    );
    if (reservation.reservationId === null) throw new Error(`the seeded reservation of ${agents[n]!.id} was refused`);
  }

  // Webhook deliveries the dispatcher failed: two given up on, one being retried.
  await pool.query(
    `WITH endpoint AS (
       INSERT INTO webhook_endpoints (account_id, url, event_types, secret_ciphertext)
       VALUES ($1, 'https://hooks.example.com/apg', '{policy.violation}', '\\x00') RETURNING id),
     events AS (
       INSERT INTO gateway_events (id, account_id, type, payload)
       SELECT 'evt_' || md5(random()::text || g::text), $1, 'policy.violation', '{}'::json FROM generate_series(1, 3) g RETURNING id)
     INSERT INTO event_deliveries (event_id, channel, destination, endpoint_id, secret_ciphertext, status, attempts, last_status, last_error,
                                   next_attempt_at)
     SELECT e.id, 'webhook', 'https://hooks.example.com/apg', (SELECT id FROM endpoint), '\\x00',
            CASE WHEN row_number() OVER () <= 2 THEN 'failed' ELSE 'pending' END, 8, 503, 'HTTP 503 from the receiver',
            now() + interval '6 hours'
     FROM events e`,
    [accountId],
  );

  // Planner statistics for the new rows, as autovacuum gives them after a load like this one.
  await pool.query("ANALYZE");
  const { rows } = await pool.query<{ n: string }>("SELECT count(*)::text AS n FROM transactions");
  if (Number(rows[0]!.n) < shape.payments) throw new Error(`seeded ${rows[0]!.n} payments, expected ${shape.payments}`);
  return {
    payments: shape.payments,
    agentIds: agents.map((a) => a.id),
    longAgentIds: agents.slice(0, longIds).map((a) => a.id),
    runRoots,
    ms: performance.now() - started,
  };
}
