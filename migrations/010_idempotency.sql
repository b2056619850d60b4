-- Idempotency keys of the REST /v1 gateway (api/http/idempotency.ts, docs/rest.md). One row per
-- (account, Idempotency-Key) of a POST. Written by the gateway only.
--
-- A database effect (create an alert, a webhook endpoint, an API key) inserts its row as
-- `completed`, with the response, in the same transaction as the effect: both commit or neither.
-- An effect that leaves Postgres (fund, withdraw, register an agent with its wallet, pay) writes
-- `in_progress` first, then the response once the outcome is known. A row left `in_progress`
-- by a crash is resolved on the next retry through the operation's own reference (the wallet
-- operation's client reference, the agent id), never by doing the effect again.
CREATE TABLE idempotency_keys (
  account_id       uuid        NOT NULL REFERENCES accounts (id),
  key              text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
  -- sha256 (hex) of method, path and the canonical JSON body: same key + different request = error.
  fingerprint      text        NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  method           text        NOT NULL,
  path             text        NOT NULL,
  status           text        NOT NULL CHECK (status IN ('in_progress', 'completed')),
  response_status  integer     CHECK (response_status BETWEEN 100 AND 599),
  -- The JSON body returned first, replayed byte for byte. A response carrying a secret (a new API
  -- key, a webhook signing secret) is stored only sealed (AES-256-GCM, response_sealed).
  response_body    text,
  response_sealed  bytea,
  created_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  -- Kept at least 24 h; pruned after (a reuse after pruning is a new request).
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (account_id, key),
  CHECK (status <> 'completed' OR (response_status IS NOT NULL AND (response_body IS NOT NULL OR response_sealed IS NOT NULL)))
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at) WHERE status = 'completed';
