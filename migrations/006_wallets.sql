-- Gateway tables for custodial agent wallets and settlement (api/wallets, api/settlement).
-- Written by the gateway only; the chain stays the truth for addresses' balances and for what was
-- recorded. These tables hold what the chain cannot: the encrypted keys, the next payment id of
-- each payer, and the signature of every transaction the gateway signed before it sent it.

-- One ed25519 keypair per agent. Only the AES-256-GCM ciphertext of the 32-byte seed is stored;
-- the key that decrypts it comes from configuration (WALLET_ENCRYPTION_KEY), named by key_version
-- so keys can rotate. The agent id and address are the GCM additional data, so a ciphertext moved
-- to another row does not decrypt.
CREATE TABLE agent_wallets (
  agent_id        text        PRIMARY KEY REFERENCES agents (agent_id),
  address         text        NOT NULL UNIQUE,
  ciphertext      bytea       NOT NULL CHECK (octet_length(ciphertext) = 48),  -- 32-byte seed + 16-byte tag
  nonce           bytea       NOT NULL CHECK (octet_length(nonce) = 12),
  key_version     text        NOT NULL,
  -- Payment ids are allocated per payer, strictly increasing from 1, never reused (the program's
  -- replay window refuses a duplicate and any id more than 1,024 below the highest).
  next_payment_id bigint      NOT NULL DEFAULT 1 CHECK (next_payment_id >= 1),
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- Fund and withdraw: one row per operation, written before anything is sent. A withdrawal is
-- signed locally first, so its signature is stored while it is still pending; a funding source
-- may only know its transaction once it answers (then `signature` is filled in on completion).
CREATE TABLE wallet_operations (
  id                     bigserial     PRIMARY KEY,
  agent_id               text          NOT NULL REFERENCES agent_wallets (agent_id),
  kind                   text          NOT NULL CHECK (kind IN ('fund', 'withdraw')),
  amount_units           numeric(20,0) NOT NULL CHECK (amount_units > 0),
  -- Destination owner address of a withdrawal; the agent's own address for a funding.
  to_address             text          NOT NULL,
  -- The caller's idempotency reference: a retried call with the same reference is recognised.
  client_reference       text,
  signature              text          UNIQUE,
  last_valid_block_height bigint,
  status                 text          NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
  error                  text,
  slot                   bigint,
  created_at             timestamptz   NOT NULL DEFAULT now(),
  updated_at             timestamptz   NOT NULL DEFAULT now(),
  UNIQUE (agent_id, client_reference)
);
CREATE INDEX wallet_operations_pending ON wallet_operations (created_at) WHERE status = 'pending';

-- One row per record_payment the gateway signed. The row, the payment id it consumed and the
-- transaction's signature are committed together before the transaction is sent, so a crash at
-- any point leaves either nothing (no id used, nothing sent) or a pending row that
-- `reconcilePending` resolves by looking the signature up on the chain.
CREATE TABLE settlements (
  agent_id                text          NOT NULL REFERENCES agent_wallets (agent_id),
  payment_id              numeric(20,0) NOT NULL CHECK (payment_id >= 1),
  signature               text          NOT NULL UNIQUE,
  payer                   text          NOT NULL,
  payee                   text          NOT NULL,
  amount_units            numeric(20,0) NOT NULL CHECK (amount_units > 0),
  protocol                text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  rail                    text          NOT NULL CHECK (rail IN ('stablecoin', 'card', 'other')),
  endpoint_hash           text          NOT NULL,
  invocation              text,
  settlement_reference    text,
  -- The signed transaction (base64), so a pending one can be re-sent unchanged while its
  -- blockhash is valid: the same bytes can land at most once.
  transaction             text          NOT NULL,
  last_valid_block_height bigint        NOT NULL,
  status                  text          NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
  -- The program's error name (or `expired`, `rpc:<detail>`) of a failed settlement.
  error                   text,
  slot                    bigint,
  created_at              timestamptz   NOT NULL DEFAULT now(),
  updated_at              timestamptz   NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, payment_id)
);
CREATE INDEX settlements_pending ON settlements (created_at) WHERE status = 'pending';
CREATE INDEX settlements_invocation ON settlements (invocation) WHERE invocation IS NOT NULL;
