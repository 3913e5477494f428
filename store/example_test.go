package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
	"github.com/rflow-dev/rflow/trigger"
)

// The claim gate: two processes see the same log at once and both claim
// it, each in its own transaction. The unique (workflow, trigger key) index
// lets one claim create the run; the other waits for it and creates
// nothing, so the occurrence runs exactly once.
func ExampleClaimRuns() {
	ctx := context.Background()
	pool, closeDB, err := storetest.Open(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeDB()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.DeployWorkflow(ctx, tx, "on-deposit", "hash-1", []byte(`{}`))
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	claim := store.Claim{Workflow: "on-deposit", TriggerKey: "1:0xabc:0", TriggerKind: trigger.Event,
		Trigger: []byte(`{"event": {}, "block": 7, "phase": "confirmed"}`), ChainID: 1, BlockNumber: 7}
	var created atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				won, err := store.ClaimRuns(ctx, tx, []store.Claim{claim})
				created.Add(int64(len(won)))
				return err // the winner's first step job would be enqueued here, in tx
			})
			if err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	runs, err := store.ListRuns(ctx, pool, store.RunFilter{Workflow: "on-deposit"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("claims that created a run:", created.Load())
	fmt.Println("runs:", len(runs), runs[0].TriggerKey, runs[0].Status)
	// Output:
	// claims that created a run: 1
	// runs: 1 1:0xabc:0 queued
}
