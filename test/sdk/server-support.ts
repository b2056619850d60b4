/**
 * The seller-side tests' shared setup: the WHOLE system (scripts/system.ts: local ledger, migrated
 * fresh database, indexer, REST /v1 gateway) on loopback, REST calls with an account's key, agents
 * with funded wallets, and the on-chain token balance of any address read straight from the ledger.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { getAssociatedTokenAddressSync } from "@solana/spl-token";
import { Connection, PublicKey } from "@solana/web3.js";
import { pino } from "pino";
import { startSystem, type System } from "../../scripts/system.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { type RestAnswer, restCall } from "../support/rest.js";

export interface TestSystem {
  readonly system: System;
  readonly db: FreshDatabase;
  readonly connection: Connection;
  stop(): Promise<void>;
}

export async function startTestSystem(options: { payeeAccountQuota?: number } = {}): Promise<TestSystem> {
  const db = await createFreshDatabase();
  const system = await startSystem({
    databaseUrl: db.url,
    port: 0,
    allowPrivateNetworks: true,
    logger: pino({ level: "silent" }),
    ...options,
  });
  const connection = new Connection(system.localnet.info.rpcUrl, "confirmed");
  return {
    system,
    db,
    connection,
    async stop() {
      await system.stop();
      await db.drop();
    },
  };
}

export type { RestAnswer } from "../support/rest.js";

/** One REST /v1 call on the system with `apiKey` (none when null); a string body is sent as written. */
export function rest(
  system: System,
  apiKey: string | null,
  method: string,
  path: string,
  body?: unknown,
  idempotencyKey?: string,
): Promise<RestAnswer> {
  const sent = typeof body === "string" ? { raw: body } : { body };
  return restCall(system.apiUrl, method, path, { key: apiKey, ...sent, idem: idempotencyKey, lenientJson: true });
}

/** Registers an agent in the key's account and funds its wallet with `usdc` (a decimal literal). */
export async function fundedAgent(system: System, apiKey: string, agentId: string, usdc: number): Promise<string> {
  const created = await rest(system, apiKey, "POST", "/v1/agents", { agentId });
  if (created.status !== 201) throw new Error(`agent ${agentId}: ${created.status} ${created.text}`);
  if (usdc > 0) {
    const funded = await rest(system, apiKey, "POST", `/v1/agents/${agentId}/wallet/fund`, { usdc });
    if (funded.status !== 200) throw new Error(`fund ${agentId}: ${funded.status} ${funded.text}`);
  }
  return created.body.address as string;
}

/** The settlement token in `owner`'s associated token account, in base units, as the ledger reports it. */
export async function tokenBalanceUnits(test: TestSystem, owner: string): Promise<bigint> {
  const account = getAssociatedTokenAddressSync(new PublicKey(test.system.token), new PublicKey(owner), true);
  if ((await test.connection.getAccountInfo(account, "confirmed")) === null) return 0n;
  const balance = await test.connection.getTokenAccountBalance(account, "confirmed");
  return BigInt(balance.value.amount);
}

export interface Served {
  readonly origin: string;
  close(): Promise<void>;
}

/** A real node:http server on loopback. */
export async function serve(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<Served> {
  const server: Server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Serves a fetch-style handler over node:http (the bridge a fetch runtime provides). */
export async function serveFetch(handler: (request: Request) => Promise<Response>): Promise<Served> {
  let origin = "";
  const served = await serve((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value);
      const body = chunks.length === 0 ? null : Buffer.concat(chunks);
      handler(new Request(`${origin}${req.url ?? "/"}`, { method: req.method ?? "GET", headers, ...(body === null ? {} : { body }) }))
        .then(async (response) => {
          res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
          res.end(Buffer.from(await response.arrayBuffer()));
        })
        .catch(() => {
          res.writeHead(500);
          res.end();
        });
    });
  });
  origin = served.origin;
  return served;
}

/** Authorizes a payment for `agentId` through the gateway with the 402 body the seller answered. */
export async function authorizePayment(
  system: System,
  apiKey: string,
  agentId: string,
  endpoint: string,
  offer: { x402?: unknown; mpp?: unknown; protocolPreference?: string },
) {
  const answer = await rest(system, apiKey, "POST", `/v1/agents/${agentId}/payments/authorize`, { endpoint, ...offer });
  if (answer.status !== 200) throw new Error(`authorize: ${answer.status} ${answer.text}`);
  return answer.body as {
    reservationId: string;
    headers?: Record<string, string>;
    submission?: unknown;
    paymentEndpoint?: string;
  };
}

export function decodeBase64Json(value: string | null): unknown {
  if (value === null) return null;
  return JSON.parse(Buffer.from(value, "base64").toString("utf8"));
}
