-- Approval gates: a send with approval: parks its run on one of these rows.
-- The row is the gate (seed 000, "Approvals: the gate is a row"): the
-- prepared transaction's summary, the expiry and the decision all live
-- here, so a crash while parked or between a decision and the broadcast
-- loses nothing. One row per (run, step, attempt): a `runs retry` that
-- reopens the step asks again.
CREATE TABLE rflow.approvals (
    id            uuid        PRIMARY KEY,
    run_id        uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    step_key      text        NOT NULL,
    attempt       integer     NOT NULL,
    workflow_name text        NOT NULL,
    step_id       text        NOT NULL,
    status        text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'cancelled')),
    -- What the send will do, as prepared when the gate was reached: what an
    -- approver sees, and exactly what an approved send broadcasts.
    summary       jsonb       NOT NULL,
    on_timeout    text        NOT NULL CHECK (on_timeout IN ('reject', 'proceed')),
    expires_at    timestamptz NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    decided_by    text,
    reason        text,
    UNIQUE (run_id, step_key, attempt)
);

CREATE INDEX approvals_pending ON rflow.approvals (expires_at) WHERE status = 'pending';
CREATE INDEX approvals_created ON rflow.approvals (created_at DESC);
