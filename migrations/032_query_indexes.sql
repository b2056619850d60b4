-- Issue 17: spendSummary and metrics read each agent's rollups in a window as a range of the
-- primary key (api/query/read/spend.ts). With the summed columns carried in the key's index the
-- range is an index-only scan: an agent's minutes are scattered over the heap among every other
-- agent's (rows arrive in time order), so fetching each row from the heap was most of the cost
-- (bench/api/queries.ts). Same key columns and constraint names: ON CONFLICT targets are unchanged.
ALTER TABLE spend_rollups
  DROP CONSTRAINT spend_rollups_pkey,
  ADD CONSTRAINT spend_rollups_pkey PRIMARY KEY (agent, bucket_start, protocol, endpoint_hash) INCLUDE (amount_units, tx_count);

ALTER TABLE metric_buckets
  DROP CONSTRAINT metric_buckets_pkey,
  ADD CONSTRAINT metric_buckets_pkey PRIMARY KEY (agent, bucket_start) INCLUDE (spend_units, tx_count, x402_spend_units, mpp_spend_units);
