-- Gateway tables of the spend-policy engine (spec 2.1, 3, 8). Written by the gateway only; the
-- indexer never touches them. agent_id is the gateway's agent id (no foreign key: agents live in
-- 005_accounts.sql and a policy may be set before the registration is visible to this table).

-- One policy per agent. NULL in a limit column means "no limit", as `null` does in spec 2.1.
CREATE TABLE policies (
  agent_id             text          PRIMARY KEY,
  daily_budget_units   numeric(20,0) CHECK (daily_budget_units > 0),
  per_call_limit_units numeric(20,0) CHECK (per_call_limit_units > 0),
  -- NULL: any domain may be paid. '{}': none may. Entries are lower-case ASCII host names.
  allowed_domains      text[],
  blocked_domains      text[]        NOT NULL DEFAULT '{}',
  rate_limit_calls     integer       CHECK (rate_limit_calls > 0),
  rate_limit_window    text          CHECK (rate_limit_window IN ('1m', '5m', '15m', '1h', '24h')),
  protocol_preference  text          NOT NULL DEFAULT 'auto' CHECK (protocol_preference IN ('auto', 'x402', 'mpp')),
  updated_at           timestamptz   NOT NULL DEFAULT now(),
  CHECK ((rate_limit_calls IS NULL) = (rate_limit_window IS NULL))
);

-- The reservation ledger: every payment the policy accepted, written in the same transaction as
-- the check (under a per-agent advisory lock), so concurrent payments cannot overspend. Usage
-- (daily budget, rate limit) is computed from the rows that are 'reserved' or 'settled'; a
-- 'released' row (the payment never happened) gives its amount and its call back.
CREATE TABLE spend_reservations (
  id                  bigserial     PRIMARY KEY,
  agent_id            text          NOT NULL,
  amount_units        numeric(20,0) NOT NULL CHECK (amount_units > 0),
  endpoint            text          NOT NULL,
  -- The normalized host the policy checked.
  domain              text          NOT NULL,
  protocol            text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  status              text          NOT NULL DEFAULT 'reserved' CHECK (status IN ('reserved', 'settled', 'released')),
  created_at          timestamptz   NOT NULL,
  -- Start of the daily budget period this payment counts in: its own created_at when it opened the
  -- period, else the start of the period open at created_at. Kept on the row because a period's
  -- start depends on the whole history of earlier periods, which no bounded query could recompute.
  budget_window_start timestamptz   NOT NULL,
  tx_hash             text,
  CHECK (status <> 'settled' OR tx_hash IS NOT NULL)
);
CREATE INDEX spend_reservations_agent_time ON spend_reservations (agent_id, created_at) WHERE status <> 'released';
CREATE INDEX spend_reservations_agent_window ON spend_reservations (agent_id, budget_window_start) WHERE status <> 'released';
