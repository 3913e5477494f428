package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	r := &Retry{MaxAttempts: 4, Backoff: BackoffExponential, Delay: time.Second, MaxDelay: 5 * time.Second, OnTransportError: true}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second},
		[]time.Duration{r.BackoffDelay(1), r.BackoffDelay(2), r.BackoffDelay(3), r.BackoffDelay(4)})
	require.True(t, r.CanRetry(3))
	require.False(t, r.CanRetry(4))
	require.True(t, r.RetryStatus(429))
	require.True(t, r.RetryStatus(503))
	require.False(t, r.RetryStatus(404))

	fixed := &Retry{MaxAttempts: 2, Backoff: BackoffFixed, Delay: 3 * time.Second, MaxDelay: time.Minute, OnStatus: []int{418}, Jitter: true}
	for range 20 {
		d := fixed.BackoffDelay(5)
		require.GreaterOrEqual(t, d, 1500*time.Millisecond)
		require.LessOrEqual(t, d, 3*time.Second)
	}
	require.True(t, fixed.RetryStatus(418))
	require.False(t, fixed.RetryStatus(503))

	var none *Retry
	require.False(t, none.CanRetry(1))
}

func TestCronNext(t *testing.T) {
	t.Parallel()
	p, err := Load(writeProject(t, "name: w\ntrigger: { cron: { schedule: \"*/5 * * * *\", catch_up: true } }\nsteps: [{ id: a, noop: {} }]\n"), LoadOptions{})
	require.NoError(t, err)
	c := p.Workflows[0].Trigger.Cron
	require.True(t, c.CatchUp)
	at := time.Date(2030, 1, 1, 10, 7, 30, 0, time.UTC)
	require.Equal(t, time.Date(2030, 1, 1, 10, 10, 0, 0, time.UTC), c.Next(at))
	require.Equal(t, time.Date(2030, 1, 1, 10, 15, 0, 0, time.UTC), c.Next(c.Next(at)))
	require.True(t, (&CronTrigger{}).Next(at).IsZero())
}

func TestProjectFileProblems(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), LoadOptions{})
	require.ErrorContains(t, err, "missing.yaml: cannot read the project file: no such file or directory")
	// A directory named as the project file says so, and where the file is.
	tmp := t.TempDir()
	_, err = Load(tmp, LoadOptions{})
	require.ErrorContains(t, err, "cannot read the project file: it is a directory (give the project file in it, e.g. "+
		filepath.Join(tmp, "rflow.yaml")+")")
	require.NotContains(t, err.Error(), "<nil>")

	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"bytecode": "0x"}`), 0o600))
	require.NoError(t, os.WriteFile(path, []byte(`name: p
networks: [{ name: a, chain_id: 1, rpc: "http://a" }, { name: b, chain_id: 2, rpc: "http://b" }]
wallets: [{ name: k, keystore: ./nope.json, password: "${PW}" }]
contracts:
  - { name: C, abi: ./bad.json, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - include: flows/*.yaml
`), 0o600))
	_, err = Load(path, LoadOptions{LookupEnv: lookup(map[string]string{"PW": "pw"})})
	var ds Diagnostics
	require.True(t, errors.As(err, &ds))
	msgs := []string{}
	for _, d := range ds {
		msgs = append(msgs, d.String())
	}
	require.Equal(t, []string{
		path + `:3:32: wallet k: keystore file ./nope.json not found`,
		path + `:5:5: contract C: network is required when the project has 2 networks`,
		path + `:5:21: abi ./bad.json: artifact has no "abi" key`,
		path + `:7:14: include "flows/*.yaml" matches no files`,
	}, msgs)
}

func TestProjectName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: ${P}-ops\nworkflows: [{ broken\n"), 0o600))
	_, err := ProjectName(path, lookup(nil))
	require.Error(t, err, "a file that does not parse has no name")

	require.NoError(t, os.WriteFile(path, []byte("name: ${P}-ops\nworkflows: [{ name: not checked }]\n"), 0o600))
	name, err := ProjectName(path, lookup(map[string]string{"P": "vault"}))
	require.NoError(t, err)
	require.Equal(t, "vault-ops", name)
	_, err = ProjectName(path, lookup(nil))
	require.ErrorContains(t, err, "environment variable P is not set")
}

func TestWalletFeeCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rflow.yaml")
	key := "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
	require.NoError(t, os.WriteFile(path, []byte(`name: p
networks: [{ name: a, chain_id: 1, rpc: "http://a" }]
wallets:
  - { name: ok, private_key: "`+key+`", max_fee: "30 gwei", max_priority_fee: 1000 }
`), 0o600))
	p, err := Load(path, LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, "30000000000", p.Wallets[0].MaxFee.String())
	require.Equal(t, "1000", p.Wallets[0].MaxPriorityFee.String())

	require.NoError(t, os.WriteFile(path, []byte(`name: p
networks: [{ name: a, chain_id: 1, rpc: "http://a" }]
wallets:
  - { name: a, private_key: "`+key+`", max_fee: "lots" }
  - { name: b, private_key: "`+key+`", max_fee: "1 gwei", max_priority_fee: "2 gwei" }
`), 0o600))
	_, err = Load(path, LoadOptions{})
	var ds Diagnostics
	require.True(t, errors.As(err, &ds), "%v", err)
	msgs := []string{}
	for _, d := range ds.Errors() {
		msgs = append(msgs, d.String())
	}
	require.Equal(t, []string{
		path + `:4:108: wallet a max_fee "lots" must be a positive price per gas like "30 gwei" or an integer in wei`,
		path + `:5:136: wallet b: max_priority_fee (2000000000 wei) is above max_fee (1000000000 wei): a tip is part of the fee`,
	}, msgs)
}
