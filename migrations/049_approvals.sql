-- Approvals: payments a policy holds for a person instead of refusing them (docs/policy.md
-- "Approvals", docs/rest.md "Approvals").
--
-- 1. The policy's `approval` field, as columns of `policies` (NULL timeout: no approval rule).
-- 2. A held payment's reservation has status 'pending_approval': it counts like 'reserved' in every
--    usage read (they count status <> 'released', and the spend_periods trigger of migration 029
--    does the same), so held payments cannot together exceed a limit and approving one cannot
--    overspend; nothing is signed for it while it waits.
-- 3. `approvals`: one row per held payment, decided exactly once by a conditional UPDATE
--    (`WHERE status = 'pending'`), by a person, the signed link, or the gateway's timeout loop.

ALTER TABLE policies
  ADD COLUMN approval_above_units              numeric(20,0) CHECK (approval_above_units >= 0),
  ADD COLUMN approval_domains                  text[]        NOT NULL DEFAULT '{}',
  ADD COLUMN approval_first_payment_to_domain  boolean       NOT NULL DEFAULT false,
  -- 1 s to 7 d (docs/policy.md); NULL: the policy holds no payment.
  ADD COLUMN approval_timeout_ms               bigint        CHECK (approval_timeout_ms BETWEEN 1000 AND 604800000),
  ADD COLUMN approval_on_timeout               text          CHECK (approval_on_timeout = 'deny'),
  ADD CONSTRAINT policies_approval_whole CHECK (
    (approval_timeout_ms IS NULL) = (approval_on_timeout IS NULL)
    AND (approval_timeout_ms IS NOT NULL
         OR (approval_above_units IS NULL AND approval_domains = '{}' AND NOT approval_first_payment_to_domain))
    AND (approval_timeout_ms IS NULL
         OR approval_above_units IS NOT NULL OR approval_domains <> '{}' OR approval_first_payment_to_domain)
  );

ALTER TABLE spend_reservations DROP CONSTRAINT spend_reservations_status_check;
ALTER TABLE spend_reservations ADD CONSTRAINT spend_reservations_status_check
  CHECK (status IN ('reserved', 'settled', 'released', 'pending_approval'));

CREATE TABLE approvals (
  id               uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id       uuid          NOT NULL REFERENCES accounts (id),
  -- The gateway's internal agent id (agents.agent_id), as every gateway table holds it.
  agent_id         text          NOT NULL REFERENCES agents (agent_id),
  -- The reservation that holds the amount while the approval waits; released on deny / expiry.
  reservation_id   bigint        NOT NULL UNIQUE REFERENCES spend_reservations (id),
  -- The authorize request's Idempotency-Key, so a repeat of it resumes this approval.
  idempotency_key  text          CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  amount_units     numeric(20,0) NOT NULL CHECK (amount_units > 0),
  endpoint         text          NOT NULL,
  -- The normalized host the policy checked.
  domain           text          NOT NULL,
  -- Which approval rule held the payment (the policy field's name).
  rule             text          NOT NULL CHECK (rule IN ('above', 'domains', 'firstPaymentToDomain')),
  -- The engine's text for it (`approval_required: …`).
  reason           text          NOT NULL,
  status           text          NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  requested_at     timestamptz   NOT NULL,
  expires_at       timestamptz   NOT NULL CHECK (expires_at > requested_at),
  decided_at       timestamptz,
  -- The deciding API key's id (api_keys.id), 'link' (the signed one-time link) or 'timeout'.
  decided_by       text          CHECK (decided_by IS NULL OR decided_by IN ('link', 'timeout') OR decided_by ~ '^[1-9][0-9]{0,18}$'),
  note             text          CHECK (length(note) <= 500),
  -- SHA-256 of the signed link's token (never the token); NULL when no link was made.
  link_token_hash  bytea         UNIQUE CHECK (octet_length(link_token_hash) = 32),
  link_used_at     timestamptz,
  -- For an approval: the outcome of re-running the policy ('authorized' or 'refused').
  outcome          text          CHECK (outcome IN ('authorized', 'refused')),
  CHECK ((status = 'pending') = (decided_at IS NULL)),
  CHECK ((status = 'pending') = (decided_by IS NULL)),
  CHECK (status <> 'expired' OR decided_by = 'timeout'),
  CHECK (decided_by <> 'timeout' OR status = 'expired'),
  CHECK (outcome IS NULL OR status = 'approved'),
  CHECK (link_used_at IS NULL OR (link_token_hash IS NOT NULL AND decided_by = 'link'))
);

-- The timeout loop: pending approvals by expiry.
CREATE INDEX approvals_pending_expiry ON approvals (expires_at) WHERE status = 'pending';
-- Listing: an account's approvals newest first, optionally by status or agent.
CREATE INDEX approvals_account_time ON approvals (account_id, requested_at DESC, id DESC);
CREATE INDEX approvals_account_status_time ON approvals (account_id, status, requested_at DESC, id DESC);
CREATE INDEX approvals_agent_time ON approvals (agent_id, requested_at DESC, id DESC);
-- A repeated authorize finds its approval by the account's Idempotency-Key.
CREATE UNIQUE INDEX approvals_idempotency ON approvals (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- `approval.firstPaymentToDomain`: has this agent a settled payment to this exact host? One index
-- probe under the agent's lock (PolicyUsage.domainPaidBefore).
CREATE INDEX spend_reservations_agent_paid_domain ON spend_reservations (agent_id, domain) WHERE status = 'settled';
