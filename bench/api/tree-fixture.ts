/**
 * The chain the paymentTree bench reads: one 10,000-node payment tree of depth 10 paid by one
 * account's agents (plus a branch paid by another account's agent, which the account must not
 * see), buried among ~100,000 unrelated payments (small trees and top-level payments of this and
 * other accounts), so the tree query has to use its indexes to be fast.
 *
 * Rows go straight into `chain_events`, `transactions`, `payment_edges` and `payment_closure` (one unnest INSERT per
 * table and chunk): going through the decoder and `projectEvents` would take minutes on this
 * machine. They are what the indexer writes, and the seed proves it: a sample of events is
 * checked against the IDL coder and the decoder's `eventPayload`, and a sample of projected rows
 * is deleted and re-projected by the indexer's own `projectEvents` (then rolled back), which must
 * give back the same rows, depths and closure rows included.
 * Deterministic: addresses and signatures are hashes of labels; structure comes from a seeded PRNG.
 */
import { createHash } from "node:crypto";
import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { PublicKey } from "@solana/web3.js";
import bs58 from "bs58";
import type pg from "pg";
import { createAccount } from "../../api/shared/keys.js";
import { type EventPayload, eventPayload } from "../../indexer/decode/payload.js";
import { withTransaction } from "../../indexer/db/database.js";
import {
  CLOSURE_NODE_COLUMNS,
  closureNodeColumnsOf,
  explorerSuffix,
  projectEvents,
  projectFinality,
} from "../../indexer/store/projections.js";
import { mulberry32 } from "../../test/support/random.js";
import { decodeEventInstructionData, EVENT_IX_TAG, endpointHash, PAYMENT_LEDGER_IDL } from "../../programs/payment_ledger/ts/index.js";

export interface FixtureShape {
  /** Nodes of the benchmarked tree the account sees, root included. */
  readonly treeNodes: number;
  /** Depth of the deepest level (the root is depth 0). */
  readonly treeDepth: number;
  /** Payments of the branch under the tree paid by another account's agent (hidden from the account). */
  readonly foreignBranch: number;
  /** Unrelated payments around the tree. */
  readonly backgroundPayments: number;
  readonly accounts: number;
  readonly agentsPerAccount: number;
}

/** What the account must see of the tree: the expected answer of both resolvers. */
export interface ExpectedNode {
  readonly parentTxHash: string | null;
  readonly depth: number;
  readonly agentId: string;
  readonly amountUnits: bigint;
}

export interface Fixture {
  /** accounts.id of the account the tree belongs to. */
  readonly accountId: string;
  readonly rootTxHash: string;
  readonly expected: ReadonlyMap<string, ExpectedNode>;
  readonly expectedTotals: { readonly amountUnits: bigint; readonly transactionCount: number; readonly agentCount: number };
  readonly payments: number;
  readonly edges: number;
  readonly seedMs: number;
}

interface Wallet {
  readonly agentId: string;
  readonly account: number;
  readonly bytes: Uint8Array;
  readonly address: string;
}

interface Payment {
  readonly signature: Uint8Array;
  readonly txHash: string;
  readonly payer: Wallet;
  readonly amountUnits: bigint;
  readonly parent: Payment | null;
  /** Depth below the top-level payment of its tree (what payment_edges.depth holds). */
  readonly depth: number;
  /** The invocation this payment opened for its children (an address), made on first use. */
  invocation?: { readonly bytes: Uint8Array; readonly address: string };
}

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const discriminator = Uint8Array.from(PAYMENT_LEDGER_IDL.events!.find((e) => e.name === "PaymentRecorded")!.discriminator);
const BASE_TIME_S = 1_767_225_600;
const BUDGET_UNITS = 1_000_000_000_000n;
const CLUSTER = "devnet";
const EXPLORER_TX = "https://explorer.solana.com/tx/";
/** Payments per seed transaction. */
const SEED_CHUNK = 10_000;
/** Every this many synthetic events, one is checked against the IDL coder and the decoder. */
const CHECK_EVERY = 499;
/** Every this many payments, one is re-projected by `projectEvents` and compared. */
const REPROJECT_EVERY = 101;
/** Slots behind the newest that are not yet final (Solana finalizes about 32 slots behind). */
const FINALITY_LAG_SLOTS = 32;

const digest = (algorithm: "sha256" | "sha512", label: string): Buffer => createHash(algorithm).update(label).digest();

