package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrCursorMoved means a cursor was not where the caller read it: a reorg
// rewound it, or another holder advanced it. The caller rolls back and
// re-reads.
var ErrCursorMoved = errors.New("cursor moved")

// IndexedBlock is one block of a network's persisted block-hash window.
type IndexedBlock struct {
	Number     int64
	Hash       string
	ParentHash string
}

// WindowHead returns the newest block of chainID's window; ok is false when
// the window is empty (the head tracker has not run yet).
func WindowHead(ctx context.Context, db DBTX, chainID int64) (b IndexedBlock, ok bool, err error) {
	err = db.QueryRow(ctx, `
		SELECT number, hash, parent_hash FROM indexer.blocks
		WHERE chain_id = $1 ORDER BY number DESC LIMIT 1`, chainID).Scan(&b.Number, &b.Hash, &b.ParentHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, false, nil
	}
	if err != nil {
		return b, false, fmt.Errorf("window head of chain %d: %w", chainID, err)
	}
	return b, true, nil
}

// WindowBlocks returns chainID's window blocks numbered from..to, oldest first.
func WindowBlocks(ctx context.Context, db DBTX, chainID, from, to int64) ([]IndexedBlock, error) {
	rows, err := db.Query(ctx, `
		SELECT number, hash, parent_hash FROM indexer.blocks
		WHERE chain_id = $1 AND number BETWEEN $2 AND $3 ORDER BY number`, chainID, from, to)
	if err != nil {
		return nil, fmt.Errorf("window blocks %d..%d of chain %d: %w", from, to, chainID, err)
	}
	blocks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[IndexedBlock])
	if err != nil {
		return nil, fmt.Errorf("window blocks %d..%d of chain %d: %w", from, to, chainID, err)
	}
	return blocks, nil
}

// WindowBottom returns the oldest block number in chainID's window, or -1.
func WindowBottom(ctx context.Context, db DBTX, chainID int64) (int64, error) {
	var n *int64
	if err := db.QueryRow(ctx, `SELECT min(number) FROM indexer.blocks WHERE chain_id = $1`, chainID).Scan(&n); err != nil {
		return 0, fmt.Errorf("window bottom of chain %d: %w", chainID, err)
	}
	if n == nil {
		return -1, nil
	}
	return *n, nil
}

