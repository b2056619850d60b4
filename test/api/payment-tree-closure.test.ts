/**
 * paymentTree, two ways of reading the same forest: `loadPaymentTree` (a recursive walk with narrow
 * array rows) against the closure-table loader it replaced (payment_closure, which the projection
 * maintains; bench/api/closure-tree.ts) and the walk with object rows (bench/api/recursive-tree.ts).
 * On random forests projected by the indexer's own projection (random batches, sometimes out of
 * chain order as a backfill of an earlier range after a later one), the answers must be equal, for
 * both accounts (one's agents pay inside the other's trees), every depth bound and node limits
 * below and above the tree's size.
 */
import { createHash } from "node:crypto";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPaymentTree } from "../../api/query/read/payment-tree.js";
import { closureTreeBefore } from "../../bench/api/closure-tree.js";
import { recursiveTree } from "../../bench/api/recursive-tree.js";
import { createAccount } from "../../api/shared/keys.js";
import type { DecodedEvent } from "../../indexer/decode/transaction.js";
import { withTransaction } from "../../indexer/db/database.js";
import { batchInput } from "../../indexer/store/projection-input.js";
import { PROJECTION_TABLES, projectInput } from "../../indexer/store/projections.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { mulberry32 } from "../support/random.js";

const BASE_TIME_S = 1_767_225_600;
const address = (label: string): string => bs58.encode(createHash("sha256").update(label).digest());
const signature = (label: string): string => bs58.encode(createHash("sha512").update(label).digest());

interface Wallet {
  readonly account: "A" | "B";
  readonly address: string;
}

/**
 * A random forest in chain order: each transaction is a top-level payment or names an earlier
 * transaction as its parent; some transactions record two payments (same parent, either payer).
 * Account B's agents pay inside A's trees (a fifth of the payments), and A's inside B's.
 */
function randomForest(seed: number, transactions: number, wallets: readonly Wallet[]): { id: string; event: DecodedEvent }[] {
  const random = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const hashes: string[] = [];
  const events: { id: string; event: DecodedEvent }[] = [];
  for (let t = 0; t < transactions; t += 1) {
    const hash = signature(`tree-closure/${seed}/${t}`);
    // Mostly children of recent transactions (deep chains), some of any earlier one, some roots.
    const roll = random();
    const parent =
      hashes.length === 0 || roll < 0.12
        ? null
        : roll < 0.7
          ? hashes[Math.max(0, hashes.length - 1 - Math.floor(random() * 6))]!
          : pick(hashes);
    const payments = random() < 0.1 ? 2 : 1;
    for (let k = 0; k < payments; k += 1) {
      const payer = random() < 0.8 ? pick(wallets.filter((w) => w.account === "A")) : pick(wallets.filter((w) => w.account === "B"));
      const id = String(events.length + 1);
      events.push({
        id,
        event: {
          signature: hash,
          instructionIndex: k,
          innerIndex: 0,
          ordinal: 0,
          slot: BigInt(1 + t),
          blockTime: BASE_TIME_S + t,
          commitment: "confirmed",
          name: "PaymentRecorded",
          payload: {
            payer: payer.address,
            payee: address(`payee/${t % 5}`),
            mint: address("mint"),
            paymentId: String(t * 2 + k + 1),
            protocol: t % 3 === 0 ? "mpp" : "x402",
            rail: "stablecoin",
            amountUnits: String(1_000 + Math.floor(random() * 1_000_000)),
            endpointHash: "ab".repeat(32),
            parent:
              parent === null
                ? null
                : { parentSignature: parent, invocation: address(`invocation/${parent}`), budgetUnits: "1000000000000" },
            atomic: true,
            settlementReference: null,
            recordedAtSeconds: BASE_TIME_S + t,
          },
          raw: new Uint8Array(),
          source: "inner-instructions",
        } as DecodedEvent,
      });
    }
    hashes.push(hash);
  }
  return events;
}

let db: FreshDatabase;
const accounts: Record<"A" | "B", string> = { A: "", B: "" };
const wallets: Wallet[] = [];

