package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/store"
)

// DiscardedRunError is the error of a run DiscardChain ended.
const DiscardedRunError = "the dev chain it came from was discarded when rflow dev restarted (its chain is gone, so the run can never finish)"

// DiscardedTxError is the error of a send DiscardChain ended.
const DiscardedTxError = "the dev chain it was sent on was discarded when rflow dev restarted: nothing of it can be mined any more"

// DiscardedChain is what DiscardChain did.
type DiscardedChain struct {
	// Discarded is false when there was nothing to discard: no chain was
	// recorded for the chain id yet.
	Discarded bool
	// Runs counts the previous chain's runs, which stay in history.
	Runs int
	// Ended counts those of them that were in flight and are now cancelled.
	Ended int
}

// DiscardChain retires the chain chainID served before the one whose
// genesis block is genesis, when that chain is gone by construction:
// rflow dev's embedded chain is new on every start. Unlike a node replaced
// under the same chain id (the head tracker's genesis check), nothing is
// recorded as a reorg and no run is orphaned, so no on_reorg response
// starts: the previous chain's runs stay as they ended, their trigger keys
// qualified so the new chain's identical logs become runs of their own,
// and the ones in flight are cancelled (see CancelRun) with
// DiscardedRunError. The chain's sends not final are ended with
// DiscardedTxError and its wallet nonces forgotten (see
// store.EndDiscardedChainTxs). It needs no
// engine and must run before the engine reads the chain.
func DiscardChain(ctx context.Context, pool *pgxpool.Pool, chainID int64, genesis string) (DiscardedChain, error) {
	var out DiscardedChain
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		out = DiscardedChain{}
		known, ok, err := store.GetChainIdentity(ctx, tx, chainID)
		if err != nil || !ok {
			return err
		}
		out.Discarded = true
		// The genesis qualifies the old keys when it changed (anvil). The
		// simulated chain's genesis is the same in every session, so its
		// keys are qualified with the old window's head, a block of that
		// session only.
		qualifier := known.Genesis
		if qualifier == genesis {
			wh, ok, err := store.WindowHead(ctx, tx, chainID)
			switch {
			case err != nil:
				return err
			case ok:
				qualifier = wh.Hash
			default:
				qualifier = genesis + "/" + time.Now().UTC().Format(time.RFC3339Nano)
			}
		}
		replaced, err := store.ReplaceChain(ctx, tx, store.ChainReplacement{
			ID:         store.ChainIdentity{ChainID: chainID, Network: known.Network, Genesis: genesis},
			OldGenesis: known.Genesis, Qualifier: qualifier,
		})
		if err != nil {
			return err
		}
		out.Runs = replaced.Qualified
		// The sends first: cancelling a run then finds its send ended
		// instead of asking the relayer for a no-op on the new chain.
		if _, err := store.EndDiscardedChainTxs(ctx, tx, chainID, DiscardedTxError); err != nil {
			return err
		}
		for _, id := range replaced.Live {
			run, err := CancelRun(ctx, tx, id)
			if err != nil {
				return fmt.Errorf("end run %s of the discarded chain: %w", id, err)
			}
			if run.Status != store.RunCancelled {
				continue
			}
			if err := store.EndDiscardedRun(ctx, tx, id, DiscardedRunError); err != nil {
				return err
			}
			out.Ended++
		}
		return nil
	})
	if err != nil {
		return DiscardedChain{}, fmt.Errorf("discard the previous chain of chain id %d: %w", chainID, err)
	}
	return out, nil
}
