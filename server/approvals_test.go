package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/server"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/workflow"
)

const gatedYAML = `
name: gates
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1, block_poll_interval: 100ms }
wallets:
  - { name: ops, private_key: "0x%s" }
workflows:
  - name: gated
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, to: "0x000000000000000000000000000000000000dEaD", value: "${{ gwei(1) }}", approval: {} }
`

// TestApprovalCommands: the approvals API lists a parked gate, approves it
// under the command ledger (same key: the recorded reply; another key: the
// same approval, nothing sent twice), refuses a conflicting decision with
// 409 and shows who decided in the run.
func TestApprovalCommands(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 4)
	b := newBundle(t, fmt.Sprintf(gatedYAML, node.URL, anviltest.DevKeys[4]), true)
	nonce := func() uint64 {
		n, err := node.Client().NonceAt(context.Background(), from, nil)
		require.NoError(t, err)
		return n
	}
	start := nonce()
	park := func(key string) (runID, approvalID, short string) {
		r := b.api(t, "POST", "/v1/workflows/gated/runs", key, []byte(`{}`))
		require.Equal(t, 201, r.status, "%s", r.body)
		runID = r.json(t)["run_id"].(string)
		require.Eventually(t, func() bool {
			l := b.api(t, "GET", "/v1/approvals?status=pending&run_id="+runID, "", nil)
			require.Equal(t, 200, l.status, "%s", l.body)
			aps := l.json(t)["approvals"].([]any)
			if len(aps) != 1 {
				return false
			}
			ap := aps[0].(map[string]any)
			approvalID, short = ap["id"].(string), ap["short_id"].(string)
			return true
		}, 30*time.Second, 50*time.Millisecond)
		return runID, approvalID, short
	}

	runID, id, short := park("run-1")
	got := b.api(t, "GET", "/v1/approvals/"+short, "", nil)
	require.Equal(t, 200, got.status)
	// A malformed id is a 400, as a malformed run id is; an unknown one a 404.
	bad := b.api(t, "GET", "/v1/approvals/zzz", "", nil)
	require.Equal(t, 400, bad.status, "%s", bad.body)
	require.Equal(t, "bad_approval_id", bad.errorCode(t))
	bad = b.api(t, "POST", "/v1/approvals/zzz/approve", "kz", nil)
	require.Equal(t, 400, bad.status, "%s", bad.body)
	require.Equal(t, "bad_approval_id", bad.errorCode(t))
	require.Equal(t, 404, b.api(t, "GET", "/v1/approvals/"+uuid.NewString(), "", nil).status)
	sum := got.json(t)["approval"].(map[string]any)["summary"].(map[string]any)
	require.Equal(t, "1000000000", sum["value"])
	require.Equal(t, "ops", sum["wallet"])

	require.Equal(t, 400, b.api(t, "POST", "/v1/approvals/"+id+"/approve", "", nil).status, "a mutation needs a key")
	first := b.api(t, "POST", "/v1/approvals/"+short+"/approve", "k1", []byte(`{"by":"ops-lead","reason":"ok"}`))
	require.Equal(t, 200, first.status, "%s", first.body)
	ap := first.json(t)["approval"].(map[string]any)
	require.Equal(t, "approved", ap["status"])
	require.Equal(t, workflow.FullAccessToken, ap["decided_by"], "the decider is the token, not the body's by")
	replay := b.api(t, "POST", "/v1/approvals/"+short+"/approve", "k1", []byte(`{"by":"ops-lead","reason":"ok"}`))
	require.Equal(t, "true", replay.header.Get(server.HeaderReplayed))
	require.Equal(t, first.body, replay.body, "the recorded reply")
	other := b.api(t, "POST", "/v1/approvals/"+id+"/approve", "k2", []byte(`{"by":"someone-else"}`))
	require.Equal(t, 200, other.status)
	require.Equal(t, workflow.FullAccessToken, other.json(t)["approval"].(map[string]any)["decided_by"], "a repeat records nothing new")
	conflict := b.api(t, "POST", "/v1/approvals/"+id+"/reject", "k3", nil)
	require.Equal(t, 409, conflict.status)
	require.Equal(t, "approval_conflict", conflict.errorCode(t))

	require.Eventually(t, func() bool {
		r, err := store.GetRun(context.Background(), b.pool, mustUUID(t, runID), false)
		require.NoError(t, err)
		return r.Status == store.RunCompleted
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, start+1, nonce(), "one send for three approve requests")
	detail := b.api(t, "GET", "/v1/runs/"+runID, "", nil).json(t)
	aps := detail["approvals"].([]any)
	require.Len(t, aps, 1)
	require.Equal(t, "ok", aps[0].(map[string]any)["reason"])

	_, id2, _ := park("run-2")
	rej := b.api(t, "POST", "/v1/approvals/"+id2+"/reject", "k4", []byte(`{"reason":"no"}`))
	require.Equal(t, 200, rej.status, "%s", rej.body)
	require.Equal(t, workflow.FullAccessToken, rej.json(t)["approval"].(map[string]any)["decided_by"])
	late := b.api(t, "POST", "/v1/approvals/"+id2+"/approve", "k5", nil)
	require.Equal(t, 409, late.status)
	require.Equal(t, 404, b.api(t, "POST", "/v1/approvals/00000000/approve", "k6", nil).status)
	require.Equal(t, 400, b.api(t, "GET", "/v1/approvals?status=bogus", "", nil).status)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, start+1, nonce(), "the rejected send went nowhere")
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}