const levelSizesMemo = new Map<string, number[]>();

/** Level sizes 1, b, b^2, ... (rounded) summing to exactly `nodes` over `depth + 1` levels. */
export function levelSizes(nodes: number, depth: number): number[] {
  const key = `${nodes}/${depth}`;
  const known = levelSizesMemo.get(key);
  if (known !== undefined) return known;
  if (nodes < depth + 1) throw new RangeError(`${nodes} nodes cannot reach depth ${depth}`);
  const total = (b: number): number => Array.from({ length: depth + 1 }, (_, k) => b ** k).reduce((s, n) => s + n, 0);
  let low = 1;
  let high = nodes;
  for (let i = 0; i < 100; i += 1) {
    const mid = (low + high) / 2;
    if (total(mid) < nodes) low = mid;
    else high = mid;
  }
  const sizes = Array.from({ length: depth + 1 }, (_, k) => Math.max(1, Math.round(low ** k)));
  sizes[0] = 1;
  sizes[depth] = nodes - sizes.slice(0, depth).reduce((s, n) => s + n, 0);
  if (sizes[depth]! < 1) throw new RangeError(`level sizes ${sizes.join(",")} do not fit ${nodes} nodes`);
  levelSizesMemo.set(key, sizes);
  return sizes;
}

/**
 * One tree in BFS order (parents before children, as the chain records them). Parents are picked
 * at random on the level above, so fan-out varies and some mid-level payments are leaves.
 * `under`: the payment the tree's first payment is made under (a branch of another tree).
 */
function buildTree(
  label: string,
  sizes: readonly number[],
  payers: readonly Wallet[],
  next: () => number,
  under: Payment | null = null,
): Payment[] {
  const payments: Payment[] = [];
  let previous: Payment[] = under === null ? [] : [under];
  const baseDepth = under === null ? 0 : under.depth + 1;
  sizes.forEach((size, level) => {
    const current: Payment[] = [];
    for (let i = 0; i < size; i += 1) {
      const signature = digest("sha512", `${label}/${level}/${i}`);
      const payment: Payment = {
        signature,
        txHash: bs58.encode(signature),
        payer: level === 0 ? payers[0]! : payers[Math.floor(next() * payers.length)]!,
        amountUnits: BigInt(1_000 + Math.floor(next() * 1_000_000)),
        parent: previous.length === 0 ? null : previous[Math.floor(next() * previous.length)]!,
        depth: baseDepth + level,
      };
      payments.push(payment);
      current.push(payment);
    }
    previous = current;
  });
  return payments;
}

function invocationOf(parent: Payment): { readonly bytes: Uint8Array; readonly address: string } {
  if (parent.invocation === undefined) {
    const bytes = digest("sha256", `invocation/${parent.txHash}`);
    parent.invocation = { bytes, address: bs58.encode(bytes) };
  }
  return parent.invocation;
}

const endpointTexts = Array.from({ length: 10 }, (_, i) => `tools${i % 3}.example.com/v1/tool-${i}`);
const endpoints = endpointTexts.map((text) => endpointHash(text));
const endpointHex = endpoints.map((e) => Buffer.from(e).toString("hex"));
const payees = Array.from({ length: 20 }, (_, i) => digest("sha256", `service-${i}`));
const payeeAddresses = payees.map((p) => bs58.encode(p));
const mint = digest("sha256", "usdc-mint");
const mintAddress = bs58.encode(mint);

/** Payment `i` of the chain (its position: slot, time, payee, protocol and endpoint follow from it). */
interface Placed {
  readonly payment: Payment;
  readonly i: number;
  readonly slot: number;
  readonly blockTime: number;
  readonly protocol: "x402" | "mpp";
  readonly payee: number;
  readonly endpoint: number;
}

function place(payment: Payment, i: number): Placed {
  return {
    payment,
    i,
    slot: 1 + Math.floor(i / 4),
    blockTime: BASE_TIME_S + Math.floor(i / 50),
    protocol: i % 3 === 0 ? "mpp" : "x402",
    payee: i % payees.length,
    endpoint: i % endpoints.length,
  };
}

