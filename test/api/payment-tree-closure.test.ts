/**
 * paymentTree, several ways of reading the same forest: `loadPaymentTree` (the closure table's
 * pages, who sees what decided from the parent links) against the recursive walk it falls back to
 * (`walkPaymentTree`), the older closure statement with object rows (bench/api/closure-tree.ts) and
 * the walk with object rows (bench/api/recursive-tree.ts). On random forests projected by the
 * indexer's own projection (random batches, sometimes out of chain order as a backfill of an
 * earlier range after a later one), the answers must be equal, for both accounts (one's agents pay
 * inside the other's trees), every depth bound and node limits below and above the tree's size;
 * then past pages of another account's payments, over the bound where it walks instead, and with
 * the closure rows a rollback leaves behind. Half of each forest is finalized: a node's status
 * comes from its payment, not from its closure row, whether the unfinalized payments are few
 * enough to hash or are probed per node.
 */
import { createHash } from "node:crypto";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closureReadBound, loadPaymentTree, walkPaymentTree } from "../../api/query/read/payment-tree.js";
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
/** An `unfinalizedHashedMax` below a forest's unfinalized payments: statuses read by probe. */
const PROBED_PAST = 8;
const address = (label: string): string => bs58.encode(createHash("sha256").update(label).digest());
const signature = (label: string): string => bs58.encode(createHash("sha512").update(label).digest());

interface Wallet {
  readonly account: "A" | "B";
  readonly address: string;
}

/** The PaymentRecorded event `id` of transaction `t` (its `k`-th payment), paid by `payer`, child of `parent`. */
function paymentEvent(
  id: number,
  hash: string,
  k: number,
  t: number,
  payer: string,
  parent: string | null,
  random: () => number,
): { id: string; event: DecodedEvent } {
  return {
    id: String(id),
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
        payer,
        payee: address(`payee/${t % 5}`),
        mint: address("mint"),
        paymentId: String(t * 2 + k + 1),
        protocol: t % 3 === 0 ? "mpp" : "x402",
        rail: "stablecoin",
        amountUnits: String(1_000 + Math.floor(random() * 1_000_000)),
        endpointHash: "ab".repeat(32),
        parent:
          parent === null ? null : { parentSignature: parent, invocation: address(`invocation/${parent}`), budgetUnits: "1000000000000" },
        atomic: true,
        settlementReference: null,
        recordedAtSeconds: BASE_TIME_S + t,
      },
      raw: new Uint8Array(),
      source: "inner-instructions",
    } as DecodedEvent,
  };
}

/**
 * A random forest in chain order: each transaction is a top-level payment or names an earlier
 * transaction as its parent; some transactions record two payments (same parent, either payer;
 * with `dag`, the second one's parent is sometimes another earlier transaction).
 * Account B's agents pay inside A's trees (a fifth of the payments), and A's inside B's.
 */
function randomForest(
  seed: number,
  transactions: number,
  wallets: readonly Wallet[],
  /** A transaction's second payment sometimes under another parent than its first (a DAG). */
  dag = false,
): { id: string; event: DecodedEvent }[] {
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
      const own = k === 1 && dag && parent !== null && random() < 0.5 ? pick(hashes) : parent;
      events.push(paymentEvent(events.length + 1, hash, k, t, payer.address, own, random));
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
  // Finality up to the middle of the chain, as projectFinality leaves `transactions` (these events
  // are projected from memory, not stored): a node's status must be its payment's either way.
  await db.pool.query("UPDATE transactions SET status = 'finalized' WHERE slot <= $1", [Math.floor(events.length / 2)]);
}

