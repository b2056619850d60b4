-- The events not yet finalized, by slot: what each finality report updates (`projectFinality`:
-- `slot <= $1 AND NOT finalized`). Without it that statement reads every event stored below the
-- finalized slot, all of history, on every report: ~250 ms at 300,000 events and growing with
-- them, once per committed run on a live cluster. With it, the events of the newest ~32 slots
-- (docs/indexer.md#performance). Created on every partition, present and future.
CREATE INDEX chain_events_unfinalized ON chain_events (slot) WHERE NOT finalized;
