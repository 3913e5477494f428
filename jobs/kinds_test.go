package jobs_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// TestNotYetExecutableKindFailsClearly: a step kind the table knows but
// cannot execute (wait_for today) parks like any effect and fails the run
// with a message that names it; the steps after it never run.
func TestNotYetExecutableKindFailsClearly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := newReceiver(t)
	project := chainProject(t, `
name: kinds
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x00000000000000000000000000000000000000aa" }
workflows:
  - name: waits
    trigger: { manual: {} }
    steps:
      - id: first
        noop: {}
      - id: wait
        wait_for: { event: { contract: Vault, event: Deposit }, timeout: 1h }
      - id: after
        http_call: { url: "`+recv.URL+`/after" }
`, nil)
	pool, e := deployed(t, project)
	b := &testBundle{pool: pool, engine: e, project: project, recv: recv}

	payload, err := json.Marshal(trigger.ManualPayload{})
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		id, _, err = e.StartRunTx(ctx, tx, store.Claim{Workflow: "waits", TriggerKey: "k", TriggerKind: trigger.Manual, Trigger: payload})
		return err
	}))
	run := b.waitRun(t, id)
	require.Equal(t, store.RunFailed, run.Status)
	require.NotNil(t, run.Error)
	require.Contains(t, *run.Error, "wait_for steps are not available in this version of rflow")
	steps := b.steps(t, id)
	require.Equal(t, store.StepCompleted, steps["first"].Status)
	require.Equal(t, store.StepFailed, steps["wait"].Status)
	require.Nil(t, steps["after"])
	require.Empty(t, recv.got("/after"))
}
