package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
// reachable, or a chain task of this project has not advanced for longer
// than it should (see chainStalls). Every process answers the same: the
// progress it judges is what the tasks' holders wrote to the database.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		s.logger.WarnContext(ctx, "readiness check failed", "err", err)
		writeError(w, errUnreachable)
		return
	}
	if e := s.chainStalls(ctx); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

var errUnreachable = &apiError{status: http.StatusServiceUnavailable, code: "database_unreachable",
	message: "the database is not reachable"}

// ChainWatch is what /readyz watches: the cursor tasks of the deployed
// chain triggers and wait feeds ("event/<workflow>", "block/<workflow>",
// "read/<workflow>", "wait/<chain id>/<address|any>/<topic>") and the
// networks whose heads they need.
type ChainWatch struct {
	Tasks    []string
	Networks []WatchedNetwork
}

// WatchedNetwork is a network whose head must advance.
type WatchedNetwork struct {
	Name    string
	ChainID int64
}

// stalledHead is one network whose head did not advance, in the
// readiness reply's details.
type stalledHead struct {
	Task    string `json:"task"`
	Network string `json:"network"`
	ChainID int64  `json:"chain_id"`
	// Head is the window's newest block (-1: none yet), NodeHead what the
	// node last reported (-1: it never answered).
	Head     int64 `json:"head"`
	NodeHead int64 `json:"node_head"`
	// StalledFor is how long rflow's view of the chain has not advanced.
	StalledFor     string  `json:"stalled_for"`
	StalledSeconds float64 `json:"stalled_seconds"`
	// Cause is node_unreachable, node_not_advancing, tracker_behind or
	// not_running (no process holds the head lease).
	Cause     string `json:"cause"`
	Holder    string `json:"holder,omitempty"`
	LeaseLive bool   `json:"lease_live"`
	reason    string
}

// stalledTrigger is one stuck cursor (a trigger's or a wait feed's) in the
// readiness reply's details.
type stalledTrigger struct {
	Trigger        string    `json:"trigger"` // the task, as before wait feeds were watched
	Task           string    `json:"task"`
	Phase          string    `json:"phase"`
	Network        string    `json:"network"`
	ChainID        int64     `json:"chain_id"`
	Block          int64     `json:"block"`
	Head           int64     `json:"head"`
	LastProgress   time.Time `json:"last_progress"`
	StalledFor     string    `json:"stalled_for"`
	StalledSeconds float64   `json:"stalled_seconds"`
	Holder         string    `json:"holder,omitempty"`
	LeaseLive      bool      `json:"lease_live"`
}

// chainStalls fails readiness when, for longer than Config.ReadyStall, a
// watched network's head has not advanced (code head_stalled; the stall
// allowed grows to three observed block times on a slow chain) or a watched
// cursor has left a new block unclaimed (trigger_stalled). Both lists are
// in the details either way.
func (s *Server) chainStalls(ctx context.Context) *apiError {
	if s.readyStall <= 0 || s.watch == nil {
		return nil
	}
	watch, err := s.watch(ctx)
	if err == nil && len(watch.Tasks) == 0 && len(watch.Networks) == 0 {
		return nil
	}
	var heads []store.HeadProgress
	var lags []store.CursorLag
	if err == nil {
		heads, err = store.HeadProgresses(ctx, s.pool)
	}
	if err == nil {
		lags, err = store.CursorLags(ctx, s.pool)
	}
	if err != nil {
		s.logger.WarnContext(ctx, "readiness check failed", "err", err)
		return errUnreachable
	}
	names := map[int64]string{}
	for _, n := range watch.Networks {
		names[n.ChainID] = n.Name
	}
	stalledHeads := s.stalledHeads(watch.Networks, heads)
	stalled := s.stalledCursors(watch.Tasks, lags, names)
	if len(stalledHeads) == 0 && len(stalled) == 0 {
		return nil
	}
	details := map[string]any{"heads": stalledHeads, "stalled": stalled}
	if stalledHeads == nil {
		details["heads"] = []stalledHead{}
	}
	if stalled == nil {
		details["stalled"] = []stalledTrigger{}
	}
	if len(stalledHeads) > 0 {
		var parts []string
		for _, h := range stalledHeads {
			parts = append(parts, h.reason)
		}
		msg := strings.Join(parts, "; ")
		if len(stalled) > 0 {
			msg += fmt.Sprintf("; %d chain task(s) stalled", len(stalled))
		}
		return &apiError{status: http.StatusServiceUnavailable, code: "head_stalled", message: msg, details: details}
	}
	first := stalled[0]
	return &apiError{status: http.StatusServiceUnavailable, code: "trigger_stalled",
		message: fmt.Sprintf("%d chain task(s) made no progress for over %s while the head moved; %s (%s) on network %s is at block %d, the head at %d, stalled for %s",
			len(stalled), s.readyStall, first.Task, first.Phase, first.Network, first.Block, first.Head, first.StalledFor),
		details: details}
}

