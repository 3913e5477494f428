package jobs_test

import (
	"testing"

	"github.com/rflow-dev/rflow/store/storetest"
)

// TestMain gives every test in this package the shared Postgres harness.
func TestMain(m *testing.M) { storetest.Main(m) }
