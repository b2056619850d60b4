-- paymentTree walks payment_edges alone: the child's payer (for the account filter) sits on the
-- edge, and the parent index carries what the walk reads, so each level is an index-only scan.
ALTER TABLE payment_edges ADD COLUMN child_payer text;
UPDATE payment_edges e SET child_payer = t.agent FROM transactions t WHERE t.event_id = e.child_event_id;
ALTER TABLE payment_edges ALTER COLUMN child_payer SET NOT NULL;
DROP INDEX payment_edges_parent;
CREATE INDEX payment_edges_parent ON payment_edges (parent_tx_hash) INCLUDE (child_event_id, child_tx_hash, child_payer);
