-- Archiving an agent (DELETE /v1/agents/{agentId}, docs/rest.md "Archiving an agent"): the row is
-- kept, never deleted, because its id is what transactions, payment trees, spend rollups,
-- rejections, reservations, policies and wallet operations reference; deleting it would orphan
-- (or cascade away) that history. `archived_at` set = the agent can no longer authorize payments
-- or be funded, and listings hide it unless asked (`includeArchived`). Its id stays taken, so a
-- later agent can never inherit its history.
ALTER TABLE agents ADD COLUMN archived_at timestamptz;
