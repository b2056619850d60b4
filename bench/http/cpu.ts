/**
 * What the compiled executor saves, in Node CPU time per request rather than requests per second:
 * CPU time is what a loaded, shared machine distorts least. The query service with graphql-jit
 * (the default) and with graphql-js (`compiledExecutor: false`) answer the same requests through
 * `yoga.fetch` (no sockets), 8 at a time, in alternating order over 5 rounds, after a warmup; the
 * median of `process.cpuUsage()` per request is printed for `{ __typename }` and for
 * `transactions(limit: 50)` (a store of 200,000 payments, bench/http/store.ts). Postgres's own CPU
 * is not counted: the executor does not change it.
 *
 *   npx tsx bench/http/cpu.ts
 */
import { createApiServer } from "../../api/query/server.js";
import { issueApiKey } from "../../api/shared/keys.js";
import { createFreshDatabase } from "../../test/indexer/fresh-database.js";
import { seedPayments } from "./store.js";
const db = await createFreshDatabase();
const accountId = await seedPayments(db.pool, { payments: 200_000, agents: 1000, accounts: 50 });
const { apiKey } = await issueApiKey(db.pool, accountId);
const jit = createApiServer({ pool: db.pool, liveFeed: false });
const plain = createApiServer({ pool: db.pool, liveFeed: false, compiledExecutor: false });
const bodies = {
  typename: JSON.stringify({ query: "{ __typename }" }),
  transactions: JSON.stringify({
    query: `query T($limit: Int) { transactions(limit: $limit) { nodes { id txHash agentId protocol amountPaidUnits endpoint domain timestamp depth status } pageInfo { hasNextPage endCursor } } }`,
    variables: { limit: 50 },
  }),
};
async function cpuPerRequest(server: typeof jit, body: string, n: number): Promise<number> {
  const req = async (): Promise<void> => {
    const response = await server.yoga.fetch("http://localhost/graphql", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body,
    });
    const text = await response.text();
    if (response.status !== 200 || text.includes('"errors"')) throw new Error(`${response.status} ${text.slice(0, 300)}`);
  };
  const before = process.cpuUsage();
  for (let i = 0; i < n; i += 8) await Promise.all(Array.from({ length: 8 }, req));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}
const ROUNDS = 5;
for (const [name, body] of Object.entries(bodies)) {
  const n = name === "typename" ? 4000 : 800;
  await cpuPerRequest(jit, body, n);
  await cpuPerRequest(plain, body, n);
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2) {
      b.push(await cpuPerRequest(plain, body, n));
      a.push(await cpuPerRequest(jit, body, n));
    } else {
      a.push(await cpuPerRequest(jit, body, n));
      b.push(await cpuPerRequest(plain, body, n));
    }
  }
  const med = (x: number[]): string => [...x].sort((p, q) => p - q)[Math.floor(ROUNDS / 2)]!.toFixed(0);
  console.log(
    `${name}: CPU µs per request, jit ${med(a)} (${a.map((x) => x.toFixed(0)).join(",")}), graphql-js ${med(b)} (${b.map((x) => x.toFixed(0)).join(",")})`,
  );
}
await db.drop();
process.exit(0);
