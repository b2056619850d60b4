-- Indexes no query reads, each one more random insert per event on the ingest path (issue 17):
-- - chain_events_name: projections select events by id (ingest from memory, rebuild by id range,
--   the primary key), never by name first.
-- - chain_transactions_seen_outcome: nothing filters the seen transactions by outcome (a handful
--   of distinct values; an audit scans the table).
-- - transactions_parent: trees are read from payment_edges (payment_edges_parent), runs too;
--   nothing looks a record up by its parent transaction in `transactions`.
DROP INDEX IF EXISTS chain_events_name;
DROP INDEX IF EXISTS chain_transactions_seen_outcome;
DROP INDEX IF EXISTS transactions_parent;