/** Discriminator + borsh body of the PaymentRecorded event, field by field in IDL order. */
function eventBytes(p: Placed): Buffer {
  const { payment } = p;
  const raw = Buffer.alloc(8 + 32 + 32 + 8 + 8 + 32 + 1 + 1 + 32 + 1 + 1 + (payment.parent === null ? 1 : 1 + 32 + 64 + 16) + 8 + 8);
  let at = 0;
  const bytes = (value: Uint8Array): void => {
    raw.set(value, at);
    at += value.length;
  };
  bytes(discriminator);
  bytes(payment.payer.bytes);
  bytes(payees[p.payee]!);
  at = raw.writeBigUInt64LE(BigInt(p.i + 1), at); // payment_id
  at = raw.writeBigUInt64LE(payment.amountUnits, at);
  bytes(mint);
  at = raw.writeUInt8(p.protocol === "x402" ? 0 : 1, at);
  at = raw.writeUInt8(0, at); // Rail::Stablecoin
  bytes(endpoints[p.endpoint]!);
  at = raw.writeUInt8(1, at); // atomic
  at = raw.writeUInt8(0, at); // settlement_reference: None
  if (payment.parent === null) {
    at = raw.writeUInt8(0, at);
  } else {
    at = raw.writeUInt8(1, at);
    bytes(invocationOf(payment.parent).bytes);
    bytes(payment.parent.signature);
    at = raw.writeBigUInt64LE(BUDGET_UNITS, at);
    at = raw.writeBigUInt64LE(payment.amountUnits, at); // spent after this payment
  }
  at = raw.writeBigInt64LE(BigInt(p.blockTime), at); // recorded_at
  at = raw.writeBigUInt64LE(BigInt(p.slot), at);
  if (at !== raw.length) throw new Error(`encoded ${at} of ${raw.length} bytes`);
  return raw;
}

/** `eventPayload` of the event, built directly. */
function payloadOf(p: Placed): EventPayload {
  const { payment } = p;
  return {
    payer: payment.payer.address,
    payee: payeeAddresses[p.payee]!,
    paymentId: String(p.i + 1),
    amountUnits: payment.amountUnits.toString(),
    mint: mintAddress,
    protocol: p.protocol,
    rail: "stablecoin",
    endpointHash: endpointHex[p.endpoint]!,
    atomic: true,
    settlementReference: null,
    parent:
      payment.parent === null
        ? null
        : {
            invocation: invocationOf(payment.parent).address,
            parentSignature: payment.parent.txHash,
            budgetUnits: BUDGET_UNITS.toString(),
            spentUnits: payment.amountUnits.toString(),
          },
    recordedAtSeconds: p.blockTime,
    slot: String(p.slot),
  };
}

/** The hand-written bytes and payload must be what the IDL coder and the decoder produce. */
function checkAgainstCoder(p: Placed): void {
  const { payment } = p;
  const raw = eventBytes(p);
  const encoded = coder.types.encode("PaymentRecorded", {
    payer: new PublicKey(payment.payer.bytes),
    payee: new PublicKey(payees[p.payee]!),
    payment_id: new BN(p.i + 1),
    amount: new BN(payment.amountUnits.toString()),
    mint: new PublicKey(mint),
    protocol: p.protocol === "mpp" ? { Mpp: {} } : { X402: {} },
    rail: { Stablecoin: {} },
    endpoint_hash: [...endpoints[p.endpoint]!],
    atomic: true,
    settlement_reference: null,
    parent:
      payment.parent === null
        ? null
        : {
            invocation: new PublicKey(invocationOf(payment.parent).bytes),
            parent_signature: [...payment.parent.signature],
            budget: new BN(BUDGET_UNITS.toString()),
            spent: new BN(payment.amountUnits.toString()),
          },
    recorded_at: new BN(p.blockTime),
    slot: new BN(p.slot),
  });
  if (!Buffer.concat([discriminator, encoded]).equals(raw)) throw new Error(`synthetic event ${p.i} is not the IDL coder's encoding`);
  const decoded = decodeEventInstructionData(Uint8Array.from([...EVENT_IX_TAG, ...raw]));
  if (decoded === null) throw new Error(`synthetic event ${p.i} does not decode`);
  const expected = JSON.stringify(eventPayload(decoded));
  const built = JSON.stringify(payloadOf(p));
  if (expected !== built) throw new Error(`synthetic payload ${p.i} differs from the decoder's:\n${built}\n${expected}`);
}

// `insertSeen` and `insertEvents` of indexer/store/ingest.ts, for events as the RPC source yields
// them (inner instruction 0 of instruction 0, one event per transaction, confirmed).
const INSERT_SEEN = `
  INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail)
  SELECT sig, slot, 'indexed', 1, NULL FROM unnest($1::text[], $2::bigint[]) AS u(sig, slot)`;
