-- Links a policy reservation to the payment it let through, so the gateway closes it by itself:
-- the facilitator (x402) and the MPP service settle a payment the gateway authorized and find its
-- reservation by `payment_ref`; a sweeper releases reservations whose signed payment expired unused.
--
-- payment_ref: `x402:<payer>:<nonce>` for an x402 PaymentPayload, `mpp:<payer>:<nonce>` for an MPP
--   submission, `mpp-charge:<mpp_payments.id>` for a session charge. NULL for reservations made
--   without a signed payment (tests, the policy module's own callers).
-- expires_at: the signed payment's `validUntil`; after it (plus a grace) nothing can settle it.
-- parent_tx_hash: the invoking transaction when a sub-agent pays under `agents.invoke`.
-- invocation_budget_units: this payment invokes its payee as a sub-agent with that budget; the
--   gateway opens the invocation on-chain once the payment settled (`invocation` then holds it).
ALTER TABLE spend_reservations
  ADD COLUMN payment_ref             text,
  ADD COLUMN expires_at              timestamptz,
  ADD COLUMN parent_tx_hash          text,
  ADD COLUMN invocation_budget_units numeric(20,0) CHECK (invocation_budget_units > 0),
  ADD COLUMN invocation              text;

CREATE UNIQUE INDEX spend_reservations_payment_ref ON spend_reservations (payment_ref) WHERE payment_ref IS NOT NULL;
-- The sweeper's scan: open reservations by expiry.
CREATE INDEX spend_reservations_open_expiry ON spend_reservations (expires_at) WHERE status = 'reserved';
