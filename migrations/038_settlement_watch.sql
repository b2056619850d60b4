-- A custodial settlement the node refused before sending (preflight) is failed, yet its signed
-- bytes exist until its blockhash expires. `watch` keeps such rows followed by the reconciler
-- (api/gateway/settlement/reconciliation.ts) until the chain says they landed (the row becomes
-- confirmed: record_payment recorded it in the same transaction) or can no longer land.
ALTER TABLE settlements ADD COLUMN watch boolean NOT NULL DEFAULT false;
CREATE INDEX settlements_watched ON settlements (created_at) WHERE status = 'failed' AND watch;