describe("paymentTree equals the walk it replaced and the older loaders", () => {
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
      const statuses = await db.pool.query<{ status: string; n: string }>(
        "SELECT status, count(*) AS n FROM transactions GROUP BY 1 ORDER BY 1",
      );
      expect(statuses.rows.map((r) => r.status)).toEqual(["confirmed", "finalized"]);
      // More unfinalized payments than PROBED_PAST: that read probes the page's instead of hashing them all.
      expect(Number(statuses.rows[0]!.n)).toBeGreaterThan(PROBED_PAST);

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
            expect(full).toEqual(await walkPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 }));
            expect(full).toEqual(await closureTreeBefore(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 }));
            expect(await loadPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit: 100_000 }, PROBED_PAST)).toEqual(full);
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
              expect(await loadPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit }, PROBED_PAST)).toEqual(cut);
              expect(cut).toEqual(await closureTreeBefore(db.pool, accounts[account], root, { maxDepth, nodeLimit }));
              expect(cut).toEqual(await walkPaymentTree(db.pool, accounts[account], root, { maxDepth, nodeLimit }));
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

  it("on random DAGs (a transaction's payments under different parents), every root, both accounts, every bound", async () => {
    let differentParents = 0;
    for (const seed of [7, 8]) {
      const events = randomForest(seed, 240, wallets, true);
      await project(events, seed, seed === 8);
      const split = await db.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM (SELECT tx_hash FROM transactions GROUP BY tx_hash HAVING count(DISTINCT parent_tx_hash) > 1) x",
      );
      differentParents += Number(split.rows[0]!.n);
      for (const root of new Set(events.map((e) => e.event.signature))) {
        for (const account of ["A", "B"] as const) {
          for (const maxDepth of [1, 3, 64]) {
            for (const nodeLimit of [3, 100_000]) {
              const bounds = { maxDepth, nodeLimit };
              const tree = await loadPaymentTree(db.pool, accounts[account], root, bounds);
              expect(tree).toEqual(await walkPaymentTree(db.pool, accounts[account], root, bounds));
              if (nodeLimit > 3) expect(tree).toEqual(await recursiveTree(db.pool, accounts[account], root, bounds));
            }
          }
        }
      }
    }
    expect(differentParents).toBeGreaterThan(5);
  }, 120_000);

  it("a payment by another account's agent hides itself and everything below it, whatever lies below", async () => {
    const events = randomForest(5, 120, wallets);
    await project(events, 5, false);
    const own = await paidByAgentsOf(accounts.A);
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
      for (const node of tree.nodes) {
        expect(own.has(`${node.txHash}/${node.agentId}`)).toBe(true);
        if (node.depth > 0) expect(seen.has(node.parentTxHash!)).toBe(true);
      }
    }
  });
});

/** "txHash/agentId" of every payment an agent of `accountId` paid: what a tree node of its may be. */
async function paidByAgentsOf(accountId: string): Promise<Set<string>> {
  const { rows } = await db.pool.query<{ paid: string }>(
    `SELECT t.tx_hash || '/' || a.public_id AS paid FROM transactions t JOIN agents a ON a.wallet_address = t.agent
     WHERE a.account_id = $1`,
    [accountId],
  );
  return new Set(rows.map((row) => row.paid));
}

/** `db.pool`, counting the statements sent through it: closure pages and walks. */
function countingPool(): { pool: typeof db.pool; pages: () => number; walks: () => number } {
  let pages = 0;
  let walks = 0;
  const pool = new Proxy(db.pool, {
    get(target, property, receiver) {
      if (property !== "query") return Reflect.get(target, property, receiver) as unknown;
      return (query: { text: string }, ...rest: unknown[]) => {
        if (query.text.includes("FROM payment_closure")) pages += 1;
        if (query.text.includes("WITH RECURSIVE")) walks += 1;
        return (target.query as (...a: unknown[]) => unknown)(query, ...rest);
      };
    },
  });
  return { pool, pages: () => pages, walks: () => walks };
}