const INSERT_EVENTS = `
  INSERT INTO chain_events (signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                            finalized, event_name, payload, raw, source)
  SELECT u.sig, 0, 0, 0, u.slot, to_timestamp(u.bt), 'confirmed', false, 'PaymentRecorded', j.payload, decode(u.raw, 'hex'),
         'inner-instructions'
  FROM unnest($1::text[], $2::bigint[], $3::float8[], $5::text[]) WITH ORDINALITY AS u(sig, slot, bt, raw, n)
  JOIN jsonb_array_elements($4::jsonb) WITH ORDINALITY AS j(payload, n) USING (n)
  ORDER BY u.n
  RETURNING id, signature`;
// The rows `projectEvents` derives from those events (checked by `checkAgainstProjection`).
const INSERT_TRANSACTIONS = `
  INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                            amount_units, endpoint_hash, parent_tx_hash, invocation, atomic, settlement_reference,
                            settlement_status, explorer_url, "timestamp", slot, status)
  SELECT id, sig, 0, agent, payee, $11, payment_id, protocol, 'stablecoin', amount, endpoint, parent, invocation, true, NULL,
         NULL, $12 || sig || $13, to_timestamp(bt), slot, 'confirmed'
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::numeric[], $6::text[], $7::numeric[], $8::text[],
              $9::text[], $10::text[], $14::float8[], $15::bigint[])
       AS u(id, sig, agent, payee, payment_id, protocol, amount, endpoint, parent, invocation, bt, slot)`;
const INSERT_EDGES = `
  INSERT INTO payment_edges (child_event_id, parent_tx_hash, child_tx_hash, invocation, depth, child_payer)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[])`;

// Each row carries its payment's node columns, from the row just inserted into `transactions`.
const INSERT_CLOSURE = `
  INSERT INTO payment_closure (ancestor_tx_hash, distance, descendant_event_id, ${CLOSURE_NODE_COLUMNS})
  SELECT u.ancestor, u.distance, u.descendant, ${closureNodeColumnsOf("t")}
  FROM unnest($1::text[], $2::int[], $3::bigint[]) AS u(ancestor, distance, descendant)
  JOIN transactions t ON t.event_id = u.descendant`;

async function insertChunk(client: pg.ClientBase, chunk: readonly Placed[]): Promise<string[]> {
  const signatures = chunk.map((p) => p.payment.txHash);
  const slots = chunk.map((p) => p.slot);
  const times = chunk.map((p) => p.blockTime);
  // The event store is partitioned by slot range (migrations/052): the chunk's partitions first.
  await client.query("SELECT event_store_ensure_partitions($1::bigint[])", [slots]);
  await client.query(INSERT_SEEN, [signatures, slots]);
  const payloads = JSON.stringify(chunk.map(payloadOf));
  const raws = chunk.map((p) => eventBytes(p).toString("hex"));
  const inserted = await client.query<{ id: string; signature: string }>(INSERT_EVENTS, [signatures, slots, times, payloads, raws]);
  const idOf = new Map(inserted.rows.map((r) => [r.signature, r.id]));
  const ids = signatures.map((signature) => idOf.get(signature)!);
  if (idOf.size !== chunk.length) throw new Error(`inserted ${idOf.size} of ${chunk.length} events`);
  await client.query(INSERT_TRANSACTIONS, [
    ids,
    signatures,
    chunk.map((p) => p.payment.payer.address),
    chunk.map((p) => payeeAddresses[p.payee]!),
    chunk.map((p) => String(p.i + 1)),
    chunk.map((p) => p.protocol),
    chunk.map((p) => p.payment.amountUnits.toString()),
    chunk.map((p) => endpointHex[p.endpoint]!),
    chunk.map((p) => p.payment.parent?.txHash ?? null),
    chunk.map((p) => (p.payment.parent === null ? null : invocationOf(p.payment.parent).address)),
    mintAddress,
    EXPLORER_TX,
    explorerSuffix(CLUSTER),
    times,
    slots,
  ]);
  const children = chunk.flatMap((p, k) => (p.payment.parent === null ? [] : [{ p, id: ids[k]!, parent: p.payment.parent }]));
  await client.query(INSERT_EDGES, [
    children.map((c) => c.id),
    children.map((c) => c.parent.txHash),
    children.map((c) => c.p.payment.txHash),
    children.map((c) => invocationOf(c.parent).address),
    children.map((c) => c.p.payment.depth),
    children.map((c) => c.p.payment.payer.address),
  ]);
  // Every ancestor of each payment, one row per distance (what the projection's closure holds).
  const closure = children.flatMap((c) => {
    const rows: [string, number, string][] = [];
    for (let up: Payment | null = c.parent, distance = 1; up !== null; up = up.parent, distance += 1)
      rows.push([up.txHash, distance, c.id]);
    return rows;
  });
  await client.query(INSERT_CLOSURE, [closure.map((r) => r[0]), closure.map((r) => r[1]), closure.map((r) => r[2])]);
  return ids;
}

