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
// on), returns wait_for candidates past the fork to waiting, marks runs
// whose triggering block is no longer canonical as orphaned, and inserts the indexer.reorgs row. It returns the orphaned run ids.
func ApplyReorg(ctx context.Context, tx pgx.Tx, r ReorgRecord, canonical []IndexedBlock, keep int64) ([]uuid.UUID, error) {
	if err := lockChainCursors(ctx, tx, r.ChainID); err != nil {
		return nil, err
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
	if err := forgetFinality(ctx, tx, r.ChainID, r.ForkBlock); err != nil {
		return nil, err
	}
	if err := AppendBlocks(ctx, tx, r.ChainID, canonical, keep); err != nil {
		return nil, err
	}
	if err := disarmWaits(ctx, tx, r.ChainID, r.ForkBlock); err != nil {
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

// lockChainCursors locks every cursor of the chain, first in a transaction
// that changes its window: an ingester holding its cursor row finishes (and
// its advance is then seen and rewound) before the window changes under it.
func lockChainCursors(ctx context.Context, tx pgx.Tx, chainID int64) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM indexer.cursors WHERE chain_id = $1 ORDER BY task, phase FOR UPDATE`,
		chainID); err != nil {
		return fmt.Errorf("lock chain %d cursors: %w", chainID, err)
	}
	return nil
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

// Cursor is a (task, phase) cursor: the last block (or slot) fully
// processed, and the chain it was processed on.
type Cursor struct {
	Block   int64
	ChainID int64
}

// EnsureCursor creates the (task, phase) cursor at block start on chainID
// if it does not exist and returns it. A cursor of another chain (its
// ChainID differs from chainID) is returned as it is: the caller decides.
func EnsureCursor(ctx context.Context, db DBTX, task, phase string, chainID, start int64) (Cursor, error) {
	var c Cursor
	err := db.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO indexer.cursors (task, phase, chain_id, block) VALUES ($1, $2, $3, $4)
			ON CONFLICT (task, phase) DO NOTHING RETURNING block, chain_id
		)
		SELECT block, chain_id FROM ins
		UNION ALL
		SELECT block, chain_id FROM indexer.cursors WHERE task = $1 AND phase = $2
		LIMIT 1`, task, phase, chainID, start).Scan(&c.Block, &c.ChainID)
	if err != nil {
		return c, fmt.Errorf("cursor %s/%s: %w", task, phase, err)
	}
	return c, nil
}

// ResetCursor moves the (task, phase) cursor to block start on chainID,
// fenced by lease (ErrLeaseLost: roll back). Ingestion calls it when the
// cursor belongs to another chain or lies beyond the chain's head: it would
// otherwise skip blocks of the chain it now reads. When the cursor was on
// another chain (from is its chain id, not chainID), workflow's runs on
// that chain have their trigger keys qualified with it ("@<chain id>"):
// block and read keys are block numbers, and the new chain's blocks must
// become runs of their own.
func ResetCursor(ctx context.Context, tx pgx.Tx, lease Lease, task, phase, workflow string, from, chainID, start int64) error {
	if err := FenceLease(ctx, tx, lease); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE indexer.cursors SET chain_id = $3, block = $4, lease_token = $5, updated_at = now()
		WHERE task = $1 AND phase = $2`, task, phase, chainID, start, lease.Token); err != nil {
		return fmt.Errorf("reset cursor %s/%s to %d: %w", task, phase, start, err)
	}
	if from == chainID {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.workflow_runs SET trigger_key = trigger_key || '@' || $2::text, updated_at = now()
		WHERE workflow_name = $1 AND chain_id = $2 AND trigger_key NOT LIKE '%@%'
		  AND trigger_key NOT LIKE $2::text || ':%'`, workflow, from); err != nil {
		return fmt.Errorf("qualify trigger keys of %s on chain %d: %w", workflow, from, err)
	}
	return nil
}

