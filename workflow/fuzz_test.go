package workflow

import (
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad feeds arbitrary project files to Load: it must return a project
// or Diagnostics, never panic or return another kind of error for a file it
// could read.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"name: x\n",
		"name: x\nnetworks: [{name: local, chain_id: 1, rpc: http://x}]\nworkflows: [{name: w, trigger: {manual: {}}, steps: [{id: a, noop: {}}]}]\n",
		"a: &a [*a, *a]\n",
		"- [\n",
		"name: !!binary aGVsbG8=\n",
		"<<: {name: x}\n",
		"name: x\napi: {tokens: [{name: ci, token: \"${CI:-0123456789abcdef0}\", roles: [read, deploy]}, {token: t}, x]}\nwallets: [{private_key: k}]\n",
		"name: x\nworkflows: [{trigger: {webhook: {secret: \"${S:-s}\"}}, steps: [{id: a, http_call: {url: \"http://h/${S:-s}\", hmac_secret: \"${H:-h}\"}}]}]\n",
	} {
		f.Add([]byte(seed))
	}
	abiPath, err := filepath.Abs("../testdata/projects/reference/abis/Vault.json")
	if err != nil {
		f.Fatal(err)
	}
	abiSrc, err := os.ReadFile(abiPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		defer watchdog(string(src), 10*time.Second)()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "abis"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "abis", "Vault.json"), abiSrc, 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "rflow.yaml")
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := Load(path, LoadOptions{LookupEnv: lookup(referenceEnv)})
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) || !ds.HasErrors() {
				t.Fatalf("Load returned %T %v, want Diagnostics with errors", err, err)
			}
			return
		}
		for _, w := range p.Workflows {
			again, err := CompileSpec(p, w.Spec, OriginFile)
			if err != nil {
				t.Fatalf("workflow %s: its own spec does not compile: %v\nspec: %s", w.Name, err, w.Spec)
			}
			if again.Hash != w.Hash {
				t.Fatalf("workflow %s: spec hash changed on recompile\n%s\n%s", w.Name, w.Spec, again.Spec)
			}
		}
		_ = p.Summary()
	})
}

// FuzzParseWorkflow feeds arbitrary workflow definitions (YAML or JSON, as
// the HTTP API receives them) to ParseWorkflow against the reference project.
func FuzzParseWorkflow(f *testing.F) {
	p, err := Load("../testdata/projects/reference/rflow.yaml", LoadOptions{LookupEnv: lookup(referenceEnv)})
	if err != nil {
		f.Fatal(err)
	}
	for _, w := range p.Workflows {
		f.Add(w.Spec)
	}
	refund, err := os.ReadFile("../testdata/projects/reference/workflows/refund.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(refund)
	f.Fuzz(func(t *testing.T, src []byte) {
		defer watchdog(string(src), 10*time.Second)()
		w, err := ParseWorkflow(p, "body.yaml", src)
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("ParseWorkflow returned %T %v, want Diagnostics", err, err)
			}
			return
		}
		again, err := CompileSpec(p, w.Spec, OriginAPI)
		if err != nil || again.Hash != w.Hash {
			t.Fatalf("spec does not round-trip: %v\n%s", err, w.Spec)
		}
	})
}

// watchdog panics with the input when one fuzz iteration runs longer than
// limit, so the fuzzer reports (and saves) inputs that hang instead of
// stalling silently. Call the returned func when the iteration is done.
func watchdog(input any, limit time.Duration) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(limit):
			panic(fmt.Sprintf("fuzz input takes more than %s: %q", limit, input))
		}
	}()
	return func() { close(done) }
}

// FuzzExpr compiles arbitrary expressions in a step scope and evaluates the
// ones that compile against a fresh and a journal-decoded environment: no
// input may panic.
func FuzzExpr(f *testing.F) {
	for _, seed := range []string{
		"event.amount / 100",
		"event.amount >= ether('1.5') && event.sender == trigger.event.sender",
		"steps.lookup.output.body.wallets[0]",
		"2 ** 255 + 1 - event.amount",
		"-event.amount % 7",
		"format_units(units('1.25', 6), 6)",
		"let x = event.amount; x * x * x * x * x * x * x * x * x",
		"map([1, 2, 3], # * event.amount)",
		"event.amount > 1.5 ? 'big' : 'small'",
		"{'a': [1, 2]}.a[1] == 2",
		"bigint('115792089237316195423570985008687907853269984665640564039457584007913129639935') + 1",
		"env.HOME + '/x'",
		"run.attempt ** 4096",
		"bigint('010') + 0x10",
		"115792089237316195423570985008687907853269984665640564039457584007913129639935 - event.amount",
		"-9223372036854775808 + 0xffffffffffffffffffffffff_ffff",
		"result[0] * 2 == result.reserve1 && result[2] > 0",
		"result[3]",
		"result[-1] + result['arg1']",
	} {
		f.Add(seed)
	}
	fresh := Env{
		"event":   map[string]any{"amount": big2to255plus1(), "sender": "0x00000000000000000000000000000000000000aa", "block": 7},
		"trigger": map[string]any{"key": "k", "kind": "event"},
		"steps":   map[string]any{"lookup": map[string]any{"output": map[string]any{"body": map[string]any{"wallets": []any{"a"}}}}},
		"run":     map[string]any{"id": "r", "workflow": "w", "attempt": 1},
		"env":     map[string]any{"HOME": "/root"},
		"result":  map[string]any{"reserve0": big.NewInt(100), "reserve1": big.NewInt(200), "arg2": big.NewInt(7)},
	}
	b, err := MarshalJSON(fresh)
	if err != nil {
		f.Fatal(err)
	}
	decoded, err := UnmarshalJSON(b)
	if err != nil {
		f.Fatal(err)
	}
	journal := Env(decoded.(map[string]any))
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2000 {
			return
		}
		defer watchdog(src, 3*time.Second)()
		e, ds := compileExpr(src, Position{File: "f", Line: 1, Col: 1}, testScope().with("result", reservesT()))
		if e == nil {
			if !ds.HasErrors() {
				t.Fatalf("no expression and no error for %q", src)
			}
			return
		}
		for _, env := range []Env{fresh, journal, nil} {
			if v, err := e.Eval(env); err == nil {
				_, _ = render(v)
			}
		}
	})
}
