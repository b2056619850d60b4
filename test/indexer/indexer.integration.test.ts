/**
 * The indexer over the real program on a real local ledger and a real Postgres: payments are
 * made through the ledger, read back by the JSON-RPC source, and checked in every read model.
 */
import type { AnchorProvider } from "@coral-xyz/anchor";
import { createTransferCheckedInstruction } from "@solana/spl-token";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IngestPipeline, WriterLockedError } from "../../indexer/pipeline.js";
import { RpcSource } from "../../indexer/sources/rpc.js";
import type { RawTransaction } from "../../indexer/sources/source.js";
import { withTransaction } from "../../indexer/db/database.js";
import { rebuildProjections } from "../../indexer/store/rebuild.js";
import { verifyChainAgainstStore, verifyProjections } from "../../indexer/verify.js";
import {
  associatedTransferAccounts,
  EVENT_IX_TAG,
  endpointHash,
  invocationPda,
  openInvocationInstruction,
  PAYMENT_LEDGER_PROGRAM_ID,
  recordPaymentInstruction,
} from "../../programs/payment_ledger/ts/index.js";
import {
  type AgentWallet,
  createAgentWallet,
  type LedgerAccess,
  ledgerAccess,
  type PaymentTerms,
  recordPayment,
} from "../../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../../scripts/localnet.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";
import { projectionSnapshot } from "./read-models.js";
import { pollUntil } from "../support/poll.js";

const USDC = 1_000_000n;
const QUOTE = "api.example.com/v1/quote";
const SEARCH = "search.example.org/v2/find";
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

let localnet: Localnet;
let provider: AnchorProvider;
let ledger: LedgerAccess;
let db: FreshDatabase;
let source: RpcSource;
let pipeline: IngestPipeline;
let lastSlot: bigint;

function x402(paymentId: bigint, amountUnits: bigint, endpoint = QUOTE): PaymentTerms {
  return { paymentId, amountUnits, protocol: "x402", rail: "stablecoin", endpointHash: endpointHash(endpoint) };
}

function send(instruction: TransactionInstruction, signers: Keypair[]): Promise<string> {
  return provider.sendAndConfirm(new Transaction().add(instruction), signers, { commitment: "confirmed" });
}

function pay(payer: AgentWallet, payee: AgentWallet, terms: PaymentTerms, invocation?: PublicKey): Promise<string> {
  return recordPayment(ledger, payer, payee, terms, invocation);
}

async function openInvocation(invoker: AgentWallet, parent: string, subAgent: AgentWallet, budgetUnits: bigint): Promise<PublicKey> {
  const parentSignature = bs58.decode(parent);
  await send(
    await openInvocationInstruction({
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      authority: localnet.info.authority,
      invoker: invoker.publicKey,
      parentSignature,
      subAgent: subAgent.publicKey,
      budgetUnits,
    }),
    [invoker.keypair],
  );
  return invocationPda(parentSignature, subAgent.publicKey, PAYMENT_LEDGER_PROGRAM_ID).address;
}

/** Sends without preflight, so the ledger includes the failing transaction with its error. */
async function sendIncludedFailure(instruction: TransactionInstruction, signers: Keypair[]): Promise<string> {
  const { connection } = provider;
  const latest = await connection.getLatestBlockhash("confirmed");
  const tx = new Transaction({ feePayer: localnet.info.authority, ...latest }).add(instruction);
  tx.sign(localnet.keypairs.authority, ...signers);
  const signature = await connection.sendRawTransaction(tx.serialize(), { skipPreflight: true });
  const result = await connection.confirmTransaction({ signature, ...latest }, "confirmed");
  if (result.value.err === null) throw new Error("the over-budget payment was accepted");
  return signature;
}

/** A third-party facilitator's settlement: a plain TransferChecked from payer to payee. */
async function settle(payer: AgentWallet, payee: AgentWallet, units: bigint): Promise<string> {
  return send(createTransferCheckedInstruction(payer.tokenAccount, localnet.info.mint, payee.tokenAccount, payer.publicKey, units, 6), [
    payer.keypair,
  ]);
}

async function raw(signature: string): Promise<RawTransaction> {
  const tx = await source.transaction(signature);
  if (tx === null) throw new Error(`no transaction ${signature}`);
  return tx;
}

async function rows<T>(query: string, params: unknown[] = []): Promise<T[]> {
  return (await db.pool.query(query, params)).rows as T[];
}

