-- The token accounts the service opened for its own agents when they were created (the service
-- authority pays the rent), so a new agent can be paid at once by any client, including an
-- official x402 client that expects the payee's token account to exist. Each row counts against
-- the same per-account 24-hour quota as payee token accounts created by settlements
-- (api/gateway/settlement/payee-account.ts, store.ts payeeAccountsCreatedToday).
CREATE TABLE agent_token_accounts (
  agent_id    text        PRIMARY KEY REFERENCES agents (agent_id),
  account_id  uuid        NOT NULL REFERENCES accounts (id),
  address     text        NOT NULL,
  -- The creating transaction, once it is signed.
  signature   text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_token_accounts_account_time ON agent_token_accounts (account_id, created_at);
