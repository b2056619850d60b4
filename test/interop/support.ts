/**
 * What the interop tests of `Client.pay` against official x402 / MPP servers share: the whole
 * system (scripts/system.ts) on loopback with a buyer account and a funded agent, a payee wallet
 * with a token account (the official clients never create one), a fee payer holding only SOL,
 * a `fetch` that records what reached the paid API, and readers of the ledger, the reservations,
 * the signed transfers and the index.
 */
import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, Keypair, LAMPORTS_PER_SOL, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { expect } from "vitest";
import { type AgentWallet, airdrop, createAgentWallet, ledgerAccess } from "../../scripts/agent-wallets.js";
import { Client, type FetchFunction } from "../../sdk/src/index.js";
import { startSystem } from "../../scripts/system.js";
import { createFreshDatabase } from "../indexer/fresh-database.js";
import { fundedAgent, rest, type TestSystem } from "../sdk/server-support.js";

export interface InteropSetup {
  readonly test: TestSystem;
  readonly apiKey: string;
  readonly servers: Server[];
}

/**
 * The system with its background loops (reconciler, sweeper) slowed to once an hour: the tests run
 * the sweeper themselves, at the moments they mean, so that what they see is not a race with it.
 */
export async function startInterop(): Promise<InteropSetup> {
  const db = await createFreshDatabase();
  const system = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    logger: pino({ level: "silent" }),
    reconcileIntervalMs: 3_600_000,
  });
  const test: TestSystem = {
    system,
    db,
    connection: new Connection(system.localnet.info.rpcUrl, "confirmed"),
    async stop() {
      await system.stop();
      await db.drop();
    },
  };
  const { apiKey } = await test.system.createAccount("interop buyer");
  return { test, apiKey, servers: [] };
}

export async function stopInterop(setup: InteropSetup | undefined): Promise<void> {
  for (const server of setup?.servers ?? []) {
    server.closeAllConnections();
    server.close();
  }
  await setup?.test.stop();
}

export async function listen(setup: InteropSetup, server: Server): Promise<string> {
  setup.servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A wallet outside the gateway with a token account of the settlement mint and no SOL: a payee. */
export function payeeWallet(setup: InteropSetup): Promise<AgentWallet> {
  return createAgentWallet(ledgerAccess(setup.test.system.localnet), { airdropLamports: 0 });
}

/** A keypair holding only SOL: the payee side's fee payer. */
export async function feePayer(setup: InteropSetup): Promise<Keypair> {
  const keypair = Keypair.generate();
  await airdrop(ledgerAccess(setup.test.system.localnet).provider, keypair.publicKey, LAMPORTS_PER_SOL);
  return keypair;
}

/** Requests that reached `origin`, with the payment headers they carried. */
export interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
}

/** A client of a new funded agent whose `fetch` records what reached `origin` (and may drop gateway calls). */
export async function payingClient(
  setup: InteropSetup,
  agentId: string,
  usdc: number,
  options: {
    readonly origin: () => string | readonly string[];
    readonly seen: Seen[];
    readonly drop?: (url: string, method: string) => boolean;
  },
): Promise<{ client: Client; address: string }> {
  const address = await fundedAgent(setup.test.system, setup.apiKey, agentId, usdc);
  const recording: FetchFunction = (input, init) => {
    const url = String(input);
    const method = init?.method ?? "GET";
    if (options.drop?.(url, method) === true) return Promise.reject(new TypeError("fetch failed (dropped by the test)"));
    const origins = options.origin();
    if ((typeof origins === "string" ? [origins] : origins).some((origin) => url.startsWith(`${origin}/`))) {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries((init?.headers as Record<string, string> | undefined) ?? {}))
        headers[name.toLowerCase()] = value;
      options.seen.push({ method, path: new URL(url).pathname, headers });
    }
    return fetch(input, init);
  };
  const client = new Client({ agentId, apiKey: setup.apiKey, baseUrl: setup.test.system.apiUrl, fetch: recording, maxRetries: 0 });
  return { client, address };
}

/** Token balance (base units) of `owner`'s associated token account, read from the ledger. */
export async function tokens(setup: InteropSetup, owner: PublicKey | string): Promise<bigint> {
  const { system, connection } = setup.test;
  const account = getAssociatedTokenAddressSync(new PublicKey(system.token), new PublicKey(owner), true);
  if ((await connection.getAccountInfo(account, "confirmed")) === null) return 0n;
  return BigInt((await connection.getTokenAccountBalance(account, "confirmed")).value.amount);
}

