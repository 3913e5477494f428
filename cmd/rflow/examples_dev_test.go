package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/devchain"
	"github.com/rflow-dev/rflow/store/storetest"
)

// devExample starts `rflow dev --project examples/<name>` as a real
// process, the example's files as they are, and returns the database it
// runs on.
func devExample(t *testing.T, name string) (dbURL string, p *proc) {
	t.Helper()
	dbURL = storetest.URL(t)
	p = startRflowArgs(t, nil, "--database-url", dbURL, "dev", "--project", "../../examples/"+name, "--http", "127.0.0.1:0",
		"--emit-every", "1s", "--chain", devchain.BackendSimulated)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", p.out)
		}
	})
	return dbURL, p
}

// runStepStatus is `rflow runs show -o json`'s step statuses by step id.
func runStepStatus(t *testing.T, dbURL, id string) (status string, steps map[string]string) {
	t.Helper()
	out, stderr, code := rflowCmd(t, "--database-url", dbURL, "runs", "show", id, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var run struct {
		Status string `json:"status"`
		Steps  []struct {
			StepID string `json:"step_id"`
			Status string `json:"status"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &run), out)
	steps = map[string]string{}
	for _, s := range run.Steps {
		steps[s.StepID] = s.Status
	}
	return run.Status, steps
}

func runIDs(t *testing.T, dbURL string, args ...string) []string {
	t.Helper()
	out, _, code := rflowCmd(t, append([]string{"--database-url", dbURL, "runs", "list", "-o", "json"}, args...)...)
	var page struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
		return nil
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestDevRunsSagaExample: under rflow dev, examples/saga's runs wait for
// the dev chain's claim of their deposit and complete through settled.
func TestDevRunsSagaExample(t *testing.T) {
	t.Parallel()
	dbURL, p := devExample(t, "saga")
	var settled string
	require.Eventually(t, func() bool {
		for _, id := range runIDs(t, dbURL, "--workflow", "deposit-claimed", "--status", "completed") {
			if _, steps := runStepStatus(t, dbURL, id); steps["claimed"] == "completed" && steps["settled"] == "completed" {
				settled = id
				return true
			}
		}
		return false
	}, 90*time.Second, 500*time.Millisecond, "no saga run completed through its claim")
	_, steps := runStepStatus(t, dbURL, settled)
	require.Equal(t, "skipped", steps["remind"])
	p.stop(t)
}

// TestDevRunsApprovalsExample: under rflow dev, examples/approvals refunds
// small deposits at once and parks large ones on an approval; the README's
// commands, typed as it shows them from the repository (no -c, no database
// URL: they find the session's embedded database), list the gate, approve
// it, and the run completes.
func TestDevRunsApprovalsExample(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	env := append(withoutEnv(os.Environ(), "DATABASE_URL", "XDG_DATA_HOME"), "XDG_DATA_HOME="+publicTempDir(t))
	// typed runs a command as the README has it, from the repository.
	typed := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(rflowBin, args...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repo, env, &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), errb.String(), ee.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), errb.String(), 0
	}
	dev := &syncBuffer{}
	cmd := exec.Command(rflowBin, "dev", "--project", "examples/approvals", "--http", "127.0.0.1:0",
		"--emit-every", "1s", "--chain", devchain.BackendSimulated)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repo, env, dev, dev
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{}), out: dev}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("rflow dev said:\n%s", dev)
		}
	})

	// pending waits for a gate other than those in skip and returns it.
	pending := func(skip ...string) (approval, run string) {
		t.Helper()
		require.Eventually(t, func() bool {
			out, _, code := typed("approvals", "list", "--status", "pending", "-o", "json")
			var list struct {
				Approvals []struct {
					ShortID string `json:"short_id"`
					RunID   string `json:"run_id"`
				} `json:"approvals"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
				return false
			}
			for _, a := range list.Approvals {
				if !slices.Contains(skip, a.ShortID) {
					approval, run = a.ShortID, a.RunID
					return true
				}
			}
			return false
		}, 120*time.Second, 500*time.Millisecond, "no refund waited for an approval")
		return approval, run
	}
	approval, run := pending()
	out, stderr, code := typed("approvals", "list", "--status", "pending")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, approval)
	// The live view polls the journal: its line comes a moment after the gate.
	require.Eventually(t, func() bool { return strings.Contains(dev.String(), `approve="rflow approve `+approval+`"`) },
		10*time.Second, 100*time.Millisecond, "the live view prints the command typed here")
	out, stderr, code = typed("runs", "show", run, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"status": "waiting_approval"`)

	out, stderr, code = typed("approve", approval, "--reason", "checked")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "approved")
	require.Eventually(t, func() bool {
		out, _, code := typed("runs", "show", run)
		return code == 0 && strings.Contains(out, "completed") && strings.Contains(out, "checked") &&
			regexp.MustCompile(`(?m)^status\s+completed`).MatchString(out)
	}, 60*time.Second, 500*time.Millisecond, "the approved refund's run did not complete")
	// The live view polls the journal: it shows the notice a moment after.
	require.Eventually(t, func() bool { return strings.Contains(dev.String(), `notify="refunded `) },
		10*time.Second, 100*time.Millisecond, "the live view did not show the refund's notice")
	// And a second gate, rejected as the README rejects one.
	rejected, rejectedRun := pending(approval)
	out, stderr, code = typed("reject", rejected, "--reason", "not this one")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "rejected")
	require.Eventually(t, func() bool {
		out, _, code := typed("runs", "show", rejectedRun)
		return code == 0 && regexp.MustCompile(`(?m)^status\s+failed`).MatchString(out) && strings.Contains(out, "not this one")
	}, 60*time.Second, 500*time.Millisecond, "the rejected refund's run did not fail")

	out, stderr, code = typed("budgets", "ls")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "refunds")
	p.stop(t)
}
