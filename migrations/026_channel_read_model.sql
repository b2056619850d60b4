-- Channel read model (issue 16, docs/indexer.md "Channels"): the escrowed payment channels as the
-- chain recorded them, projected from the channel events of `chain_events` by
-- indexer/store/channels.ts. Disposable like every projection: `rebuild` truncates and replays.
-- What the gateway knows and the chain does not yet (vouchers signed and accepted, not settled)
-- stays in its own tables (025_channel_sessions.sql); the query service joins the two.
--
-- Amounts are base units of the channel's mint. A channel address reopened after a close (the
-- same payer, payee and channel id) shows its latest incarnation; the earlier one stays in the
-- event store.

CREATE TABLE channels (
  -- The Channel PDA, base58.
  address                 text          PRIMARY KEY,
  payer                   text          NOT NULL,
  payee                   text          NOT NULL,
  mint                    text          NOT NULL,
  -- The payer's 32-byte salt, hex.
  channel_id              text          NOT NULL,
  protocol                text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  invocation              text,
  -- Escrowed in all (the opening deposit plus top ups).
  deposit_units           numeric(20,0) NOT NULL,
  -- Highest settled cumulative voucher and its sequence (charges settled).
  settled_units           numeric(20,0) NOT NULL,
  sequence                bigint        NOT NULL,
  settlement_count        integer       NOT NULL,
  -- Returned to the payer at close; null until closed.
  refunded_units          numeric(20,0),
  status                  text          NOT NULL CHECK (status IN ('open', 'closing', 'closed')),
  -- Closed by the payer after expiry without a close request.
  forced                  boolean       NOT NULL,
  open_tx                 text          NOT NULL,
  opened_slot             bigint        NOT NULL,
  opened_at               timestamptz   NOT NULL,
  expires_at              timestamptz   NOT NULL,
  withdraw_delay_seconds  integer       NOT NULL,
  close_requested_tx      text,
  close_requested_by      text,
  close_requested_at      timestamptz,
  refundable_at           timestamptz,
  close_tx                text,
  closed_by               text,
  closed_slot             bigint,
  -- The block time of the close; null when the source did not know it.
  closed_at               timestamptz,
  CHECK (settled_units <= deposit_units),
  CHECK ((status = 'closed') = (close_tx IS NOT NULL))
);
CREATE INDEX channels_payer ON channels (payer, opened_slot DESC);
CREATE INDEX channels_payee ON channels (payee, opened_slot DESC);

-- One row per settle_channel (or close_channel with a final settlement): a ChannelSettled event.
CREATE TABLE channel_settlements (
  tx_hash            text          NOT NULL,
  instruction_index  integer       NOT NULL,
  channel            text          NOT NULL,
  settler            text          NOT NULL,
  cumulative_units   numeric(20,0) NOT NULL,
  delta_units        numeric(20,0) NOT NULL,
  sequence           bigint        NOT NULL,
  charge_count       integer       NOT NULL,
  charges_digest     text          NOT NULL,
  slot               bigint        NOT NULL,
  block_time         timestamptz,
  PRIMARY KEY (tx_hash, instruction_index)
);
CREATE INDEX channel_settlements_channel ON channel_settlements (channel, sequence);

-- The link of a charge's payment row (`transactions.event_id`: the PaymentRecorded a settlement
-- carries) to its channel and settlement.
CREATE TABLE channel_payments (
  event_id                      bigint        PRIMARY KEY,
  channel                       text          NOT NULL,
  payment_id                    numeric(20,0) NOT NULL,
  settlement_tx                 text          NOT NULL,
  settlement_instruction_index  integer       NOT NULL
);
CREATE INDEX channel_payments_channel ON channel_payments (channel, payment_id);
CREATE INDEX channel_payments_settlement ON channel_payments (settlement_tx, settlement_instruction_index);

-- The projection re-derives a channel from its own events (a handful per channel): this index
-- finds them without scanning the store. Partial: payments, the bulk of the store, are left out.
CREATE INDEX chain_events_channel ON chain_events ((payload->>'channel'), id)
  WHERE event_name IN ('ChannelOpened', 'ChannelToppedUp', 'ChannelSettled', 'ChannelCloseRequested', 'ChannelClosed');
