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

-- trigger_lag counts up to the node's head when the window trails it, and
-- finds a cursor's lease under the project's prefix (<project>/<task>).
CREATE OR REPLACE VIEW rflow.trigger_lag AS
SELECT c.task, c.phase, c.chain_id, c.block AS cursor_block, h.head_block,
       h.head_block - c.block AS blocks_behind,
       now() - c.updated_at   AS since_advance,
       l.owner                AS lease_owner,
       l.expires_at > now()   AS lease_live
FROM indexer.cursors c
LEFT JOIN LATERAL (
    SELECT greatest((SELECT max(b.number) FROM indexer.blocks b WHERE b.chain_id = c.chain_id),
                    (SELECT x.node_head FROM indexer.heads x WHERE x.chain_id = c.chain_id)) AS head_block
) h ON true
LEFT JOIN LATERAL (
    SELECT x.owner, x.expires_at FROM rflow.leases x
    WHERE x.name = c.task OR right(x.name, length(c.task) + 1) = '/' || c.task
    ORDER BY x.token = c.lease_token DESC, x.expires_at DESC LIMIT 1
) l ON true;

-- Per network: the window's head and how long since it gained a block,
-- what the node last answered and when, and who runs the head tracker.
CREATE VIEW rflow.chain_heads AS
SELECT h.network, h.chain_id, w.number AS window_head, now() - w.seen_at AS head_age,
       h.node_head, now() - h.polled_at AS since_poll, h.block_time,
       l.owner AS lease_owner, l.expires_at > now() AS lease_live
FROM indexer.heads h
LEFT JOIN LATERAL (
    SELECT b.number, b.seen_at FROM indexer.blocks b WHERE b.chain_id = h.chain_id ORDER BY b.number DESC LIMIT 1
) w ON true
LEFT JOIN rflow.leases l ON l.name = h.lease;
