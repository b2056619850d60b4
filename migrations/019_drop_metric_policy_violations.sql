-- `metric_buckets.policy_violations` (002) was meant to be filled "by the gateway later" and never
-- was: it has held 0 in every row. It is dropped rather than written because it cannot be right
-- where it is. `metric_buckets` is a projection of the chain (`chain_events` +
-- `settlement_transfers`): `rebuild` truncates and recomputes it from those, and `verify` compares
-- a rebuild with the stored rows. A policy rejection is a gateway decision that never reaches the
-- chain, so a count written here would vanish on every rebuild and show up as a verify difference.
-- The policy_violations metric reads `payment_rejections` instead (api/metrics.ts,
-- api/rejections.ts), the gateway table that records each rejection with its reason.
ALTER TABLE metric_buckets DROP COLUMN policy_violations;
