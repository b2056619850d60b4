-- Marks the settlements whose transaction also creates the payee's associated token account, paid
-- for by the service authority (api/settlement/payee.ts). The settlement counts these per paying
-- account over the last 24 hours and refuses a payment beyond the quota, so paying fresh
-- addresses cannot drain the authority's SOL on rent. A failed settlement created nothing and
-- does not count.
ALTER TABLE settlements ADD COLUMN payee_account_created boolean NOT NULL DEFAULT false;
CREATE INDEX settlements_payee_account_created ON settlements (agent_id, created_at) WHERE payee_account_created;
