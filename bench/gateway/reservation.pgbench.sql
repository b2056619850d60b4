-- The floor of `npm run bench:capacity`: the gateway's reservation transaction as pgbench runs it,
-- statement for statement (api/gateway/reservations/store.ts `reserveInTransaction` inside
-- BEGIN … COMMIT, the way the capacity bench calls it): savepoint, the agent's advisory lock, the
-- policy with its version, the usage read (running total of the period, running rate count),
-- the INSERT (whose triggers keep both running totals), commit. The SQL text is the store's; what
-- the gateway computes in JavaScript is an expression here: the instants (now() − 24 h, the rate
-- window's start) and the budget period's start (the open period's, else now()).
-- Variables: -D prefix=<agent id prefix> -D agents=<n> (agents <prefix>-0 … <prefix>-(n−1)).
\set a random(0, :agents - 1)
BEGIN;
SAVEPOINT policy_reservation;
SELECT pg_advisory_xact_lock(7240004, hashtext(:prefix || '-' || :a)), current_setting('transaction_isolation') AS isolation;
SELECT p.agent_id, p.daily_budget_units, p.per_call_limit_units, p.allowed_domains, p.blocked_domains,
  p.rate_limit_calls, p.rate_limit_window, p.protocol_preference, p.approval_above_units, p.approval_domains,
  p.approval_first_payment_to_domain, p.approval_timeout_ms, p.approval_on_timeout, p.endpoint_budgets, p.version, p.updated_at, coalesce(p.version, (SELECT max(version) FROM policy_versions WHERE agent_id = :prefix || '-' || :a), 0) AS current_version
     FROM (SELECT 1) AS one LEFT JOIN policies p ON p.agent_id = :prefix || '-' || :a \gset policy_
WITH open_period AS (
       SELECT min(window_start) AS start, coalesce(sum(used_units), 0) AS used FROM spend_periods
       WHERE agent_id = :prefix || '-' || :a AND calls > 0 AND window_start > now() - interval '24 hours'
     )
     SELECT p.start AS window_start, p.used::text AS used_units,
            p.start IS NOT NULL AND EXISTS (
              SELECT 1 FROM payment_rejections
              WHERE agent_id = :prefix || '-' || :a AND reason_code = 'daily_budget_exceeded' AND created_at >= p.start AND created_at > :policy_updated_at::timestamptz
            ) AS exhausted,
            CASE WHEN (now() - interval '24 hours')::timestamptz IS NULL THEN 0
                 ELSE (SELECT coalesce(sum(CASE WHEN b.hour_start > date_trunc('hour', (now() - interval '24 hours')::timestamptz, 'UTC') THEN b.calls
                                                ELSE (SELECT coalesce(sum(m), 0) FROM unnest(b.minute_calls[
                                                        extract(minute FROM (now() - interval '24 hours')::timestamptz AT TIME ZONE 'UTC')::int + 2 : 60]) AS m) END), 0)
                       FROM spend_rate_calls b WHERE b.agent_id = :prefix || '-' || :a AND b.hour_start >= date_trunc('hour', (now() - interval '24 hours')::timestamptz, 'UTC'))
                    + (SELECT count(*) FROM spend_reservations
                       WHERE agent_id = :prefix || '-' || :a AND status <> 'released' AND created_at > (now() - interval '24 hours')::timestamptz
                         AND created_at < date_trunc('minute', (now() - interval '24 hours')::timestamptz, 'UTC') + interval '1 minute')
                    + (SELECT count(*) FROM channel_charges c JOIN channel_sessions s ON s.channel = c.channel
                       WHERE s.agent_id = :prefix || '-' || :a AND (s.closed_at IS NULL OR s.closed_at > (now() - interval '24 hours')::timestamptz)
                         AND c.status <> 'void' AND c.created_at > (now() - interval '24 hours')::timestamptz) END::int AS rate_calls
     FROM open_period p \gset usage_
INSERT INTO spend_reservations (agent_id, amount_units, endpoint, domain, protocol, created_at, budget_window_start, status,
                                      parent_tx_hash, policy_version)
       VALUES (:prefix || '-' || :a, 1000, 'https://api.example.com/v1/data', 'api.example.com', 'x402', now(),
               coalesce(nullif(:usage_window_start::text, '')::timestamptz, now()), 'reserved', NULL, :policy_current_version) RETURNING id;
COMMIT;
