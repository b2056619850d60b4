-- Running totals of the daily budget periods (issue 17: the per-period usage read must not grow
-- with the number of reservations in the period). One row per (agent, budget period start): the
-- amount and the number of the period's reservations that count ('reserved' or 'settled').
--
-- Authority: `spend_reservations` stays the truth; this table is derived from it by the trigger
-- below, in the same transaction as every change of a reservation (insert, status change, delete),
-- whichever statement makes it. So the reservation's check under the agent's lock reads one row
-- instead of summing the period, and nothing else has to remember to keep the total.
-- A period whose reservations were all released has calls = 0 and does not count as open, exactly
-- as before (usage was the sum over non-released rows).
CREATE TABLE spend_periods (
  agent_id     text          NOT NULL,
  window_start timestamptz   NOT NULL,
  used_units   numeric(20,0) NOT NULL CHECK (used_units >= 0),
  calls        bigint        NOT NULL CHECK (calls >= 0),
  PRIMARY KEY (agent_id, window_start)
);

CREATE FUNCTION spend_periods_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status <> 'released' THEN
    UPDATE spend_periods SET used_units = used_units - OLD.amount_units, calls = calls - 1
    WHERE agent_id = OLD.agent_id AND window_start = OLD.budget_window_start;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status <> 'released' THEN
    INSERT INTO spend_periods AS p (agent_id, window_start, used_units, calls)
    VALUES (NEW.agent_id, NEW.budget_window_start, NEW.amount_units, 1)
    ON CONFLICT (agent_id, window_start)
    DO UPDATE SET used_units = p.used_units + EXCLUDED.used_units, calls = p.calls + 1;
  END IF;
  RETURN NULL;
END $$;

-- Only changes that can move a total fire it (a claim, a link or a tx hash does not).
CREATE TRIGGER spend_reservations_periods_insert AFTER INSERT ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_periods_apply();
CREATE TRIGGER spend_reservations_periods_update AFTER UPDATE OF status, amount_units, agent_id, budget_window_start ON spend_reservations
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.amount_units IS DISTINCT FROM NEW.amount_units
                     OR OLD.agent_id IS DISTINCT FROM NEW.agent_id OR OLD.budget_window_start IS DISTINCT FROM NEW.budget_window_start)
  EXECUTE FUNCTION spend_periods_apply();
CREATE TRIGGER spend_reservations_periods_delete AFTER DELETE ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_periods_apply();

INSERT INTO spend_periods (agent_id, window_start, used_units, calls)
SELECT agent_id, budget_window_start, sum(amount_units), count(*)
FROM spend_reservations WHERE status <> 'released'
GROUP BY agent_id, budget_window_start;
