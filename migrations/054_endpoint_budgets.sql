-- Budgets per endpoint (docs/policy.md "Endpoint budgets").
--
-- 1. The policy's `endpointBudgets` rules, as one jsonb list on `policies` (each rule
--    { match, dailyBudgetUnits, perCallLimitUnits, rateLimit }; validated by the policy module).
-- 2. `spend_period_endpoints`: running totals of each budget period per endpoint paid, kept by a
--    trigger exactly as `spend_periods` is (migration 029): the amount and the number of the
--    period's reservations that count (status <> 'released'), per (agent, period, endpoint). A
--    rule's usage sums the rows whose endpoint the rule covers (matched in the policy module, so a
--    rule added later counts what was paid before it). It grows with the endpoints an agent pays
--    in a period, not with its payments.

ALTER TABLE policies ADD COLUMN endpoint_budgets jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(endpoint_budgets) = 'array');

CREATE TABLE spend_period_endpoints (
  agent_id     text          NOT NULL,
  window_start timestamptz   NOT NULL,
  endpoint     text          NOT NULL,
  used_units   numeric(20,0) NOT NULL CHECK (used_units >= 0),
  calls        bigint        NOT NULL CHECK (calls >= 0),
  PRIMARY KEY (agent_id, window_start, endpoint)
);

CREATE FUNCTION spend_period_endpoints_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status <> 'released' THEN
    UPDATE spend_period_endpoints SET used_units = used_units - OLD.amount_units, calls = calls - 1
    WHERE agent_id = OLD.agent_id AND window_start = OLD.budget_window_start AND endpoint = OLD.endpoint;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status <> 'released' THEN
    INSERT INTO spend_period_endpoints AS p (agent_id, window_start, endpoint, used_units, calls)
    VALUES (NEW.agent_id, NEW.budget_window_start, NEW.endpoint, NEW.amount_units, 1)
    ON CONFLICT (agent_id, window_start, endpoint)
    DO UPDATE SET used_units = p.used_units + EXCLUDED.used_units, calls = p.calls + 1;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER spend_reservations_period_endpoints_insert AFTER INSERT ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_period_endpoints_apply();
CREATE TRIGGER spend_reservations_period_endpoints_update
  AFTER UPDATE OF status, amount_units, agent_id, budget_window_start, endpoint ON spend_reservations
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.amount_units IS DISTINCT FROM NEW.amount_units
                     OR OLD.agent_id IS DISTINCT FROM NEW.agent_id OR OLD.budget_window_start IS DISTINCT FROM NEW.budget_window_start
                     OR OLD.endpoint IS DISTINCT FROM NEW.endpoint)
  EXECUTE FUNCTION spend_period_endpoints_apply();
CREATE TRIGGER spend_reservations_period_endpoints_delete AFTER DELETE ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_period_endpoints_apply();

INSERT INTO spend_period_endpoints (agent_id, window_start, endpoint, used_units, calls)
SELECT agent_id, budget_window_start, endpoint, sum(amount_units), count(*)
FROM spend_reservations WHERE status <> 'released'
GROUP BY agent_id, budget_window_start, endpoint;

-- A rule's rate window counts the agent's recent reservations by endpoint.
CREATE INDEX spend_reservations_agent_recent_endpoint ON spend_reservations (agent_id, created_at, endpoint) WHERE status <> 'released';
