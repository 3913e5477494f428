-- Leases split trigger ingestion between rflow processes. One row per task
-- (a network's head tracker, an event/block/read trigger, a cron schedule).
-- A process takes a free or expired row with FOR UPDATE SKIP LOCKED, which
-- bumps token; every write the task makes is fenced by that token, so a
-- process that lost its lease (paused, partitioned, slow) can no longer write.
CREATE TABLE rflow.leases (
    name        text        PRIMARY KEY,
    owner       text,
    token       bigint      NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL DEFAULT '-infinity',
    acquired_at timestamptz,
    renewed_at  timestamptz
);

-- One cursor per (task, phase): the last block whose logs/blocks/reads are
-- fully claimed. It advances in the same transaction as the claims for its
-- range, so a crash can never skip a range; reorgs rewind it.
CREATE TABLE indexer.cursors (
    task        text        NOT NULL,
    phase       text        NOT NULL,
    chain_id    bigint      NOT NULL,
    block       bigint      NOT NULL,
    lease_token bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, phase)
);
CREATE INDEX cursors_chain ON indexer.cursors (chain_id, block);

-- The canonical chain as the head tracker last saw it: a bounded window of
-- recent blocks per network. A new block whose parent_hash differs from the
-- stored hash below it is a reorg.
CREATE TABLE indexer.blocks (
    chain_id    bigint      NOT NULL,
    number      bigint      NOT NULL,
    hash        text        NOT NULL,
    parent_hash text        NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, number)
);

-- Every reorg detected: the first replaced block, how many blocks were
-- replaced, and how many runs lost their triggering log or block.
CREATE TABLE indexer.reorgs (
    id            bigserial   PRIMARY KEY,
    chain_id      bigint      NOT NULL,
    fork_block    bigint      NOT NULL,
    depth         integer     NOT NULL,
    old_hash      text        NOT NULL,
    new_hash      text        NOT NULL,
    orphaned_runs integer     NOT NULL DEFAULT 0,
    detected_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reorgs_chain ON indexer.reorgs (chain_id, id);
