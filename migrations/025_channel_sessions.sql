-- Channel sessions (issue 16, docs/ledger.md §5, docs/protocols.md): what the gateway knows of
-- an escrowed payment channel that one of its agents opened, and of every voucher it signed on
-- it. Written by the gateway only; the chain-derived view of the same channels (deposit, settled,
-- refunded, as the program recorded them) is the indexer's. The query service joins the two so
-- that a charge accepted but not yet settled is shown as such, never as confirmed.
--
-- Amounts are base units of the channel's mint. The gateway is both the payer's custodian (it
-- signs the vouchers with the agent's wallet key) and the program's authority (it may settle for
-- the payee).

CREATE TABLE channel_sessions (
  -- The Channel PDA, base58: ["channel", payer, payee, channel_id].
  channel                 text          PRIMARY KEY,
  account_id              uuid          NOT NULL REFERENCES accounts (id),
  agent_id                text          NOT NULL REFERENCES agents (agent_id),
  payer                   text          NOT NULL,
  payee                   text          NOT NULL,
  mint                    text          NOT NULL,
  -- The payer's 32-byte random salt, hex.
  channel_id              text          NOT NULL CHECK (channel_id ~ '^[0-9a-f]{64}$'),
  protocol                text          NOT NULL CHECK (protocol IN ('mpp', 'x402')),
  -- The service the session pays (scheme://host[:port]); vouchers are signed for its endpoints.
  service_origin          text          NOT NULL,
  -- The invoking transaction when the session pays under an invocation; NULL at top level.
  parent_tx_hash          text,
  deposit                 numeric(20,0) NOT NULL CHECK (deposit > 0),
  expires_at              timestamptz   NOT NULL,
  withdraw_delay_seconds  integer       NOT NULL CHECK (withdraw_delay_seconds > 0),
  -- 'opening' until open_channel is confirmed; 'closing' once a close was requested on chain;
  -- 'closed' once refunded; 'failed' when open_channel definitely failed (nothing moved).
  status                  text          NOT NULL
                                        CHECK (status IN ('opening', 'open', 'closing', 'closed', 'failed')),
  open_tx                 text,
  opened_slot             bigint,
  -- Highest voucher the gateway signed, highest the payee accepted, highest settled on chain.
  signed_cumulative       numeric(20,0) NOT NULL DEFAULT 0 CHECK (signed_cumulative >= 0),
  signed_sequence         bigint        NOT NULL DEFAULT 0 CHECK (signed_sequence >= 0),
  accepted_cumulative     numeric(20,0) NOT NULL DEFAULT 0 CHECK (accepted_cumulative >= 0),
  accepted_sequence       bigint        NOT NULL DEFAULT 0 CHECK (accepted_sequence >= 0),
  settled_cumulative      numeric(20,0) NOT NULL DEFAULT 0 CHECK (settled_cumulative >= 0),
  settled_sequence        bigint        NOT NULL DEFAULT 0 CHECK (settled_sequence >= 0),
  -- What returned to the payer at close (deposit − settled).
  refunded                numeric(20,0) CHECK (refunded >= 0),
  close_tx                text,
  created_at              timestamptz   NOT NULL DEFAULT now(),
  updated_at              timestamptz   NOT NULL DEFAULT now(),
  closed_at               timestamptz,
  CHECK (settled_cumulative <= signed_cumulative),
  CHECK (signed_cumulative <= deposit),
  UNIQUE (payer, payee, channel_id)
);
CREATE INDEX channel_sessions_agent ON channel_sessions (agent_id, created_at DESC);
CREATE INDEX channel_sessions_account ON channel_sessions (account_id, created_at DESC);
CREATE INDEX channel_sessions_live ON channel_sessions (status) WHERE status IN ('opening', 'open', 'closing');

-- One row per voucher the gateway signed: the charge it adds (payment id, amount, endpoint) and the
-- voucher after it. `signed`: handed to the payer's client; `accepted`: the payee took it (it served
-- the request, or presented it for settlement); `settled`: covered by a confirmed settle_channel
-- (settlement_tx); `void`: never accepted and beyond the highest accepted voucher at close, so it
-- was never paid.
CREATE TABLE channel_charges (
  channel        text          NOT NULL REFERENCES channel_sessions (channel),
  sequence       bigint        NOT NULL CHECK (sequence > 0),
  payment_id     bigint        NOT NULL,
  amount         numeric(20,0) NOT NULL CHECK (amount > 0),
  cumulative     numeric(20,0) NOT NULL CHECK (cumulative > 0),
  -- Host and path without scheme, as spec 2.2 prints endpoints; endpoint_hash as the program hashes it.
  endpoint       text          NOT NULL,
  endpoint_hash  bytea         NOT NULL CHECK (octet_length(endpoint_hash) = 32),
  -- Charges digest after this charge (docs/ledger.md §5, Voucher format) and the payer's signature
  -- (base58) over the voucher message.
  digest         bytea         NOT NULL CHECK (octet_length(digest) = 32),
  signature      text          NOT NULL,
  status         text          NOT NULL CHECK (status IN ('signed', 'accepted', 'settled', 'void')),
  settlement_tx  text,
  created_at     timestamptz   NOT NULL DEFAULT now(),
  accepted_at    timestamptz,
  settled_at     timestamptz,
  PRIMARY KEY (channel, sequence),
  UNIQUE (channel, payment_id),
  CHECK ((status = 'settled') = (settlement_tx IS NOT NULL))
);
CREATE INDEX channel_charges_unsettled ON channel_charges (channel, sequence) WHERE status IN ('signed', 'accepted');
