// Package bench holds rflow's benchmarks (`make bench`). Each compares a
// figure with a baseline measured in the same run on the same Postgres.
package bench

import (
	"os"
	"testing"

	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	summary.print()
	storetest.Shutdown()
	os.Exit(code)
}
