-- An event occurrence's trigger key is now chain_id:tx_hash:tx<position in
-- its transaction> (stable when a reorg re-mines the transaction elsewhere);
-- earlier versions keyed it chain_id:tx_hash:<block log index>. The block's
-- log index alone cannot be turned into the transaction's position in SQL
-- (that needs the transaction's receipt), so old keys are not rewritten
-- here: the claim gate rewrites a run's old key when the same log (same
-- block hash, same block log index) is claimed again (store.ClaimRuns).
-- This table bounds that work: per chain, the newest block of a run claimed
-- under an old key. Claims above it cannot meet an old key and skip the
-- check; a fresh install has no row.
CREATE TABLE rflow.legacy_event_keys (
    chain_id  bigint PRIMARY KEY,
    max_block bigint NOT NULL
);
INSERT INTO rflow.legacy_event_keys (chain_id, max_block)
SELECT chain_id, max(block_number) FROM rflow.workflow_runs
WHERE trigger_kind = 'event' AND chain_id IS NOT NULL AND block_number IS NOT NULL
  AND trigger_key ~ '^([a-z]+:[^:]+:)?[0-9]+:0x[0-9a-fA-F]{64}:[0-9]+(:head|:confirmed)?$'
GROUP BY chain_id;

-- A log re-included after its reorg response was decided (the run was
-- stopped or compensated) is recorded on that response.
ALTER TABLE rflow.reorg_runs ADD COLUMN reincluded_at timestamptz;
