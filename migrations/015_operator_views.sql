-- Views for operators (docs/operations.md shows queries over them), and the
-- index `rflow runs prune` walks.

-- Terminal runs by the time they finished: retention deletes through it.
CREATE INDEX workflow_runs_finished ON rflow.workflow_runs (finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- One row per workflow: how many runs are in each state, the oldest
-- unfinished one and the latest activity.
CREATE VIEW rflow.run_summary AS
SELECT workflow_name,
       count(*)                                                       AS runs,
       count(*) FILTER (WHERE status = 'queued')                      AS queued,
       count(*) FILTER (WHERE status = 'running')                     AS running,
       count(*) FILTER (WHERE status LIKE 'waiting\_%')               AS waiting,
       count(*) FILTER (WHERE status = 'completed')                   AS completed,
       count(*) FILTER (WHERE status = 'failed')                      AS failed,
       count(*) FILTER (WHERE status = 'cancelled')                   AS cancelled,
       min(created_at) FILTER (WHERE status NOT IN ('completed', 'failed', 'cancelled')) AS oldest_unfinished_at,
       max(created_at)                                                AS last_claimed_at,
       max(finished_at)                                               AS last_finished_at
FROM rflow.workflow_runs
GROUP BY workflow_name;

-- Unfinished runs that have not moved for 10 minutes and are not parked by
-- design: a delay past its wake time by more than a minute, or any other
-- state but waiting for an event or an approval (those wait as long as
-- their workflow says). `step` is the run's current journal row.
CREATE VIEW rflow.stuck_runs AS
SELECT r.id, r.workflow_name, r.status, r.position, r.attempt, r.updated_at,
       now() - r.updated_at AS stuck_for, r.wake_at,
       s.status AS step_status, s.attempt AS step_attempt, s.error AS step_error
FROM rflow.workflow_runs r
LEFT JOIN LATERAL (
    SELECT status, attempt, error FROM rflow.step_runs
    WHERE run_id = r.id AND step_key = r.position
) s ON true
WHERE r.status NOT IN ('completed', 'failed', 'cancelled', 'waiting_event', 'waiting_approval')
  AND r.updated_at < now() - interval '10 minutes'
  AND (r.status <> 'waiting_delay' OR r.wake_at < now() - interval '1 minute');

-- How far each chain ingestion task trails its network's head: blocks
-- behind the newest block the head tracker saw, and time since the cursor
-- last moved, with the process holding its lease.
CREATE VIEW rflow.trigger_lag AS
SELECT c.task, c.phase, c.chain_id, c.block AS cursor_block, h.head_block,
       h.head_block - c.block AS blocks_behind,
       now() - c.updated_at   AS since_advance,
       l.owner                AS lease_owner,
       l.expires_at > now()   AS lease_live
FROM indexer.cursors c
LEFT JOIN LATERAL (
    SELECT max(number) AS head_block FROM indexer.blocks b WHERE b.chain_id = c.chain_id
) h ON true
LEFT JOIN rflow.leases l ON l.name = c.task;
