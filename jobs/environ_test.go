package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/workflow"
)

func TestEnvironHidesSecrets(t *testing.T) {
	t.Setenv("RFLOW_TEST_WALLET_KEY", "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	t.Setenv("DATABASE_URL", "postgres://user:pw@db/rflow")
	t.Setenv("RFLOW_API_TOKEN", "token")
	t.Setenv("SLACK_URL", "https://hooks.example/x")
	p := &workflow.Project{Wallets: []*workflow.Wallet{{Name: "ops", PrivateKey: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"}}}
	env := environ(p)
	require.Equal(t, "https://hooks.example/x", env["SLACK_URL"])
	for _, k := range []string{"RFLOW_TEST_WALLET_KEY", "DATABASE_URL", "RFLOW_API_TOKEN"} {
		require.NotContains(t, env, k)
	}
}
