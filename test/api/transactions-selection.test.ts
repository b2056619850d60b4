/**
 * `transactions` reads only the row columns its selection asks for (api/query/resolvers/common.ts
 * transactionColumns): every field of Transaction, asked alone, through a named fragment, an
 * inline fragment or an alias, answers exactly what it answers among all fields, over GraphQL/HTTP
 * on a store with every kind of row (payments with and without known endpoints, parents, tree
 * edges, settlement, reservations' policy versions; rejections with limit terms and versions;
 * another account's agent). The REST listing, which has no selection, answers every field.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, createApiServer } from "../../api/query/server.js";
import { createAccount, issueApiKey } from "../../api/shared/keys.js";
import { limitReason } from "../../api/shared/policy/reasons.js";
import { createFreshDatabase, type FreshDatabase } from "../indexer/fresh-database.js";
import { createClient } from "./client.js";

const NOW = new Date("2026-03-01T12:00:00.000Z");
/** Object fields of Transaction and a sub-selection for each. */
const SUB_SELECTIONS: Record<string, string> = { agent: "{ agentId name }", parent: "{ txHash amountPaid }", channel: "{ address }" };

let db: FreshDatabase;
let server: ApiServer;
let client: ReturnType<typeof createClient>;
let baseUrl = "";
let key = "";

beforeAll(async () => {
  db = await createFreshDatabase();
  const account = await createAccount(db.pool, "selection");
  const other = await createAccount(db.pool, "other");
  key = (await issueApiKey(db.pool, account)).apiKey;
  // Agents 0-2 are the account's, agent 3 another account's.
  await db.pool.query(
    `INSERT INTO agents (agent_id, account_id, name, wallet_address)
     SELECT 'agent-' || k, CASE WHEN k < 3 THEN $1::uuid ELSE $2::uuid END, 'agent ' || k, 'wallet-' || k FROM generate_series(0, 3) k`,
    [account, other],
  );
  await db.pool.query(
    `INSERT INTO endpoints (endpoint_hash, endpoint, domain) VALUES (md5('e0'), 'api.example.com/v1/data', 'api.example.com')`,
  );
  // 120 payments, one a second: every third under the one before it (a parent, a tree edge),
  // every fifth settled separately, half on an endpoint the gateway does not know.
  await db.pool.query(
    `INSERT INTO transactions (event_id, tx_hash, instruction_index, agent, payee, mint, payment_id, protocol, rail,
                               amount_units, endpoint_hash, atomic, explorer_url, "timestamp", slot, status,
                               parent_tx_hash, settlement_status)
     SELECT i + 1, 'tx-' || i, 0, 'wallet-' || (i % 4), 'payee', 'mint', i, CASE WHEN i % 2 = 0 THEN 'x402' ELSE 'mpp' END,
            'stablecoin', 1000 + i, md5('e' || (i % 2)), i % 5 <> 0, 'https://explorer.example/tx/' || i,
            $1::timestamptz - i * interval '1 second', i, CASE WHEN i % 7 = 0 THEN 'confirmed' ELSE 'finalized' END,
            CASE WHEN i % 3 = 1 THEN 'tx-' || (i + 1) END, CASE WHEN i % 5 = 0 THEN 'verified' END
     FROM generate_series(0, 119) i`,
    [NOW],
  );
  await db.pool.query(
    `INSERT INTO payment_edges (child_event_id, parent_tx_hash, child_tx_hash, invocation, depth, child_payer)
     SELECT event_id, parent_tx_hash, tx_hash, 'invocation-' || event_id, 1 + event_id % 3, agent FROM transactions WHERE parent_tx_hash IS NOT NULL`,
  );
  await db.pool.query(
    `INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, status, created_at, budget_window_start, tx_hash, policy_version)
     SELECT 'agent-' || (i % 4), 1000, 'api.example.com/v1/data', 'api.example.com', 'x402', 'released', $1, $1, 'tx-' || i, i % 9
     FROM generate_series(0, 119, 4) i`,
    [NOW],
  );
  // Rejections between the payments, half with limit terms, some with a version.
  for (let i = 0; i < 20; i += 1) {
    await db.pool.query(
      `INSERT INTO payment_rejections (agent_id, amount_units, endpoint, domain, protocol, reason_code, reason, created_at, policy_version)
       VALUES ($1, $2, 'api.example.com/v1/data', 'api.example.com', $3, 'per_call_limit_exceeded', $4, $5, $6)`,
      [
        `agent-${i % 4}`,
        2_000 + i,
        i % 3 === 0 ? null : "x402",
        i % 2 === 0 ? limitReason("per_call_limit_exceeded", "0.002000", "0.001000", "usdc") : "per_call_limit_exceeded: other",
        new Date(NOW.getTime() - i * 5_500),
        i % 4 === 0 ? null : i,
      ],
    );
  }
  server = createApiServer({ pool: db.pool, now: () => NOW, liveFeed: false });
  baseUrl = `http://127.0.0.1:${await server.listen(0)}`;
  client = createClient(baseUrl);
});

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

