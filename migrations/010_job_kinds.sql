-- River job kinds follow one scheme, rflow.<thing>. A job an earlier
-- version queued under an old name keeps its place and runs under the new
-- one (a kind no worker knows would fail). Finished jobs keep their name as
-- history.
UPDATE river.river_job SET kind = 'rflow.ledger_cleanup'
WHERE kind = 'rflow_ledger_cleanup' AND state NOT IN ('completed', 'cancelled', 'discarded');
