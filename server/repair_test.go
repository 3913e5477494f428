package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A parked run whose delay job was deleted is repaired: the counter says
// so, and GET /v1/runs/{id} lists the repair.
func TestRepairIsCountedAndShown(t *testing.T) {
	t.Parallel()
	c := newCalls(t)
	b := newOpsBundle(t, opsProject(c.URL))
	id := b.start(t, "park", "r-park")
	b.waitStatus(t, id, "waiting_delay")
	_, err := b.pool.Exec(b.ctx, `DELETE FROM river.river_job WHERE args @> jsonb_build_object('run_id', $1::uuid) OR args ? $1::text`, id)
	require.NoError(t, err)
	n, err := b.engine.RepairRuns(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	f := b.scrape(t)
	require.Equal(t, 1.0, value(t, f, "rflow_runs_repaired_total", map[string]string{"workflow": "park"}))
	r := b.get(t, "/v1/runs/"+id, true)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var detail struct {
		Repairs []struct {
			Step    string `json:"step"`
			Attempt int    `json:"attempt"`
		} `json:"repairs"`
	}
	require.NoError(t, json.Unmarshal(r.body, &detail))
	require.Len(t, detail.Repairs, 1, "%s", r.body)
	require.Equal(t, "wait", detail.Repairs[0].Step)
}
