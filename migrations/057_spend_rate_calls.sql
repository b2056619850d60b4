-- Running counts of the calls in the rate-limit window (issue 32: the rate-limit read under the
-- agent's lock must not grow with the reservations in the window, as the spend total no longer
-- does since migration 029). One row per (agent, UTC hour of `created_at`): how many of the
-- hour's reservations count (status <> 'released', as the rate window counts them), in all and
-- per minute of the hour (`minute_calls[1]` is minute 0).
--
-- The read stays exact for a sliding window starting at any instant W (calls with created_at > W,
-- api/shared/policy/store.ts readUsage): the hours after W's hour in full, the minutes after W's
-- minute from W's hour's array, and the reservations of W's own minute counted row by row on the
-- (agent_id, created_at) index. At most 25 rows and one minute of reservations, whatever the
-- window holds.
--
-- Authority: `spend_reservations` stays the truth; this table is derived from it by the trigger
-- below, in the same transaction as every change that moves a count (insert, release, a released
-- payment that lands, an approval re-dating a held payment, delete), whichever statement makes it.
-- Hours are UTC whatever the session's time zone (date_trunc's third argument).
CREATE TABLE spend_rate_calls (
  agent_id     text        NOT NULL,
  hour_start   timestamptz NOT NULL,
  calls        bigint      NOT NULL CHECK (calls >= 0),
  minute_calls integer[]   NOT NULL CHECK (array_length(minute_calls, 1) = 60 AND 0 <= ALL (minute_calls)),
  PRIMARY KEY (agent_id, hour_start)
);

CREATE FUNCTION spend_rate_calls_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  minute integer;
  fresh integer[];
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status <> 'released' THEN
    minute := extract(minute FROM OLD.created_at AT TIME ZONE 'UTC')::integer + 1;
    UPDATE spend_rate_calls SET calls = calls - 1, minute_calls[minute] = minute_calls[minute] - 1
    WHERE agent_id = OLD.agent_id AND hour_start = date_trunc('hour', OLD.created_at, 'UTC');
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status <> 'released' THEN
    minute := extract(minute FROM NEW.created_at AT TIME ZONE 'UTC')::integer + 1;
    fresh := array_fill(0, ARRAY[60]);
    fresh[minute] := 1;
    INSERT INTO spend_rate_calls AS r (agent_id, hour_start, calls, minute_calls)
    VALUES (NEW.agent_id, date_trunc('hour', NEW.created_at, 'UTC'), 1, fresh)
    ON CONFLICT (agent_id, hour_start)
    DO UPDATE SET calls = r.calls + 1, minute_calls[minute] = r.minute_calls[minute] + 1;
  END IF;
  RETURN NULL;
END $$;

-- Only changes that can move a count fire it: released or not, the time, the agent (a settlement,
-- a claim or a link does not).
CREATE TRIGGER spend_reservations_rate_calls_insert AFTER INSERT ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_rate_calls_apply();
CREATE TRIGGER spend_reservations_rate_calls_update AFTER UPDATE OF status, created_at, agent_id ON spend_reservations
  FOR EACH ROW WHEN ((OLD.status = 'released') IS DISTINCT FROM (NEW.status = 'released')
                     OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.agent_id IS DISTINCT FROM NEW.agent_id)
  EXECUTE FUNCTION spend_rate_calls_apply();
CREATE TRIGGER spend_reservations_rate_calls_delete AFTER DELETE ON spend_reservations
  FOR EACH ROW EXECUTE FUNCTION spend_rate_calls_apply();

INSERT INTO spend_rate_calls (agent_id, hour_start, calls, minute_calls)
SELECT agent_id, hour_start, sum(n),
       ARRAY(SELECT coalesce((jsonb_object_agg(minute, n) ->> m::text)::integer, 0) FROM generate_series(0, 59) AS m ORDER BY m)
FROM (
  SELECT agent_id, date_trunc('hour', created_at, 'UTC') AS hour_start,
         extract(minute FROM created_at AT TIME ZONE 'UTC')::integer AS minute, count(*) AS n
  FROM spend_reservations WHERE status <> 'released'
  GROUP BY 1, 2, 3
) AS per_minute
GROUP BY agent_id, hour_start;