func (s *Server) stalledHeads(nets []WatchedNetwork, heads []store.HeadProgress) []stalledHead {
	byChain := map[int64]store.HeadProgress{}
	for _, h := range heads {
		byChain[h.ChainID] = h
	}
	var out []stalledHead
	for _, n := range nets {
		h, ok := byChain[n.ChainID]
		allowed := max(s.readyStall, 3*h.BlockTime)
		age := h.WindowAge
		if !ok || h.Window < 0 {
			age = time.Since(s.started) // nothing recorded: count from this process's start
		}
		if age <= allowed {
			continue
		}
		st := stalledHead{Task: "head/" + fmt.Sprint(n.ChainID), Network: n.Name, ChainID: n.ChainID, Head: -1, NodeHead: -1,
			StalledFor: age.Round(time.Second).String(), StalledSeconds: age.Seconds(), Holder: h.Holder, LeaseLive: h.LeaseLive}
		if ok {
			st.Head = h.Window
			if h.Polled {
				st.NodeHead = h.NodeHead
			}
		}
		what := fmt.Sprintf("network %s (chain %d): no new block for %s", n.Name, n.ChainID, st.StalledFor)
		switch {
		case !ok || !h.Polled:
			st.Cause = "node_unreachable"
			st.reason = what + " (its node has not answered a head poll)"
		case !h.LeaseLive:
			st.Cause = "not_running"
			st.reason = what + " (no process holds its head tracker's lease)"
		case h.PollAge > allowed:
			st.Cause = "node_unreachable"
			st.reason = fmt.Sprintf("%s (its node last answered %s ago; the head tracker is held by %s)", what,
				h.PollAge.Round(time.Second), h.Holder)
		case h.NodeHead > h.Window:
			st.Cause = "tracker_behind"
			st.reason = fmt.Sprintf("%s (its node is at block %d, the window at %d: the head tracker, held by %s, is not catching up)",
				what, h.NodeHead, h.Window, h.Holder)
		default:
			st.Cause = "node_not_advancing"
			st.reason = fmt.Sprintf("%s (its node answers, but its newest block is still %d, %s old)", what, h.NodeHead,
				h.NodeHeadAge.Round(time.Second))
		}
		out = append(out, st)
	}
	return out
}

func (s *Server) stalledCursors(tasks []string, lags []store.CursorLag, names map[int64]string) []stalledTrigger {
	watched := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		watched[t] = true
	}
	var out []stalledTrigger
	for _, l := range lags {
		if !watched[l.Task] || !l.Stalled(s.readyStall) {
			continue
		}
		out = append(out, stalledTrigger{Trigger: l.Task, Task: l.Task, Phase: l.Phase, Network: names[l.ChainID],
			ChainID: l.ChainID, Block: l.Block, Head: l.Head, LastProgress: l.Updated.UTC(),
			StalledFor: l.Waiting.Round(time.Second).String(), StalledSeconds: l.Waiting.Seconds(),
			Holder: l.Holder, LeaseLive: l.LeaseLive})
	}
	return out
}
