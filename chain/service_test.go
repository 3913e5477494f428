package chain_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

// Two services split the tasks between them; when one stops, the other
// takes everything over, and every log is still claimed exactly once.
func TestServicesSplitTasksAndTakeOver(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	wfs := []string{"a", "b", "c", "d", "e"}
	addWorkflows(t, pool, wfs...)
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(em.ABI, "Deposit")
	require.NoError(t, err)
	cfg := chain.Config{LeasePrefix: "proj", LeaseTTL: 900 * time.Millisecond, Networks: []chain.Network{network(node.URL)}}
	for _, wf := range wfs {
		cfg.Events = append(cfg.Events, chain.EventTrigger{Workflow: wf, Network: "local", Event: deposit, RunOn: chain.RunOnHead})
	}
	owned := func(owner string) int {
		return count(t, pool, `SELECT count(*) FROM rflow.leases WHERE owner = $1 AND expires_at > now()
			AND name NOT LIKE 'proj/node/%'`, owner)
	}

	cfgA := cfg
	cfgA.Owner = "A"
	stopA := startService(t, pool, cfgA)
	eventually(t, 10*time.Second, "A holding all 6 tasks", func() bool { return owned("A") == 6 })

	cfgB := cfg
	cfgB.Owner = "B"
	startService(t, pool, cfgB)
	eventually(t, 10*time.Second, "the tasks split 3/3", func() bool { return owned("A") == 3 && owned("B") == 3 })
	em.EmitMany(100, 0)

	stopA()
	eventually(t, 10*time.Second, "B holding everything", func() bool { return owned("B") == 6 })
	em.EmitMany(100, 100)
	eventually(t, 20*time.Second, "every log claimed for every workflow", func() bool {
		return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) == 5*200
	})
	require.Equal(t, 5*200, count(t, pool, `SELECT count(DISTINCT (workflow_name, trigger_key)) FROM rflow.workflow_runs`))
}

// startService runs a Service until the returned stop is called (or the
// test ends).
func startService(t *testing.T, p *pgxpool.Pool, cfg chain.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := chain.NewService(ctx, p, gateClaimer{}, cfg, testLogger(t))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
		svc.Close()
	}
	t.Cleanup(stop)
	return stop
}

// A lease taken over behind a process's back fences it at once: it claims
// nothing more until the lease is free again.
func TestStolenLeaseFencesIngestion(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	addWorkflows(t, pool, "wf")
	node := anviltest.Start(t, anviltest.Options{})
	em := anviltest.DeployEmitter(t, node)
	deposit, err := chain.NewEvent(em.ABI, "Deposit")
	require.NoError(t, err)
	runService(t, pool, chain.Config{Owner: "A", LeaseTTL: 900 * time.Millisecond, Networks: []chain.Network{network(node.URL)},
		Events: []chain.EventTrigger{{Workflow: "wf", Network: "local", Event: deposit, RunOn: chain.RunOnHead}}})
	runs := func() int { return count(t, pool, `SELECT count(*) FROM rflow.workflow_runs`) }
	em.Deposit(1)
	eventually(t, 10*time.Second, "the first claim", func() bool { return runs() == 1 })

	ctx := context.Background()
	_, err = pool.Exec(ctx, `UPDATE rflow.leases SET owner = 'thief', token = token + 1, expires_at = now() + interval '1 hour'
		WHERE name = 'event/wf'`)
	require.NoError(t, err)
	em.Deposit(2)
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, 1, runs(), "a fenced process must not claim")

	_, err = pool.Exec(ctx, `UPDATE rflow.leases SET expires_at = now() WHERE name = 'event/wf'`)
	require.NoError(t, err)
	eventually(t, 10*time.Second, "A back in charge", func() bool { return runs() == 2 })
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM rflow.leases WHERE name = 'event/wf' AND owner = 'A' AND token = 3`))
}
