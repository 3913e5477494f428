-- The step journal's foreign key to its run cost two thirds of the time of
-- writing a claim's first step rows (a trigger and a row lock per row): the
-- engine only ever journals steps of a run it just claimed or holds fenced,
-- so the key guarded nothing. Retention (store.PruneRuns, and the replay's
-- prune) deletes a run's steps with it explicitly instead of by cascade.
ALTER TABLE rflow.step_runs DROP CONSTRAINT step_runs_run_id_fkey;

-- `rflow runs list` and the console page runs newest first by (created_at,
-- id) under a workflow filter, a status filter (--failed, the DLQ page), or
-- both (workflow_runs_workflow_status). Without these, a filter on a rare
-- workflow or status walked workflow_runs_paging across every run; the
-- status one also serves the prepared (generic) plan, which a partial
-- index on status = 'failed' could not. Migrations run in a transaction,
-- so these are not built CONCURRENTLY: claims wait while they build, on a
-- large table for as long as the build takes.
CREATE INDEX workflow_runs_workflow_paging ON rflow.workflow_runs (workflow_name, created_at DESC, id DESC);
CREATE INDEX workflow_runs_status_paging ON rflow.workflow_runs (status, created_at DESC, id DESC);
