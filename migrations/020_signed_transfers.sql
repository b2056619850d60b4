-- Payments to real x402 / MPP servers (issue 12): the gateway signs, with the agent's custodial
-- key, a token transfer transaction that the payee's side (an x402 facilitator, an MPP server)
-- co-signs as fee payer and broadcasts. The money moves in THAT transaction, outside our control
-- once the signed bytes are handed out; payment_ledger then records the payment in a second
-- transaction that names the first as its settlement reference (no tokens move in the record).
--
-- One row per signed transfer, written in the same transaction as the spend reservation it
-- belongs to (`payment_ref`, also on spend_reservations and on the record's settlements row).
-- status:
--   signed   the bytes were handed out; the transfer may land until its blockhash expires
--   landed   the transfer is on the ledger (settlement_tx), not recorded yet
--   recorded payment_ledger recorded it (record_tx); the reservation is settled with record_tx
--   expired  the blockhash expired and the ledger has no such transfer: nothing moved
--   failed   the transfer landed but failed on chain: nothing moved
-- The sweeper (api/gateway/transfers/sweep.ts) moves every row out of `signed` and `landed`.
CREATE TABLE signed_transfers (
  id                      bigserial     PRIMARY KEY,
  payment_ref             text          NOT NULL UNIQUE,
  reservation_id          bigint        NOT NULL UNIQUE,
  agent_id                text          NOT NULL,
  protocol                text          NOT NULL CHECK (protocol IN ('x402', 'mpp')),
  -- The wire format the payee asked in: x402 v2 (PAYMENT-REQUIRED header), x402 v1 (402 body),
  -- or an MPP `solana` / `charge` challenge.
  format                  text          NOT NULL CHECK (format IN ('x402-v2', 'x402-v1', 'mpp')),
  payer                   text          NOT NULL,
  payee                   text          NOT NULL,
  mint                    text          NOT NULL,
  amount_units            numeric(20,0) NOT NULL CHECK (amount_units > 0),
  endpoint                text          NOT NULL,
  parent_tx_hash          text,
  invocation              text,
  -- The agent's signature over the transfer's message: the one thing of the final transaction
  -- known when it is signed (its id is the fee payer's signature, made later by the payee's side).
  payer_signature         text          NOT NULL UNIQUE,
  fee_payer               text          NOT NULL,
  -- The transaction's id when the gateway signed it completely (it paid the fee), else null.
  expected_tx             text,
  last_valid_block_height bigint        NOT NULL,
  status                  text          NOT NULL DEFAULT 'signed'
                                        CHECK (status IN ('signed', 'landed', 'recorded', 'expired', 'failed')),
  settlement_tx           text,
  record_tx               text,
  failure                 text,
  created_at              timestamptz   NOT NULL DEFAULT now(),
  updated_at              timestamptz   NOT NULL DEFAULT now(),
  CHECK (status NOT IN ('landed', 'recorded', 'failed') OR settlement_tx IS NOT NULL),
  CHECK (status <> 'recorded' OR record_tx IS NOT NULL)
);
CREATE INDEX signed_transfers_open ON signed_transfers (created_at) WHERE status IN ('signed', 'landed');
CREATE UNIQUE INDEX signed_transfers_settlement ON signed_transfers (settlement_tx) WHERE settlement_tx IS NOT NULL;
