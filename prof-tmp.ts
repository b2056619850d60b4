import pg from "pg";
import { decodeRawTransaction } from "./indexer/decode/transaction.js";
import { ingestBatch } from "./indexer/store/ingest.js";
import { createFreshDatabase } from "./test/indexer/fresh-database.js";
import { syntheticTransaction } from "./bench/indexer/synthetic.js";
const times = new Map<string, number>();
const orig = pg.Client.prototype.query as any;
(pg.Client.prototype as any).query = function (this: any, ...args: any[]) {
  const text = typeof args[0] === "string" ? args[0] : args[0]?.text ?? "?";
  const key = text.replace(/\s+/g, " ").trim().slice(0, 50);
  const t = performance.now();
  const r = orig.apply(this, args);
  if (r && typeof r.then === "function") return r.then((v: any) => { times.set(key, (times.get(key) ?? 0) + performance.now() - t); return v; });
  return r;
};
const db = await createFreshDatabase();
const decoded = Array.from({ length: 40000 }, (_, i) => decodeRawTransaction(syntheticTransaction(i)));
const t0 = performance.now();
for (let s = 0; s < decoded.length; s += 2000) {
  const chunk = decoded.slice(s, s + 2000);
  await ingestBatch(db.pool, { transactions: chunk, checkpoint: { source: "b", slot: chunk.at(-1)!.slot, blockhash: null } }, { cluster: "devnet" });
}
console.log("total", Math.round(performance.now() - t0));
for (const [k, v] of [...times].sort((a, b) => b[1] - a[1])) console.log(Math.round(v), k);
await db.drop();
