-- Events, alerts and the webhook outbox (spec 2.10, 3, 6). Gateway tables: written by the gateway
-- and the dispatcher, never by the indexer. See docs/events.md.

-- One row per event the gateway emits (`budget.warning`, `policy.violation`, an alert firing),
-- written in the same transaction as the change that caused it. The id is the Standard Webhooks
-- `webhook-id` of every delivery of the event: stable across retries, the receivers' dedupe key.
CREATE TABLE gateway_events (
  id          text        PRIMARY KEY CHECK (id ~ '^evt_[0-9a-f]{32}$'),
  account_id  uuid        NOT NULL REFERENCES accounts (id),
  agent_id    text,
  type        text        NOT NULL CHECK (type ~ '^[a-z_]+\.[a-z_]+$'),
  -- The exact JSON body a webhook receiver gets (spec 6 shapes). `json`, not `jsonb`: the text is
  -- kept byte for byte (field order included), and it is what gets signed and sent.
  payload     json        NOT NULL,
  -- Set when an alert rule produced the event (its notification goes to the alert's target only).
  alert_id    uuid,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gateway_events_account_time ON gateway_events (account_id, created_at);

-- Webhook endpoints registered per account. The signing secret (`whsec_…`) is shown once at
-- creation; only its AES-256-GCM ciphertext is stored (key from WEBHOOK_SECRETS_KEY, never here).
CREATE TABLE webhook_endpoints (
  id                uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id        uuid        NOT NULL REFERENCES accounts (id),
  url               text        NOT NULL CHECK (url ~ '^https?://'),
  event_types       text[]      NOT NULL CHECK (cardinality(event_types) > 0),
  description       text        NOT NULL DEFAULT '',
  secret_ciphertext bytea       NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  -- Deleted endpoints are kept (disabled) so the outbox rows that name them stay readable.
  disabled_at       timestamptz,
  disabled_reason   text
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id) WHERE disabled_at IS NULL;

-- Alert rules (spec 2.10). threshold_bp: percent in hundredths (budget_pct, 80 % = 8000);
-- threshold_units: token base units (spend_rate); window_ms: the spend_rate window.
CREATE TABLE alerts (
  id                 uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id         uuid          NOT NULL REFERENCES accounts (id),
  agent_id           text          NOT NULL REFERENCES agents (agent_id),
  type               text          NOT NULL CHECK (type IN ('budget_pct', 'spend_rate', 'policy_violation')),
  threshold_bp       integer       CHECK (threshold_bp > 0 AND threshold_bp <= 10000),
  threshold_units    numeric(20,0) CHECK (threshold_units > 0),
  window_text        text,
  window_ms          bigint        CHECK (window_ms > 0),
  notify             text          NOT NULL CHECK (notify ~ '^(webhook|email):'),
  -- Signs the alert's webhook notifications; null for email targets. Encrypted as above.
  secret_ciphertext  bytea,
  -- budget_pct: start of the budget period it last fired in (fires once per period).
  fired_window_start timestamptz,
  -- spend_rate: when it last fired (fires at most once per window length).
  last_fired_at      timestamptz,
  created_at         timestamptz   NOT NULL DEFAULT now(),
  deleted_at         timestamptz,
  CHECK ((type = 'budget_pct') = (threshold_bp IS NOT NULL)),
  CHECK ((type = 'spend_rate') = (threshold_units IS NOT NULL AND window_ms IS NOT NULL AND window_text IS NOT NULL)),
  CHECK ((notify LIKE 'webhook:%') = (secret_ciphertext IS NOT NULL))
);
CREATE INDEX alerts_agent ON alerts (agent_id, type) WHERE deleted_at IS NULL;
CREATE INDEX alerts_account ON alerts (account_id, created_at);

-- The outbox: one row per (event, destination), inserted in the event's transaction, so an event
-- whose transaction rolls back has no delivery and a committed one cannot lose its deliveries.
-- The dispatcher claims due rows with FOR UPDATE SKIP LOCKED and leases them (locked_until); a
-- lease that runs out (a killed dispatcher) makes the row due again.
CREATE TABLE event_deliveries (
  id                bigserial   PRIMARY KEY,
  event_id          text        NOT NULL REFERENCES gateway_events (id),
  channel           text        NOT NULL CHECK (channel IN ('webhook', 'email')),
  -- The URL (webhook) or the e-mail address.
  destination       text        NOT NULL,
  endpoint_id       uuid        REFERENCES webhook_endpoints (id),
  alert_id          uuid        REFERENCES alerts (id),
  -- Copied from the endpoint or alert at enqueue time, so later deletion cannot strand a delivery.
  secret_ciphertext bytea,
  status            text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  -- Attempts started (counted at claim time, so a delivery that kills its dispatcher still counts).
  attempts          integer     NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  locked_until      timestamptz,
  lease_token       uuid,
  last_status       integer,
  last_error        text,
  delivered_at      timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  CHECK ((channel = 'webhook') = (secret_ciphertext IS NOT NULL)),
  CHECK (endpoint_id IS NULL OR alert_id IS NULL)
);
CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX event_deliveries_event ON event_deliveries (event_id);