/**
 * Deletes the projected rows of a sample of events, re-projects them with the indexer's
 * `projectEvents`, and requires the very same rows back; rolled back either way.
 */
async function checkAgainstProjection(pool: pg.Pool, sample: readonly string[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("CREATE TEMP TABLE seeded_tx ON COMMIT DROP AS SELECT * FROM transactions WHERE event_id = ANY($1::bigint[])", [
      sample,
    ]);
    await client.query(
      "CREATE TEMP TABLE seeded_edges ON COMMIT DROP AS SELECT * FROM payment_edges WHERE child_event_id = ANY($1::bigint[])",
      [sample],
    );
    await client.query(
      "CREATE TEMP TABLE seeded_closure ON COMMIT DROP AS SELECT * FROM payment_closure WHERE descendant_event_id = ANY($1::bigint[])",
      [sample],
    );
    await client.query("DELETE FROM payment_closure WHERE descendant_event_id = ANY($1::bigint[])", [sample]);
    await client.query("DELETE FROM payment_edges WHERE child_event_id = ANY($1::bigint[])", [sample]);
    await client.query("DELETE FROM transactions WHERE event_id = ANY($1::bigint[])", [sample]);
    await projectEvents(client, sample, { cluster: CLUSTER });
    const differences = await client.query<{ tx: string; edges: string; closure: string; n: string }>(
      `SELECT (SELECT count(*) FROM ((TABLE seeded_tx EXCEPT SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]))
                                     UNION ALL
                                     (SELECT * FROM transactions WHERE event_id = ANY($1::bigint[]) EXCEPT TABLE seeded_tx)) d) AS tx,
              (SELECT count(*) FROM ((TABLE seeded_edges EXCEPT SELECT * FROM payment_edges WHERE child_event_id = ANY($1::bigint[]))
                                     UNION ALL
                                     (SELECT * FROM payment_edges WHERE child_event_id = ANY($1::bigint[]) EXCEPT TABLE seeded_edges)) d) AS edges,
              (SELECT count(*) FROM ((TABLE seeded_closure EXCEPT SELECT * FROM payment_closure WHERE descendant_event_id = ANY($1::bigint[]))
                                     UNION ALL
                                     (SELECT * FROM payment_closure WHERE descendant_event_id = ANY($1::bigint[]) EXCEPT TABLE seeded_closure)) d) AS closure,
              (SELECT count(*) FROM seeded_tx) AS n`,
      [sample],
    );
    const row = differences.rows[0]!;
    if (row.tx !== "0" || row.edges !== "0" || row.closure !== "0" || Number(row.n) !== sample.length) {
      throw new Error(`seeded rows differ from projectEvents' for the sample: ${JSON.stringify(row)} of ${sample.length}`);
    }
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
    client.release();
  }
}