async function transactionFields(): Promise<string[]> {
  const data = await client.ok(key, `{ __type(name: "Transaction") { fields { name } } }`);
  return (data.__type.fields as { name: string }[]).map((f) => f.name);
}

const selection = (field: string): string => `${field} ${SUB_SELECTIONS[field] ?? ""}`;

describe("transactions reads the columns its selection asks for", () => {
  it("every field answers alone, in a fragment, in an inline fragment and under an alias what it answers among all", async () => {
    const fields = await transactionFields();
    expect(fields.length).toBeGreaterThan(20);
    const page = "pageInfo { hasNextPage endCursor }";
    for (const limit of [200, 37]) {
      const all = await client.ok(key, `{ transactions(limit: ${limit}) { nodes { ${fields.map(selection).join(" ")} } ${page} } }`);
      const nodes = all.transactions.nodes as Record<string, unknown>[];
      expect(nodes.length).toBe(limit === 200 ? 105 : 37);
      // Every kind of row is on the page: payments and rejections, parents, depths, versions, terms.
      if (limit === 200) {
        for (const field of ["parent", "depth", "policyVersion", "rejectionLimit", "settlementStatus", "domain"]) {
          expect(new Set(nodes.map((n) => JSON.stringify(n[field]))).size, field).toBeGreaterThan(1);
        }
      }
      for (const field of fields) {
        const want = { nodes: nodes.map((n) => ({ [field]: n[field] })), pageInfo: all.transactions.pageInfo };
        const alone = await client.ok(key, `{ transactions(limit: ${limit}) { nodes { ${selection(field)} } ${page} } }`);
        expect(alone.transactions, field).toEqual(want);
        const fragment = await client.ok(
          key,
          `query { transactions(limit: ${limit}) { nodes { ...F } ${page} } } fragment F on Transaction { ${selection(field)} }`,
        );
        expect(fragment.transactions, field).toEqual(want);
        const inline = await client.ok(
          key,
          `{ transactions(limit: ${limit}) { nodes { ... on Transaction { ${selection(field)} } } ${page} } }`,
        );
        expect(inline.transactions, field).toEqual(want);
        const aliased = await client.ok(key, `{ transactions(limit: ${limit}) { nodes { x: ${selection(field)} } ${page} } }`);
        expect(aliased.transactions.nodes, field).toEqual(nodes.map((n) => ({ x: n[field] })));
      }
    }
  });

  it("two selections of the same field merge; only pageInfo reads the keys alone", async () => {
    const data = await client.ok(
      key,
      `{ a: transactions(limit: 5) { nodes { txHash } } b: transactions(limit: 5) { nodes { timestamp } pageInfo { endCursor } }
         transactions(limit: 5) { nodes { amountPaid } nodes { rejectionUnit } } }`,
    );
    const all = await client.ok(
      key,
      `{ transactions(limit: 5) { nodes { txHash timestamp amountPaid rejectionUnit } pageInfo { hasNextPage endCursor } } }`,
    );
    const nodes = all.transactions.nodes as Record<string, unknown>[];
    expect(data.a.nodes).toEqual(nodes.map((n) => ({ txHash: n.txHash })));
    expect(data.b).toEqual({
      nodes: nodes.map((n) => ({ timestamp: n.timestamp })),
      pageInfo: { endCursor: all.transactions.pageInfo.endCursor },
    });
    expect(data.transactions.nodes).toEqual(nodes.map((n) => ({ amountPaid: n.amountPaid, rejectionUnit: n.rejectionUnit })));
    const keys = await client.ok(key, `{ transactions(limit: 5) { pageInfo { hasNextPage endCursor } } }`);
    expect(keys.transactions.pageInfo).toEqual(all.transactions.pageInfo);
  });

  it("the REST listing (no selection) answers every field", async () => {
    const response = await fetch(`${baseUrl}/v1/transactions?limit=50`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { transactions: Record<string, unknown>[] };
    const gql = await client.ok(
      key,
      `{ transactions(limit: 50) { nodes { txHash amountPaidUnits timestamp policyVersion rejectionLimit solanaExplorer } } }`,
    );
    expect(
      body.transactions.map((t) => ({
        txHash: t.txHash,
        amountPaidUnits: t.amountPaidUnits,
        timestamp: t.timestamp,
        policyVersion: t.policyVersion,
        rejectionLimit: t.rejectionLimit,
        solanaExplorer: t.solanaExplorer,
      })),
    ).toEqual(gql.transactions.nodes);
  });
});
