-- A reservation's reads under the agent's lock in one round trip (issue 32, one hot agent: the
-- lock is held from its grant to the commit, so every round trip inside it limits how many
-- reservations one agent can make per second).
--
-- `policy_usage` is the usage a decision is made on (api/shared/policy/store.ts `readUsage`, which
-- calls it): the open budget period's running total, whether a refusal exhausted it since the
-- policy changed, and the calls in the sliding rate window (migration 057's running counts).
-- PL/pgSQL, not SQL, so that a session keeps its query's plan (a SQL function that cannot be
-- inlined plans its body at every call).
--
-- `policy_lock_and_read` takes the agent's transaction-level advisory lock, then reads the policy
-- with its version and the usage. Under READ COMMITTED each statement of a VOLATILE function takes
-- a new snapshot, so both reads start after the lock is held and see every reservation and policy
-- version committed before it, as the separate statements did. The rate window's start is `at`
-- minus the policy's window ('1m' .. '24h' read as intervals: exact, as the gateway computes it).
CREATE FUNCTION policy_usage(agent text, budget_since timestamptz, rate_since timestamptz, policy_updated_at timestamptz)
RETURNS TABLE (window_start timestamptz, used_units text, exhausted boolean, rate_calls integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    WITH open_period AS (
      SELECT min(sp.window_start) AS start, coalesce(sum(sp.used_units), 0) AS used FROM spend_periods sp
      WHERE sp.agent_id = agent AND sp.calls > 0 AND sp.window_start > budget_since
    )
    SELECT p.start, p.used::text,
           p.start IS NOT NULL AND EXISTS (
             SELECT 1 FROM payment_rejections r
             WHERE r.agent_id = agent AND r.reason_code = 'daily_budget_exceeded' AND r.created_at >= p.start
               AND r.created_at > policy_updated_at
           ),
           CASE WHEN rate_since IS NULL THEN 0
                ELSE (SELECT coalesce(sum(CASE WHEN b.hour_start > date_trunc('hour', rate_since, 'UTC') THEN b.calls
                                               ELSE (SELECT coalesce(sum(m), 0) FROM unnest(b.minute_calls[
                                                       extract(minute FROM rate_since AT TIME ZONE 'UTC')::int + 2 : 60]) AS m) END), 0)
                      FROM spend_rate_calls b WHERE b.agent_id = agent AND b.hour_start >= date_trunc('hour', rate_since, 'UTC'))
                   + (SELECT count(*) FROM spend_reservations s
                      WHERE s.agent_id = agent AND s.status <> 'released' AND s.created_at > rate_since
                        AND s.created_at < date_trunc('minute', rate_since, 'UTC') + interval '1 minute')
                   + (SELECT count(*) FROM channel_charges c JOIN channel_sessions cs ON cs.channel = c.channel
                      WHERE cs.agent_id = agent AND (cs.closed_at IS NULL OR cs.closed_at > rate_since)
                        AND c.status <> 'void' AND c.created_at > rate_since) END::int
    FROM open_period p;
END
$$;

CREATE FUNCTION policy_lock_and_read(lock_namespace integer, agent text, at timestamptz)
RETURNS TABLE (
  isolation text,
  agent_id text,
  daily_budget_units numeric(20, 0),
  per_call_limit_units numeric(20, 0),
  allowed_domains text[],
  blocked_domains text[],
  rate_limit_calls integer,
  rate_limit_window text,
  protocol_preference text,
  approval_above_units numeric(20, 0),
  approval_domains text[],
  approval_first_payment_to_domain boolean,
  approval_timeout_ms bigint,
  approval_on_timeout text,
  endpoint_budgets jsonb,
  version integer,
  updated_at timestamptz,
  current_version integer,
  window_start timestamptz,
  used_units text,
  exhausted boolean,
  rate_calls integer
)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
  p policies%ROWTYPE;
  found_policy boolean;
  last_version integer;
BEGIN
  PERFORM pg_advisory_xact_lock(lock_namespace, hashtext(agent));
  -- A new snapshot from here on: taken after the lock was granted.
  SELECT * INTO p FROM policies WHERE policies.agent_id = agent;
  found_policy := FOUND;
  IF NOT found_policy THEN
    -- The empty policy, at the version of its last clearing (0 if it never had one).
    SELECT coalesce(max(v.version), 0) INTO last_version FROM policy_versions v WHERE v.agent_id = agent;
  END IF;
  RETURN QUERY
    SELECT current_setting('transaction_isolation'),
           CASE WHEN found_policy THEN p.agent_id END, p.daily_budget_units, p.per_call_limit_units, p.allowed_domains,
           p.blocked_domains, p.rate_limit_calls, p.rate_limit_window, p.protocol_preference, p.approval_above_units,
           p.approval_domains, p.approval_first_payment_to_domain, p.approval_timeout_ms, p.approval_on_timeout,
           p.endpoint_budgets, p.version, p.updated_at, CASE WHEN found_policy THEN p.version ELSE last_version END,
           u.window_start, u.used_units, u.exhausted, u.rate_calls
    FROM policy_usage(
      agent,
      at - interval '24 hours',
      CASE WHEN found_policy AND p.rate_limit_window IS NOT NULL THEN at - p.rate_limit_window::interval END,
      CASE WHEN found_policy THEN p.updated_at ELSE 'epoch'::timestamptz END
    ) AS u;
END
$$;
