-- wait_for steps (seed 000, "Sagas: wait_for guarantees"). One row per
-- parked step attempt holds its event conditions and deadline, written in
-- the transaction that parks the run, so a restart loses nothing.
--
-- status: waiting (no candidate), armed (a matching log seen at less than
-- the wait's confirmations; a reorg that removes it returns the wait to
-- waiting), matched (settled with the event), timed_out, failed (its where
-- could not be evaluated on a candidate), cancelled. The
-- row lock on it decides a timeout racing a match: exactly one of them
-- moves it out of waiting/armed.
CREATE TABLE rflow.waits (
    id            bigserial   PRIMARY KEY,
    run_id        uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    step_key      text        NOT NULL,
    step_id       text        NOT NULL,
    attempt       integer     NOT NULL,
    chain_id      bigint      NOT NULL,
    contract      text        NOT NULL,
    event         text        NOT NULL,
    -- address: the contract's lower-case hex address, '' for any emitter.
    address       text        NOT NULL,
    topic         text        NOT NULL,
    -- match_key: 'field=value' of an equality the where requires of the
    -- event, evaluated when the wait parked; '' when there is none (every
    -- log of the event is then a candidate).
    match_key     text        NOT NULL DEFAULT '',
    where_src     text,
    confirmations integer     NOT NULL CHECK (confirmations >= 0),
    -- from_block: logs from this block on match (the lookback that closes
    -- the gap between the trigger's block and the park).
    from_block    bigint      NOT NULL,
    lookback_done boolean     NOT NULL DEFAULT false,
    deadline      timestamptz,
    on_timeout    text        NOT NULL DEFAULT 'fail',
    status        text        NOT NULL DEFAULT 'waiting'
        CHECK (status IN ('waiting', 'armed', 'matched', 'timed_out', 'failed', 'cancelled')),
    cand_block    bigint,
    cand_hash     text,
    cand_index    integer,
    event_data    jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    settled_at    timestamptz,
    UNIQUE (run_id, step_key, attempt)
);

-- A log finds its waits by (chain, event, key): an indexed lookup, not a
-- test of every parked where.
CREATE INDEX waits_live_idx ON rflow.waits (chain_id, topic, match_key)
    WHERE status IN ('waiting', 'armed');
CREATE INDEX waits_armed_idx ON rflow.waits (chain_id, topic, cand_block)
    WHERE status = 'armed';
CREATE INDEX waits_lookback_idx ON rflow.waits (chain_id, topic)
    WHERE NOT lookback_done AND status IN ('waiting', 'armed');
