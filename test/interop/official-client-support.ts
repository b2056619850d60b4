/**
 * Shared setup of the interop tests (the official x402 and MPP packages against our components,
 * unmodified, configured only through their public options): the whole system on loopback
 * (test/sdk/server-support.ts), a payer wallet the gateway does NOT hold (a plain keypair with
 * settlement tokens and no SOL: the gateway's fee payer pays its fees), a payee with a token
 * account, and reads of what the chain and the index say about a payment.
 */
import { expect } from "vitest";
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from "@solana/spl-token";
import { Keypair, PublicKey, sendAndConfirmTransaction, Transaction } from "@solana/web3.js";
import { lamportsSpent } from "../../api/gateway/settlement/sol-spent.js";
import { createClient } from "../api/client.js";
import { pollUntil } from "../support/poll.js";
import type { NodeMiddleware, NodeRequest } from "../../sdk/src/server/index.js";
import { fundedAgent, serve, type Served, type TestSystem } from "../sdk/server-support.js";

/** A keypair with `units` of the settlement token in its associated token account, and no SOL. */
export async function outsidePayer(test: TestSystem, units: bigint): Promise<Keypair> {
  const payer = Keypair.generate();
  await fundTokens(test, payer.publicKey, units);
  return payer;
}

/** Creates `owner`'s token account if needed and moves `units` from the local treasury into it. */
export async function fundTokens(test: TestSystem, owner: PublicKey, units: bigint): Promise<void> {
  const { localnet } = test.system;
  const { authority, treasury } = localnet.keypairs;
  const mint = localnet.info.mint;
  const account = getAssociatedTokenAddressSync(mint, owner, true);
  const transaction = new Transaction().add(createAssociatedTokenAccountIdempotentInstruction(authority.publicKey, account, owner, mint));
  if (units > 0n) {
    transaction.add(
      createTransferCheckedInstruction(localnet.info.treasuryToken, mint, account, treasury.publicKey, units, localnet.info.decimals),
    );
  }
  await sendAndConfirmTransaction(test.connection, transaction, units > 0n ? [authority, treasury] : [authority], {
    commitment: "confirmed",
  });
}

export async function solLamports(test: TestSystem, owner: PublicKey | string): Promise<number> {
  return test.connection.getBalance(new PublicKey(owner), "confirmed");
}

export interface IndexedRecord {
  readonly txHash: string;
  readonly agent: string;
  readonly payee: string;
  readonly amountUnits: bigint;
  readonly protocol: string;
  readonly rail: string;
  readonly atomic: boolean;
  readonly settlementStatus: string | null;
}

/** The payment_ledger record naming `settlement` as its settlement reference, once the indexer verified it. */
export async function verifiedRecord(test: TestSystem, settlement: string): Promise<IndexedRecord> {
  let last = "no record";
  return pollUntil(
    async () => {
      const { rows } = await test.system.pool.query<{
        tx_hash: string;
        agent: string;
        payee: string;
        amount_units: string;
        protocol: string;
        rail: string;
        atomic: boolean;
        settlement_status: string | null;
      }>(
        `SELECT tx_hash, agent, payee, amount_units, protocol, rail, atomic, settlement_status
         FROM transactions WHERE settlement_reference = $1`,
        [settlement],
      );
      const row = rows[0];
      if (row === undefined) return null;
      last = `record ${row.tx_hash} ${row.settlement_status}`;
      if (row.settlement_status !== "verified") return null;
      return {
        txHash: row.tx_hash,
        agent: row.agent,
        payee: row.payee,
        amountUnits: BigInt(row.amount_units),
        protocol: row.protocol,
        rail: row.rail,
        atomic: row.atomic,
        settlementStatus: row.settlement_status,
      };
    },
    { timeoutMs: 30_000, intervalMs: 200, what: () => `the verified record of ${settlement} (${last})` },
  );
}

/** Every payment_ledger record naming `settlement` (to prove a replay recorded nothing more). */
export async function recordsReferencing(test: TestSystem, settlement: string): Promise<number> {
  const { rows } = await test.system.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM transactions WHERE settlement_reference = $1",
    [settlement],
  );
  return rows[0]!.n;
}

/** A fetch that remembers every request it sends (to replay one, or to see that none was sent). */
export function recordingFetch(): { fetch: typeof fetch; requests: Request[] } {
  const requests: Request[] = [];
  return {
    requests,
    fetch: async (input, init) => {
      const request = new Request(input, init);
      requests.push(request.clone());
      return fetch(request);
    },
  };
}

export interface ReceivedPayment {
  readonly txHash: string;
  readonly payer: string;
  readonly agentId: string;
  readonly protocol: string;
  readonly amountPaidUnits: string;
  readonly endpoint: string;
  readonly settlementReference: string | null;
  readonly settlementStatus: string | null;
}

/** The seller's GraphQL view of what its agent `agentId` received that `settlement` paid. */
export async function receivedInGraphql(
  test: TestSystem,
  apiKey: string,
  agentId: string,
  settlement: string,
): Promise<ReceivedPayment | null> {
  const data = await createClient(test.system.apiUrl).ok<{ receivedPayments: ReceivedPayment[] }>(
    apiKey,
    `query($agentId: ID) { receivedPayments(agentId: $agentId) {
       txHash payer agentId protocol amountPaidUnits endpoint settlementReference settlementStatus } }`,
    { agentId },
  );
  return data.receivedPayments.find((payment) => payment.settlementReference === settlement) ?? null;
}

