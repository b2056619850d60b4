-- A sub-agent's MPP payments under an `agents.invoke` invocation (docs/protocols.md): the parent
-- travels from the payment's linked reservation (`spend_reservations.parent_tx_hash`, migrations/011)
-- onto what the MPP service keeps, so every later charge settles under the same invocation.
--
-- mpp_payments.parent_tx_hash: the invoking transaction this payment settled under (its invocation
--   account is derived from it and the payer); NULL for a top-level payment.
-- mpp_sessions.parent_tx_hash: the parent of the submission that established the session. Every
--   charge on the session (and on its refreshed successors) is a payment under that parent, so a
--   session opened under one invocation can never pay under another one, nor as a top-level payment.
ALTER TABLE mpp_payments ADD COLUMN parent_tx_hash text;
ALTER TABLE mpp_sessions ADD COLUMN parent_tx_hash text;
