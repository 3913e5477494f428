-- What each network's head tracker last heard from its node, written by
-- whichever process holds the network's head lease (fenced by its token),
-- so every process reports the same truth in /readyz and /metrics: a
-- head that stopped advancing, a node that stopped answering, or a
-- tracker that falls behind its node.
CREATE TABLE indexer.heads (
    chain_id       bigint PRIMARY KEY,
    network        text NOT NULL,
    -- lease is the head tracker's lease name; lease_token the token of
    -- the holder that wrote the row.
    lease          text NOT NULL,
    lease_token    bigint NOT NULL,
    -- node_head is the newest block number the node reported at its last
    -- answered poll (the window may trail it while catching up), and
    -- node_head_time that block's timestamp.
    node_head      bigint NOT NULL,
    node_head_time timestamptz NOT NULL,
    -- block_time is the observed seconds per block (a moving average of
    -- the node's block timestamps); NULL until the head has advanced once.
    block_time     double precision,
    -- polled_at is when the node last answered a head poll.
    polled_at      timestamptz NOT NULL DEFAULT now()
);
