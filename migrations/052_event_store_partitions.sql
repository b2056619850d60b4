-- The event store partitioned by slot range, so the cost of ingest stays flat as history grows:
-- a batch writes into the newest partition only, whose indexes (the random-keyed unique key of
-- `chain_events` by signature, the primary key of `chain_transactions_seen`) stay small and in
-- memory, instead of one b-tree per table that outgrows shared buffers (docs/indexer.md).
--
-- Each partition holds `event_store_partition_width()` slots (100,000: about 11 hours of mainnet,
-- 400,000 events of the synthetic bench). Ingest creates the partition a batch needs, and the
-- next one ahead, through `event_store_ensure_partitions` in the batch's own transaction
-- (indexer/store/partitions.ts); there is no default partition, so a row no partition covers is
-- an error, never a row parked where a later partition could not be attached.
--
-- Keys include the partition key (PostgreSQL requires it): the event key is (signature,
-- instruction index, inner index, ordinal, slot) and a seen transaction's is (signature, slot).
-- The same event read twice sits in the same slot, so re-ingesting still lands on the same row;
-- a transaction that a fork moved to another slot is another row until its dead slot rolls back.

CREATE FUNCTION event_store_partition_width() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 100000::bigint $$;

-- Creates the partitions (of both tables) holding the given slots, when missing. Serialized by a
-- transaction-level advisory lock, so two callers never race to create the same one.
CREATE FUNCTION event_store_ensure_partitions(slots bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  width bigint := event_store_partition_width();
  start bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('event_store_partitions'));
  FOR start IN SELECT DISTINCT (s / width) * width FROM unnest(slots) AS s WHERE s >= 0 ORDER BY 1 LOOP
    IF to_regclass(format('chain_events_%s', start)) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF chain_events FOR VALUES FROM (%s) TO (%s)',
                     'chain_events_' || start, start, start + width);
    END IF;
    IF to_regclass(format('chain_transactions_seen_%s', start)) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF chain_transactions_seen FOR VALUES FROM (%s) TO (%s)',
                     'chain_transactions_seen_' || start, start, start + width);
    END IF;
  END LOOP;
END $$;

-- chain_events: same columns, now partitioned; the rows move over, then the indexes are built once.
ALTER TABLE chain_events RENAME TO chain_events_unpartitioned;
ALTER SEQUENCE chain_events_id_seq OWNED BY NONE;
CREATE TABLE chain_events (
  id                bigint      NOT NULL DEFAULT nextval('chain_events_id_seq'),
  signature         text        NOT NULL,
  instruction_index integer     NOT NULL,
  inner_index       integer     NOT NULL,
  event_ordinal     integer     NOT NULL,
  slot              bigint      NOT NULL CHECK (slot >= 0),
  block_time        timestamptz,
  commitment        text        NOT NULL CHECK (commitment IN ('processed', 'confirmed', 'finalized')),
  finalized         boolean     NOT NULL DEFAULT false,
  event_name        text        NOT NULL,
  payload           jsonb       NOT NULL,
  raw               bytea       NOT NULL,
  source            text        NOT NULL CHECK (source IN ('inner-instructions', 'logs')),
  ingested_at       timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (slot);

-- chain_transactions_seen, the same way.
ALTER TABLE chain_transactions_seen RENAME TO chain_transactions_seen_unpartitioned;
CREATE TABLE chain_transactions_seen (
  signature   text        NOT NULL,
  slot        bigint      NOT NULL CHECK (slot >= 0),
  outcome     text        NOT NULL CHECK (outcome IN
                ('indexed', 'no_events', 'failed', 'foreign', 'malformed', 'unknown_event', 'truncated', 'unresolved')),
  event_count integer     NOT NULL,
  detail      text,
  seen_at     timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (slot);

SELECT event_store_ensure_partitions(array_agg(DISTINCT slot))
FROM (SELECT slot FROM chain_events_unpartitioned UNION SELECT slot FROM chain_transactions_seen_unpartitioned) s
HAVING count(*) > 0;

INSERT INTO chain_events (id, signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
                          finalized, event_name, payload, raw, source, ingested_at)
SELECT id, signature, instruction_index, inner_index, event_ordinal, slot, block_time, commitment,
       finalized, event_name, payload, raw, source, ingested_at
FROM chain_events_unpartitioned ORDER BY id;
INSERT INTO chain_transactions_seen (signature, slot, outcome, event_count, detail, seen_at)
SELECT signature, slot, outcome, event_count, detail, seen_at FROM chain_transactions_seen_unpartitioned;

DROP TABLE chain_events_unpartitioned;
DROP TABLE chain_transactions_seen_unpartitioned;
ALTER SEQUENCE chain_events_id_seq OWNED BY chain_events.id;

ALTER TABLE chain_events
  ADD CONSTRAINT chain_events_pkey PRIMARY KEY (id, slot),
  ADD CONSTRAINT chain_events_key UNIQUE (signature, instruction_index, inner_index, event_ordinal, slot);
CREATE INDEX chain_events_slot ON chain_events (slot, id);
CREATE INDEX chain_events_channel ON chain_events ((payload->>'channel'), id)
  WHERE event_name IN ('ChannelOpened', 'ChannelToppedUp', 'ChannelSettled', 'ChannelCloseRequested', 'ChannelClosed');

ALTER TABLE chain_transactions_seen ADD CONSTRAINT chain_transactions_seen_pkey PRIMARY KEY (signature, slot);
CREATE INDEX chain_transactions_seen_slot ON chain_transactions_seen (slot);
CREATE INDEX chain_transactions_seen_unresolved ON chain_transactions_seen (slot) WHERE outcome = 'unresolved';
