-- Names the signed payment a settlement settles, so a claim whose process died between claiming
-- the payment and learning its transaction (x402_nonces / mpp_payments left `claimed` without a
-- tx_hash) can be resolved: the settlement row, committed before anything is sent, carries the
-- same reference as the reservation (`spend_reservations.payment_ref`, migrations/011). No row
-- with the reference after a grace means nothing was ever sent for that payment.
ALTER TABLE settlements ADD COLUMN payment_ref text;
CREATE UNIQUE INDEX settlements_payment_ref ON settlements (payment_ref) WHERE payment_ref IS NOT NULL;
