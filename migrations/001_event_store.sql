-- The event store: facts read from the chain. Append-only; the chain is the authority.

-- One row per program event. The key is where the event sits in its transaction, so the same
-- event read twice (replay, overlapping backfill, two sources) lands on the same row.
CREATE TABLE chain_events (
  id                bigserial PRIMARY KEY,
  signature         text        NOT NULL,
  instruction_index integer     NOT NULL,
  -- Position among the instruction's inner instructions; -1 when read from `Program data:` logs.
  inner_index       integer     NOT NULL,
  -- Position among the transaction's events.
  event_ordinal     integer     NOT NULL,
  slot              bigint      NOT NULL,
  block_time        timestamptz,
  commitment        text        NOT NULL CHECK (commitment IN ('processed', 'confirmed', 'finalized')),
  -- The only mutable column: set once the slot is finalized, never cleared.
  finalized         boolean     NOT NULL DEFAULT false,
  event_name        text        NOT NULL,
  -- Decoded body; u64/i64 as decimal strings, keys base58, hashes hex.
  payload           jsonb       NOT NULL,
  -- Discriminator + borsh body exactly as emitted.
  raw               bytea       NOT NULL,
  source            text        NOT NULL CHECK (source IN ('inner-instructions', 'logs')),
  ingested_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (signature, instruction_index, inner_index, event_ordinal)
);
CREATE INDEX chain_events_slot ON chain_events (slot, id);
CREATE INDEX chain_events_name ON chain_events (event_name, id);

-- Every transaction a source handed us, with what the decoder made of it. Skipped ones
-- (failed, foreign, malformed, unknown event, truncated logs) are counted here, never thrown.
CREATE TABLE chain_transactions_seen (
  signature   text        PRIMARY KEY,
  slot        bigint      NOT NULL,
  outcome     text        NOT NULL CHECK (outcome IN
                ('indexed', 'no_events', 'failed', 'foreign', 'malformed', 'unknown_event', 'truncated')),
  event_count integer     NOT NULL,
  detail      text,
  seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chain_transactions_seen_outcome ON chain_transactions_seen (outcome);
CREATE INDEX chain_transactions_seen_slot ON chain_transactions_seen (slot);

-- The SPL Token TransferChecked a settlement reference names (records settled by a third-party
-- facilitator). Facts from the referenced transaction; append-only.
CREATE TABLE settlement_transfers (
  signature        text PRIMARY KEY,
  slot             bigint        NOT NULL,
  -- null when the referenced transaction holds no TransferChecked (or failed).
  source_owner     text,
  destination_owner text,
  authority        text,
  mint             text,
  amount_units     numeric(20,0),
  decimals         integer,
  failed           boolean       NOT NULL
);

-- How far each source has been ingested. Advanced in the same transaction as the events.
CREATE TABLE checkpoints (
  source     text        PRIMARY KEY,
  slot       bigint      NOT NULL,
  blockhash  text,
  updated_at timestamptz NOT NULL DEFAULT now()
);
