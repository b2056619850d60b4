/**
 * Which chain a database belongs to: the store of table `chain_identity` (one row, the genesis
 * hash of the cluster the database was first built from). The SQL on that table lives here.
 *
 * A database and a ledger that do not belong together are refused before anything is read or
 * written, never mixed: `claimChain` records the chain of a database that has none and compares
 * it otherwise. Two processes claiming at once agree, because the insert of the one row is
 * conditional and both read the row that won.
 */
import type { Db } from "../db/database.js";

/**
 * A database built from one chain, started against another; or a new database (`databaseChain`
 * null) started against a ledger that already has a history the database never saw.
 */
export class ChainMismatch extends Error {
  constructor(
    readonly databaseChain: string | null,
    readonly ledgerChain: string,
  ) {
    super(
      databaseChain === null
        ? `the database is new, but the ledger (chain ${ledgerChain}) holds a history from an earlier run`
        : `the database holds the history of chain ${databaseChain}, but the ledger is chain ${ledgerChain}`,
    );
    this.name = "ChainMismatch";
  }
}

/** The genesis hash recorded for this database, or null when it has none yet. */
export async function chainOfDatabase(db: Db): Promise<string | null> {
  const { rows } = await db.query<{ genesis_hash: string }>("SELECT genesis_hash FROM chain_identity");
  return rows[0]?.genesis_hash ?? null;
}

/** Records `genesisHash` as this database's chain when it has none; throws ChainMismatch when it has another. */
export async function claimChain(db: Db, genesisHash: string): Promise<void> {
  await db.query("INSERT INTO chain_identity (genesis_hash) VALUES ($1) ON CONFLICT (singleton) DO NOTHING", [genesisHash]);
  const recorded = await chainOfDatabase(db);
  if (recorded !== genesisHash) throw new ChainMismatch(recorded, genesisHash);
}