beforeAll(async () => {
  db = await createFreshDatabase();
  for (const account of ["A", "B"] as const) {
    accounts[account] = await createAccount(db.pool, `tree-closure-${account}`);
    for (let i = 0; i < (account === "A" ? 4 : 2); i += 1) {
      const wallet = { account, address: address(`wallet/${account}/${i}`) };
      wallets.push(wallet);
      await db.pool.query("INSERT INTO agents (agent_id, account_id, wallet_address) VALUES ($1, $2, $3)", [
        `${accounts[account]}/agent-${account}${i}`,
        accounts[account],
        wallet.address,
      ]);
    }
  }
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

/** Projects `events` through the indexer's projection, in batches of random size, in `order`. */
async function project(events: readonly { id: string; event: DecodedEvent }[], seed: number, outOfOrder: boolean): Promise<void> {
  await db.pool.query(`TRUNCATE ${PROJECTION_TABLES.join(", ")}`);
  const random = mulberry32(seed * 31);
  const batches: { id: string; event: DecodedEvent }[][] = [];
  for (let start = 0; start < events.length; ) {
    const size = 1 + Math.floor(random() * 60);
    batches.push(events.slice(start, start + size));
    start += size;
  }
  // A backfill of an earlier range after a later one: children projected before their parents.
  if (outOfOrder) batches.reverse();
  for (const batch of batches) {
    await withTransaction(db.pool, (client) => projectInput(client, batchInput(batch), { cluster: "devnet", notify: false }));
  }
}

describe("paymentTree equals the closure-table loader it replaced and the walk with object rows", () => {
  for (const [seed, outOfOrder] of [
    [1, false],
    [2, false],
    [3, true],
    [4, true],
  ] as const) {
    it(`on a random forest (seed ${seed}, batches ${outOfOrder ? "in reverse chain order" : "in chain order"}), every root, both accounts, every bound`, async () => {
      const events = randomForest(seed, 240, wallets);
      await project(events, seed, outOfOrder);
      const deepest = await db.pool.query<{ d: number }>("SELECT max(distance) AS d FROM payment_closure");
      expect(deepest.rows[0]!.d).toBeGreaterThanOrEqual(5);

      const roots = [...new Set(events.map((e) => e.event.signature))];
      let compared = 0;
      let nonTrivial = 0;
      let limited = 0;
      for (const root of roots) {
        for (const account of ["A", "B"] as const) {
          for (const maxDepth of [0, 1, 3, 64]) {
            const full = await loadPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 });
            const reference = await recursiveTree(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 });
            expect(full).toEqual(reference);
            expect(full).toEqual(await closureTreeBefore(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 }));
            compared += 1;
            if (full === null) continue;
            if (full.nodes.length > 2) nonTrivial += 1;
            // Over the node limit: the walk stopped anywhere in the last level it reached, so only
            // the count, depths and flag are the reference's; the closure takes the earliest
            // payments (here the first nodes of the whole tree's order, times follow chain order).
            const nodeLimit = Math.max(1, Math.floor(full.nodes.length / 2));
            if (nodeLimit < full.nodes.length) {
              const cut = await loadPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit });
              const cutReference = await recursiveTree(db.pool, accounts[account], root, { maxDepth, nodeLimit });
              expect(cut!.nodes).toEqual(full.nodes.slice(0, nodeLimit));
              expect(cut).toEqual(await closureTreeBefore(db.pool, accounts[account], root, { maxDepth, nodeLimit }));
              expect(cut!.truncated).toBe(true);
              expect(cutReference!.truncated).toBe(true);
              expect(cut!.nodes.map((n) => n.depth)).toEqual(cutReference!.nodes.map((n) => n.depth));
              limited += 1;
            }
          }
        }
      }
      expect(compared).toBe(roots.length * 8);
      expect(nonTrivial).toBeGreaterThan(50);
      expect(limited).toBeGreaterThan(50);
    }, 120_000);
  }

  it("a payment by another account's agent hides itself and everything below it, whatever lies below", async () => {
    const events = randomForest(5, 120, wallets);
    await project(events, 5, false);
    const hidden = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM payment_closure c JOIN payment_edges e ON e.child_event_id = c.descendant_event_id
       JOIN agents a ON a.wallet_address = e.child_payer WHERE a.account_id = $1 AND c.distance >= 2`,
      [accounts.B],
    );
    expect(Number(hidden.rows[0]!.n)).toBeGreaterThan(0);
    for (const root of new Set(events.map((e) => e.event.signature))) {
      const tree = await loadPaymentTree(db.pool, accounts.A, root, { maxDepth: 64, nodeLimit: 100_000 });
      if (tree === null) continue;
      const seen = new Set(tree.nodes.map((n) => n.txHash));
      const own = new Set(wallets.filter((w) => w.account === "A").map((w) => w.address));
      for (const node of tree.nodes) {
        expect(own.has(node.walletAddress)).toBe(true);
        if (node.depth > 0) expect(seen.has(node.parentTxHash!)).toBe(true);
      }
    }
  });
});
