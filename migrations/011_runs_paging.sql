-- runs list pages by keyset on (created_at, id), newest first: ties in
-- created_at (runs claimed in one transaction) are broken by id, so a page
-- boundary never skips or repeats a run.
DROP INDEX rflow.workflow_runs_created;
CREATE INDEX workflow_runs_paging ON rflow.workflow_runs (created_at DESC, id DESC);
DROP INDEX rflow.workflow_runs_workflow_status;
CREATE INDEX workflow_runs_workflow_status ON rflow.workflow_runs (workflow_name, status, created_at DESC, id DESC);

-- Short run ids (the last 8 hex digits, the random end of a UUIDv7, as the
-- live view prints them) are looked up by this expression.
CREATE INDEX workflow_runs_short_id ON rflow.workflow_runs (right(id::text, 8));
