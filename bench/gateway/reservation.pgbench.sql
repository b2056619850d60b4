-- The floor of `npm run bench:capacity`: the gateway's reservation transaction as pgbench runs it,
-- statement for statement (api/gateway/reservations/store.ts `reserveInTransaction` inside
-- BEGIN … COMMIT without a savepoint, the way the authorize route calls it): the agent's advisory lock with
-- the policy, its version and the usage read in one call (`policy_lock_and_read`, migration 059),
-- the INSERT (whose triggers keep the running totals), commit. The SQL text is the store's; what
-- the gateway computes in JavaScript is an expression here: the instant (now()) and the budget
-- period's start (the open period's, else now()).
-- Variables: -D prefix=<agent id prefix> -D agents=<n> (agents <prefix>-0 … <prefix>-(n−1)).
\set a random(0, :agents - 1)
BEGIN;
SELECT isolation, agent_id, daily_budget_units, per_call_limit_units, allowed_domains, blocked_domains,
  rate_limit_calls, rate_limit_window, protocol_preference, approval_above_units, approval_domains,
  approval_first_payment_to_domain, approval_timeout_ms, approval_on_timeout, endpoint_budgets, version, updated_at, current_version, window_start, used_units, exhausted, rate_calls
     FROM policy_lock_and_read(7240004, :prefix || '-' || :a, now()) \gset usage_
INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start, status,
                                      parent_tx_hash, policy_version)
       VALUES (:prefix || '-' || :a, 1000, 'https://api.example.com/v1/data', 'api.example.com', 'x402', now(),
               coalesce(nullif(:usage_window_start::text, '')::timestamptz, now()), 'reserved', NULL, :usage_current_version) RETURNING id;
COMMIT;
