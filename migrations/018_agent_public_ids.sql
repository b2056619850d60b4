-- Agent ids are scoped per account (issue 10 §4): two accounts may each have an agent `researcher`,
-- and registering an id another account holds must not answer 409 (that was an existence oracle).
--
-- `agents.agent_id` stays the internal key every gateway table references (payment_rejections,
-- agent_wallets, wallet_operations, policies, spend_reservations, x402_nonces, the MPP tables,
-- gateway_events, alerts, ...), so no foreign key is rewritten, and a sealed wallet key, whose
-- associated data is `{agentId, address}`, still opens. It is never shown to a caller.
--
-- `public_id` is the id callers see and send, unique within an account. It is derived from the
-- internal key, never stored apart from it, so the two cannot disagree:
--   - an agent registered before this migration keeps agent_id = public_id (`researcher`);
--   - a new agent gets agent_id = '<account uuid>/<public id>' (`1b2c…/researcher`).
-- `/` is not allowed in a public id, so everything after the first `/` is the public id, and the
-- gateway maps an internal key to its public id without a lookup (api/agent-ids.ts).
-- `gateway_events.agent_id` (no foreign key) holds the public id, as the payload it sits beside
-- does; with `account_id` it names the agent.
ALTER TABLE agents DROP CONSTRAINT agents_agent_id_check;
ALTER TABLE agents ADD COLUMN public_id text GENERATED ALWAYS AS (substr(agent_id, strpos(agent_id, '/') + 1)) STORED;
ALTER TABLE agents ADD CONSTRAINT agents_public_id_check CHECK (public_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');
-- Either a pre-migration key or the account-scoped form; never another account's prefix.
ALTER TABLE agents ADD CONSTRAINT agents_agent_id_form CHECK (agent_id = public_id OR agent_id = account_id::text || '/' || public_id);
-- One agent per public id in an account, archived ones included: an archived id stays taken in
-- its account (its history is read through it), while another account may register it.
ALTER TABLE agents ADD CONSTRAINT agents_account_public_id UNIQUE (account_id, public_id);
