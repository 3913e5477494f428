package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// FinalityTag names a block tag a node reports (indexer.finality.tag).
type FinalityTag string

// Finality tags.
const (
	TagSafe      FinalityTag = "safe"
	TagFinalized FinalityTag = "finalized"
)

// SetFinality records the block a chain's node reports for tag, fenced by
// the head tracker's lease. It reports whether the recorded block changed.
func SetFinality(ctx context.Context, tx pgx.Tx, lease Lease, chainID int64, tag FinalityTag, b IndexedBlock) (bool, error) {
	if err := FenceLease(ctx, tx, lease); err != nil {
		return false, err
	}
	tg, err := tx.Exec(ctx, `
		INSERT INTO indexer.finality (chain_id, tag, number, hash) VALUES ($1, $2, $3, $4)
		ON CONFLICT (chain_id, tag) DO UPDATE SET number = excluded.number, hash = excluded.hash, seen_at = now()
		WHERE (indexer.finality.number, indexer.finality.hash) IS DISTINCT FROM (excluded.number, excluded.hash)`,
		chainID, tag, b.Number, b.Hash)
	if err != nil {
		return false, fmt.Errorf("record the %s block of chain %d: %w", tag, chainID, err)
	}
	return tg.RowsAffected() == 1, nil
}

// canonicalTag holds for a recorded tag block f that the window does not
// hold under another hash. After a finality violation (a reorg below the
// finalized block) the recorded block is off the chain until the next
// poll: nothing may follow it in the meantime.
const canonicalTag = `NOT EXISTS (SELECT 1 FROM indexer.blocks b
	WHERE b.chain_id = f.chain_id AND b.number = f.number AND b.hash <> f.hash)`

// FinalityBlock returns the block recorded for tag on chainID; ok is false
// when none was recorded yet, or the window holds its number under
// another hash (see canonicalTag).
func FinalityBlock(ctx context.Context, db DBTX, chainID int64, tag FinalityTag) (b IndexedBlock, ok bool, err error) {
	err = db.QueryRow(ctx, `SELECT f.number, f.hash FROM indexer.finality f WHERE f.chain_id = $1 AND f.tag = $2
		AND `+canonicalTag, chainID, tag).Scan(&b.Number, &b.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return IndexedBlock{}, false, nil
	}
	if err != nil {
		return IndexedBlock{}, false, fmt.Errorf("the %s block of chain %d: %w", tag, chainID, err)
	}
	return b, true, nil
}

// forgetFinality drops the recorded tag blocks of chainID from block from
// on, in a reorg's transaction: a reorg that reaches them is a finality
// violation, and nothing may follow the old chain's tags until the node
// reports new ones.
func forgetFinality(ctx context.Context, tx pgx.Tx, chainID, from int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM indexer.finality WHERE chain_id = $1 AND number >= $2`, chainID, from); err != nil {
		return fmt.Errorf("forget the finality tags of chain %d from %d: %w", chainID, from, err)
	}
	return nil
}