describe("the closure's pages and the walk it falls back to", () => {
  /**
   * A root paid by A; right under it `foreign` payments by B (each with a child by A, hidden with
   * it), then `own` payments by A, each with two children by A. Closure order puts B's level first.
   */
  function shadowedTree(label: string, foreign: number, own: number): { root: string; events: { id: string; event: DecodedEvent }[] } {
    const random = mulberry32(foreign * 7 + own);
    const a = wallets.filter((w) => w.account === "A");
    const b = wallets.filter((w) => w.account === "B");
    const events: { id: string; event: DecodedEvent }[] = [];
    let t = 0;
    const pay = (payer: Wallet, parent: string | null): string => {
      const hash = signature(`${label}/${t}`);
      events.push(paymentEvent(events.length + 1, hash, 0, t, payer.address, parent, random));
      t += 1;
      return hash;
    };
    const root = pay(a[0]!, null);
    const hidden = Array.from({ length: foreign }, (_, i) => pay(b[i % b.length]!, root));
    for (const parent of hidden) pay(a[1]!, parent);
    const shown = Array.from({ length: own }, (_, i) => pay(a[i % a.length]!, root));
    for (const parent of shown) for (let k = 0; k < 2; k += 1) pay(a[2]!, parent);
    return { root, events };
  }

  it("reads past another account's payments a page at a time, and answers as the walk", async () => {
    const { root, events } = shadowedTree("pages", 150, 40);
    await project(events, 11, false);
    for (const nodeLimit of [1, 5, 39, 41, 120, 100_000]) {
      for (const maxDepth of [0, 1, 2, 64]) {
        const counted = countingPool();
        const tree = await loadPaymentTree(counted.pool, accounts.A, root, { maxDepth, nodeLimit });
        expect(tree).toEqual(await walkPaymentTree(db.pool, accounts.A, root, { maxDepth, nodeLimit }));
        expect(tree).toEqual(await recursiveTree(db.pool, accounts.A, root, { maxDepth, nodeLimit }));
        expect(counted.walks()).toBe(0);
        // 150 of B's payments come first at depth 1: a page of nodeLimit + 65 rows does not pass them.
        if (maxDepth >= 1 && nodeLimit + 1 + 64 < 150) expect(counted.pages()).toBeGreaterThan(1);
      }
    }
    // Pages of 66, 65 and 65 rows end the closure exactly (2 × 98 rows, all hidden): the fourth is empty.
    const exact = shadowedTree("exact", 98, 0);
    await project(exact.events, 13, false);
    const counted = countingPool();
    const alone = await loadPaymentTree(counted.pool, accounts.A, exact.root, { maxDepth: 64, nodeLimit: 1 });
    expect(counted.pages()).toBe(4);
    expect(alone).toEqual(await walkPaymentTree(db.pool, accounts.A, exact.root, { maxDepth: 64, nodeLimit: 1 }));
    expect(alone!.nodes.map((n) => n.txHash)).toEqual([exact.root]);
    // B sees none of it: the root is not its agents' payment.
    expect(await loadPaymentTree(db.pool, accounts.B, exact.root, { maxDepth: 64, nodeLimit: 100 })).toBeNull();
  }, 60_000);

  it("walks instead when the pages are mostly payments the account does not see", async () => {
    const nodeLimit = 4;
    const foreign = closureReadBound(nodeLimit + 1) + 100;
    const { root, events } = shadowedTree("fallback", foreign, 10);
    await project(events, 12, false);
    const counted = countingPool();
    const tree = await loadPaymentTree(counted.pool, accounts.A, root, { maxDepth: 64, nodeLimit });
    expect(counted.walks()).toBe(1);
    expect(tree).toEqual(await walkPaymentTree(db.pool, accounts.A, root, { maxDepth: 64, nodeLimit }));
    expect(tree!.nodes).toHaveLength(nodeLimit);
    expect(tree!.truncated).toBe(true);
    const own = await paidByAgentsOf(accounts.A);
    expect(tree!.nodes.every((node) => own.has(`${node.txHash}/${node.agentId}`))).toBe(true);
  }, 60_000);

  it("a payment rolled back out of the middle of a tree hides what lies below it, though its closure rows stay", async () => {
    const events = randomForest(6, 200, wallets);
    await project(events, 6, false);
    // The rows a rollback of one payment leaves (indexer/store/projections.ts unprojectEvents): its
    // payment, its edge and its own closure rows go; its descendants' closure rows through it stay.
    const middle = await db.pool.query<{ event_id: string; tx_hash: string }>(
      `SELECT t.event_id, t.tx_hash FROM transactions t
       WHERE EXISTS (SELECT 1 FROM payment_edges e WHERE e.parent_tx_hash = t.tx_hash)
         AND NOT EXISTS (SELECT 1 FROM transactions o WHERE o.tx_hash = t.tx_hash AND o.event_id <> t.event_id)
         AND t.parent_tx_hash IS NOT NULL
       ORDER BY t.event_id LIMIT 5`,
    );
    expect(middle.rows).toHaveLength(5);
    const gone = middle.rows.map((r) => r.event_id);
    await db.pool.query("DELETE FROM payment_closure WHERE descendant_event_id = ANY($1::bigint[])", [gone]);
    await db.pool.query("DELETE FROM payment_edges WHERE child_event_id = ANY($1::bigint[])", [gone]);
    await db.pool.query("DELETE FROM transactions WHERE event_id = ANY($1::bigint[])", [gone]);
    const stale = await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM payment_closure WHERE ancestor_tx_hash = ANY($1::text[])", [
      middle.rows.map((r) => r.tx_hash),
    ]);
    expect(Number(stale.rows[0]!.n)).toBeGreaterThan(0);
    let nonTrivial = 0;
    for (const root of new Set(events.map((e) => e.event.signature))) {
      for (const account of ["A", "B"] as const) {
        const tree = await loadPaymentTree(db.pool, accounts[account], root, { maxDepth: 64, nodeLimit: 100_000 });
        expect(tree).toEqual(await walkPaymentTree(db.pool, accounts[account], root, { maxDepth: 64, nodeLimit: 100_000 }));
        if (tree !== null && tree.nodes.length > 2) nonTrivial += 1;
      }
    }
    expect(nonTrivial).toBeGreaterThan(10);
  }, 60_000);
});
