-- A transaction whose address-table keys the source did not report is recorded `unresolved`
-- (its events cannot be read without them) instead of `no_events`; reading it again with its keys
-- replaces the row, and `indexer verify` reports every one left.
ALTER TABLE chain_transactions_seen DROP CONSTRAINT chain_transactions_seen_outcome_check;
ALTER TABLE chain_transactions_seen ADD CONSTRAINT chain_transactions_seen_outcome_check CHECK (outcome IN
  ('indexed', 'no_events', 'failed', 'foreign', 'malformed', 'unknown_event', 'truncated', 'unresolved'));
CREATE INDEX chain_transactions_seen_unresolved ON chain_transactions_seen (slot) WHERE outcome = 'unresolved';
