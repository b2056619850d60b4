-- Issue 32: the transactions listing reads each agent's newest payments in (timestamp, event_id)
-- order (api/query/read/transactions.ts). With event_id in the index that read is an index-only
-- scan in the listing's exact order: no heap fetch per key and no sort of each agent's ties
-- (on 1,000,000 payments, 20 agents × 51 keys: 1,100 buffers and an incremental sort before,
-- 70 buffers after; bench/http). Same name and leading columns: every read of (agent) or
-- (agent, timestamp) it served, this one serves.
DROP INDEX transactions_agent_time;
CREATE INDEX transactions_agent_time ON transactions (agent, "timestamp", event_id);