async function storeCounts(): Promise<{ events: string; seen: string }> {
  const [counts] = await rows<{ events: string; seen: string }>(
    "SELECT (SELECT count(*) FROM chain_events) AS events, (SELECT count(*) FROM chain_transactions_seen) AS seen",
  );
  return counts!;
}

// The traffic, made once through the real program.
const made = {} as {
  agent: AgentWallet;
  service: AgentWallet;
  orchestrator: AgentWallet;
  subAgent: AgentWallet;
  subSubAgent: AgentWallet;
  atomic: string[];
  card: string;
  parent: string;
  underInvocation: string[];
  invocation: PublicKey;
  depth2: string;
  settled: string;
  settledWrongAmount: string;
  failed: string;
};

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
  db = await createFreshDatabase();
  source = new RpcSource({ rpcUrl: localnet.rpcUrl, programId: PAYMENT_LEDGER_PROGRAM_ID, name: "rpc-test" });
  pipeline = new IngestPipeline({
    pool: db.pool,
    programId: PAYMENT_LEDGER_PROGRAM_ID,
    cluster: localnet.rpcUrl,
    lookup: (signature) => source.transaction(signature),
    batchSize: 4,
  });

  const agent = await createAgentWallet(ledger, { usdcUnits: 20n * USDC });
  const service = await createAgentWallet(ledger);
  const orchestrator = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
  const subAgent = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
  const subSubAgent = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
  Object.assign(made, { agent, service, orchestrator, subAgent, subSubAgent });

  made.atomic = [await pay(agent, service, x402(1n, 1_234_567n)), await pay(agent, service, x402(2n, 765_433n, SEARCH))];
  made.card = await pay(agent, service, { ...x402(3n, 700_000n), protocol: "mpp", rail: "card" });

  made.parent = await pay(orchestrator, subAgent, x402(1n, USDC / 10n));
  made.invocation = await openInvocation(orchestrator, made.parent, subAgent, 3n * USDC);
  made.underInvocation = [
    await pay(subAgent, service, x402(1n, 1_000_000n), made.invocation),
    await pay(subAgent, subSubAgent, x402(2n, 1_500_000n), made.invocation),
  ];
  const nested = await openInvocation(subAgent, made.underInvocation[1]!, subSubAgent, USDC);
  made.depth2 = await pay(subSubAgent, service, x402(1n, 250_000n), nested);

  const settlement = await settle(agent, service, 400_000n);
  made.settled = await pay(agent, service, { ...x402(4n, 400_000n), settlementReference: bs58.decode(settlement) });
  const short = await settle(agent, service, 100_000n);
  made.settledWrongAmount = await pay(agent, service, { ...x402(5n, 150_000n), settlementReference: bs58.decode(short) });

  // Over budget: included with its error (skipPreflight), as a cluster would.
  made.failed = await sendIncludedFailure(
    await recordPaymentInstruction({
      ...x402(3n, 10n * USDC),
      programId: PAYMENT_LEDGER_PROGRAM_ID,
      authority: localnet.info.authority,
      payer: subAgent.publicKey,
      payee: service.publicKey,
      invocation: made.invocation,
      transfer: associatedTransferAccounts(subAgent.publicKey, service.publicKey, localnet.info.mint),
    }),
    [subAgent.keypair],
  );

  lastSlot = await source.currentSlot("confirmed");
  await pipeline.backfill(source, { fromSlot: 0n, toSlot: lastSlot });
}, 240_000);

afterAll(async () => {
  await db?.drop();
  await localnet?.stop();
});

