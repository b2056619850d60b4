/**
 * The chain a database belongs to (indexer/store/chain-identity.ts), on a real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChainMismatch, chainOfDatabase, claimChain } from "../../indexer/store/chain-identity.js";
import { createFreshDatabase, type FreshDatabase } from "./fresh-database.js";

let db: FreshDatabase;

beforeAll(async () => {
  db = await createFreshDatabase();
});

afterAll(async () => {
  await db?.drop();
});

describe("chain identity", () => {
  it("a new database takes the first chain it is claimed for, and keeps it", async () => {
    await db.pool.query("DELETE FROM chain_identity");
    expect(await chainOfDatabase(db.pool)).toBeNull();
    await claimChain(db.pool, "genesis-A");
    await claimChain(db.pool, "genesis-A");
    expect(await chainOfDatabase(db.pool)).toBe("genesis-A");
  });

  it("a claim for another chain is refused, naming both, and changes nothing", async () => {
    await db.pool.query("DELETE FROM chain_identity");
    await claimChain(db.pool, "genesis-A");
    const refused = await claimChain(db.pool, "genesis-B").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ChainMismatch);
    expect((refused as ChainMismatch).databaseChain).toBe("genesis-A");
    expect((refused as ChainMismatch).ledgerChain).toBe("genesis-B");
    expect((refused as Error).message).toContain("genesis-A");
    expect(await chainOfDatabase(db.pool)).toBe("genesis-A");
  });

  it("concurrent claims for two chains on a new database: exactly one wins, the other is refused", async () => {
    await db.pool.query("DELETE FROM chain_identity");
    const claims = ["genesis-A", "genesis-B", "genesis-A", "genesis-B"].map((hash) =>
      claimChain(db.pool, hash).then(
        () => hash,
        (error: unknown) => error,
      ),
    );
    const outcomes = await Promise.all(claims);
    const winner = await chainOfDatabase(db.pool);
    expect(["genesis-A", "genesis-B"]).toContain(winner);
    for (const outcome of outcomes) {
      if (typeof outcome === "string") expect(outcome).toBe(winner);
      else expect(outcome).toBeInstanceOf(ChainMismatch);
    }
    expect(outcomes.filter((outcome) => outcome === winner)).toHaveLength(2);
  });

  it("a new database beside a ledger with history is described as such", () => {
    expect(new ChainMismatch(null, "genesis-C").message).toMatch(/database is new.*genesis-C.*earlier run/);
  });
});
