-- Read models projected from chain_events (and settlement_transfers) only. Disposable: `rebuild`
-- truncates them and replays the event store.

-- Spec 2.2: one row per recorded payment (a PaymentRecorded event).
-- No foreign keys to chain_events: a projection is derived from it, rebuilt from it and checked
-- against it by verify; a foreign key would make every projected row lock its event row (FOR KEY
-- SHARE), writing to the event store's pages on every ingest.
CREATE TABLE transactions (
  event_id             bigint        PRIMARY KEY,
  tx_hash              text          NOT NULL,
  instruction_index    integer       NOT NULL,
  -- Payer address until the gateway maps wallets to agent ids.
  agent                text          NOT NULL,
  payee                text          NOT NULL,
  mint                 text          NOT NULL,
  payment_id           numeric(20,0) NOT NULL,
  protocol             text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  rail                 text          NOT NULL CHECK (rail IN ('stablecoin', 'card', 'other')),
  amount_units         numeric(20,0) NOT NULL,
  endpoint_hash        text          NOT NULL,
  policy_check         text          NOT NULL DEFAULT 'passed',
  parent_tx_hash       text,
  invocation           text,
  atomic               boolean       NOT NULL,
  settlement_reference text,
  -- 'verified' | 'unverified' for records naming a settlement; null otherwise.
  settlement_status    text CHECK (settlement_status IN ('verified', 'unverified')),
  explorer_url         text          NOT NULL,
  "timestamp"          timestamptz   NOT NULL,
  slot                 bigint        NOT NULL,
  status               text          NOT NULL CHECK (status IN ('confirmed', 'finalized'))
);
CREATE INDEX transactions_tx_hash ON transactions (tx_hash);
CREATE INDEX transactions_agent_time ON transactions (agent, "timestamp");
CREATE INDEX transactions_parent ON transactions (parent_tx_hash);
CREATE INDEX transactions_settlement ON transactions (settlement_reference) WHERE settlement_reference IS NOT NULL;

-- Payment trees: the invoking transaction -> each payment made under the invocation.
CREATE TABLE payment_edges (
  child_event_id bigint  PRIMARY KEY,
  parent_tx_hash text    NOT NULL,
  child_tx_hash  text    NOT NULL,
  invocation     text    NOT NULL,
  -- 1 for a payment whose parent has no parent itself; +1 per level.
  depth          integer NOT NULL CHECK (depth >= 1)
);
CREATE INDEX payment_edges_parent ON payment_edges (parent_tx_hash);

-- Spend per payer x minute x protocol x endpoint hash. Domains come from `endpoints` (the chain
-- knows only hashes), so the per-domain view groups hashes at read time.
CREATE TABLE spend_rollups (
  agent         text          NOT NULL,
  bucket_start  timestamptz   NOT NULL,
  protocol      text          NOT NULL,
  endpoint_hash text          NOT NULL,
  amount_units  numeric(20,0) NOT NULL,
  tx_count      bigint        NOT NULL,
  PRIMARY KEY (agent, bucket_start, protocol, endpoint_hash)
);

-- Spec 4.2 metrics per payer x minute; policy_violations come from the gateway later.
CREATE TABLE metric_buckets (
  agent             text          NOT NULL,
  bucket_start      timestamptz   NOT NULL,
  spend_units       numeric(20,0) NOT NULL,
  tx_count          bigint        NOT NULL,
  x402_spend_units  numeric(20,0) NOT NULL,
  x402_count        bigint        NOT NULL,
  mpp_spend_units   numeric(20,0) NOT NULL,
  mpp_count         bigint        NOT NULL,
  policy_violations bigint        NOT NULL DEFAULT 0,
  PRIMARY KEY (agent, bucket_start)
);

-- agents.invoke budgets and their consumption.
CREATE TABLE invocations (
  invocation     text          PRIMARY KEY,
  invoker        text,
  sub_agent      text          NOT NULL,
  parent_tx_hash text          NOT NULL,
  budget_units   numeric(20,0) NOT NULL,
  spent_units    numeric(20,0) NOT NULL,
  payment_count  bigint        NOT NULL,
  opened_slot    bigint
);

-- Filled by the gateway (hash -> endpoint text); not a projection, never truncated by rebuild.
CREATE TABLE endpoints (
  endpoint_hash text PRIMARY KEY,
  endpoint      text NOT NULL,
  domain        text NOT NULL
);

-- Spec 2.2 as read: the endpoint text when the gateway knows it, the hash otherwise.
CREATE VIEW transactions_view AS
SELECT t.*, coalesce(e.endpoint, t.endpoint_hash) AS endpoint
FROM transactions t LEFT JOIN endpoints e USING (endpoint_hash);

CREATE VIEW spend_rollups_by_domain AS
SELECT r.agent, r.bucket_start, r.protocol, coalesce(e.domain, r.endpoint_hash) AS domain,
       sum(r.amount_units) AS amount_units, sum(r.tx_count) AS tx_count
FROM spend_rollups r LEFT JOIN endpoints e USING (endpoint_hash)
GROUP BY 1, 2, 3, 4;
