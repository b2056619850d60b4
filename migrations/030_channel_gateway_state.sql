-- Channel sessions, the gateway's working state (issue 16, api/gateway/channels): what it needs
-- beyond the shared contract of migrations/025 to open, sign and settle crash-safely.

ALTER TABLE channel_sessions
  -- The spend reservation the deposit took (api/shared/policy/store.ts), linked as `channel:<channel>`.
  ADD COLUMN reservation_id bigint,
  -- The Idempotency-Key's effect reference of the POST that opened it: a retry resumes this row.
  ADD COLUMN open_reference text UNIQUE,
  -- The invocation account the channel pays under (with parent_tx_hash), base58.
  ADD COLUMN invocation text,
  -- open_channel as signed before it was sent: a crash between commit and confirmation is
  -- resolved by looking the signature up (or reading the channel account), never by re-signing.
  ADD COLUMN open_wire text,
  ADD COLUMN open_last_valid_block_height bigint,
  -- The charges digest after signed_sequence: the next voucher's starting point, without reading
  -- the last charge row on every paid request.
  ADD COLUMN signed_digest bytea CHECK (signed_digest IS NULL OR octet_length(signed_digest) = 32),
  -- The refund_channel that ended the channel (after close_tx, the close request).
  ADD COLUMN refund_tx text,
  ADD COLUMN failure text;

-- One row per settle_channel transaction the gateway signed for a channel (as authority): the
-- durable intent written before sending. At most one `pending` per channel, so settlements of a
-- channel are strictly sequential and a crash leaves at most one to resolve.
CREATE TABLE channel_settlement_sends (
  signature               text          PRIMARY KEY,
  channel                 text          NOT NULL REFERENCES channel_sessions (channel),
  -- The charges it covers: from_sequence .. to_sequence, bringing settled to `cumulative`.
  from_sequence           bigint        NOT NULL CHECK (from_sequence > 0),
  to_sequence             bigint        NOT NULL,
  cumulative              numeric(20,0) NOT NULL CHECK (cumulative > 0),
  wire                    text          NOT NULL,
  last_valid_block_height bigint        NOT NULL,
  status                  text          NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
  slot                    bigint,
  error                   text,
  created_at              timestamptz   NOT NULL DEFAULT now(),
  resolved_at             timestamptz,
  CHECK (to_sequence >= from_sequence)
);
CREATE UNIQUE INDEX channel_settlement_sends_one_pending ON channel_settlement_sends (channel) WHERE status = 'pending';
CREATE INDEX channel_settlement_sends_channel ON channel_settlement_sends (channel, to_sequence);
