package budgets_test

import (
	"testing"

	"github.com/rflow-dev/rflow/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