export async function lamports(setup: InteropSetup, owner: PublicKey | string): Promise<bigint> {
  return BigInt(await setup.test.connection.getBalance(new PublicKey(owner), "confirmed"));
}

export async function reservationsOf(setup: InteropSetup, agentId: string) {
  const { rows } = await setup.test.system.pool.query<{
    id: string;
    status: string;
    tx_hash: string | null;
    amount_units: string;
    payment_ref: string | null;
  }>(
    `SELECT r.id, r.status, r.tx_hash, r.amount_units::text, r.payment_ref FROM spend_reservations r
     JOIN agents a ON a.agent_id = r.agent_id WHERE a.public_id = $1 ORDER BY r.id`,
    [agentId],
  );
  return rows;
}

/** The agent's recorded rejections (listed as `rejected` transactions), oldest first. */
export async function rejectionsOf(setup: InteropSetup, agentId: string) {
  const { rows } = await setup.test.system.pool.query<{ reason_code: string; amount_units: string }>(
    `SELECT p.reason_code, p.amount_units::text FROM payment_rejections p
     JOIN agents a ON a.agent_id = p.agent_id WHERE a.public_id = $1 ORDER BY p.id`,
    [agentId],
  );
  return rows;
}

export async function transfersOf(setup: InteropSetup, agentId: string) {
  const { rows } = await setup.test.system.pool.query<{
    status: string;
    format: string;
    settlement_tx: string | null;
    record_tx: string | null;
    payment_ref: string;
    amount_units: string;
    last_valid_block_height: string;
  }>(
    `SELECT t.status, t.format, t.settlement_tx, t.record_tx, t.payment_ref, t.amount_units::text, t.last_valid_block_height::text
     FROM signed_transfers t JOIN agents a ON a.agent_id = t.agent_id WHERE a.public_id = $1 ORDER BY t.id`,
    [agentId],
  );
  return rows;
}

/** The index's row of the ledger transaction `txHash`, once the indexer has it (null after `timeoutMs`). */
export async function indexed(
  setup: InteropSetup,
  txHash: string,
  until: (row: IndexedRow) => boolean,
  timeoutMs = 20_000,
): Promise<IndexedRow | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await setup.test.system.pool.query<IndexedRow>(
      `SELECT tx_hash, agent, payee, amount_units::text, protocol, settlement_reference, settlement_status, parent_tx_hash
       FROM transactions WHERE tx_hash = $1`,
      [txHash],
    );
    if (rows[0] !== undefined && until(rows[0])) return rows[0];
    if (Date.now() > deadline) return rows[0] ?? null;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export interface IndexedRow {
  tx_hash: string;
  agent: string;
  payee: string;
  amount_units: string;
  protocol: string;
  settlement_reference: string | null;
  settlement_status: string | null;
  parent_tx_hash: string | null;
}

export { rest };

/** The headers of a request that carry a payment (x402, MPP) or its authorization. */
export const paymentHeaders = (request: Seen): string[] =>
  Object.keys(request.headers).filter((name) => /payment|authorization/.test(name));

/**
 * The agent's policy refuses the call to `endpoint` before anything is signed: `refused` accepts
 * the client's error, at most the unpaid request reached the API, the gateway recorded the
 * rejection once, and no transfer, reservation or token moved (the agent was funded with 1 USDC).
 */
export async function expectRefusedBeforeSigning(
  setup: InteropSetup,
  seen: Seen[],
  payer: { readonly client: Client; readonly address: string },
  agentId: string,
  endpoint: string,
  refused: (error: unknown) => void,
): Promise<void> {
  seen.length = 0;
  const error = await payer.client.pay({ endpoint }).then(
    () => new Error("the payment was made"),
    (thrown: unknown) => thrown,
  );
  refused(error);
  // At most the unpaid first request left, without payment headers (a refused domain: none at all).
  expect(seen.length).toBeLessThanOrEqual(1);
  expect(seen.flatMap((request) => paymentHeaders(request))).toEqual([]);
  // The gateway recorded the refusal once (a domain refused by the client too: the client asks it).
  const reasonCode = (error as { reasonCode?: string }).reasonCode;
  expect((await rejectionsOf(setup, agentId)).map((row) => row.reason_code)).toEqual([reasonCode]);
  expect(await transfersOf(setup, agentId)).toEqual([]);
  expect(await reservationsOf(setup, agentId)).toEqual([]);
  expect(await tokens(setup, payer.address)).toBe(1_000_000n);
}