// LockCursor locks the (task, phase) cursor row for the rest of tx and
// returns its block. Ingesters call it first in their claim transaction, so
// a concurrent reorg rewind either happens before (and is seen) or waits.
func LockCursor(ctx context.Context, tx pgx.Tx, task, phase string) (int64, error) {
	var block int64
	err := tx.QueryRow(ctx, `SELECT block FROM indexer.cursors WHERE task = $1 AND phase = $2 FOR UPDATE`,
		task, phase).Scan(&block)
	if errors.Is(err, pgx.ErrNoRows) {
		// Deleted by a chain replacement (ReplaceChain): it restarts at the
		// trigger's start block.
		return 0, fmt.Errorf("lock cursor %s/%s: %w", task, phase, ErrCursorMoved)
	}
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

// ChainIdentity is what the indexer recorded about a chain id: the genesis
// hash of the chain it read, and the network name it read it as.
type ChainIdentity struct {
	ChainID int64
	Network string
	Genesis string
}

// GetChainIdentity returns chainID's recorded identity; ok is false when
// none is recorded (a chain never read, or read before identities were).
func GetChainIdentity(ctx context.Context, db DBTX, chainID int64) (id ChainIdentity, ok bool, err error) {
	err = db.QueryRow(ctx, `SELECT chain_id, network, genesis_hash FROM indexer.chains WHERE chain_id = $1`,
		chainID).Scan(&id.ChainID, &id.Network, &id.Genesis)
	if errors.Is(err, pgx.ErrNoRows) {
		return id, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("identity of chain %d: %w", chainID, err)
	}
	return id, true, nil
}

// RecordChainIdentity stores id as its chain's identity.
func RecordChainIdentity(ctx context.Context, tx pgx.Tx, id ChainIdentity) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO indexer.chains (chain_id, network, genesis_hash) VALUES ($1, $2, $3)
		ON CONFLICT (chain_id) DO UPDATE SET network = excluded.network, genesis_hash = excluded.genesis_hash,
			seen_at = now()`, id.ChainID, id.Network, id.Genesis); err != nil {
		return fmt.Errorf("record identity of chain %d: %w", id.ChainID, err)
	}
	return nil
}

// ChainReplacement is a chain id whose node now serves another chain (or
// one that shares no block with the window), and how ReplaceChain retires
// the chain it served before.
type ChainReplacement struct {
	// ID is the chain the chain id serves now.
	ID ChainIdentity
	// OldGenesis is the genesis recorded for the previous chain ("" none).
	OldGenesis string
	// Reorg, when set, records the replacement as a reorg from block 0
	// (its ChainID and ForkBlock are set here): every run of the chain is
	// orphaned (see ApplyReorg), so its on_reorg responses start. That is
	// what a production node replaced under the same chain id means. Nil
	// discards the previous chain without a reorg: rflow dev's embedded
	// chain is new on every start by construction, so its previous
	// session's runs stay in history as they are (the caller ends the
	// ones still in flight, see ReplacedChain.Live).
	Reorg *ReorgRecord
	// Qualifier, when set, is appended ("@" + Qualifier) to the previous
	// chain's trigger keys; empty: OldGenesis when it differs from
	// ID.Genesis, else the keys stay as they are.
	Qualifier string
}

// ReplacedChain is what ReplaceChain did to the previous chain's runs.
type ReplacedChain struct {
	// Orphaned are the runs a recorded reorg orphaned (Reorg set).
	Orphaned []uuid.UUID
	// Qualified counts the runs whose trigger keys were qualified.
	Qualified int
	// Live are the qualified runs that had not finished.
	Live []uuid.UUID
}

// ReplaceChain forgets everything the indexer knew about c.ID's chain id,
// in tx: with c.Reorg it is recorded as a reorg from block 0, else the
// chain's window and cursors are only dropped (no reorg, no run orphaned).
// Either way the window is emptied (the head tracker seeds it again) and
// every cursor of the chain is deleted, so each trigger starts again at its
// configured start block. The previous chain's runs have their trigger keys
// qualified (see ChainReplacement.Qualifier): the new chain's occurrences
// (whose transaction hashes and block numbers can repeat the old chain's, a
// fresh dev node replaying the same transactions) are then new runs.
func ReplaceChain(ctx context.Context, tx pgx.Tx, c ChainReplacement) (ReplacedChain, error) {
	var out ReplacedChain
	id := c.ID
	if c.Reorg != nil {
		r := *c.Reorg
		r.ChainID, r.ForkBlock = id.ChainID, 0
		orphaned, err := ApplyReorg(ctx, tx, r, nil, 0)
		if err != nil {
			return out, err
		}
		out.Orphaned = orphaned
	} else {
		if err := lockChainCursors(ctx, tx, id.ChainID); err != nil {
			return out, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM indexer.blocks WHERE chain_id = $1`, id.ChainID); err != nil {
			return out, fmt.Errorf("drop the window of chain %d: %w", id.ChainID, err)
		}
		if err := forgetFinality(ctx, tx, id.ChainID, 0); err != nil {
			return out, err
		}
	}
	qualifier := c.Qualifier
	if qualifier == "" && c.OldGenesis != "" && c.OldGenesis != id.Genesis {
		qualifier = c.OldGenesis
	}
	if qualifier != "" {
		rows, err := tx.Query(ctx, `
			UPDATE rflow.workflow_runs SET trigger_key = trigger_key || '@' || $2, updated_at = now()
			WHERE chain_id = $1 AND trigger_key NOT LIKE '%@%'
			RETURNING id, status`, id.ChainID, qualifier)
		if err != nil {
			return out, fmt.Errorf("qualify trigger keys of replaced chain %d: %w", id.ChainID, err)
		}
		var runID uuid.UUID
		var status RunStatus
		if _, err := pgx.ForEachRow(rows, []any{&runID, &status}, func() error {
			out.Qualified++
			if !status.Terminal() {
				out.Live = append(out.Live, runID)
			}
			return nil
		}); err != nil {
			return out, fmt.Errorf("qualify trigger keys of replaced chain %d: %w", id.ChainID, err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM indexer.cursors WHERE chain_id = $1`, id.ChainID); err != nil {
		return out, fmt.Errorf("reset cursors of chain %d: %w", id.ChainID, err)
	}
	if err := RecordChainIdentity(ctx, tx, id); err != nil {
		return out, err
	}
	return out, nil
}

// EndDiscardedRun records why a run of a discarded chain (see
// ChainReplacement.Reorg) ended, ahead of what its error already says (a
// cancelled send's note).
func EndDiscardedRun(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) error {
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.workflow_runs SET error = $2 || COALESCE('; ' || error, ''), updated_at = now() WHERE id = $1`,
		id, reason); err != nil {
		return fmt.Errorf("note the end of run %s: %w", id, err)
	}
	return nil
}