// AppendBlocks adds blocks (which must extend the window: the caller has
// checked their parent hashes) and prunes blocks older than keep below the
// new head, so the window stays bounded.
func AppendBlocks(ctx context.Context, tx pgx.Tx, chainID int64, blocks []IndexedBlock, keep int64) error {
	if len(blocks) == 0 {
		return nil
	}
	nums := make([]int64, len(blocks))
	hashes := make([]string, len(blocks))
	parents := make([]string, len(blocks))
	for i, b := range blocks {
		nums[i], hashes[i], parents[i] = b.Number, b.Hash, b.ParentHash
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO indexer.blocks (chain_id, number, hash, parent_hash)
		SELECT $1, n, h, p FROM unnest($2::bigint[], $3::text[], $4::text[]) AS b(n, h, p)
		ON CONFLICT (chain_id, number) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash,
			seen_at = now()`, chainID, nums, hashes, parents); err != nil {
		return fmt.Errorf("append %d block(s) to chain %d window: %w", len(blocks), chainID, err)
	}
	head := blocks[len(blocks)-1].Number
	if _, err := tx.Exec(ctx, `DELETE FROM indexer.blocks WHERE chain_id = $1 AND number <= $2`,
		chainID, head-keep); err != nil {
		return fmt.Errorf("prune chain %d window: %w", chainID, err)
	}
	return nil
}

// ReorgRecord describes a detected reorg: blocks from ForkBlock up to the
// old head were replaced; Depth counts the replaced blocks.
type ReorgRecord struct {
	ChainID   int64
	ForkBlock int64
	Depth     int
	OldHash   string // the replaced hash at ForkBlock
	NewHash   string // the canonical hash at ForkBlock now ("" if the chain is shorter)
}

// ApplyReorg records a reorg in one transaction: it rewinds every cursor of
// the chain at or past the fork to ForkBlock-1 (locking the chain's cursors
// first, so it serialises with ingesters, which lock their cursor row and
// then check LastReorgID), replaces
// the window from the fork with canonical (the new blocks from ForkBlock
// on), marks runs whose triggering block is no longer canonical as orphaned,
// and inserts the indexer.reorgs row. It returns the orphaned run ids.
func ApplyReorg(ctx context.Context, tx pgx.Tx, r ReorgRecord, canonical []IndexedBlock, keep int64) ([]uuid.UUID, error) {
	// Lock every cursor of the chain first: an ingester holding its cursor
	// row finishes (and its advance is then seen and rewound) before the
	// window changes under it.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM indexer.cursors WHERE chain_id = $1 ORDER BY task, phase FOR UPDATE`,
		r.ChainID); err != nil {
		return nil, fmt.Errorf("lock chain %d cursors: %w", r.ChainID, err)
	}
	if _, err := tx.Exec(ctx, `
		UPDATE indexer.cursors SET block = $2 - 1, updated_at = now()
		WHERE chain_id = $1 AND block >= $2`, r.ChainID, r.ForkBlock); err != nil {
		return nil, fmt.Errorf("rewind chain %d cursors to %d: %w", r.ChainID, r.ForkBlock-1, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM indexer.blocks WHERE chain_id = $1 AND number >= $2`,
		r.ChainID, r.ForkBlock); err != nil {
		return nil, fmt.Errorf("drop replaced blocks of chain %d: %w", r.ChainID, err)
	}
	if err := AppendBlocks(ctx, tx, r.ChainID, canonical, keep); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `
		UPDATE rflow.workflow_runs r SET orphaned_at = now(), updated_at = now()
		WHERE r.chain_id = $1 AND r.block_number >= $2 AND r.orphaned_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM indexer.blocks b
		                  WHERE b.chain_id = r.chain_id AND b.number = r.block_number AND b.hash = r.block_hash)
		RETURNING r.id`, r.ChainID, r.ForkBlock)
	if err != nil {
		return nil, fmt.Errorf("mark orphaned runs on chain %d from %d: %w", r.ChainID, r.ForkBlock, err)
	}
	orphaned, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("mark orphaned runs on chain %d from %d: %w", r.ChainID, r.ForkBlock, err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO indexer.reorgs (chain_id, fork_block, depth, old_hash, new_hash, orphaned_runs)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ChainID, r.ForkBlock, r.Depth, r.OldHash, r.NewHash, len(orphaned)); err != nil {
		return nil, fmt.Errorf("record reorg on chain %d: %w", r.ChainID, err)
	}
	return orphaned, nil
}

// Reorgs returns chainID's recorded reorgs, newest first (at most limit).
func Reorgs(ctx context.Context, db DBTX, chainID int64, limit int) ([]ReorgRecord, error) {
	rows, err := db.Query(ctx, `
		SELECT chain_id, fork_block, depth, old_hash, new_hash FROM indexer.reorgs
		WHERE chain_id = $1 ORDER BY id DESC LIMIT $2`, chainID, limit)
	if err != nil {
		return nil, fmt.Errorf("reorgs of chain %d: %w", chainID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ReorgRecord])
	if err != nil {
		return nil, fmt.Errorf("reorgs of chain %d: %w", chainID, err)
	}
	return out, nil
}

// EnsureCursor creates the (task, phase) cursor at block start if it does
// not exist and returns its current block (the last block fully processed).
func EnsureCursor(ctx context.Context, db DBTX, task, phase string, chainID, start int64) (int64, error) {
	var block int64
	err := db.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO indexer.cursors (task, phase, chain_id, block) VALUES ($1, $2, $3, $4)
			ON CONFLICT (task, phase) DO NOTHING RETURNING block
		)
		SELECT block FROM ins
		UNION ALL
		SELECT block FROM indexer.cursors WHERE task = $1 AND phase = $2
		LIMIT 1`, task, phase, chainID, start).Scan(&block)
	if err != nil {
		return 0, fmt.Errorf("cursor %s/%s: %w", task, phase, err)
	}
	return block, nil
}

