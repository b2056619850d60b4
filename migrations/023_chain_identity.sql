-- The chain this database projects: the genesis hash of the cluster it was first built from.
-- A database holds the history of one chain; a start against another chain (a ledger wiped or
-- replaced by hand, a database pointed at the wrong cluster) is refused instead of mixing the two
-- (indexer/store/chain-identity.ts). One row at most.
CREATE TABLE chain_identity (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  genesis_hash text NOT NULL CHECK (genesis_hash <> ''),
  claimed_at timestamptz NOT NULL DEFAULT now()
);
