-- Payments made by wallets the gateway does not hold (issue 12): an official x402 client's
-- `exact` transfer or an MPP `solana` charge, each a transaction the payer signed and the gateway
-- co-signed as fee payer (api/gateway/cosigned). One row per co-signed transaction, keyed by its
-- id (the fee payer's signature, deterministic for a given message): the primary key is the set
-- of consumed signatures, so the same transaction is settled at most once. The row is committed
-- before the transaction is sent, so a crash leaves a row the reconciler resolves by signature.
--
-- The payment_ledger record of the payment comes second, in its own transaction, naming the
-- transfer as its settlement reference: `record_attested_payment` signed by the authority alone
-- (record = 'attest'), or none here when the payer is one of the gateway's agents (record =
-- 'payer': the agent's side records it with its own signature). Payment ids of attested payers
-- come from `attested_payers` (agents use agent_wallets.next_payment_id; a wallet is one or the
-- other), never reused: a failed record is retried under a new id.
CREATE TABLE cosigned_transfers (
  signature                      text          PRIMARY KEY,
  protocol                       text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  -- The resource server's account that presented the payment (its API key).
  account_id                     uuid          NOT NULL REFERENCES accounts (id),
  payer                          text          NOT NULL,
  payee                          text          NOT NULL,
  mint                           text          NOT NULL,
  amount_units                   numeric(20,0) NOT NULL CHECK (amount_units > 0),
  endpoint                       text          NOT NULL,
  -- The co-signed transaction (base64) and a bound on its blockhash's last valid block height.
  transaction                    text          NOT NULL,
  last_valid_block_height        bigint        NOT NULL,
  status                         text          NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'confirmed', 'failed')),
  slot                           bigint,
  error                          text,
  record                         text          NOT NULL CHECK (record IN ('attest', 'payer')),
  record_payment_id              numeric(20,0),
  record_signature               text          UNIQUE,
  record_transaction             text,
  record_last_valid_block_height bigint,
  record_status                  text          CHECK (record_status IN ('pending', 'confirmed', 'failed')),
  record_error                   text,
  created_at                     timestamptz   NOT NULL DEFAULT now(),
  updated_at                     timestamptz   NOT NULL DEFAULT now(),
  CHECK (record_signature IS NULL OR (record = 'attest' AND record_status IS NOT NULL))
);
CREATE INDEX cosigned_transfers_open ON cosigned_transfers (created_at)
  WHERE status = 'pending' OR (status = 'confirmed' AND record = 'attest' AND (record_status IS NULL OR record_status <> 'confirmed'));

CREATE TABLE attested_payers (
  payer           text          PRIMARY KEY,
  next_payment_id numeric(20,0) NOT NULL DEFAULT 1 CHECK (next_payment_id >= 1)
);
