-- Why and since when a workflow is paused (a circuit breaker trip or an
-- operator), and when it was last resumed: a circuit breaker counts only
-- the failures after a resume, so the failures that tripped it cannot trip
-- it again.
ALTER TABLE rflow.workflows
    ADD COLUMN paused_at     timestamptz,
    ADD COLUMN paused_reason text,
    ADD COLUMN resumed_at    timestamptz;

-- The circuit breaker counts a workflow's failed runs finished in its window.
CREATE INDEX workflow_runs_failed_finished ON rflow.workflow_runs (workflow_name, finished_at)
    WHERE status = 'failed';
