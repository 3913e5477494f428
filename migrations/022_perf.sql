-- The step journal's foreign key to its run cost two thirds of the time of
-- writing a claim's first step rows (a trigger and a row lock per row): the
-- engine only ever journals steps of a run it just claimed or holds fenced,
-- so the key guarded nothing. Retention (store.PruneRuns) deletes a run's
-- steps with it explicitly instead of by cascade.
ALTER TABLE rflow.step_runs DROP CONSTRAINT step_runs_run_id_fkey;
