-- Guards that must survive a restart. rate_limit_buckets holds fixed
-- windows: one row per (workflow, guard, window), claimed with one atomic
-- INSERT … ON CONFLICT DO UPDATE … WHERE count < max, so racing runs never
-- admit more than max and a fresh process cannot reset a live window.
-- guard is 'rate_limit' (durable: true) or 'throttle'.
CREATE TABLE rflow.rate_limit_buckets (
    workflow     text        NOT NULL,
    guard        text        NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer     NOT NULL,
    PRIMARY KEY (workflow, guard, window_start),
    CONSTRAINT rate_limit_buckets_guard CHECK (guard IN ('rate_limit', 'throttle'))
);

-- A run held by throttle or rate_limit waits in status throttled (with no
-- job) until its window frees; released oldest first.
ALTER TABLE rflow.workflow_runs DROP CONSTRAINT workflow_runs_status;
ALTER TABLE rflow.workflow_runs ADD CONSTRAINT workflow_runs_status CHECK (status IN ('queued', 'throttled',
    'running', 'waiting_delay', 'waiting_tx', 'waiting_event', 'waiting_approval', 'completed', 'failed', 'cancelled'));
CREATE INDEX workflow_runs_throttled ON rflow.workflow_runs (workflow_name, created_at, id) WHERE status = 'throttled';

-- concurrency: { max, key } counts a workflow's in-flight runs per key.
ALTER TABLE rflow.workflow_runs ADD COLUMN concurrency_key text;
CREATE INDEX workflow_runs_concurrency ON rflow.workflow_runs (workflow_name, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status NOT IN ('throttled', 'completed', 'failed', 'cancelled');