/** Builds the chain and writes it into `pool` (a migrated, empty database), with its accounts and agents. */
export async function seedFixture(pool: pg.Pool, shape: FixtureShape): Promise<Fixture> {
  const started = performance.now();
  const next = mulberry32(0x5eed_7ee); // the same chain on every run

  const accountIds: string[] = [];
  for (let a = 0; a < shape.accounts; a += 1) accountIds.push(await createAccount(pool, `bench account ${a}`));
  const wallets: Wallet[][] = accountIds.map((_, account) =>
    Array.from({ length: shape.agentsPerAccount }, (_, k) => {
      const agentId = `bench-${account}-agent-${k}`;
      const bytes = digest("sha256", agentId);
      return { agentId, account, bytes, address: bs58.encode(bytes) };
    }),
  );
  await pool.query(
    "INSERT INTO agents (agent_id, account_id, name, wallet_address) SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[])",
    [
      wallets.flat().map((w) => w.agentId),
      wallets.flat().map((w) => accountIds[w.account]!),
      wallets.flat().map((w) => `agent ${w.agentId}`),
      wallets.flat().map((w) => w.address),
    ],
  );

  // The endpoints the gateway knows (it writes this table), so `endpoint` resolves to text.
  await pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])", [
    endpointHex,
    endpointTexts,
    endpointTexts.map((text) => text.split("/")[0]!),
  ]);

  const tree = buildTree("tree", levelSizes(shape.treeNodes, shape.treeDepth), wallets[0]!, next);
  // A branch paid by another account's agent under a mid-level payment: the account sees neither
  // it nor what its own agents paid below it.
  const hiddenUnder = tree.find((p) => p.depth === Math.min(3, shape.treeDepth - 1))!;
  const hiddenPayers = [wallets[1]![0]!, ...wallets[0]!];
  const hidden =
    shape.foreignBranch === 0
      ? []
      : buildTree("foreign", levelSizes(shape.foreignBranch, Math.min(2, shape.foreignBranch - 1)), hiddenPayers, next, hiddenUnder);

  // Background: small trees (1-20 payments, depth <= 3); a fifth of them paid by the tree's own
  // account, so the account filter alone does not single the tree out.
  const background: Payment[] = [];
  for (let t = 0; background.length < shape.backgroundPayments; t += 1) {
    const account = next() < 0.2 ? 0 : 1 + Math.floor(next() * (shape.accounts - 1));
    const size = Math.min(shape.backgroundPayments - background.length, 1 + Math.floor(next() * 20));
    const depth = Math.min(size - 1, Math.floor(next() * 4));
    background.push(...buildTree(`bg-${t}`, levelSizes(size, depth), wallets[account]!, next));
  }

  // Interleave the tree's payments evenly among the others (each stream keeps its own order, so
  // parents come before their children), spreading the tree over the whole heap.
  const treeStream = [...tree, ...hidden];
  const order: Payment[] = [];
  const stride = (background.length + treeStream.length) / treeStream.length;
  let b = 0;
  treeStream.forEach((payment, k) => {
    const until = Math.floor((k + 1) * stride) - (k + 1);
    while (b < until && b < background.length) order.push(background[b++]!);
    order.push(payment);
  });
  while (b < background.length) order.push(background[b++]!);

  const placed = order.map(place);
  for (let i = 0; i < placed.length; i += CHECK_EVERY) checkAgainstCoder(placed[i]!);
  checkAgainstCoder(placed.at(-1)!);

  const ids: string[] = [];
  for (let start = 0; start < placed.length; start += SEED_CHUNK) {
    ids.push(...(await withTransaction(pool, (client) => insertChunk(client, placed.slice(start, start + SEED_CHUNK)))));
  }
  // Finality as a live cluster has it, by the indexer's own step: all but the newest slots.
  await withTransaction(pool, (client) => projectFinality(client, BigInt(placed.at(-1)!.slot - FINALITY_LAG_SLOTS)));
  // Every tree payment of the first few levels (parents within the sample), plus a spread sample.
  const inTree = new Set(treeStream);
  const sample = ids.filter((_, i) => i % REPROJECT_EVERY === 0 || (order[i]!.depth <= 2 && inTree.has(order[i]!)));
  await checkAgainstProjection(pool, sample);
  await pool.query("VACUUM ANALYZE");

  const counts = (
    await pool.query<{ payments: string; edges: string }>(
      "SELECT (SELECT count(*) FROM transactions) AS payments, (SELECT count(*) FROM payment_edges) AS edges",
    )
  ).rows[0]!;
  const expected = new Map<string, ExpectedNode>(
    tree.map((p) => [
      p.txHash,
      { parentTxHash: p.parent?.txHash ?? null, depth: p.depth, agentId: p.payer.agentId, amountUnits: p.amountUnits },
    ]),
  );
  return {
    accountId: accountIds[0]!,
    rootTxHash: tree[0]!.txHash,
    expected,
    expectedTotals: {
      amountUnits: tree.reduce((sum, p) => sum + p.amountUnits, 0n),
      transactionCount: tree.length,
      agentCount: new Set(tree.map((p) => p.payer.agentId)).size,
    },
    payments: Number(counts.payments),
    edges: Number(counts.edges),
    seedMs: performance.now() - started,
  };
}