// TestApprovalDecidedByToken: only a token with the approve role decides,
// and the decision records that token's name, whatever the body's by says.
func TestApprovalDecidedByToken(t *testing.T) {
	t.Parallel()
	node := anviltest.Start(t, anviltest.Options{BlockTime: 200 * time.Millisecond})
	_, from := anviltest.Key(t, 3)
	project := fmt.Sprintf(gatedYAML, node.URL, anviltest.DevKeys[3]) + `api:
  tokens:
    - { name: treasury, token: "${TREASURY_TOKEN}", roles: [read, approve] }
    - { name: oncall,   token: "${ONCALL_TOKEN}",   roles: [read, operate] }
`
	b := newBundleEnv(t, project, tokensEnv, true)
	r := b.as(t, "Bearer", oncallToken, "POST", "/v1/workflows/gated/runs", "run-1", []byte(`{}`))
	require.Equal(t, 201, r.status, "%s", r.body)
	runID := r.json(t)["run_id"].(string)
	var id string
	require.Eventually(t, func() bool {
		l := b.as(t, "Bearer", oncallToken, "GET", "/v1/approvals?status=pending&run_id="+runID, "", nil)
		aps := l.json(t)["approvals"].([]any)
		if len(aps) == 1 {
			id = aps[0].(map[string]any)["id"].(string)
		}
		return id != ""
	}, 30*time.Second, 50*time.Millisecond)
	start, err := node.Client().NonceAt(context.Background(), from, nil)
	require.NoError(t, err)

	r = b.as(t, "Bearer", oncallToken, "POST", "/v1/approvals/"+id+"/approve", "a1", []byte(`{"by":"treasury"}`))
	requireForbidden(t, r, "approve", "oncall")
	ap, err := store.GetApproval(context.Background(), b.pool, uuid.MustParse(id), false)
	require.NoError(t, err)
	require.Equal(t, store.ApprovalPending, ap.Status, "a refused decision decided nothing")

	r = b.as(t, "Bearer", treasuryToken, "POST", "/v1/approvals/"+id+"/approve", "a2", []byte(`{"by":"mallory","reason":"ok"}`))
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "treasury", r.json(t)["approval"].(map[string]any)["decided_by"])
	r = b.api(t, "POST", "/v1/approvals/"+id+"/approve", "a3", nil)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, "treasury", r.json(t)["approval"].(map[string]any)["decided_by"], "the same decision again records nothing new")
	require.Eventually(t, func() bool {
		n, err := node.Client().NonceAt(context.Background(), from, nil)
		require.NoError(t, err)
		return n == start+1
	}, 30*time.Second, 50*time.Millisecond, "one send")
	ap, err = store.GetApproval(context.Background(), b.pool, uuid.MustParse(id), false)
	require.NoError(t, err)
	require.Equal(t, "treasury", *ap.DecidedBy)
}
