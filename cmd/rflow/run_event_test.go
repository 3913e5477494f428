package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

const runEventProject = `
name: run-event
networks:
  - { name: local, chain_id: 31337, rpc: "%[1]s", confirmations: 1, block_poll_interval: 200ms }
contracts:
  - { name: Emitter, abi: "%[2]s", network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: on-deposit
    trigger: { event: { contract: Emitter, event: Deposit } }
    steps:
      - id: record
        http_call:
          method: POST
          url: "%[3]s/record"
          body: { amount: "${{ event.amount }}", sender: "${{ event.sender }}", block: "${{ event.block }}" }
  - name: hello
    trigger: { manual: {} }
    steps:
      - { id: greet, http_call: { url: "%[3]s/fail" } }
  - name: divide
    trigger: { manual: {} }
    steps:
      - { id: a, http_call: { url: "%[3]s/ok" } }
      - id: b
        if: "${{ 10 / (steps.a.output.status - 200) > 0 }}"
        noop: {}
  - name: ticking
    trigger: { cron: { schedule: "0 0 1 1 *" } }
    steps:
      - { id: nap, delay: 1s }
`

// TestRunEventFiresASyntheticOccurrence fires an event workflow by hand
// through `rflow run --event` against a running `rflow start`: the args are
// typed per the ABI (a uint256 above 2^255 exact), the run is an event run
// marked synthetic in the journal, and its http_call body carries the
// uint256 amounts as decimal strings, small or not (the block, no ABI
// value, stays a number).
// Usage errors name what is missing; a failed http_call journals the
// response's status and body.
func TestRunEventFiresASyntheticOccurrence(t *testing.T) {
	t.Parallel()
	if _, err := anviltest.Binary(); err != nil {
		t.Skip(err)
	}
	node := anviltest.Start(t, anviltest.Options{BlockTime: time.Second})
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/fail" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":"quota exceeded","pad":"%s"}`, strings.Repeat("x", 10000))
			return
		}
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	abiPath, err := filepath.Abs("../../testdata/contracts/Emitter.abi.json")
	require.NoError(t, err)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(runEventProject, node.URL, abiPath, srv.URL)), 0o644))
	db := storetest.URL(t)
	p := startRflow(t, db, config, "")
	defer p.stop(t)
	cli := func(args ...string) (string, string, int) {
		return rflowCmd(t, append([]string{"--database-url", db}, args...)...)
	}
	require.Eventually(t, func() bool {
		out, _, code := cli("workflows", "ls", "-o", "json")
		return code == 0 && strings.Contains(out, `"on-deposit"`)
	}, 20*time.Second, 100*time.Millisecond)

	// Usage errors, before anything is started.
	_, stderr, code := cli("run", "on-depsit", "-c", config)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr, "workflow on-depsit is not in "+config+"; workflows: divide, hello, on-deposit, ticking")
	_, stderr, code = cli("run", "on-deposit", "-c", config)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `workflow on-deposit has an event trigger: pass the occurrence to fire it with, e.g. --event '{"sender": …, "amount": …}'`)
	_, stderr, code = cli("run", "on-deposit", "-c", config, "--event", `{"sender":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--event: missing amount (uint256) of event Deposit")
	_, stderr, code = cli("run", "on-deposit", "-c", config, "--event", `{"sender":"0x7099","amount":1}`)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--event: sender (address)")
	_, stderr, code = cli("run", "on-deposit", "-c", config, "--event", `{"sender":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","amount":1,"amout":2}`)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--event: amout: not an argument of event Deposit")
	_, stderr, code = cli("run", "ticking", "-c", config)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "workflow ticking has a cron trigger")
	_, stderr, code = cli("run", "hello", "-c", config, "--event", `{}`)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "workflow hello has a manual trigger: pass --input JSON, not --event")

	huge := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(1))
	fire := func(amount string) string {
		t.Helper()
		out, stderr, code := cli("run", "on-deposit", "-c", config, "-o", "json", "--event",
			`{"sender":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","amount":`+amount+`,"block":12}`)
		require.Equal(t, 0, code, stderr)
		var started struct {
			RunID string `json:"run_id"`
			Key   string `json:"key"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &started))
		require.True(t, strings.HasPrefix(started.Key, "manual:"), started.Key)
		return started.RunID
	}
	hugeRun := fire(huge.String())
	smallRun := fire(`"42"`) // a decimal string works as well as a number

	for _, id := range []string{hugeRun, smallRun} {
		var detail runDetail
		require.Eventually(t, func() bool {
			out, _, code := cli("runs", "show", id, "-o", "json")
			return code == 0 && json.Unmarshal([]byte(out), &detail) == nil && store.RunStatus(detail.Status).Terminal()
		}, 20*time.Second, 100*time.Millisecond)
		require.Equal(t, string(store.RunCompleted), detail.Status)
		require.Equal(t, "event", detail.TriggerKind)
		require.Nil(t, detail.ChainID, "a synthetic run has no chain coordinates a reorg could orphan")
		var trig struct {
			Synthetic bool                       `json:"synthetic"`
			Event     map[string]json.RawMessage `json:"event"`
		}
		require.NoError(t, json.Unmarshal(detail.Trigger, &trig))
		require.True(t, trig.Synthetic)
		require.Equal(t, `"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"`, string(trig.Event["sender"]))
		require.Equal(t, "12", string(trig.Event["block"]))
		// -o json shows the uint256 amount as a decimal string, small or
		// not; the block, the log's own, stays a number.
		if id == hugeRun {
			require.Equal(t, `"`+huge.String()+`"`, string(trig.Event["amount"]))
		} else {
			require.Equal(t, `"42"`, string(trig.Event["amount"]))
		}
		table, _, code := cli("runs", "show", id)
		require.Equal(t, 0, code)
		require.Contains(t, table, "synthetic: fired by hand with rflow run --event")
	}
	mu.Lock()
	require.ElementsMatch(t, []string{
		`{"amount":"` + huge.String() + `","block":12,"sender":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`,
		`{"amount":"42","block":12,"sender":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`,
	}, bodies)
	mu.Unlock()

	// A failed http_call journals the response's status and (the first
	// 4 KiB of) its body.
	out, stderr, code := cli("run", "hello", "-c", config, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var started struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	var detail runDetail
	require.Eventually(t, func() bool {
		out, _, code := cli("runs", "show", started.RunID, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &detail) == nil && store.RunStatus(detail.Status).Terminal()
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, string(store.RunFailed), detail.Status)
	require.Len(t, detail.Steps, 1)
	msg := *detail.Steps[0].Error
	require.Contains(t, msg, `unexpected status 429: {"error":"quota exceeded","pad":"xxx`)
	require.True(t, strings.HasSuffix(msg, "… (4096 of 10035 bytes)"), msg[len(msg)-40:])
	table, _, _ := cli("runs", "show", started.RunID)
	require.Contains(t, table, `unexpected status 429: {"error":"quota exceeded"`)
	require.Less(t, bytes.Count([]byte(table), []byte("x")), 5000, "runs show prints the error cut")

	// A run-time expression error names where the expression is written.
	out, stderr, code = cli("run", "divide", "-c", config, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	require.Eventually(t, func() bool {
		out, _, code := cli("runs", "show", started.RunID, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &detail) == nil && store.RunStatus(detail.Status).Terminal()
	}, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, string(store.RunFailed), detail.Status)
	require.NotNil(t, detail.Error)
	require.Contains(t, *detail.Error, config+":25:18: evaluate ${{ 10 / (steps.a.output.status - 200) > 0 }}: division by zero")
}

func TestRunsShowNotesOrphanedAndSyntheticRuns(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	block := int64(77)
	var b bytes.Buffer
	printRunNotes(&b, &store.Run{Trigger: []byte(`{"event":{},"synthetic":true}`), OrphanedAt: &at, BlockNumber: &block})
	require.Equal(t, "          synthetic: fired by hand with rflow run --event, not emitted on chain\n"+
		"orphaned  2026-01-02T03:04:05Z: its block 77 was reorged away (see the reorg response below and docs/reorgs.md)\n", b.String())
	b.Reset()
	printRunNotes(&b, &store.Run{Trigger: []byte(`{"event":{}}`)})
	require.Empty(t, b.String())
}
