-- A reservation's signed payment is taken by the settler that moves its money (the x402
-- facilitator, the MPP service) before anything is sent: `claimed_at` is set by one conditional
-- UPDATE while the reservation is still 'reserved' and unclaimed. `release` is a conditional
-- UPDATE on the same row that requires `claimed_at IS NULL`, so exactly one of the two wins:
-- a released reservation's payment can never be settled afterwards, and a payment already being
-- settled can no longer be released (its money may land; it keeps counting until the outcome is
-- known). Session charges are claimed when they are reserved (their settlement starts at once).
ALTER TABLE spend_reservations ADD COLUMN claimed_at timestamptz;

-- The exhausted state of the daily budget (spec 3) is read from the period's over-budget
-- rejections: one index probe per reservation.
CREATE INDEX payment_rejections_agent_budget ON payment_rejections (agent_id, created_at)
  WHERE reason_code = 'daily_budget_exceeded';
