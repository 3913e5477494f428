-- A guard's window is only needed until it ends: the ledger cleanup job
-- deletes windows that ended more than an hour ago (store.DeleteEndedWindows).
-- Windows written before this migration have no end and are left alone: their
-- length (the guard's per) was never recorded, so none can be known to be over.
ALTER TABLE rflow.rate_limit_buckets ADD COLUMN window_end timestamptz;
CREATE INDEX rate_limit_buckets_ended ON rflow.rate_limit_buckets (window_end);
