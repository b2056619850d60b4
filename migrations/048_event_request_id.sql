-- The id of the HTTP request that caused an event (api/shared/ops/request-id.ts), so the webhook
-- deliveries the dispatcher sends later log the same id as the payment's own log lines. NULL for
-- events no request caused (loops, the sweeper).
ALTER TABLE gateway_events ADD COLUMN request_id text;
