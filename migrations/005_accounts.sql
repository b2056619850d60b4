-- Gateway tables for the query service: accounts, their API keys and agents, and the payments
-- the gateway rejected (they never reach the chain). Written by the gateway, never by the indexer;
-- `rebuild` does not touch them.

CREATE TABLE accounts (
  id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  name       text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- A key is 32 random bytes shown once at issue; only its sha256 is stored. A high-entropy key
-- needs no salt or slow hash: nobody can guess it, so the hash only protects a leaked table.
CREATE TABLE api_keys (
  id          bigserial   PRIMARY KEY,
  account_id  uuid        NOT NULL REFERENCES accounts (id),
  key_sha256  text        NOT NULL UNIQUE CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
  -- The key's first characters, for display ("apg_1a2b3c4d…"); not enough to use it.
  prefix      text        NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

-- Spec 2.5: the agents of an account. `wallet_address` is the payer address the chain records,
-- which is how `transactions.agent` maps to an agent id.
CREATE TABLE agents (
  agent_id       text        PRIMARY KEY CHECK (agent_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
  account_id     uuid        NOT NULL REFERENCES accounts (id),
  name           text        NOT NULL DEFAULT '',
  wallet_address text        NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_account ON agents (account_id, agent_id);

-- Spec 2.2 / 3: a payment a policy rejected appears in listings with status `rejected`.
CREATE TABLE payment_rejections (
  id           bigserial     PRIMARY KEY,
  agent_id     text          NOT NULL REFERENCES agents (agent_id),
  amount_units numeric(20,0) NOT NULL CHECK (amount_units >= 0),
  -- Host and path without scheme, as spec 2.2 prints endpoints.
  endpoint     text          NOT NULL,
  domain       text          NOT NULL,
  -- Null when the call was rejected before a protocol was chosen (a domain breach).
  protocol     text          CHECK (protocol IN ('x402', 'mpp')),
  -- Machine code, e.g. `per_call_limit_exceeded` (spec 6, 7).
  reason_code  text          NOT NULL,
  -- Human text: `<reason_code>: requested <amount> <unit>, limit is <amount> <unit>`.
  reason       text          NOT NULL,
  created_at   timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX payment_rejections_agent_time ON payment_rejections (agent_id, created_at);
