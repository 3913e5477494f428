package relayer

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// Retrack is called in the transaction that records a reorg of chainID
// from fork (the chain service's OnReorg): every confirmed send whose
// block the reorg replaced is tracked again, with a job of its own, like
// a mined send that lost its block: the same transaction is found in its
// new block, or its very bytes are sent again (same nonce, same hash),
// and it ends confirmed once more at its depth on the new chain. Its final
// hook runs again; the engine's finds the step completed and does nothing.
// A reorg deeper than a send's confirmations therefore still pays once, as
// long as the chain's window (256 blocks) still held the replaced block.
// It returns how many sends it re-tracked.
func (r *Relayer) Retrack(ctx context.Context, tx pgx.Tx, chainID, fork int64) (int, error) {
	txs, err := store.RetrackRelayerTxs(ctx, tx, chainID, fork)
	if err != nil {
		return 0, err
	}
	var ids []uuid.UUID
	for _, t := range txs {
		// The reorg is the chain's, the send is its project's: another
		// project's (Config.Ours), whose wallet of the same name may hold
		// another key, is left to its own project's recovery, which finds
		// it mined and unchecked.
		if r.cfg.Ours != nil {
			ok, err := r.cfg.Ours(ctx, tx, t.ExternalID)
			if err != nil {
				return 0, err
			}
			if !ok {
				continue
			}
		}
		if err := r.startJob(ctx, tx, t.TxID); err != nil {
			return 0, err
		}
		ids = append(ids, t.TxID)
	}
	if len(ids) > 0 {
		r.log.Warn("confirmed sends lost their blocks (reorg deeper than their confirmations); tracking them again",
			"chain_id", chainID, "fork_block", fork, "sends", len(ids))
	}
	return len(ids), nil
}
