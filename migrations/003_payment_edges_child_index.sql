-- Edge depth is computed from the parent's own edge, looked up by its transaction hash.
CREATE INDEX payment_edges_child_tx ON payment_edges (child_tx_hash);
