-- Each closure row carries its descendant payment's tree-node columns (issue 32, trees), and the
-- primary key includes them: a tree is one index-only range scan, in key order, instead of a
-- primary-key lookup of `transactions` per node (10,000 nodes: ~24 against ~63 ms inside
-- Postgres). In the heap alone they would not do: a tree's rows are written over its lifetime,
-- so its heap rows lie scattered and cost a page each (~58 ms).
-- Only a payment's immutable facts: no closure row is ever updated. Its status (confirmed until
-- finality) is read from `transactions_confirmed`, the payments not yet finalized: a few seconds'
-- worth on a live cluster, so the tree reads it whole instead of probing per node.
-- The cost: a payment's columns are stored once per ancestor, twice (heap and key).
-- Rows written since the last vacuum are read from the heap (index-only scans need the
-- visibility map), which autovacuum's insert threshold keeps to the newest.
--
-- Rebuilt rather than updated in place: one write of every row instead of a dead copy of each.
CREATE TABLE payment_closure_nodes (
  ancestor_tx_hash    text          NOT NULL,
  distance            integer       NOT NULL CHECK (distance >= 1),
  descendant_event_id bigint        NOT NULL,
  tx_hash             text          NOT NULL,
  parent_tx_hash      text          NOT NULL,
  agent               text          NOT NULL,
  amount_units        numeric(20,0) NOT NULL,
  protocol            text          NOT NULL,
  endpoint_hash       text          NOT NULL,
  "timestamp"         timestamptz   NOT NULL,
  explorer_url        text          NOT NULL
);
INSERT INTO payment_closure_nodes
SELECT c.ancestor_tx_hash, c.distance, c.descendant_event_id, t.tx_hash, t.parent_tx_hash, t.agent, t.amount_units,
       t.protocol, t.endpoint_hash, t."timestamp", t.explorer_url
FROM payment_closure c JOIN transactions t ON t.event_id = c.descendant_event_id
ORDER BY c.ancestor_tx_hash, c.distance, c.descendant_event_id;
DROP TABLE payment_closure;
ALTER TABLE payment_closure_nodes RENAME TO payment_closure;
ALTER TABLE payment_closure ADD CONSTRAINT payment_closure_pkey PRIMARY KEY (ancestor_tx_hash, distance, descendant_event_id)
  INCLUDE (tx_hash, parent_tx_hash, agent, amount_units, protocol, endpoint_hash, "timestamp", explorer_url);
CREATE INDEX payment_closure_descendant ON payment_closure (descendant_event_id);

CREATE INDEX transactions_confirmed ON transactions (event_id) WHERE status = 'confirmed';
