package jobs_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// The run's own attempts share a step's Idempotency-Key; each operator
// retry is a new request with a key that names it, so an endpoint that
// cached the failure under the old key (Stripe-style) does not replay it.
func TestOperatorRetryIsANewRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, retrying)
	b.recv.mu.Lock()
	b.recv.status["/flaky"] = []int{500, 500, 500, 500}
	b.recv.mu.Unlock()
	id := b.manual(t, "flaky", "k", nil)
	retry := func() {
		t.Helper()
		require.Equal(t, store.RunFailed, b.waitRun(t, id).Status)
		require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := b.engine.RetryRunTx(context.Background(), tx, id)
			return err
		}))
	}
	retry()
	retry()
	require.Equal(t, store.RunCompleted, b.waitRun(t, id).Status)

	keys := func(path string) []string {
		var out []string
		for _, r := range b.recv.got(path) {
			out = append(out, r.Header.Get("Idempotency-Key"))
		}
		return out
	}
	k := id.String() + ":flaky"
	require.Equal(t, []string{k, k, k, k + ":r1", k + ":r2"}, keys("/flaky"))
	require.Equal(t, []string{id.String() + ":once"}, keys("/once"), "the completed step never re-ran")
	require.Equal(t, []string{id.String() + ":after:r2"}, keys("/after"))
}
