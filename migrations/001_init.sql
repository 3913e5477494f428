-- Schemas: rflow (engine state), relayer (transactions, nonces), indexer
-- (cursors, block-hash window, reorgs). River lives in schema river.
CREATE SCHEMA IF NOT EXISTS rflow;
CREATE SCHEMA IF NOT EXISTS relayer;
CREATE SCHEMA IF NOT EXISTS indexer;

-- One row per deployed workflow. generation bumps when spec_hash changes; runs
-- pin the generation they were claimed under and execute that spec.
CREATE TABLE rflow.workflows (
    name        text        PRIMARY KEY,
    generation  bigint      NOT NULL DEFAULT 1,
    spec_hash   text        NOT NULL,
    spec        jsonb       NOT NULL,
    paused      boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Every generation ever deployed, so a run can always load the spec it was
-- claimed under even after a redeploy.
CREATE TABLE rflow.workflow_generations (
    workflow_name text        NOT NULL REFERENCES rflow.workflows (name) ON DELETE CASCADE,
    generation    bigint      NOT NULL,
    spec_hash     text        NOT NULL,
    spec          jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, generation)
);

-- The claim gate: one row per trigger occurrence. Whoever inserts the row owns
-- the run; everyone else's INSERT ... ON CONFLICT DO NOTHING is a no-op.
CREATE TABLE rflow.workflow_runs (
    id            uuid        PRIMARY KEY,
    workflow_name text        NOT NULL,
    generation    bigint      NOT NULL,
    trigger_key   text        NOT NULL,
    trigger_kind  text        NOT NULL,
    trigger       jsonb       NOT NULL DEFAULT '{}',
    status        text        NOT NULL DEFAULT 'queued',
    position      text,
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    CONSTRAINT workflow_runs_claim UNIQUE (workflow_name, trigger_key),
    CONSTRAINT workflow_runs_status CHECK (status IN ('queued', 'running', 'waiting_delay',
        'waiting_tx', 'waiting_event', 'waiting_approval', 'completed', 'failed', 'cancelled'))
);
