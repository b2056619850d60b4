/**
 * The set-based projections against themselves by another path: random histories (payment trees
 * under invocations, invocations opened before and after their payments, several events per
 * transaction, unknown block times, settlement references verified and not, finality, a dead
 * slot) ingested in random batches from memory must leave exactly the read models a rebuild from
 * the event store produces, and the live feed must have been told of every payment once.
 * No ledger needed: transactions are encoded by the IDL coder, as the program emits them.
 */
import { randomBytes } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair, type PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { withTransaction } from "../../indexer/db/database.js";
import type { SettlementTransfer } from "../../indexer/decode/settlement.js";
import { decodeRawTransaction } from "../../indexer/decode/transaction.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { ingestBatch, LEDGER_TRANSACTIONS_CHANNEL } from "../../indexer/store/ingest.js";
import { projectEvents } from "../../indexer/store/projections.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { EVENT_IX_TAG, eventAuthorityPda, PAYMENT_LEDGER_IDL, PAYMENT_LEDGER_PROGRAM_ID } from "../../programs/payment_ledger/ts/index.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { projectionSnapshot, snapshotDifference } from "./read-models.js";
import { mulberry32 } from "../support/random.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
const authority = eventAuthorityPda(PAYMENT_LEDGER_PROGRAM_ID).address.toBase58();
const options = { cluster: "devnet" };

function eventData(name: string, fields: Record<string, unknown>): Uint8Array {
  const discriminator = PAYMENT_LEDGER_IDL.events!.find((event) => event.name === name)!.discriminator;
  return new Uint8Array([...EVENT_IX_TAG, ...discriminator, ...coder.types.encode(name, fields)]);
}

interface Invocation {
  readonly key: PublicKey;
  /** The only payer under the invocation: the program checks it. */
  readonly subAgent: PublicKey;
  readonly parentSignature: Uint8Array;
  readonly budget: number;
  spent: number;
  opened: boolean;
}

interface History {
  readonly transactions: RawTransaction[];
  readonly settlements: SettlementTransfer[];
  readonly payments: number;
}

