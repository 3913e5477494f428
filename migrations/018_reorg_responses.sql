-- on_reorg responses: one per (run, fork) whose triggering log a reorg
-- orphaned. A response waits ('pending') until the fork is at the network's
-- depth; then it is either 'reincluded' (the log came back in the new
-- canonical chain, the run carries on) or the run is stopped and the
-- workflow's on_reorg: steps run through their own step journal
-- (reorg_step_runs), with the same discipline as a run's steps: a row and
-- attempt exist before the effect, the outcome commits with the successor.
CREATE TABLE rflow.reorg_runs (
    id            uuid        PRIMARY KEY,
    run_id        uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    fork_block    bigint      NOT NULL,
    chain_id      bigint      NOT NULL,
    depth         integer     NOT NULL,
    old_hash      text        NOT NULL DEFAULT '',
    new_hash      text        NOT NULL DEFAULT '',
    -- the response is decided once the run's ingestion cursor (or, without
    -- one, the chain's window head) reaches this block: fork + confirmations.
    decide_at     bigint      NOT NULL,
    attempt       integer     NOT NULL DEFAULT 1,
    status        text        NOT NULL DEFAULT 'pending',
    position      text,
    epoch         integer     NOT NULL DEFAULT 0,
    error         text,
    failed_step   text,
    wake_at       timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    UNIQUE (run_id, fork_block),
    CONSTRAINT reorg_runs_status CHECK (status IN ('pending', 'reincluded', 'queued', 'running',
        'waiting_delay', 'waiting_tx', 'waiting_event', 'waiting_approval', 'completed', 'failed', 'cancelled'))
);
CREATE INDEX reorg_runs_unfinished ON rflow.reorg_runs (updated_at)
    WHERE status NOT IN ('reincluded', 'completed', 'failed', 'cancelled');

-- The response's step journal: the same shape as rflow.step_runs, keyed by
-- the response.
CREATE TABLE rflow.reorg_step_runs (
    run_id      uuid        NOT NULL REFERENCES rflow.reorg_runs (id) ON DELETE CASCADE,
    step_key    text        NOT NULL,
    step_id     text        NOT NULL,
    kind        text        NOT NULL,
    attempt     integer     NOT NULL DEFAULT 1,
    status      text        NOT NULL DEFAULT 'queued',
    input       jsonb,
    output      jsonb,
    error       text,
    wake_at     timestamptz,
    held_at     timestamptz, -- never set: the column keeps the two journals' shape
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (run_id, step_key),
    CONSTRAINT reorg_step_runs_status CHECK (status IN ('queued', 'running', 'retrying', 'waiting',
        'completed', 'failed', 'skipped', 'cancelled'))
);

-- A step of an orphaned run reached while its response is pending is held:
-- it stays queued with no job (held_at set) until the log is re-included
-- (its job is enqueued again) or the response stops the run (cancelled).
ALTER TABLE rflow.step_runs ADD COLUMN held_at timestamptz;
