package workflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeFinalityProject writes writeProject's project with finality (a
// network's finality: line, or "") on its network.
func writeFinalityProject(t *testing.T, finality, wf string) string {
	t.Helper()
	path := writeProject(t, wf)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	if finality != "" {
		s = strings.Replace(s, "    rpc: http://127.0.0.1:8545\n", "    rpc: http://127.0.0.1:8545\n    "+finality+"\n", 1)
	}
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	return path
}

func loadDiagnostics(t *testing.T, path string) (*Project, Diagnostics) {
	t.Helper()
	p, err := Load(path, LoadOptions{LookupEnv: lookup(nil)})
	if err != nil {
		var ds Diagnostics
		require.True(t, errors.As(err, &ds), "error is Diagnostics: %v", err)
		return nil, ds
	}
	return p, p.Warnings
}

func TestFinalityTagsLoad(t *testing.T) {
	t.Parallel()
	wf := `name: w
trigger:
  event: { contract: Vault, event: Deposit, run_on: finalized }
steps:
  - id: claimed
    wait_for: { event: { contract: Vault, event: Claimed }, confirmations: safe, timeout: 1h }
  - id: deep
    wait_for: { event: { contract: Vault, event: Claimed }, confirmations: 3, timeout: 1h }
`
	p, ds := loadDiagnostics(t, writeFinalityProject(t, "finality: tags", wf))
	require.Empty(t, ds, "a network that declares tags: no warning")
	require.NotNil(t, p)
	require.Equal(t, FinalityTags, p.Networks[0].Finality)
	w := p.Workflows[0]
	require.Equal(t, RunOnFinalized, w.Trigger.Event.RunOn)
	require.Nil(t, w.Trigger.Event.Confirmations)
	require.Equal(t, TagSafe, w.Steps[0].WaitFor.Finality)
	require.Nil(t, w.Steps[0].WaitFor.Confirmations)
	require.Empty(t, w.Steps[1].WaitFor.Finality)
	require.Equal(t, 3, *w.Steps[1].WaitFor.Confirmations)

	p, ds = loadDiagnostics(t, writeFinalityProject(t, "finality: tags", "name: b\ntrigger: { block: { every: 4, run_on: safe } }\nsteps: [{ id: a, noop: {} }]\n"))
	require.NotNil(t, p, ds.Error())
	require.Equal(t, RunOnSafe, p.Workflows[0].Trigger.Block.RunOn)
	require.Equal(t, []TagUse{{Network: "local", Tag: TagSafe, What: "workflow b: block trigger run_on: safe"}}, p.TagUses())
	p, _ = loadDiagnostics(t, writeFinalityProject(t, "", "name: b\ntrigger: { block: { every: 4 } }\nsteps: [{ id: a, noop: {} }]\n"))
	require.Equal(t, RunOnHead, p.Workflows[0].Trigger.Block.RunOn)
	require.Empty(t, p.TagUses())

	// The existing values keep their meaning.
	for _, runOn := range []string{RunOnHead, RunOnConfirmed, RunOnBoth} {
		p, ds := loadDiagnostics(t, writeFinalityProject(t, "", strings.Replace(wf, "run_on: finalized", "run_on: "+runOn, 1)))
		require.NotNil(t, p, "run_on: %s: %s", runOn, ds.Error())
		require.Equal(t, runOn, p.Workflows[0].Trigger.Event.RunOn)
	}
}

func TestFinalityDiagnostics(t *testing.T) {
	t.Parallel()
	steps := "steps:\n  - id: a\n    noop: {}\n"
	trigger := func(extra string) string {
		return "name: w\ntrigger:\n  event: { contract: Vault, event: Deposit" + extra + " }\n" + steps
	}
	wait := func(conf string) string {
		return "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    wait_for: { event: { contract: Vault, event: Claimed }, confirmations: " + conf + ", timeout: 1h }\n"
	}
	cases := []struct {
		name, finality, wf string
		want               []string // wf.yaml positions, or rflow.yaml ones for "rflow.yaml:"
	}{
		{"network lacks tags: run_on", "finality: none", trigger(", run_on: finalized"),
			[]string{"3:53: event trigger run_on: finalized: network local declares finality: none (its nodes serve no safe/finalized block tags); use a depth (confirmations: N)"}},
		{"network lacks tags: wait_for", "finality: none", wait("safe"),
			[]string{"5:76: wait_for confirmations: safe: network local declares finality: none"}},
		{"undeclared network: run_on warns", "", trigger(", run_on: safe"),
			[]string{`3:53: warning: event trigger run_on: safe: network local does not declare finality: tags; rflow start refuses to run if its node does not serve the "safe" block tag`}},
		{"undeclared network: wait_for warns", "", wait("finalized"),
			[]string{"5:76: warning: wait_for confirmations: finalized: network local does not declare finality: tags"}},
		{"confirmations beside run_on finalized", "finality: tags", trigger(", confirmations: 5, run_on: finalized"),
			[]string{"3:60: event trigger: confirmations has no effect with run_on: finalized (the node's finalized block decides); remove it, or use run_on: confirmed"}},
		{"tag as an event trigger's confirmations", "finality: tags", trigger(", confirmations: finalized"),
			[]string{"3:60: event trigger: confirmations takes a block count, not finalized; for the node's finalized block use run_on: finalized"}},
		{"misspelt tag on wait_for", "finality: tags", wait("finalised"),
			[]string{`5:76: wait_for: confirmations must be a block count, safe or finalized, not "finalised"; did you mean finalized?`}},
		{"unknown run_on", "finality: tags", trigger(", run_on: finalised"),
			[]string{`3:53: run_on must be one of head, confirmed, both, safe, finalized, not "finalised"; did you mean finalized?`}},
		{"tag on a send", "finality: tags", "name: w\ntrigger: { manual: {} }\nsteps:\n  - id: a\n    send: { wallet: ops, to: \"0x5FbDB2315678afecb367f032d93F642f64180aa3\", confirmations: finalized }\n",
			[]string{"5:91: send: confirmations takes a block count, not finalized; a send counts blocks; to act once its effect is finalized, wait_for its event with confirmations: finalized"}},
		{"block trigger on a network without tags", "finality: none", "name: w\ntrigger:\n  block: { every: 5, run_on: finalized }\n" + steps,
			[]string{"3:30: block trigger run_on: finalized: network local declares finality: none"}},
		{"block trigger run_on confirmed", "finality: tags", "name: w\ntrigger:\n  block: { run_on: confirmed }\n" + steps,
			[]string{`3:20: block trigger run_on must be one of head, safe, finalized, not "confirmed"`}},
		{"bad finality declaration", "finality: final", trigger(""),
			[]string{`rflow.yaml:6:15: network local: finality must be one of tags, none, not "final"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := writeFinalityProject(t, c.finality, c.wf)
			_, got := loadDiagnostics(t, path)
			require.Len(t, got, len(c.want), "got:\n%s", got.Error())
			for i, want := range c.want {
				prefix := filepath.Join(filepath.Dir(path), "wf.yaml") + ":"
				if strings.HasPrefix(want, "rflow.yaml:") {
					prefix, want = path+":", strings.TrimPrefix(want, "rflow.yaml:")
				}
				line := strings.TrimPrefix(got[i].String(), prefix)
				require.True(t, strings.HasPrefix(line, want), "diagnostic %d\n got: %s\nwant: %s", i, got[i].String(), fmt.Sprint(prefix, want))
			}
		})
	}
}
