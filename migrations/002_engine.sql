-- Engine journal: the run's chain coordinates (for reorg handling) and one
-- row per step execution.
ALTER TABLE rflow.workflow_runs
    ADD COLUMN attempt      integer     NOT NULL DEFAULT 1,
    ADD COLUMN chain_id     bigint,
    ADD COLUMN block_number bigint,
    ADD COLUMN block_hash   text,
    ADD COLUMN orphaned_at  timestamptz,
    ADD COLUMN wake_at      timestamptz,
    -- goto jumps taken so far; step keys after the n-th jump carry @n, so a
    -- step revisited by a loop journals under a fresh key.
    ADD COLUMN epoch        integer     NOT NULL DEFAULT 0,
    ADD COLUMN failed_step  text;

-- Operator queries: stuck/incomplete runs, a workflow's failed runs, newest first.
CREATE INDEX workflow_runs_incomplete ON rflow.workflow_runs (updated_at)
    WHERE status NOT IN ('completed', 'failed', 'cancelled');
CREATE INDEX workflow_runs_workflow_status ON rflow.workflow_runs (workflow_name, status, created_at DESC);
CREATE INDEX workflow_runs_created ON rflow.workflow_runs (created_at DESC);
CREATE INDEX workflow_runs_block ON rflow.workflow_runs (chain_id, block_number)
    WHERE chain_id IS NOT NULL;

-- The step journal. A row (with its attempt) exists before the step's side
-- effect; its outcome is written in the same transaction that enqueues the
-- successor. step_key is the step id, or id[i] for a foreach item.
CREATE TABLE rflow.step_runs (
    run_id      uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    step_key    text        NOT NULL,
    step_id     text        NOT NULL,
    kind        text        NOT NULL,
    attempt     integer     NOT NULL DEFAULT 1,
    status      text        NOT NULL DEFAULT 'queued',
    input       jsonb,
    output      jsonb,
    error       text,
    wake_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (run_id, step_key),
    CONSTRAINT step_runs_status CHECK (status IN ('queued', 'running', 'retrying', 'waiting',
        'completed', 'failed', 'skipped', 'cancelled'))
);
CREATE INDEX step_runs_latency ON rflow.step_runs (step_id, finished_at) WHERE status = 'completed';

-- Liveness of rflow processes: each holds a session advisory lock on its
-- node id while alive, so a crashed process is detected the moment its
-- connection drops, and its in-flight River jobs can be rescued at once.
CREATE TABLE rflow.nodes (
    id          bigint      PRIMARY KEY,
    client_id   text        NOT NULL UNIQUE,
    hostname    text        NOT NULL,
    pid         integer     NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE SEQUENCE rflow.nodes_id_seq OWNED BY rflow.nodes.id;