/** A random history: trees of payments under invocations, opened in the same stream or not. */
function randomHistory(seed: number, size: number): History {
  const random = mulberry32(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const agents = Array.from({ length: 6 }, () => Keypair.generate().publicKey);
  const mint = Keypair.generate().publicKey;
  const signatures: Uint8Array[] = [];
  const invocations: Invocation[] = [];
  const transactions: RawTransaction[] = [];
  const settlements: SettlementTransfer[] = [];
  let payments = 0;
  const baseTime = 1_767_225_600;
  for (let i = 0; i < size; i += 1) {
    const slot = 1 + Math.floor(i / 3);
    const signature = Uint8Array.from(randomBytes(64));
    const events: Uint8Array[] = [];
    // Sometimes open an invocation under an earlier payment (its parent).
    if (signatures.length > 0 && int(6) === 0) {
      const invocation: Invocation = {
        key: Keypair.generate().publicKey,
        subAgent: agents[int(agents.length)]!,
        parentSignature: signatures[int(signatures.length)]!,
        budget: 1_000_000,
        spent: 0,
        opened: int(4) !== 0,
      };
      invocations.push(invocation);
      if (invocation.opened) {
        events.push(
          eventData("InvocationOpened", {
            invocation: invocation.key,
            invoker: agents[int(agents.length)],
            sub_agent: invocation.subAgent,
            parent_signature: Array.from(invocation.parentSignature),
            budget: new BN(invocation.budget),
            opened_at: new BN(baseTime + i),
            slot: new BN(slot),
          }),
        );
      }
    }
    for (let k = 1 + int(3); k > 0; k -= 1) {
      const under = invocations.length > 0 && int(2) === 0 ? invocations[int(invocations.length)]! : null;
      const payer = under?.subAgent ?? agents[int(agents.length)]!;
      const payee = agents[int(agents.length)]!;
      const amount = 1 + int(5_000);
      if (under !== null) under.spent += amount;
      const settled = int(8) === 0 ? Uint8Array.from(randomBytes(64)) : null;
      if (settled !== null) {
        const verified = int(2) === 0;
        settlements.push({
          signature: bs58.encode(settled),
          slot: BigInt(slot),
          failed: false,
          transfer: {
            sourceOwner: payer.toBase58(),
            destinationOwner: payee.toBase58(),
            authority: payer.toBase58(),
            mint: mint.toBase58(),
            amountUnits: BigInt(verified ? amount : amount + 1),
            decimals: 6,
          },
        });
      }
      payments += 1;
      events.push(
        eventData("PaymentRecorded", {
          payer,
          payee,
          payment_id: new BN(i * 4 + k),
          amount: new BN(amount),
          mint,
          protocol: int(3) === 0 ? { Mpp: {} } : { X402: {} },
          rail: { Stablecoin: {} },
          endpoint_hash: Array.from({ length: 32 }, (_, j) => (int(4) * 31 + j) & 0xff),
          atomic: settled === null,
          settlement_reference: settled === null ? null : Array.from(settled),
          parent:
            under === null
              ? null
              : {
                  invocation: under.key,
                  parent_signature: Array.from(under.parentSignature),
                  budget: new BN(under.budget),
                  spent: new BN(under.spent),
                },
          recorded_at: new BN(baseTime + i * 7),
          slot: new BN(slot),
        }),
      );
    }
    signatures.push(signature);
    transactions.push({
      signature: bs58.encode(signature),
      slot: BigInt(slot),
      blockTime: int(5) === 0 ? null : baseTime + i * 7 + 1,
      indexInBlock: i % 3,
      commitment: "confirmed",
      err: null,
      accountKeys: [agents[0]!.toBase58(), programId, authority],
      instructions: [{ programIdIndex: 1, accounts: [0], data: new Uint8Array([1]), stackHeight: 1 }],
      innerInstructions: [{ index: 0, instructions: events.map((data) => ({ programIdIndex: 1, accounts: [2], data, stackHeight: 2 })) }],
      logs: null,
      preTokenBalances: [],
      postTokenBalances: [],
    });
  }
  return { transactions, settlements, payments };
}

describe("projections written from memory equal a rebuild from the event store", () => {
  let db: FreshDatabase;
  beforeAll(async () => {
    db = await createFreshDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  for (const seed of [1, 2, 3]) {
    it(`a random history (seed ${seed}) ingested in random batches leaves what a rebuild leaves`, async () => {
      await db.pool.query("TRUNCATE chain_events, chain_transactions_seen, settlement_transfers, checkpoints");
      await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      const history = randomHistory(seed, 600);
      const decoded = history.transactions.map((tx) => decodeRawTransaction(tx, PAYMENT_LEDGER_PROGRAM_ID));
      expect(decoded.every((d) => d.outcome === "indexed")).toBe(true);

      const listener = await db.pool.connect();
      const notified: string[] = [];
      listener.on("notification", (message) => notified.push(JSON.parse(message.payload!).txHash));
      await listener.query(`LISTEN ${LEDGER_TRANSACTIONS_CHANNEL}`);
      try {
        const random = mulberry32(seed * 7);
        await ingestBatch(db.pool, { transactions: [], settlements: history.settlements }, options);
        for (let start = 0; start < decoded.length; ) {
          const size = 1 + Math.floor(random() * 120);
          const chunk = decoded.slice(start, start + size);
          // An overlap with the previous batch, as a resumed source re-reads: absorbed by the event key.
          const overlap = start > 0 && random() < 0.3 ? decoded.slice(Math.max(0, start - 5), start) : [];
          await ingestBatch(db.pool, { transactions: [...overlap, ...chunk], finalizedSlot: chunk[0]!.slot - 3n }, options);
          start += size;
        }
        // A slot that died after it was ingested.
        const dead = decoded.at(-2)!.slot;
        await ingestBatch(db.pool, { transactions: [], deadSlots: [dead] }, options);
        await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        await listener.query(`UNLISTEN ${LEDGER_TRANSACTIONS_CHANNEL}`);
        listener.release();
      }

      const incremental = await projectionSnapshot(db.pool);
      const paymentsLeft = Number((await db.pool.query("SELECT count(*) AS n FROM transactions")).rows[0].n);
      const edges = Number((await db.pool.query("SELECT count(*) AS n FROM payment_edges")).rows[0].n);
      const verified = Number(
        (await db.pool.query("SELECT count(*) AS n FROM transactions WHERE settlement_status = 'verified'")).rows[0].n,
      );
      expect(paymentsLeft).toBeGreaterThan(history.payments * 0.9);
      expect(edges).toBeGreaterThan(0);
      expect(verified).toBeGreaterThan(0);
      // The closure is every (ancestor, distance, payment) a walk up the edges finds, nothing else,
      // some of it deeper than one level, and nothing of the dead slot's payments is left in it.
      expect(await closureMinusWalk(db.pool)).toEqual({ missing: "0", extra: "0" });
      const deep = await db.pool.query("SELECT count(*) AS n FROM payment_closure WHERE distance >= 2");
      expect(Number(deep.rows[0].n)).toBeGreaterThan(0);
      const deadLeft = await db.pool.query(
        `SELECT count(*) AS n FROM payment_closure c WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.event_id = c.descendant_event_id)`,
      );
      expect(deadLeft.rows[0].n).toBe("0");
      // Every payment ingested was announced once (the dead slot's too: they were live). Postgres
      // folds identical payloads of one transaction: one per transaction and payer.
      const announced = new Set(
        decoded.flatMap((d) => d.events.filter((e) => e.name === "PaymentRecorded").map((e) => `${d.signature}/${e.payload.payer}`)),
      );
      expect(notified.length).toBe(announced.size);
      expect(new Set(notified)).toEqual(new Set([...announced].map((k) => k.split("/")[0])));

      await withTransaction(db.pool, (client) => rebuildProjections(client, options));
      const rebuilt = await projectionSnapshot(db.pool);
      expect(snapshotDifference(incremental, rebuilt)).toEqual({});
    });
  }

  it("a dead slot's payments leave the closure with their edges, and their ancestors' other rows stay", async () => {
    const slot = await db.pool.query<{ slot: string; n: string }>(
      `SELECT t.slot::text AS slot, count(*) AS n FROM payment_closure c JOIN transactions t ON t.event_id = c.descendant_event_id
       JOIN chain_events e ON e.id = t.event_id WHERE NOT e.finalized GROUP BY t.slot ORDER BY t.slot DESC LIMIT 1`,
    );
    expect(slot.rows.length).toBe(1);
    const dying = slot.rows[0]!.slot;
    const before = Number((await db.pool.query("SELECT count(*) AS n FROM payment_closure")).rows[0].n);
    await ingestBatch(db.pool, { transactions: [], deadSlots: [BigInt(dying)] }, options);
    const after = Number((await db.pool.query("SELECT count(*) AS n FROM payment_closure")).rows[0].n);
    expect(before - after).toBeGreaterThanOrEqual(Number(slot.rows[0]!.n));
    const left = await db.pool.query(
      "SELECT count(*) AS n FROM payment_closure c WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.event_id = c.descendant_event_id)",
    );
    expect(left.rows[0].n).toBe("0");
    expect(await closureMinusWalk(db.pool)).toEqual({ missing: "0", extra: "0" });
  });

  it("projecting stored events by id gives the rows ingest wrote", async () => {
    const before = await projectionSnapshot(db.pool);
    const sample = await db.pool.query<{ event_id: string }>("SELECT event_id FROM transactions ORDER BY event_id DESC LIMIT 50");
    const ids = sample.rows.map((r) => r.event_id).reverse();
    expect(ids.length).toBe(50);
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("CREATE TEMP TABLE kept ON COMMIT DROP AS SELECT * FROM transactions WHERE event_id = ANY($1::bigint[])", [ids]);
      await client.query("DELETE FROM payment_edges WHERE child_event_id = ANY($1::bigint[])", [ids]);
      await client.query("DELETE FROM transactions WHERE event_id = ANY($1::bigint[])", [ids]);
      await projectEvents(client, ids, options);
      const differing = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM ((TABLE kept EXCEPT SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]))
                                   UNION ALL (SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]) EXCEPT TABLE kept)) d`,
        [ids],
      );
      expect(differing.rows[0]!.n).toBe("0");
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
    expect(await projectionSnapshot(db.pool)).toEqual(before);
  });
});

/** payment_closure against a recursive walk up payment_edges (the definition): rows only one side has. */
async function closureMinusWalk(pool: pg.Pool): Promise<{ missing: string; extra: string }> {
  const result = await pool.query<{ missing: string; extra: string }>(
    `WITH RECURSIVE up (descendant_event_id, ancestor_tx_hash, distance) AS (
       SELECT child_event_id, parent_tx_hash, 1 FROM payment_edges
       UNION
       SELECT u.descendant_event_id, e.parent_tx_hash, u.distance + 1
       FROM up u JOIN payment_edges e ON e.child_tx_hash = u.ancestor_tx_hash WHERE u.distance < 1024),
     walked AS (SELECT ancestor_tx_hash, distance, descendant_event_id FROM up),
     closure AS (SELECT ancestor_tx_hash, distance, descendant_event_id FROM payment_closure)
     SELECT (SELECT count(*) FROM (TABLE walked EXCEPT TABLE closure) m)::text AS missing,
            (SELECT count(*) FROM (TABLE closure EXCEPT TABLE walked) x)::text AS extra`,
  );
  return result.rows[0]!;
}
