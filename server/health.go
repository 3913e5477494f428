package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rflow-dev/rflow/store"
)

// readyTimeout bounds the readiness probe's database work.
const readyTimeout = 2 * time.Second

// healthz is liveness only: the process serves HTTP. It never touches the
// database, so a database outage does not get every process restarted.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is readiness: 503 with the reason when the database is not
// reachable or a chain trigger of this project is stuck (its cursor has
// not moved for longer than Config.ReadyStall while its network's head
// moved past it).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		s.logger.WarnContext(ctx, "readiness check failed", "err", err)
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "database_unreachable",
			message: "the database is not reachable"})
		return
	}
	if e := s.stalledTriggers(ctx); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// stalledTrigger is one stuck cursor in the readiness reply's details.
type stalledTrigger struct {
	Trigger      string    `json:"trigger"`
	Phase        string    `json:"phase"`
	ChainID      int64     `json:"chain_id"`
	Block        int64     `json:"block"`
	Head         int64     `json:"head"`
	LastProgress time.Time `json:"last_progress"`
}

func (s *Server) stalledTriggers(ctx context.Context) *apiError {
	if s.readyStall <= 0 || s.triggers == nil {
		return nil
	}
	tasks, err := s.triggers(ctx)
	if err != nil {
		s.logger.WarnContext(ctx, "readiness check failed", "err", err)
		return &apiError{status: http.StatusServiceUnavailable, code: "database_unreachable",
			message: "the database is not reachable"}
	}
	watched := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		watched[t] = true
	}
	lags, err := store.CursorLags(ctx, s.pool)
	if err != nil {
		s.logger.WarnContext(ctx, "readiness check failed", "err", err)
		return &apiError{status: http.StatusServiceUnavailable, code: "database_unreachable",
			message: "the database is not reachable"}
	}
	var stalled []stalledTrigger
	for _, l := range lags {
		if watched[l.Task] && l.Stalled(s.readyStall) {
			stalled = append(stalled, stalledTrigger{Trigger: l.Task, Phase: l.Phase, ChainID: l.ChainID,
				Block: l.Block, Head: l.Head, LastProgress: l.Updated.UTC()})
		}
	}
	if len(stalled) == 0 {
		return nil
	}
	first := stalled[0]
	return &apiError{status: http.StatusServiceUnavailable, code: "trigger_stalled",
		message: fmt.Sprintf("%d chain trigger(s) made no progress for over %s while the head moved; %s (%s) is at block %d, the head at %d",
			len(stalled), s.readyStall, first.Trigger, first.Phase, first.Block, first.Head),
		details: map[string]any{"stalled": stalled}}
}
