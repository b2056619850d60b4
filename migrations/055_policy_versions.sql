-- Policy versions (docs/policy.md "Versions"): every change of an agent's policy (policies.set,
-- policies.clear) writes a version under the agent's policy lock, and every decision records the
-- version it was made under, so an auditor can answer "under which rules did this payment pass".
--
-- `policies.version` is the agent's current version, read with the policy under the same lock as
-- every reservation. An agent that never had a policy is at version 0 (the empty policy). A
-- cleared policy's row is deleted; its clearing is a version whose policy is the empty one.

CREATE TABLE policy_versions (
  agent_id    text        NOT NULL,
  version     integer     NOT NULL CHECK (version >= 1),
  created_at  timestamptz NOT NULL,
  -- Who changed it: the API key's id ('key:<id>'), 'admin' (the operator's console) or 'system'.
  created_by  text        NOT NULL CHECK (length(created_by) BETWEEN 1 AND 100),
  -- The whole policy as the engine sees it (money in base units as decimal strings).
  policy      jsonb       NOT NULL,
  -- SHA-256 (hex) of `policy`'s text as Postgres renders the jsonb: equal policies, equal hashes.
  hash        text        NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
  PRIMARY KEY (agent_id, version)
);

ALTER TABLE policies ADD COLUMN version integer NOT NULL DEFAULT 0 CHECK (version >= 0);

-- The version each decision was made under; NULL for decisions made before versions existed.
ALTER TABLE spend_reservations ADD COLUMN policy_version integer CHECK (policy_version >= 0);
ALTER TABLE payment_rejections ADD COLUMN policy_version integer CHECK (policy_version >= 0);
ALTER TABLE approvals ADD COLUMN policy_version integer CHECK (policy_version >= 0);

-- transactions.get / list: a chain payment's version is its reservation's, found by its transaction.
CREATE INDEX spend_reservations_tx_hash ON spend_reservations (tx_hash) WHERE tx_hash IS NOT NULL;
