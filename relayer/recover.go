package relayer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// recoverBatch is how many stale sends Recover takes over per query.
const recoverBatch = 500

// RecoverResult says what Recover did.
type RecoverResult struct {
	// Reconciled counts (wallet, network) nonces checked against the chain.
	Reconciled int
	// Unreachable counts (wallet, network) pairs whose node did not answer;
	// they are reconciled on a later pass (and on their next nonce error).
	Unreachable int
	// Resumed counts in-flight sends given a new job.
	Resumed int
}

// Recover makes sure every send in flight is driven by a live job. Call it
// at boot and periodically. It first reconciles each wallet's stored next
// nonce with the chain's pending nonce on every network (raising it when the
// wallet was used outside rflow), then gives each in-flight send that no
// worker has checked for Config.StaleAfter a fresh send job.
// A node that does not answer is logged and counted, not an error: one
// network being down must not stop a boot. Errors are database errors.
// The old job, if it ever runs again, finds it no longer drives the send and
// does nothing; the work itself is idempotent (a reserved nonce stays with
// its send, recorded bytes are re-sent as they are).
func (r *Relayer) Recover(ctx context.Context) (RecoverResult, error) {
	var res RecoverResult
	for name, w := range r.cfg.Wallets {
		for chainID, b := range r.cfg.Networks {
			pending, err := b.PendingNonceAt(ctx, w.Address())
			if err != nil {
				r.log.Warn("relayer recovery: node did not answer; nonce not reconciled", "wallet", name,
					"chain_id", chainID, "error", err)
				res.Unreachable++
				continue
			}
			if _, err := store.ReconcileNonce(ctx, r.cfg.Pool, w.Address().Hex(), int64(chainID), pending); err != nil {
				return res, err
			}
			res.Reconciled++
		}
	}
	cutoff := time.Now().Add(-r.cfg.StaleAfter)
	for {
		rows, err := store.InFlightRelayerTxs(ctx, r.cfg.Pool, cutoff, recoverBatch)
		if err != nil {
			return res, err
		}
		for _, row := range rows {
			resumed, err := r.resume(ctx, row, cutoff)
			if err != nil {
				return res, err
			}
			if resumed {
				res.Resumed++
				r.log.Info("send resumed by recovery", "external_id", row.ExternalID, "status", row.Status)
			}
		}
		if len(rows) < recoverBatch {
			break
		}
	}
	if res.Resumed > 0 || res.Unreachable > 0 {
		r.log.Info("relayer recovery", "reconciled", res.Reconciled, "resumed", res.Resumed, "unreachable", res.Unreachable)
	}
	return res, nil
}

// RecoverArgs is the periodic job that runs Recover (see PeriodicJobs).
type RecoverArgs struct{}

// Kind is the River job kind.
func (RecoverArgs) Kind() string { return "relayer_recover" }

type recoverWorker struct {
	river.WorkerDefaults[RecoverArgs]
	r *Relayer
}

func (w *recoverWorker) Timeout(*river.Job[RecoverArgs]) time.Duration { return 5 * time.Minute }

func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[RecoverArgs]) error {
	_, err := w.r.Recover(ctx)
	return err
}

// PeriodicJobs returns the relayer's periodic work for river.Config's
// PeriodicJobs: Recover every interval, on the leader only, so a send whose
// job was lost (discarded, deleted, or stuck on a dead process) is picked up
// again without a restart. Recover is idempotent, so an extra run is
// harmless.
//
//	client, err := river.NewClient(driver, &river.Config{Workers: workers, PeriodicJobs: r.PeriodicJobs(time.Minute), …})
func (r *Relayer) PeriodicJobs(interval time.Duration) []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return RecoverArgs{}, r.insertOpts() },
		&river.PeriodicJobOpts{ID: "relayer_recover"})}
}

// resume gives one stale send a new job, unless a worker touched it since
// the scan.
func (r *Relayer) resume(ctx context.Context, row *store.RelayerTx, cutoff time.Time) (bool, error) {
	resumed := false
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		cur, err := store.LockRelayerTx(ctx, tx, row.TxID)
		if err != nil {
			return err
		}
		if cur.Final() || !cur.CheckedAt.Before(cutoff) {
			return nil
		}
		if r.cfg.Adopt != nil {
			if ok, err := r.cfg.Adopt(ctx, tx, cur.ExternalID); err != nil || !ok {
				return err
			}
		}
		resumed = true
		return r.startJob(ctx, tx, cur.TxID)
	})
	if err != nil {
		return false, fmt.Errorf("resume send %s: %w", row.ExternalID, err)
	}
	return resumed, nil
}