/**
 * An outside payer's payment as the gateway recorded it: one `record_attested_payment` record
 * naming `transfer`, verified by the indexer, whose signature the paid answer reported
 * (`recordTxHash`), and the seller's GraphQL `receivedPayments` showing it for its agent.
 */
export async function expectAttestedRecord(
  test: TestSystem,
  paid: {
    readonly transfer: string;
    readonly payer: string;
    readonly payTo: string;
    readonly amountUnits: bigint;
    readonly protocol: "x402" | "mpp";
    readonly recordTxHash: string | null | undefined;
    readonly seller: { readonly apiKey: string; readonly agentId: string };
    readonly endpoint: string;
  },
): Promise<void> {
  const record = await verifiedRecord(test, paid.transfer);
  expect(record).toMatchObject({
    agent: paid.payer,
    payee: paid.payTo,
    amountUnits: paid.amountUnits,
    protocol: paid.protocol,
    rail: "stablecoin",
    atomic: false,
  });
  expect(paid.recordTxHash).toBe(record.txHash);
  expect(await receivedInGraphql(test, paid.seller.apiKey, paid.seller.agentId, paid.transfer)).toEqual({
    txHash: record.txHash,
    payer: paid.payer,
    agentId: paid.seller.agentId,
    protocol: paid.protocol,
    amountPaidUnits: paid.amountUnits.toString(),
    endpoint: paid.endpoint,
    settlementReference: paid.transfer,
    settlementStatus: "verified",
  });
}

/** Both sides of an outside payment: a seller account whose agent `till` can be paid, and a buyer. */
export interface SellerAndBuyer {
  readonly sellerKey: string;
  /** `till`'s wallet, with its token account (the official clients never create the payee's). */
  readonly payTo: string;
  /** A wallet the gateway does not hold, with 1 USDC and no SOL. */
  readonly payer: Keypair;
}

export async function sellerAndBuyer(test: TestSystem): Promise<SellerAndBuyer> {
  const sellerKey = (await test.system.createAccount("seller")).apiKey;
  const payTo = await fundedAgent(test.system, sellerKey, "till", 0);
  await fundTokens(test, new PublicKey(payTo), 0n);
  return { sellerKey, payTo, payer: await outsidePayer(test, 1_000_000n) };
}

/** An API behind one of our middlewares: each paid request's payment goes to `paid`, the answer is the paid content. */
export function serveBehind<P extends { readonly txHash: string }>(middleware: NodeMiddleware, paid: P[]): Promise<Served> {
  return serve((req, res) => {
    middleware(req as NodeRequest, res, (error?: unknown) => {
      if (error !== undefined) {
        res.writeHead(500);
        res.end();
        return;
      }
      const payment = (req as NodeRequest).payment as P;
      paid.push(payment);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ data: "paid content", txHash: payment.txHash }));
    });
  });
}

/** The service keys' SOL now: the fee payer (co-signed transfers) and the ledger authority. */
export async function serviceSol(test: TestSystem): Promise<{ readonly feePayer: bigint; readonly authority: bigint; readonly at: Date }> {
  const read = async (key: PublicKey) => BigInt(await test.connection.getBalance(key, "confirmed"));
  const at = new Date();
  return { feePayer: await read(test.system.feePayer.publicKey), authority: await read(test.system.ledger.authority.publicKey), at };
}

/**
 * End-of-suite agreement for the service's own SOL: since `start`, the fee payer's balance fell by
 * exactly the fees of the co-signed transfers that landed, and the authority's by exactly the fees
 * and rent of the attested records that landed (both read from the chain's transaction metadata
 * for the signatures in `cosigned_transfers`), plus the token accounts it opened for agents
 * registered since `start` (`agent_token_accounts`). Valid when nothing else used either key.
 */
export async function expectServiceSolSpentOnLandedOnly(
  test: TestSystem,
  start: { readonly feePayer: bigint; readonly authority: bigint; readonly at: Date },
): Promise<void> {
  const { rows } = await test.system.pool.query<{ signature: string; record_signature: string | null }>(
    "SELECT signature, record_signature FROM cosigned_transfers",
  );
  let feePayer = 0n;
  let authority = 0n;
  for (const row of rows) {
    const transfer = await lamportsSpent(test.connection, row.signature, test.system.feePayer.publicKey);
    feePayer += transfer === null ? 0n : transfer.fee + transfer.other;
    if (row.record_signature === null) continue;
    const record = await lamportsSpent(test.connection, row.record_signature, test.system.ledger.authority.publicKey);
    authority += record === null ? 0n : record.fee + record.other;
  }
  const opened = await test.system.pool.query<{ signature: string }>(
    "SELECT signature FROM agent_token_accounts WHERE signature IS NOT NULL AND created_at >= $1",
    [start.at],
  );
  for (const row of opened.rows) {
    const opening = await lamportsSpent(test.connection, row.signature, test.system.ledger.authority.publicKey);
    authority += opening === null ? 0n : opening.fee + opening.other;
  }
  const now = await serviceSol(test);
  expect({ feePayer: start.feePayer - now.feePayer, authority: start.authority - now.authority }).toEqual({ feePayer, authority });
}