describe("indexer: chain -> event store -> read models", () => {
  it("every payment recorded on the ledger becomes one transactions row with the spec 2.2 fields, amounts exact", async () => {
    const result = await rows<Record<string, unknown>>("SELECT * FROM transactions_view WHERE tx_hash = $1", [made.atomic[0]]);
    expect(result).toHaveLength(1);
    const row = result[0]!;
    expect(row).toMatchObject({
      tx_hash: made.atomic[0],
      agent: made.agent.publicKey.toBase58(),
      payee: made.service.publicKey.toBase58(),
      mint: localnet.info.mint.toBase58(),
      protocol: "x402",
      rail: "stablecoin",
      amount_units: "1234567",
      endpoint_hash: hex(endpointHash(QUOTE)),
      endpoint: hex(endpointHash(QUOTE)),
      policy_check: "passed",
      parent_tx_hash: null,
      settlement_status: null,
      status: "confirmed",
      atomic: true,
    });
    expect(row.explorer_url).toBe(
      `https://explorer.solana.com/tx/${made.atomic[0]}?cluster=custom&customUrl=${encodeURIComponent(localnet.rpcUrl)}`,
    );
    expect(row.timestamp).toBeInstanceOf(Date);
    const payments = await rows<{ n: string; total: string }>("SELECT count(*) AS n, sum(amount_units) AS total FROM transactions");
    expect(payments[0]).toEqual({
      n: "9",
      total: String(1_234_567 + 765_433 + 700_000 + 100_000 + 1_000_000 + 1_500_000 + 250_000 + 400_000 + 150_000),
    });
  });

  it("an endpoint hash the gateway knows shows as its text; an unknown one shows as the hash", async () => {
    await db.pool.query("INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES ($1, $2, $3)", [
      hex(endpointHash(SEARCH)),
      SEARCH,
      "search.example.org",
    ]);
    const [known] = await rows<{ endpoint: string }>("SELECT endpoint FROM transactions_view WHERE tx_hash = $1", [made.atomic[1]]);
    expect(known?.endpoint).toBe(SEARCH);
    const [unknown] = await rows<{ endpoint: string }>("SELECT endpoint FROM transactions_view WHERE tx_hash = $1", [made.card]);
    expect(unknown?.endpoint).toBe(hex(endpointHash(QUOTE)));
    await db.pool.query("DELETE FROM endpoints");
  });

  it("payments under an invocation become parent -> child edges with their depth", async () => {
    const edges = await rows<{ parent_tx_hash: string; child_tx_hash: string; depth: number; invocation: string }>(
      "SELECT parent_tx_hash, child_tx_hash, depth, invocation FROM payment_edges ORDER BY child_event_id",
    );
    expect(edges).toEqual([
      { parent_tx_hash: made.parent, child_tx_hash: made.underInvocation[0], depth: 1, invocation: made.invocation.toBase58() },
      { parent_tx_hash: made.parent, child_tx_hash: made.underInvocation[1], depth: 1, invocation: made.invocation.toBase58() },
      { parent_tx_hash: made.underInvocation[1], child_tx_hash: made.depth2, depth: 2, invocation: expect.any(String) },
    ]);
  });

  it("an invocation's budget and its consumption are projected", async () => {
    const [invocation] = await rows<Record<string, unknown>>("SELECT * FROM invocations WHERE invocation = $1", [
      made.invocation.toBase58(),
    ]);
    expect(invocation).toMatchObject({
      invoker: made.orchestrator.publicKey.toBase58(),
      sub_agent: made.subAgent.publicKey.toBase58(),
      parent_tx_hash: made.parent,
      budget_units: "3000000",
      spent_units: "2500000",
      payment_count: "2",
    });
  });

  it("spend rollups and metric buckets sum exactly what the transactions hold", async () => {
    const mismatch = await rows(`
      SELECT agent, sum(amount_units) AS s, count(*) AS n FROM transactions GROUP BY agent
      EXCEPT SELECT agent, sum(amount_units), sum(tx_count) FROM spend_rollups GROUP BY agent`);
    expect(mismatch).toEqual([]);
    const [agentTotals] = await rows<Record<string, string>>(
      `SELECT sum(spend_units) AS spend, sum(tx_count) AS n, sum(x402_spend_units) AS x402, sum(mpp_spend_units) AS mpp
       FROM metric_buckets WHERE agent = $1`,
      [made.agent.publicKey.toBase58()],
    );
    expect(agentTotals).toEqual({
      spend: String(1_234_567 + 765_433 + 700_000 + 400_000 + 150_000),
      n: "5",
      x402: String(1_234_567 + 765_433 + 400_000 + 150_000),
      mpp: "700000",
    });
    const byDomain = await rows<{ protocol: string; amount_units: string }>(
      "SELECT protocol, amount_units FROM spend_rollups_by_domain WHERE agent = $1 AND domain = $2",
      [made.agent.publicKey.toBase58(), hex(endpointHash(SEARCH))],
    );
    expect(byDomain).toEqual([{ protocol: "x402", amount_units: "765433" }]);
  });

  it("a record naming a settlement is verified only when the TransferChecked it names matches", async () => {
    const statuses = await rows<{ tx_hash: string; settlement_status: string }>(
      "SELECT tx_hash, settlement_status FROM transactions WHERE settlement_reference IS NOT NULL",
    );
    expect(new Map(statuses.map((s) => [s.tx_hash, s.settlement_status]))).toEqual(
      new Map([
        [made.settled, "verified"],
        [made.settledWrongAmount, "unverified"],
      ]),
    );
  });

  it("a failed program transaction is skipped and counted, with no event stored", async () => {
    expect(made.failed).not.toBe("");
    const [seen] = await rows<{ outcome: string; event_count: number }>(
      "SELECT outcome, event_count FROM chain_transactions_seen WHERE signature = $1",
      [made.failed],
    );
    expect(seen).toEqual({ outcome: "failed", event_count: 0 });
    expect(await rows("SELECT 1 FROM chain_events WHERE signature = $1", [made.failed])).toEqual([]);
  });

  it("foreign, malformed, unknown-event and truncated-log transactions are skipped and counted, never thrown", async () => {
    const foreign = await raw(await settle(made.agent, made.service, 1n));
    const real = await raw(made.atomic[0]!);
    const withEventData = (data: (old: Uint8Array) => Uint8Array): RawTransaction => ({
      ...real,
      signature: `${real.signature.slice(0, 40)}${Math.random().toString(36).slice(2, 10)}`,
      innerInstructions: real.innerInstructions.map((group) => ({
        index: group.index,
        instructions: group.instructions.map((ix) =>
          ix.data.length > 16 && EVENT_IX_TAG.every((b, i) => ix.data[i] === b) ? { ...ix, data: data(ix.data) } : ix,
        ),
      })),
    });
    const unknown = withEventData((d) => Uint8Array.from([...d.subarray(0, 8), 1, 2, 3, 4, 5, 6, 7, 8, ...d.subarray(16)]));
    const malformed = withEventData((d) => d.subarray(0, 20));
    const truncated: RawTransaction = {
      ...real,
      signature: `${real.signature.slice(0, 40)}truncated0`,
      innerInstructions: [],
      logs: [...(real.logs ?? []).slice(0, 2), "Log truncated"],
    };
    const before = await storeCounts();
    const result = await pipeline.ingest([foreign, unknown, malformed, truncated]);
    expect(result.eventsInserted).toBe(0);
    const outcomes = await rows<{ signature: string; outcome: string }>(
      "SELECT signature, outcome FROM chain_transactions_seen WHERE signature = ANY($1)",
      [[foreign.signature, unknown.signature, malformed.signature, truncated.signature]],
    );
    expect(new Map(outcomes.map((o) => [o.signature, o.outcome]))).toEqual(
      new Map([
        [foreign.signature, "foreign"],
        [unknown.signature, "unknown_event"],
        [malformed.signature, "malformed"],
        [truncated.signature, "truncated"],
      ]),
    );
    const after = await storeCounts();
    expect(after.events).toBe(before.events);
  });

  it("re-ingesting the same slot range changes nothing", async () => {
    const before = await projectionSnapshot(db.pool);
    const counts = await storeCounts();
    const again = await pipeline.backfill(source, { fromSlot: 0n, toSlot: lastSlot });
    expect(again.events).toBe(0);
    expect(await storeCounts()).toEqual(counts);
    expect(await projectionSnapshot(db.pool)).toEqual(before);
  });

  it("a rebuild from the event store yields identical projections", async () => {
    const before = await projectionSnapshot(db.pool);
    await withTransaction(db.pool, (client) => rebuildProjections(client, { cluster: localnet.rpcUrl }));
    expect(await projectionSnapshot(db.pool)).toEqual(before);
  });

  it("verify reports no difference on a consistent database", async () => {
    const range = { fromSlot: 0n, toSlot: lastSlot };
    expect(await verifyChainAgainstStore(db.pool, source, pipeline, range)).toEqual([]);
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
  });

  it("the events of a slot that dies are removed from the event store and every projection", async () => {
    const [target] = await rows<{ slot: string }>("SELECT slot FROM chain_events WHERE signature = $1", [made.depth2]);
    const slot = BigInt(target!.slot);
    const result = await pipeline.ingest([], undefined, undefined, [slot]);
    expect(result.eventsRolledBack).toBeGreaterThan(0);
    expect(await rows("SELECT 1 FROM chain_events WHERE slot = $1", [slot.toString()])).toEqual([]);
    expect(await rows("SELECT 1 FROM transactions WHERE tx_hash = $1", [made.depth2])).toEqual([]);
    expect(await rows("SELECT 1 FROM payment_edges WHERE child_tx_hash = $1", [made.depth2])).toEqual([]);
    // What is left equals a rebuild from the remaining events.
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
    // The chain still has it (the local ledger never forks): re-ingesting restores it.
    await pipeline.backfill(source, { fromSlot: slot, toSlot: slot });
    expect(await rows("SELECT 1 FROM transactions WHERE tx_hash = $1", [made.depth2])).toHaveLength(1);
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
  });

  it("run follows the chain live from its checkpoint and marks finality, alone: a second writer is refused while it runs", async () => {
    const controller = new AbortController();
    const running = pipeline.run(source, controller.signal);
    try {
      await pollUntil(async () => (await rows("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted")).length > 0, {
        timeoutMs: 5_000,
        intervalMs: 50,
        what: "the running pipeline to take the writer lock",
      });
      // Exactly one writer per program: a second indexer is refused while the first runs.
      const standby = new IngestPipeline({
        pool: db.pool,
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        cluster: localnet.rpcUrl,
        writerLockWaitMs: 0,
      });
      await expect(standby.run(source, controller.signal)).rejects.toBeInstanceOf(WriterLockedError);
      const signature = await pay(made.agent, made.service, { ...x402(6n, 42n), protocol: "mpp", rail: "card" });
      // One budget for the three waits: 20 s to be indexed, 10 s more for finality and checkpoint.
      const deadline = Date.now() + 20_000;
      const found = await pollUntil(
        async () => {
          const listed = await rows<{ amount_units: string }>("SELECT amount_units FROM transactions WHERE tx_hash = $1", [signature]);
          return listed.length > 0 ? listed : undefined;
        },
        { timeoutMs: deadline - Date.now(), intervalMs: 100, what: `transaction ${signature} to be indexed` },
      );
      expect(found).toEqual([{ amount_units: "42" }]);
      // Finality as the source reports it (getSlot("finalized")); a finalized slot is not taken for a fork.
      const status = await pollUntil(
        async () => {
          const listed = await rows<{ status: string }>("SELECT status FROM transactions WHERE tx_hash = $1", [signature]);
          return listed[0]?.status === "finalized" ? listed : undefined;
        },
        { timeoutMs: deadline + 10_000 - Date.now(), intervalMs: 100, what: `transaction ${signature} to be finalized` },
      );
      expect(status).toEqual([{ status: "finalized" }]);
      // The checkpoint trails what is committed (it is the confirmed slot read before the listing),
      // and reaches the payment's slot on a following poll.
      const [event] = await rows<{ slot: string }>("SELECT slot FROM chain_events WHERE signature = $1", [signature]);
      const checkpoint = await pollUntil(
        async () => {
          const [row] = await rows<{ slot: string }>("SELECT slot FROM checkpoints WHERE source = $1", [source.name]);
          const slot = BigInt(row?.slot ?? "0");
          return slot >= BigInt(event!.slot) ? slot : undefined;
        },
        { timeoutMs: deadline + 10_000 - Date.now(), intervalMs: 100, what: `the checkpoint to reach slot ${event!.slot}` },
      );
      expect(checkpoint).toBeGreaterThanOrEqual(BigInt(event!.slot));
    } finally {
      controller.abort();
      await running;
    }
    lastSlot = await source.currentSlot("confirmed");
    expect(await verifyProjections(db.pool, { cluster: localnet.rpcUrl })).toEqual([]);
  });

  it("verify reports a tampered projection row and a tampered event", async () => {
    await db.pool.query("UPDATE transactions SET amount_units = amount_units + 1 WHERE tx_hash = $1", [made.card]);
    await db.pool.query(`UPDATE chain_events SET payload = jsonb_set(payload, '{amountUnits}', '"1"') WHERE signature = $1`, [
      made.atomic[1],
    ]);
    const chain = await verifyChainAgainstStore(db.pool, source, pipeline, { fromSlot: 0n, toSlot: lastSlot });
    expect(chain.map((d) => d.kind)).toEqual(["changed_event"]);
    const projections = await verifyProjections(db.pool, { cluster: localnet.rpcUrl });
    expect(projections.some((d) => d.where === "transactions" && d.detail.includes(made.card))).toBe(true);
    // verify changed nothing: the tampered row is still there.
    const [row] = await rows<{ amount_units: string }>("SELECT amount_units FROM transactions WHERE tx_hash = $1", [made.card]);
    expect(row?.amount_units).toBe("700001");
  });
});
