-- The rate window counts an agent's channel charges with its reservations, for every voucher and
-- every rate-limited payment (api/shared/policy/store.ts readUsage): the charges of one channel
-- created after the window's start are a range of this index, not a scan of the channel's charges.
CREATE INDEX channel_charges_created ON channel_charges (channel, created_at);
