-- Payment trees from a closure table (issue 17, trees): one row per (ancestor transaction,
-- descendant payment) pair at every distance, maintained by the projection (ingest and rebuild
-- alike, indexer/store/projections.ts), by rollback and by rebuild (a projection table).
-- paymentTree reads every descendant of a root within maxDepth with one range scan of the primary
-- key (ancestor, distance, descendant) instead of a recursive walk, level by level.
-- A payment with a parent link has its parent transaction at distance 1, and every ancestor of a
-- payment of that parent transaction one further. Several paths (a transaction recording payments
-- under different parents) give one row per distinct distance, as the recursive walk did.
CREATE TABLE payment_closure (
  ancestor_tx_hash    text    NOT NULL,
  distance            integer NOT NULL CHECK (distance >= 1),
  descendant_event_id bigint  NOT NULL,
  PRIMARY KEY (ancestor_tx_hash, distance, descendant_event_id)
);
-- A new payment's ancestors are read from its parent's payments' rows; rollback deletes by payment.
CREATE INDEX payment_closure_descendant ON payment_closure (descendant_event_id);

-- Existing trees: the closure of every stored edge, walked once.
INSERT INTO payment_closure (ancestor_tx_hash, distance, descendant_event_id)
WITH RECURSIVE up (descendant_event_id, ancestor_tx_hash, distance) AS (
  SELECT child_event_id, parent_tx_hash, 1 FROM payment_edges
  UNION
  SELECT u.descendant_event_id, e.parent_tx_hash, u.distance + 1
  FROM up u JOIN payment_edges e ON e.child_tx_hash = u.ancestor_tx_hash
  WHERE u.distance < 1024)
SELECT ancestor_tx_hash, distance, descendant_event_id FROM up;
