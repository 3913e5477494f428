package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
)

// riverUIPrefix is where River UI (its pages and its /api) is mounted.
const riverUIPrefix = "/riverui"

// newRiverUI builds River UI over the engine's River client: its job
// lists show rflow's step, relayer and maintenance jobs. Its background
// services (count caches) run from Serve, with the server's context.
func (s *Server) newRiverUI(client *river.Client[pgx.Tx]) (*riverui.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    s.logger.With("component", "riverui"),
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("server: river ui: %w", err)
	}
	return h, nil
}

// mountRiverUI serves River UI at /riverui/ behind the API token.
func (s *Server) mountRiverUI(h http.Handler) {
	guarded := s.requireToken(h)
	s.mux.Handle(riverUIPrefix+"/", guarded)
	s.mux.Handle(riverUIPrefix, guarded)
}

// startRiverUI starts River UI's background services until ctx ends.
func (s *Server) startRiverUI(ctx context.Context) error {
	if s.riverUI == nil {
		return nil
	}
	if err := s.riverUI.Start(ctx); err != nil {
		return fmt.Errorf("start river ui: %w", err)
	}
	return nil
}
