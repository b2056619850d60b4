-- The dispatcher's claim counts the deliveries in flight (a lease that has not run out) per
-- endpoint and per account, to keep one receiver or one tenant from holding every slot
-- (api/webhooks/dispatcher.ts). In-flight rows are few; this index finds them without scanning the
-- retries waiting for their next attempt.
CREATE INDEX event_deliveries_leased ON event_deliveries (locked_until) WHERE status = 'pending' AND locked_until IS NOT NULL;