// LockCursor locks the (task, phase) cursor row for the rest of tx and
// returns its block. Ingesters call it first in their claim transaction, so
// a concurrent reorg rewind either happens before (and is seen) or waits.
func LockCursor(ctx context.Context, tx pgx.Tx, task, phase string) (int64, error) {
	var block int64
	err := tx.QueryRow(ctx, `SELECT block FROM indexer.cursors WHERE task = $1 AND phase = $2 FOR UPDATE`,
		task, phase).Scan(&block)
	if err != nil {
		return 0, fmt.Errorf("lock cursor %s/%s: %w", task, phase, err)
	}
	return block, nil
}

// AdvanceCursor moves the (task, phase) cursor from from to to inside tx,
// fenced by lease: it returns ErrLeaseLost if lease is no longer held and
// ErrCursorMoved if the cursor is not at from. Either way roll tx back.
func AdvanceCursor(ctx context.Context, tx pgx.Tx, lease Lease, task, phase string, from, to int64) error {
	if err := FenceLease(ctx, tx, lease); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `
		UPDATE indexer.cursors SET block = $4, lease_token = $5, updated_at = now()
		WHERE task = $1 AND phase = $2 AND block = $3`, task, phase, from, to, lease.Token)
	if err != nil {
		return fmt.Errorf("advance cursor %s/%s to %d: %w", task, phase, to, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("advance cursor %s/%s from %d: %w", task, phase, from, ErrCursorMoved)
	}
	return nil
}

// BlockHashes returns the window's hashes for the given block numbers (those
// the window holds).
func BlockHashes(ctx context.Context, db DBTX, chainID int64, numbers []int64) (map[int64]string, error) {
	rows, err := db.Query(ctx, `
		SELECT number, hash FROM indexer.blocks WHERE chain_id = $1 AND number = ANY($2::bigint[])`,
		chainID, numbers)
	if err != nil {
		return nil, fmt.Errorf("block hashes of chain %d: %w", chainID, err)
	}
	out := make(map[int64]string, len(numbers))
	var n int64
	var h string
	if _, err := pgx.ForEachRow(rows, []any{&n, &h}, func() error { out[n] = h; return nil }); err != nil {
		return nil, fmt.Errorf("block hashes of chain %d: %w", chainID, err)
	}
	return out, nil
}

// LastReorgID returns the id of chainID's newest recorded reorg (0: none).
// An ingester reads it before fetching a range and again after locking its
// cursor; a change means the window moved under it and the range is stale.
func LastReorgID(ctx context.Context, db DBTX, chainID int64) (int64, error) {
	var id int64
	if err := db.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM indexer.reorgs WHERE chain_id = $1`,
		chainID).Scan(&id); err != nil {
		return 0, fmt.Errorf("last reorg of chain %d: %w", chainID, err)
	}
	return id, nil
}

// ReorgsSince returns the lowest fork block among chainID's reorgs with an
// id above afterID, and the newest such id; found is false when there are
// none. In-memory followers (wait-only subscriptions) rewind with it.
func ReorgsSince(ctx context.Context, db DBTX, chainID, afterID int64) (fork, lastID int64, found bool, err error) {
	var f, l *int64
	if err := db.QueryRow(ctx, `
		SELECT min(fork_block), max(id) FROM indexer.reorgs WHERE chain_id = $1 AND id > $2`,
		chainID, afterID).Scan(&f, &l); err != nil {
		return 0, 0, false, fmt.Errorf("reorgs of chain %d since %d: %w", chainID, afterID, err)
	}
	if f == nil {
		return 0, afterID, false, nil
	}
	return *f, *l, true, nil
}
